#include "dooly/cli/python_exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"

namespace dooly::cli {
namespace {

namespace fs = std::filesystem;

// The repository root holds `marker`; the build folder holds CMakeCache.txt. Both are found by walking up from
// the executable.
fs::path find_up(const fs::path& from, const fs::path& marker) {
  for (fs::path p = from; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / marker)) return p;
    if (p == p.parent_path()) break;
  }
  return {};
}

}  // namespace

std::string find_source_dir(const std::string& marker) {
  const fs::path exe = fs::canonical("/proc/self/exe");
  fs::path root = env::get("DOOLY_SOURCE_DIR").value_or("");
  if (root.empty()) root = find_up(exe.parent_path(), marker);
  if (root.empty())
    DOOLY_THROW(InputError, "run the dooly built inside the repository, or set DOOLY_SOURCE_DIR to the repository",
                "cannot find {} above {}", marker, exe.string());
  return root.string();
}

void exec_python_module(const std::string& module, const std::vector<std::string>& args, const std::string& marker) {
  const fs::path root = find_source_dir(marker);
  const fs::path build = find_up(fs::canonical("/proc/self/exe").parent_path(), "CMakeCache.txt");
  std::string python = env::get("DOOLY_PYTHON").value_or((root / ".venv/bin/python").string());
  if (!fs::exists(python))
    DOOLY_THROW(InputError,
                "run scripts/setup_python.sh (it creates .venv with torch and transformers), or set DOOLY_PYTHON",
                "the Python environment {} is missing", python);
  std::string pythonpath = (root / "python").string();
  if (!build.empty()) pythonpath += ":" + (build / "python").string();
  if (auto old = env::get("PYTHONPATH")) pythonpath += ":" + *old;
  setenv("PYTHONPATH", pythonpath.c_str(), 1);

  std::vector<std::string> argv = {python, "-m", module};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  execv(python.c_str(), cargv.data());
  DOOLY_THROW(Error, "check that the venv's python runs", "cannot exec {}: {}", python, std::strerror(errno));
}

}  // namespace dooly::cli
