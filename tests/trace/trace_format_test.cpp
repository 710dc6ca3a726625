#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <limits>

#include "dooly/common/error.hpp"
#include "dooly/trace/trace.hpp"
#include "support/small_trace.hpp"

namespace dooly::trace {
namespace {

using nlohmann::json;

std::string error_of(const json& j) {
  try {
    parse_trace(j, "t.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The goldens are regenerated, not edited: an old-format golden fails with the command that rewrites them.
Trace read_golden(const std::string& name) {
  const std::string path = DOOLY_SOURCE_DIR "/tests/data/traces/" + name;
  try {
    return read_trace(path);
  } catch (const InputError& e) {
    ADD_FAILURE() << e.what() << "\n  The goldens in tests/data/traces/ predate this build's trace format: regenerate "
                  << "them with `PYTHONPATH=python:build/default/python .venv/bin/python -m dooly.tracer.golden`.";
    throw;
  }
}

TEST(TraceFormat, ParsesTheSmallTrace) {
  Trace t = parse_trace(testing::small_trace(), "small");
  EXPECT_EQ(t.model, "toy");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].ops.size(), 7u);
  EXPECT_EQ(t.steps[0].calls.size(), 4u);
  EXPECT_EQ(t.modules.at("layers.2").cls, "Layer");
  const DimLabel& d = t.steps[0].ops[0].inputs[0].shape[0];
  EXPECT_EQ(d.kind, taint::Kind::num_toks);
  EXPECT_EQ(d.value, 7);
}

TEST(TraceFormat, BackendNamesAForcedSdpaKernel) {
  json j = testing::small_trace();
  EXPECT_EQ(parse_trace(j, "small").backend(), "paged|sdpa");  // PyTorch chose the kernel
  j["sdpa_kernel"] = nullptr;
  EXPECT_EQ(parse_trace(j, "small").backend(), "paged|sdpa");
  j["sdpa_kernel"] = "cudnn";
  Trace t = parse_trace(j, "small");
  EXPECT_EQ(t.attention, "paged|sdpa");
  EXPECT_EQ(t.backend(), "paged|sdpa[cudnn]");
}

TEST(TraceFormat, VersionIsChecked) {
  static_assert(kTraceFormatVersion == 3, "a new trace format: extend this test and docs/dooly-tracing.md");
  json j = testing::small_trace();
  EXPECT_EQ(parse_trace(j, "t.json").version, 3);
  // A version-2 trace predates recorded layouts: its strided inputs would hash as contiguous ones.
  j["version"] = 2;
  std::string e = error_of(j);
  EXPECT_NE(e.find("t.json: trace format version 2 is not supported (this build reads version 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("re-create it with this build's `dooly trace`"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  j["version"] = 4;
  e = error_of(j);
  EXPECT_NE(e.find("trace format version 4 is not supported (this build reads version 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("upgrade this one"), std::string::npos) << e;
  j["version"] = "3";
  EXPECT_NE(error_of(j).find("field 'version' has the wrong type"), std::string::npos);
  j.erase("version");
  EXPECT_NE(error_of(j).find("not a dooly trace"), std::string::npos);
}

TEST(TraceFormat, ReadTraceNamesTheFileOfAnOldVersion) {
  const std::string path = ::testing::TempDir() + "old_trace.json";
  json j = testing::small_trace();
  j["version"] = 2;
  std::ofstream(path) << j.dump();
  try {
    read_trace(path);
    FAIL() << "a version-2 trace was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.problem(), path + ": trace format version 2 is not supported (this build reads version 3)");
  }
}

TEST(TraceFormat, StridedTensorsCarryTheirLayout) {
  json j = testing::small_trace();
  json& in = j["steps"][0]["ops"][0]["inputs"][0];
  const size_t rank = in["shape"].size();
  EXPECT_FALSE(parse_trace(j, "t.json").steps[0].ops[0].inputs[0].layout) << "contiguous: nothing recorded";
  json strides = json::array();
  for (size_t d = 0; d < rank; ++d) strides.push_back(rank - d);
  in["strides"] = strides;
  in["offset"] = 5;
  const auto layout = parse_trace(j, "t.json").steps[0].ops[0].inputs[0].layout;
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->strides.size(), rank);
  EXPECT_EQ(layout->offset, 5);
  in["strides"].push_back(1);  // one stride too many
  std::string e = error_of(j);
  EXPECT_NE(e.find("t.json step op: a tensor of rank"), std::string::npos) << e;
  in["strides"] = strides;
  in["offset"] = -1;
  EXPECT_NE(error_of(j).find("negative storage offset"), std::string::npos);
  in["offset"] = 1.5;
  EXPECT_NE(error_of(j).find("field 'offset' has the wrong type"), std::string::npos);
}

TEST(TraceFormat, MissingFieldsAndBadKindsAreNamed) {
  json j = testing::small_trace();
  j.erase("config_hash");
  EXPECT_NE(error_of(j).find("missing field 'config_hash'"), std::string::npos);
  j = testing::small_trace();
  j["steps"][0]["ops"][0]["inputs"][0]["shape"][0]["k"] = "NUM_TOKENS";
  EXPECT_NE(error_of(j).find("'NUM_TOKENS' is not a taint kind"), std::string::npos);
  j = testing::small_trace();
  j["steps"][0]["ops"][0]["seq"] = "two";
  EXPECT_NE(error_of(j).find("field 'seq' has the wrong type"), std::string::npos);
}

// nlohmann's get<int>() of a float out of int's range is undefined behaviour (a fuzzer found 1.9e48 as the
// version); every integer field takes only a JSON integer that fits, and names the field that does not.
TEST(TraceFormat, IntegerFieldsRefuseFloatsAndOutOfRangeValues) {
  const auto refused = [](const char* field, json j) {
    const std::string e = error_of(j);
    EXPECT_NE(e.find(std::string("field '") + field + "' has the wrong type: an integer"), std::string::npos) << e;
  };
  json j = testing::small_trace();
  j["version"] = 1.88889e+48;
  refused("version", j);
  j["version"] = 2.0;  // integral, but a float: dooly never writes one
  refused("version", j);
  j = testing::small_trace();
  j["version"] = uint64_t{1} << 40;
  refused("version", j);
  j = testing::small_trace();
  j["steps"][0]["step"] = 1e300;
  refused("step", j);
  j = testing::small_trace();
  j["steps"][0]["num_tokens"] = -9.5e40;
  refused("num_tokens", j);
  j = testing::small_trace();
  j["steps"][0]["ops"][0]["call"] = std::numeric_limits<uint64_t>::max();
  refused("call", j);
  j = testing::small_trace();
  j["steps"][0]["ops"][0]["inputs"][0]["shape"][0]["v"] = 1.9e48;
  refused("v", j);
  j = testing::small_trace();
  j["steps"][0]["ops"][0]["inputs"][0]["shape"][0]["v"] = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(error_of(j), "");  // in range: the reader takes it (what it means is the planner's to judge)
}

TEST(TraceFormat, ReadsTheGoldenTinyLlama) {
  Trace t = read_golden("llama-3.1-8b-tiny__paged_sdpa.json");
  EXPECT_EQ(t.model, "llama-3.1-8b-tiny");
  EXPECT_EQ(t.architecture, "LlamaForCausalLM");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].kind, "prefill");
  EXPECT_EQ(t.steps[0].num_tokens, 521);
  EXPECT_EQ(t.steps[1].kind, "mixed");
  EXPECT_EQ(t.steps[1].num_tokens, 131);
  EXPECT_EQ(t.verification.at("num_disagreements"), 0);
  // Every dim of every op is labelled; none UNKNOWN in the tiny Llama.
  int64_t dims = 0;
  for (const auto& s : t.steps)
    for (const auto& o : s.ops)
      for (const auto* side : {&o.inputs, &o.outputs})
        for (const auto& ti : *side)
          for (const auto& d : ti.shape) {
            ++dims;
            EXPECT_NE(d.kind, taint::Kind::unknown) << o.op << " in " << o.module;
          }
  EXPECT_GT(dims, 3000);
  EXPECT_THROW(read_trace("/nonexistent/trace.json"), InputError);
}

}  // namespace
}  // namespace dooly::trace
