// The `dooly` executable: a thin shell over the libraries; each subcommand lives in its own file.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "dooly/cli/command_registry.hpp"
#include "dooly/common/error.hpp"

namespace {

// A usage error is one line: what is wrong and where the flags are listed (CLI11's default adds a second line).
std::string one_line(const CLI::App* app, const CLI::Error& e) {
  std::string where = "dooly";
  for (const CLI::App* sub : app->get_subcommands()) where += " " + sub->get_name();
  std::string what = e.what();
  std::replace(what.begin(), what.end(), '\n', ' ');
  // `dooly bogus`: CLI11 reports the missing subcommand; name the word it did not know instead.
  if (app->get_subcommands().empty() && !app->remaining().empty()) {
    std::vector<std::string> names;
    for (const auto& c : dooly::cli::commands()) names.push_back(c.name);
    std::sort(names.begin(), names.end());  // registration order is the link order
    what =
        fmt::format("unknown subcommand '{}' (the subcommands: {})", app->remaining().front(), fmt::join(names, ", "));
  }
  return fmt::format("{}: {} (the flags: `{} --help`)\n", where, what, where);
}

}  // namespace

// Exit status: 0 done, 2 bad input (a flag, a file, a store: one line on stderr), 3 a dooly bug; `dooly trace`
// returns the tracer's own (4: --strict found disagreements).
// A function-try-block: setting up the subcommands can throw too (std::bad_alloc), before the inner try.
int main(int argc, char** argv) try {
  CLI::App app{"dooly: what each piece of GPU work costs, in seconds and joules"};
  app.require_subcommand(1);
  app.failure_message(one_line);
  std::vector<dooly::cli::Command> cmds = dooly::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : cmds) c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help (code 0) or the one-line error
    return code == 0 ? 0 : 2;
  } catch (const dooly::Error& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    fmt::print(stderr, "dooly: {}\n", what);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dooly: unexpected error: {}\n", e.what());
    return 3;
  }
  return 0;
} catch (const std::exception& e) {
  // fmt::print may throw again here; std::fprintf does not.
  std::fprintf(stderr, "dooly: unexpected error: %s\n", e.what());
  return 3;
} catch (...) {
  std::fputs("dooly: unexpected error (not a std::exception)\n", stderr);
  return 3;
}
