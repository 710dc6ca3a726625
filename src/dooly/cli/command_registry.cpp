#include "dooly/cli/command_registry.hpp"

#include "dooly/common/error.hpp"

namespace dooly::cli {

namespace {
std::vector<Command>& mutable_commands() {
  static std::vector<Command> list;
  return list;
}
}  // namespace

bool add_command(std::string name, Setup setup) {
  for (const Command& c : mutable_commands())
    if (c.name == name)
      DOOLY_THROW(DuplicateError, "give each subcommand its own name", "subcommand '{}' registered twice", name);
  mutable_commands().push_back({std::move(name), setup});
  return true;
}

const std::vector<Command>& commands() { return mutable_commands(); }

}  // namespace dooly::cli
