#pragma once
// Subcommands whose work lives in Python (next to PyTorch) exec the project's venv: `python -m <module> args...`
// with PYTHONPATH = <repo>/python:<build>/python, so the package and the built binding are both found.
#include <string>
#include <vector>

namespace dooly::cli {

// The repository root (DOOLY_SOURCE_DIR, or found above the executable by `marker`, a repository path).
std::string find_source_dir(const std::string& marker);

// Never returns: execs the interpreter (DOOLY_PYTHON, else <repo>/.venv/bin/python) or throws the reason.
[[noreturn]] void exec_python_module(const std::string& module, const std::vector<std::string>& args,
                                     const std::string& marker);

}  // namespace dooly::cli
