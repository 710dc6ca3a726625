// dooly live --model NAME [--tiny] --workload SPEC --out live.json [--device cpu|cuda|cuda:N] [--attention A]
//            [--cuda-graphs on|off] [--scheduler fifo|prefill_first] [--max-batch-tokens N] [--max-batch-requests N]
//            [--block-size B] [--num-blocks K] [--dtype D] [--warmup N] [--seed S] [--slo ...] [--deadline-s T]
// Serves the workload on the real Hugging Face engine and writes the result file (docs/simulate.md, "Live runs").
// The run is Python (it drives PyTorch): this subcommand checks every argument here first (the workload through the
// simulator's own parser and generator, the model file, the output folder), so bad input is one line and exit 2
// before torch is imported, then execs `python -m dooly.live` with the same arguments.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/cli/python_exec.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"
#include "dooly/sim/workload.hpp"

namespace {

namespace fs = std::filesystem;
using namespace dooly;

constexpr const char* kMarker = "python/dooly/live/__main__.py";

struct LiveArgs {
  std::string model, workload, out, device = "auto", attention = "paged|sdpa", cuda_graphs = "off", scheduler = "fifo",
                                    dtype, slo;
  bool tiny = false;
  int64_t max_batch_tokens = 0, max_batch_requests = 0, block_size = 256, num_blocks = 0, warmup = 0, seed = 0;
  double deadline_s = -1;
};

// The model config the Python side will load: a shipped name (data/models/<name>.json, or tiny/<name>.json) or a
// path to a config.json.
void check_model(const LiveArgs& a) {
  const fs::path given(a.model);
  if (given.extension() == ".json" || fs::exists(given)) {
    const fs::path p = a.tiny ? given.parent_path() / "tiny" / given.filename() : given;
    if (!fs::is_regular_file(p))
      DOOLY_THROW(InputError, "pass a config.json from data/models/ (with --tiny: its tiny/ variant must exist)",
                  "model config {} does not exist", p.string());
    return;
  }
  const fs::path dir =
      env::get("DOOLY_MODELS_DIR").value_or((fs::path(cli::find_source_dir(kMarker)) / "data/models").string());
  const fs::path p = dir / (a.tiny ? "tiny" : "") / (a.model + ".json");
  if (fs::is_regular_file(p)) return;
  std::string known;
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  DOOLY_THROW(InputError, fmt::format("use one of the known models: {}", known.empty() ? "(none)" : known),
              "no {}model config named '{}' ({} does not exist)", a.tiny ? "tiny " : "", a.model, p.string());
}

void check_out(const std::string& out) {
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (fs::is_directory(p))
    DOOLY_THROW(InputError, "give a file name such as <folder>/live.json", "--out {} is a folder", out);
  if (!fs::is_directory(dir))
    DOOLY_THROW(InputError, "create it first", "--out {}: the folder {} does not exist", out, dir.string());
  if (::access(dir.c_str(), W_OK) != 0)
    DOOLY_THROW(InputError, "choose another place", "--out {}: the folder {} is not writable", out, dir.string());
}

void run_live(const LiveArgs& a) {
  if (a.attention.rfind("paged|", 0) != 0)
    DOOLY_THROW(InputError, "use e.g. paged|sdpa or paged|eager (the continuous-batching engine runs only paged ones)",
                "--attention {} is not a paged implementation", a.attention);
  if (a.device != "auto" && a.device != "cpu" && a.device != "cuda" &&
      !(a.device.rfind("cuda:", 0) == 0 && a.device.size() > 5 &&
        a.device.find_first_not_of("0123456789", 5) == std::string::npos))
    DOOLY_THROW(InputError, "use --device cpu, cuda or cuda:N", "unknown --device '{}'", a.device);
  check_model(a);
  const sim::Workload w = sim::parse_workload(a.workload);  // a bad spec: InputError naming the field and the fix
  if (sim::generate(w).empty())
    DOOLY_THROW(InputError, "give n >= 1 or a trace with requests", "--workload {} has no requests", a.workload);
  check_out(a.out);

  std::vector<std::string> args = {"--model",       a.model,
                                   "--workload",    a.workload,
                                   "--out",         a.out,
                                   "--device",      a.device,
                                   "--attention",   a.attention,
                                   "--cuda-graphs", a.cuda_graphs,
                                   "--scheduler",   a.scheduler,
                                   "--block-size",  std::to_string(a.block_size),
                                   "--warmup",      std::to_string(a.warmup),
                                   "--seed",        std::to_string(a.seed)};
  if (a.tiny) args.emplace_back("--tiny");
  auto optional = [&](const char* flag, int64_t v) {
    if (v > 0) args.insert(args.end(), {flag, std::to_string(v)});
  };
  optional("--max-batch-tokens", a.max_batch_tokens);
  optional("--max-batch-requests", a.max_batch_requests);
  optional("--num-blocks", a.num_blocks);
  if (!a.dtype.empty()) args.insert(args.end(), {"--dtype", a.dtype});
  if (!a.slo.empty()) args.insert(args.end(), {"--slo", a.slo});
  if (a.deadline_s >= 0) args.insert(args.end(), {"--deadline-s", fmt::format("{}", a.deadline_s)});
  std::fflush(stdout);
  cli::exec_python_module("dooly.live", args, kMarker);
}

void setup_live(CLI::App& app) {
  auto a = std::make_shared<LiveArgs>();
  const CLI::Range kPositive(int64_t{1}, int64_t{1'000'000'000}), kNonNegative(int64_t{0}, int64_t{1'000'000'000});
  CLI::App* cmd = app.add_subcommand(
      "live", "Serve a workload on the real HF engine; record tokens, steps and energy (docs/simulate.md)");
  cmd->add_option("--model", a->model, "a model name from data/models/ (e.g. llama-3.1-8b) or a config.json")
      ->required();
  cmd->add_flag("--tiny", a->tiny, "the model's tiny variant (data/models/tiny/; CPU tests)");
  cmd->add_option("--workload", a->workload, "a workload spec (docs/simulate.md)")->required();
  cmd->add_option("--out", a->out, "the result file to write (JSON)")->required();
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (auto: cuda when torch sees one)")->capture_default_str();
  cmd->add_option("--attention", a->attention, "a paged attention implementation")->capture_default_str();
  cmd->add_option("--cuda-graphs", a->cuda_graphs, "the engine's CUDA graphs")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--scheduler", a->scheduler, "the engine's scheduler")
      ->check(CLI::IsMember({"fifo", "prefill_first"}))
      ->capture_default_str();
  cmd->add_option("--max-batch-tokens", a->max_batch_tokens,
                  "tokens per step (default: the engine's own; 521 on a CPU)")
      ->check(kPositive);
  cmd->add_option("--max-batch-requests", a->max_batch_requests, "requests per step (default: the engine's own)")
      ->check(kPositive);
  cmd->add_option("--block-size", a->block_size, "KV-cache block size in tokens")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--num-blocks", a->num_blocks, "KV-cache blocks (default: the engine's own; 331 on a CPU)")
      ->check(kPositive);
  cmd->add_option("--dtype", a->dtype, "weights and cache dtype (default bfloat16 on a GPU, float32 on a CPU)");
  cmd->add_option("--warmup", a->warmup, "serve this many of the workload's first requests before the measured run")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "random weights and prompt token ids")->check(kNonNegative)->capture_default_str();
  cmd->add_option("--slo", a->slo, "goodput SLOs in seconds, e.g. ttft_s=2,tpot_s=0.1,e2e_s=30");
  cmd->add_option("--deadline-s", a->deadline_s, "end the run this many seconds after its start")
      ->check(CLI::Range(0.0, 1e9));
  cmd->callback([a] { run_live(*a); });
}

const bool registered = dooly::cli::add_command("live", &setup_live);

}  // namespace
