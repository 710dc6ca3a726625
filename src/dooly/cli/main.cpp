// The `dooly` executable: a thin shell over the libraries; each subcommand lives in its own file.
#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dooly: what each piece of GPU work costs, in seconds and joules"};
  app.require_subcommand(1);
  std::vector<dooly::cli::Command> cmds = dooly::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : cmds) c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dooly::Error& e) {
    fmt::print(stderr, "dooly: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dooly: unexpected error: {}\n", e.what());
    return 3;
  }
  return 0;
}
