#include "dooly/cli/sim_flags.hpp"

#include <filesystem>

#include "dooly/cli/python_exec.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"

namespace dooly::cli {

void SimFlags::add_to(CLI::App& cmd, bool for_sweep) {
  for (const sim::Option& o : sim::sim_options()) {
    if (for_sweep && o.output) continue;
    CLI::Option* opt = cmd.add_option_function<std::string>(
        "--" + o.name, [this, name = o.name](const std::string& v) { given_[name] = v; }, o.help);
    opt->type_name(o.value_name);
    if (o.required && !for_sweep) opt->required();
  }
}

sim::SimConfig SimFlags::config() const {
  sim::SimConfig c;
  for (const auto& [name, value] : given_) sim::set_option(c, name, value);
  return c;
}

std::string models_dir(const std::string& model) {
  if (const auto dir = env::get("DOOLY_MODELS_DIR")) return *dir;
  try {
    return (std::filesystem::path(find_source_dir("data/models/SOURCES.md")) / "data/models").string();
  } catch (const InputError&) {
    if (model.find('/') != std::string::npos) return "";
    throw;
  }
}

}  // namespace dooly::cli
