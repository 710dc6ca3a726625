#pragma once
// A labelled trace as an engine adapter writes it (traces/<model>__<attention>.json, format version 3,
// documented in docs/dooly-tracing.md): per traced engine step, the module calls and the op records with
// one label per tensor dimension.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/taint/kind.hpp"
#include "dooly/trace/layout.hpp"

namespace dooly::trace {

// Bumped whenever what the signatures hash changes, so traces (and store contents) of two versions are never
// compared. 1: the first format. 2: scaled_dot_product_attention carries the `@sdpa_kernels` pseudo-argument
// (the SDPA kernels in force), which changes its op signature and those of the modules holding it. 3: a tensor
// that is not contiguous (or sits at an offset not 16-byte aligned) records its strides and storage offset, and
// its signature hashes the layout (layout.hpp); contiguous tensors hash as in version 2.
inline constexpr int kTraceFormatVersion = 3;
// The oldest format whose signatures name the same work as this one's: format 3 only tells apart what format 2
// merged (a strided input from a contiguous one), so a store may hold traces of both under one context and keep
// its measurements (dooly::store::ingest_traces supersedes the older format's occurrences of a model).
inline constexpr int kFirstCompatibleTraceFormat = 2;

struct DimLabel {
  int64_t value = 0;
  taint::Kind kind = taint::Kind::none;
  std::string expr;        // canonical expression, e.g. "NUM_TOKS*head_dim"
  std::string value_form;  // config parts replaced by values, e.g. "128*NUM_TOKS"
};

struct TensorInfo {
  std::vector<DimLabel> shape;
  std::string dtype;
  std::optional<Layout> layout;  // recorded only for a tensor that is not contiguous at an aligned offset
};

// A non-tensor argument of an op: its position ("0", "1", ...) or keyword, its Python type, its value.
// The implicit noexcept special members reach nlohmann::json's destructor, which allocates a stack to free deep
// values: only std::bad_alloc can come out of it, and terminating then is what every json holder does.
struct Scalar {  // NOLINT(bugprone-exception-escape)
  std::string arg;
  std::string type;  // int | float | bool | str | none | list | other
  nlohmann::json value;
  std::optional<DimLabel> label;  // ints only
};

struct OpRecord {
  int64_t seq = 0;     // position in the step, shared with module calls
  int64_t call = -1;   // the innermost module call it ran in (-1: none)
  std::string op;      // normalised op name
  std::string module;  // module path of that call
  std::vector<TensorInfo> inputs, outputs;
  std::vector<Scalar> scalars;
  std::string rule;      // rule class that labelled it, "fallback" when none covered it
  std::string coverage;  // "rule" | "fallback"
  std::vector<std::string> notes;
  std::vector<std::string> kernels;  // GPU kernel symbols (metadata only)
};

struct ModuleCall {
  int64_t id = 0;
  int64_t parent = -1;
  int64_t seq = 0;
  std::string path;
};

struct ModuleInfo {
  std::string path;
  std::string cls;
  nlohmann::json attrs = nlohmann::json::object();  // primitive attributes as the adapter saw them
};

struct Step {
  int64_t step = 0;
  std::string kind;  // prefill | decode | mixed
  int64_t num_tokens = 0, num_requests = 0, num_prefill_tokens = 0, num_decode_requests = 0;
  std::vector<ModuleCall> calls;
  std::vector<OpRecord> ops;
};

struct Trace {
  // The attention backend as reports and provenance name it: the attention implementation, plus the forced SDPA
  // kernel in brackets when there was one ("paged|sdpa[cudnn]").
  std::string backend() const { return sdpa_kernel.empty() ? attention : attention + "[" + sdpa_kernel + "]"; }

  int version = kTraceFormatVersion;
  std::string model, family, architecture, config_hash, attention, dtype, device;
  std::string sdpa_kernel;  // the PyTorch SDPA kernel forced for the trace ("" when PyTorch chose)
  nlohmann::json engine_info = nlohmann::json::object();
  nlohmann::json limits = nlohmann::json::object();  // the engine's: max_batch_tokens, max_batch_requests, ...
  std::map<std::string, ModuleInfo> modules;         // by path ("" is the root model)
  std::vector<Step> steps;
  nlohmann::json summary = nlohmann::json::object();
  nlohmann::json verification = nlohmann::json::object();
};

// Parses and checks a trace (version, required fields, label kinds). Errors are InputError naming the
// file/field and what to do.
Trace parse_trace(const nlohmann::json& j, const std::string& origin = "trace");
Trace read_trace(const std::string& path);

DimLabel parse_dim(const nlohmann::json& j);

}  // namespace dooly::trace
