// Replays every fuzz target's seed corpus and crash files (tests/fuzz/corpus/<target>/, tests/fuzz/crashes/
// <target>/) through the same entry the fuzzer calls, so a fixed crash stays fixed in every build (gcc,
// asan preset) without libFuzzer. A finding fails here as it did under the fuzzer: a sanitizer report, a
// crash, or an exception other than dooly's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "targets.hpp"

namespace dooly::fuzz {
namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;
  int (*entry)(const uint8_t*, size_t);
};

constexpr Target kTargets[] = {{"recording", &recording},
                               {"readings", &readings},
                               {"analyze", &analyze},
                               {"variorum_json", &variorum_json},
                               {"trace_json", &trace_json},
                               {"model_config", &model_config},
                               {"store", &store},
                               {"grid", &grid},
                               {"value_form", &value_form},
                               {"workload", &workload},
                               {"result_json", &result_json}};

std::vector<fs::path> inputs(const std::string& target, const char* kind) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(DOOLY_SOURCE_DIR) / "tests/fuzz" / kind / target;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, CorpusAndCrashesRunClean) {
  const Target& t = GetParam();
  const auto seeds = inputs(t.name, "corpus");
  EXPECT_GE(seeds.size(), 3u) << "every target keeps a seed corpus in tests/fuzz/corpus/" << t.name;
  auto all = seeds;
  const auto crashes = inputs(t.name, "crashes");
  all.insert(all.end(), crashes.begin(), crashes.end());
  for (const fs::path& p : all) {
    SCOPED_TRACE(p.string());
    std::ifstream in(p, std::ios::binary);
    ASSERT_TRUE(in) << "cannot read " << p;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NO_THROW(EXPECT_EQ(t.entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<Target>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dooly::fuzz
