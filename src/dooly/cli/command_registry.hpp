#pragma once
// Subcommands register themselves: one file per subcommand defines
//   static const bool registered = dooly::cli::add_command("name", &setup_name);
// and main() builds the CLI11 app from the registry. A duplicate name is a programming error and throws.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dooly::cli {

// Adds the subcommand's options to `app` and sets its callback.
using Setup = void (*)(CLI::App& app);

struct Command {
  std::string name;
  Setup setup;
};

bool add_command(std::string name, Setup setup);
const std::vector<Command>& commands();

}  // namespace dooly::cli
