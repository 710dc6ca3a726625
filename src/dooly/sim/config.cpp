#include "dooly/sim/config.hpp"

#include <charconv>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"
#include "dooly/predict/step_model.hpp"

namespace dooly::sim {
namespace {

int64_t integer(const char* flag, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    DOOLY_THROW(InputError, fmt::format("give an integer in [{}, {}]", lo, hi),
                "--{}: '{}' is not an integer in [{}, {}]", flag, utf8::echo(text), lo, hi);
  return v;
}

double number(const char* flag, const std::string& text, double lo, double hi) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < lo || v > hi)
    DOOLY_THROW(InputError, fmt::format("give a number in [{}, {}]", lo, hi), "--{}: '{}' is not a number in [{}, {}]",
                flag, utf8::echo(text), lo, hi);
  return v;
}

std::string choice(const char* flag, const std::string& text, std::initializer_list<const char*> allowed) {
  for (const char* a : allowed)
    if (text == a) return text;
  DOOLY_THROW(InputError, fmt::format("use one of: {}", fmt::join(allowed, ", ")), "--{}: '{}' is not allowed", flag,
              utf8::echo(text));
}

bool on_off(const char* flag, const std::string& text) { return choice(flag, text, {"on", "off"}) == "on"; }

constexpr int64_t kBig = int64_t{1} << 40;

std::vector<Option> build() {
  std::vector<Option> o = {
      {"model", "NAME|FILE", "the model: a config in data/models/ (llama-3.1-8b) or a config.json", false, true,
       [](SimConfig& c, const std::string& v) { c.model = v; }},
      {"workload", "SPEC",
       "the requests: poisson:rate=R,n=N,prompt=DIST,output=DIST[,seed=S], gamma:, constant:, "
       "closed:users=U,..., or trace:FILE.jsonl (docs/simulate.md)",
       false, true, [](SimConfig& c, const std::string& v) { c.workload = v; }},
      {"engine", "hf|vllm", "the engine model (vllm: vLLM v1's policy, not validated live)", false, false,
       [](SimConfig& c, const std::string& v) {
         c.engine.engine = choice("engine", v, {"hf", "vllm"});
       }},
      {"scheduler", "NAME", "hf: fifo (default) or prefill_first; vllm: fcfs", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.scheduler = v; }},
      {"attention", "IMPL", "hf: paged|sdpa (default) or paged|eager", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.attention = v; }},
      {"cuda-graphs", "auto|on|off", "CUDA graphs (auto: the engine's choice; hf: off with sdpa/eager, vllm: on)",
       false, false,
       [](SimConfig& c, const std::string& v) {
         c.engine.cuda_graphs = choice("cuda-graphs", v, {"auto", "on", "off"});
       }},
      {"dtype", "NAME", "weights, activations and KV cache: bfloat16 (default), float16 or float32", false, false,
       [](SimConfig& c, const std::string& v) {
         c.engine.dtype = choice("dtype", v, {"bfloat16", "float16", "float32"});
       }},
      {"max-batch-tokens", "N", "token budget per step (hf: from its memory planner; vllm: 8192)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.max_batch_tokens = integer("max-batch-tokens", v, 1, kBig); }},
      {"num-blocks", "N", "KV cache blocks (default: from GPU memory, as the engine sizes it)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.num_blocks = integer("num-blocks", v, 1, kBig); }},
      {"block-size", "N", "tokens per KV block (hf 256, vllm 16)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.block_size = integer("block-size", v, 1, 1 << 20); }},
      {"max-requests", "N", "requests per step (hf: max_requests_per_batch, 1024; vllm: max_num_seqs, 1024)", false,
       false, [](SimConfig& c, const std::string& v) { c.engine.max_requests = integer("max-requests", v, 1, kBig); }},
      {"safety-margin", "F", "hf: no new prefill while free blocks < F x blocks (fifo 0.15, prefill_first 0)", false,
       false, [](SimConfig& c, const std::string& v) { c.engine.safety_margin = number("safety-margin", v, 0, 1); }},
      {"memory-fraction", "F",
       "share of free GPU memory for the cache (hf: max_memory_percent; vllm: "
       "gpu_memory_utilization), default 0.9",
       false, false,
       [](SimConfig& c, const std::string& v) { c.engine.memory_fraction = number("memory-fraction", v, 0.01, 1); }},
      {"reserved-gib", "G",
       "memory held besides the weights when the cache is sized (default 1.5, fitted to H200 runs)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.reserved_gib = number("reserved-gib", v, 0, 1e4); }},
      {"gpu-memory-gib", "G", "device memory (default 140.4, an H200)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.gpu.memory_gib = number("gpu-memory-gib", v, 0.1, 1e5); }},
      {"idle-power-w", "W", "board power while the device waits (default 124, an H200)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.gpu.idle_power_w = number("idle-power-w", v, 0, 1e4); }},
      {"q-padding", "N", "hf graphs: query tokens padded to a multiple of N (64)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.q_padding = integer("q-padding", v, 1, kBig); }},
      {"kv-padding", "N", "hf graphs: cached tokens read padded to a multiple of N (16384)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.kv_padding = integer("kv-padding", v, 1, kBig); }},
      {"warmup", "on|off", "hf graphs: the largest graph is captured before serving (on)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.warmup = on_off("warmup", v); }},
      {"warmup-requests", "N",
       "the first N requests served as one batch before the run, as `dooly live --warmup N` does; the graphs it "
       "captures carry over (0)",
       false, false,
       [](SimConfig& c, const std::string& v) {
         c.engine.warmup_requests = integer("warmup-requests", v, 0, 1 << 20);
       }},
      {"chunked-prefill", "on|off", "vllm: split prompts over steps (on)", false, false,
       [](SimConfig& c, const std::string& v) { c.engine.chunked_prefill = on_off("chunked-prefill", v); }},
      {"max-capture-size", "N", "vllm graphs: the largest captured batch in tokens (512)", false, false,
       [](SimConfig& c, const std::string& v) {
         c.engine.max_capture_size = integer("max-capture-size", v, 1, 1 << 20);
       }},
      {"db", "FILE", "the profiling store to price steps from (dooly profile's; its predictors: dooly predict fit)",
       false, false, [](SimConfig& c, const std::string& v) { c.db = v; }},
      {"allow-missing", "on|off", "--db: price steps without the op signatures the store has not measured (off)", false,
       false, [](SimConfig& c, const std::string& v) { c.allow_missing = on_off("allow-missing", v); }},
      {"moe-routing", "auto|uniform|random|experts:K|skew:S",
       "--db, MoE models: the experts' rows spread evenly (uniform), routed at random as the engine's router does "
       "(its padding tokens all alike), forced onto K experts, or skewed (expert i's share ~ 1/(i+1)^S), as the store "
       "measured them; auto: random where the store has the routing points, else uniform (docs/simulate.md)",
       false, false,
       [](SimConfig& c, const std::string& v) {
         (void)predict::parse_moe_routing(v);  // checked here: one line naming the flag's values
         c.moe_routing = v;
       }},
      {"cost", "auto|analytic|store", "how steps are priced (auto: store with --db, else analytic)", false, false,
       [](SimConfig& c, const std::string& v) {
         c.cost = choice("cost", v, {"auto", "analytic", "store"});
       }},
      {"step-times", "FILE",
       "the scheduler check: the k-th step takes the k-th duration (seconds, one a line) of a live run, so the "
       "scheduler meets its arrivals as the live engine did (docs/simulate.md)",
       false, false, [](SimConfig& c, const std::string& v) { c.step_times = v; }},
      {"slo", "ttft:MS,tpot:MS", "goodput: requests meeting every SLO (ttft, tpot, e2e in ms)", false, false,
       [](SimConfig& c, const std::string& v) { c.slo = v; }},
      {"out", "FILE", "result.json: summary, every request, every step", true, false,
       [](SimConfig& c, const std::string& v) { c.out = v; }},
      {"csv", "FILE", "one row per request", true, false, [](SimConfig& c, const std::string& v) { c.csv = v; }},
      {"plot", "PREFIX",
       "PNG charts: PREFIX-latency.png (CDFs of TTFT, TPOT, E2E), PREFIX-steps.png (batch, step time, power)", true,
       false, [](SimConfig& c, const std::string& v) { c.plot = v; }},
  };
  std::set<std::string> seen;
  for (const Option& x : o)
    if (!seen.insert(x.name).second)
      DOOLY_THROW(DuplicateError, "give each setting its own name", "setting '{}' is declared twice", x.name);
  return o;
}

}  // namespace

const std::vector<Option>& sim_options() {
  static const std::vector<Option> options = build();
  return options;
}

const Option* find_option(const std::string& name) {
  for (const Option& o : sim_options())
    if (o.name == name) return &o;
  return nullptr;
}

void set_option(SimConfig& c, const std::string& name, const std::string& value) {
  const Option* o = find_option(name);
  if (o == nullptr) {
    std::vector<std::string> names;
    for (const Option& x : sim_options()) names.push_back(x.name);
    DOOLY_THROW(InputError, fmt::format("the settings: {}", fmt::join(names, ", ")), "unknown setting '{}'",
                utf8::echo(name));
  }
  o->set(c, value);
}

}  // namespace dooly::sim
