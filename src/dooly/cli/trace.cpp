// dooly trace --engine hf --model data/models/llama-3.1-8b.json --attention 'paged|sdpa' --out traces/
// The tracer is Python (it drives PyTorch), and so are its flags: python/dooly/cli_trace.py declares them once.
// This subcommand declares none. It finds the project's venv and the built binding and execs
// `python -m dooly.cli_trace` with every argument after `trace` as given, `--help` included, so
// `dooly trace --help` is Python's help and a flag added there needs no change here.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"

namespace {

namespace fs = std::filesystem;

// The repository root holds python/dooly/cli_trace.py; the build folder holds CMakeCache.txt. Both are found
// by walking up from the executable.
fs::path find_up(const fs::path& from, const fs::path& marker) {
  for (fs::path p = from; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / marker)) return p;
    if (p == p.parent_path()) break;
  }
  return {};
}

[[noreturn]] void run_trace(const std::vector<std::string>& args) {
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
    DOOLY_THROW(InputError,
                "run scripts/setup_python.sh (it creates .venv with torch and transformers), or set DOOLY_PYTHON",
                "the Python environment {} is missing", python);
  std::string pythonpath = (root / "python").string();
  if (!build.empty()) pythonpath += ":" + (build / "python").string();
  if (auto old = env::get("PYTHONPATH")) pythonpath += ":" + *old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);

  std::vector<std::string> argv = {python, "-m", "dooly.cli_trace"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  execv(python.c_str(), cargv.data());
  DOOLY_THROW(Error, "check that the venv's python runs", "cannot exec {}: {}", python, std::strerror(errno));
}

void setup_trace(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "trace", "Trace a serving engine's forward passes with taint-labelled dimensions (flags: dooly trace --help)");
  cmd->set_help_flag();   // --help too is the tracer's: python -m dooly.cli_trace --help
  cmd->prefix_command();  // everything after `trace` is forwarded untouched, in order
  cmd->callback([cmd] { run_trace(cmd->remaining()); });
}

const bool registered = dooly::cli::add_command("trace", &setup_trace);

}  // namespace
