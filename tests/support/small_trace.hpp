#pragma once
// A hand-written trace: a root model with two identical "layers" and one different one, each running ops.
#include <nlohmann/json.hpp>

#include "dooly/trace/trace.hpp"

namespace dooly::testing {

inline nlohmann::json dim(int64_t v, const char* k, const char* e) { return {{"v", v}, {"k", k}, {"e", e}, {"f", e}}; }

inline nlohmann::json op(int64_t seq, int64_t call, const char* name, const char* module, int64_t toks, int64_t width) {
  nlohmann::json t = {{"dtype", "float32"}, {"shape", {dim(toks, "NUM_TOKS", "NUM_TOKS"), dim(width, "MODEL_CONFIG", "hidden_size")}}};
  return {{"seq", seq}, {"call", call}, {"op", name}, {"module", module}, {"inputs", {t}}, {"outputs", {t}},
          {"scalars", nlohmann::json::array()}, {"rule", "elementwise"}, {"coverage", "rule"}};
}

inline nlohmann::json small_trace(int64_t toks = 7) {
  using nlohmann::json;
  json modules = json::array({
      json{{"path", ""}, {"class", "Model"}, {"attrs", json::object()}},
      json{{"path", "layers.0"}, {"class", "Layer"}, {"attrs", {{"layer_idx", 0}, {"sliding_window", 4}, {"training", false}}}},
      json{{"path", "layers.1"}, {"class", "Layer"}, {"attrs", {{"layer_idx", 1}, {"sliding_window", 4}, {"training", true}}}},
      json{{"path", "layers.2"}, {"class", "Layer"}, {"attrs", {{"layer_idx", 2}, {"sliding_window", nullptr}}}},
  });
  json calls = json::array({json{{"id", 0}, {"parent", -1}, {"seq", 0}, {"module", ""}},
                            json{{"id", 1}, {"parent", 0}, {"seq", 1}, {"module", "layers.0"}},
                            json{{"id", 2}, {"parent", 0}, {"seq", 4}, {"module", "layers.1"}},
                            json{{"id", 3}, {"parent", 0}, {"seq", 7}, {"module", "layers.2"}}});
  json ops = json::array({op(2, 1, "mul", "layers.0", toks, 64), op(3, 1, "add", "layers.0", toks, 64),
                          op(5, 2, "mul", "layers.1", toks, 64), op(6, 2, "add", "layers.1", toks, 64),
                          op(8, 3, "mul", "layers.2", toks, 64), op(9, 3, "add", "layers.2", toks, 64),
                          op(10, 0, "neg", "", toks, 64)});
  return {{"version", trace::kTraceFormatVersion}, {"model", "toy"}, {"config_hash", "abc"}, {"attention", "paged|sdpa"}, {"modules", modules},
          {"steps", json::array({json{{"step", 0}, {"kind", "prefill"}, {"num_tokens", toks}, {"num_requests", 1},
                                      {"calls", calls}, {"ops", ops}}})}};
}

}  // namespace dooly::testing
