#pragma once
// A small store built by the predict tests: one model traced under one backend, measured under one context, with
// costs given by formulas some candidate represents exactly, so predictions can be checked against the formulas.
//
//   signature              phase (count)              swept            cost per call (seconds)
//   linear                 prefill 2, mixed 2         NUM_TOKS         10 us + 1 ns * T
//   sdpa (prefill)         prefill 1                  KV == NUM_TOKS   5 us + 1e-12 s * T^2
//   sdpa (cache)           mixed 1                    NUM_TOKS, KV     5 us + 1 ns * T + 0.2 ns * KV
//   index_select           mixed 2                    KV_TOKS          2 us + 0.1 ns * KV
//   mean                   prefill 1, mixed 1         none             3 us, measured without energy
//   cat                    prefill 1                  (unrunnable)
//   mul                    mixed 1                    (never measured)
//   LlamaMLP (a module)    prefill 1                  (modules are not terms)
//   engine, graphs on                                 composition      1 ms + 10 us * NUM_REQS (chunks 0, 256, 8192)
// Energy is 300 W times the latency. Points: tokens 1..4096 (powers of 2), KV 256..16384.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/store/store.hpp"
#include "store/store_fixtures.hpp"

namespace dooly::testing {

struct TinyStore {
  int64_t model = 0, traced = 0, measured = 0;
  int64_t linear = 0, sdpa_prefill = 0, sdpa_cache = 0, index_select = 0, mean = 0, cat = 0, mul = 0, mlp = 0,
          engine = 0;

  static double linear_s(double t) { return 10e-6 + 1e-9 * t; }
  static double sdpa_prefill_s(double t) { return 5e-6 + 1e-12 * t * t; }
  static double sdpa_cache_s(double t, double kv) { return 5e-6 + 1e-9 * t + 0.2e-9 * kv; }
  static double index_select_s(double kv) { return 2e-6 + 0.1e-9 * kv; }
  static double mean_s() { return 3e-6; }
  static double host_s(double reqs) { return 1e-3 + 10e-6 * reqs; }
  static constexpr double power_w = 300;
};

inline store::Measurement tiny_point(int64_t sig, int64_t prov, const std::string& key, double latency_s,
                                     bool energy = true) {
  store::Measurement m;
  m.signature_id = sig;
  m.provenance_id = prov;
  m.point_key = key;
  m.repetitions = 10;
  m.latency_mean_s = m.latency_median_s = m.latency_min_s = m.latency_max_s = latency_s;
  if (energy) m.energy_j = latency_s * TinyStore::power_w;
  m.extra_json = R"({"grid_sha256":"g"})";
  return m;
}

inline TinyStore build_tiny_store(store::Store& s) {
  using store::Phase;
  using store::SignatureKind;
  TinyStore t;
  auto tx = s.transaction();
  t.model = s.upsert_model({0, "tiny-llama", "llama", "LlamaForCausalLM", "cfg"});
  store::Provenance trace = h200_provenance("{}");
  trace.attention_backend = "paged|sdpa[efficient]";
  t.traced = s.upsert_provenance(trace);
  store::Provenance measure = h200_provenance(R"({"context":"measure"})");
  measure.attention_backend = "";
  t.measured = s.upsert_provenance(measure);
  auto op = [&](int n, const char* name, const char* rule, const char* module) {
    return s
        .upsert_signature(hex(n), name, SignatureKind::op, fmt::format(R"({{"op":{}}})", n),
                          fmt::format(R"({{"rule":"{}","example_module":"{}"}})", rule, module))
        .id;
  };
  t.linear = op(1, "linear", "matmul", "model.layers.0.mlp.down_proj");
  t.sdpa_prefill = op(2, "scaled_dot_product_attention", "attention", "model.layers.0.self_attn");
  t.sdpa_cache = op(3, "scaled_dot_product_attention", "attention", "model.layers.0.self_attn");
  t.index_select = op(4, "index_select", "index", "model.layers.0.self_attn");
  t.mean = op(5, "mean", "reduce", "model.layers.0.input_layernorm");
  t.cat = op(6, "cat", "concat", "model.rotary_emb");
  t.mul = op(7, "mul", "elementwise", "model.layers.0.mlp");
  t.mlp = s.upsert_signature(hex(8), "LlamaMLP", SignatureKind::module, R"({"module":8})").id;
  t.engine = s.upsert_signature(hex(9), "hf-continuous-batching", SignatureKind::engine,
                                R"({"attrs":{"attention":"paged|sdpa","config_hash":"cfg","cuda_graphs":[true,true],)"
                                R"("model":"tiny-llama"},"kind":"engine","name":"hf-continuous-batching","v":1})")
                 .id;
  s.replace_occurrences(t.model, t.traced,
                        std::vector<store::Occurrence>{{t.linear, Phase::prefill, 2},
                                                       {t.linear, Phase::mixed, 2},
                                                       {t.sdpa_prefill, Phase::prefill, 1},
                                                       {t.sdpa_cache, Phase::mixed, 1},
                                                       {t.index_select, Phase::mixed, 2},
                                                       {t.mean, Phase::prefill, 1},
                                                       {t.mean, Phase::mixed, 1},
                                                       {t.cat, Phase::prefill, 1},
                                                       {t.mul, Phase::mixed, 1},
                                                       {t.mlp, Phase::prefill, 1}});
  for (double tok = 1; tok <= 4096; tok *= 2) {
    s.insert_measurement(
        tiny_point(t.linear, t.measured, fmt::format(R"({{"NUM_TOKS":{}}})", tok), TinyStore::linear_s(tok)));
    s.insert_measurement(tiny_point(t.sdpa_prefill, t.measured, fmt::format(R"({{"KV_TOKS":{0},"NUM_TOKS":{0}}})", tok),
                                    TinyStore::sdpa_prefill_s(tok)));
  }
  for (double tok : {1, 4, 16, 64, 256})
    for (double kv : {256, 1024, 4096, 16384})
      s.insert_measurement(tiny_point(t.sdpa_cache, t.measured,
                                      fmt::format(R"({{"KV_TOKS":{},"NUM_TOKS":{}}})", kv, tok),
                                      TinyStore::sdpa_cache_s(tok, kv)));
  for (double kv : {256, 512, 1024, 2048, 4096, 8192, 16384})
    s.insert_measurement(
        tiny_point(t.index_select, t.measured, fmt::format(R"({{"KV_TOKS":{}}})", kv), TinyStore::index_select_s(kv)));
  s.insert_measurement(tiny_point(t.mean, t.measured, "{}", TinyStore::mean_s(), false));
  s.set_resolution(
      {t.cat, t.measured, std::nullopt, 0, store::ResolutionStatus::unrunnable,
       fmt::format(R"([{{"unit":"{}","level":0,"error":"RuntimeError: needs the rotary cache"}}])", hex(6)), 0});
  for (int reqs : {1, 2, 4, 8, 16, 32})
    for (int prefill : {0, 256, 8192}) {
      const int decodes = prefill > 0 ? reqs - 1 : reqs;
      s.insert_measurement(
          tiny_point(t.engine, t.measured,
                     fmt::format(R"({{"DECODE_REQS":{},"NUM_REQS":{},"NUM_TOKS":{},"PREFILL_TOKS":{}}})", decodes, reqs,
                                 decodes + prefill, prefill),
                     TinyStore::host_s(reqs), false));
    }
  tx.commit();
  return t;
}

}  // namespace dooly::testing
