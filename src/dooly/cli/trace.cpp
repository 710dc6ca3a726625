// dooly trace --engine hf --model data/models/llama-3.1-8b.json --attention 'paged|sdpa' --out traces/
// The tracer is Python (it drives PyTorch); this subcommand finds the project's venv and the built binding
// and execs `python -m dooly.cli_trace` with the same arguments.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"

namespace {

namespace fs = std::filesystem;

struct TraceArgs {
  std::string engine = "hf", model, attention = "paged|sdpa", out = "traces", device = "cpu", dtype, sdpa_kernel;
  int num_blocks = 0;  // 0: the engine sizes the KV cache
  bool tiny = false, no_verify = false, strict = false;
};

// The repository root holds python/dooly/cli_trace.py; the build folder holds CMakeCache.txt. Both are found
// by walking up from the executable.
fs::path find_up(fs::path from, const fs::path& marker) {
  for (fs::path p = from; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / marker)) return p;
    if (p == p.parent_path()) break;
  }
  return {};
}

[[noreturn]] void run_trace(const TraceArgs& a) {
  using namespace dooly;
  const fs::path exe = fs::canonical("/proc/self/exe");
  fs::path root = env::get("DOOLY_SOURCE_DIR").value_or("");
  if (root.empty()) root = find_up(exe.parent_path(), "python/dooly/cli_trace.py");
  if (root.empty())
    DOOLY_THROW(InputError, "run the dooly built inside the repository, or set DOOLY_SOURCE_DIR to the repository",
                "cannot find python/dooly/cli_trace.py above {}", exe.string());
  const fs::path build = find_up(exe.parent_path(), "CMakeCache.txt");
  std::string python = env::get("DOOLY_PYTHON").value_or((root / ".venv/bin/python").string());
  if (!fs::exists(python))
    DOOLY_THROW(InputError, "run scripts/setup_python.sh (it creates .venv with torch and transformers), or set DOOLY_PYTHON",
                "the Python environment {} is missing", python);
  std::string pythonpath = (root / "python").string();
  if (!build.empty()) pythonpath += ":" + (build / "python").string();
  if (auto old = env::get("PYTHONPATH")) pythonpath += ":" + *old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);

  std::vector<std::string> argv = {python, "-m", "dooly.cli_trace", "--engine", a.engine, "--model", a.model,
                                   "--attention", a.attention, "--out", a.out, "--device", a.device};
  if (!a.dtype.empty()) argv.insert(argv.end(), {"--dtype", a.dtype});
  if (!a.sdpa_kernel.empty()) argv.insert(argv.end(), {"--sdpa-kernel", a.sdpa_kernel});
  if (a.num_blocks > 0) argv.insert(argv.end(), {"--num-blocks", std::to_string(a.num_blocks)});
  if (a.tiny) argv.push_back("--tiny");
  if (a.no_verify) argv.push_back("--no-verify");
  if (a.strict) argv.push_back("--strict");
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  execv(python.c_str(), cargv.data());
  DOOLY_THROW(Error, "check that the venv's python runs", "cannot exec {}: {}", python, std::strerror(errno));
}

void setup_trace(CLI::App& app) {
  auto a = std::make_shared<TraceArgs>();
  CLI::App* cmd = app.add_subcommand("trace", "Trace a serving engine's forward passes with taint-labelled dimensions");
  cmd->add_option("--engine", a->engine, "engine to trace")->check(CLI::IsMember({"hf"}));
  cmd->add_option("--model", a->model, "model config (data/models/<name>.json) or a shipped model name")->required();
  cmd->add_option("--attention", a->attention, "attention implementation, e.g. 'paged|sdpa'");
  cmd->add_option("--out", a->out, "output folder for <model>__<backend>.json");
  cmd->add_option("--device", a->device, "cpu or cuda");
  cmd->add_option("--dtype", a->dtype, "torch dtype (default float32 on cpu, bfloat16 on cuda)");
  cmd->add_option("--sdpa-kernel", a->sdpa_kernel, "force one SDPA kernel")
      ->check(CLI::IsMember({"flash", "efficient", "cudnn", "math"}));
  cmd->add_option("--num-blocks", a->num_blocks, "KV-cache blocks (default: sized by the engine; bound it when "
                                               "several traces share a GPU)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tiny", a->tiny, "use the tiny variant of the model (data/models/tiny/)");
  cmd->add_flag("--no-verify", a->no_verify, "skip the verification run at other request sizes");
  cmd->add_flag("--strict", a->strict, "fail (exit 4) when verification finds disagreements");
  cmd->callback([a] { run_trace(*a); });
}

const bool registered = dooly::cli::add_command("trace", &setup_trace);

}  // namespace
