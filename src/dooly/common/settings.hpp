#pragma once
// Every DOOLY_* setting of the energy front ends (the Kokkos connector first; energy::ProfilerOptions and
// kokkos::ConnectorSettings read them), in one table: its name, type,
// default, range and one line of doc. The table drives the environment reader, the tool arguments
// (name=value, any case), --kokkos-tools-help and the settings list in docs/kokkos.md (a test keeps that list
// equal to the table). Values are checked against the table when they are read, so a bad one is one
// InputError naming the setting, what it was given and what it accepts, before any measurement starts.
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dooly {

enum class SettingType { text, flag, number, whole, choice, list };

struct SettingSpec {
  std::string_view name;  // without the DOOLY_ prefix, upper case
  SettingType type;
  std::string_view fallback;  // the default, in words
  double min = 0, max = 0;    // number and whole: the accepted range, inclusive
  std::string_view choices;   // choice: "a|b|c"
  std::string_view doc;       // one line
  // Read by a power backend or the clock straight from the environment, once per process: a tool argument
  // cannot reach it, and gives an error that says to export the variable.
  bool environment_only = false;
  std::string_view renamed_to;  // a deprecated name: still accepted, with one warning naming the new one
};

std::span<const SettingSpec> setting_specs() noexcept;
const SettingSpec* find_setting(std::string_view name) noexcept;  // upper case, without DOOLY_
// "[1, 10000]", "model|trapezoid", "0|1", "comma-separated list", "text"
std::string accepted_values(const SettingSpec& spec);
// The table as --kokkos-tools-help prints it, and as docs/kokkos.md lists it (markdown rows).
std::string settings_help();
std::string settings_markdown();

// Values by setting: the environment's DOOLY_<NAME> first, tool arguments over them. Each value was checked
// against its spec when it came in; the typed getters only convert. Nothing here touches the environment but
// from_env(), which only reads it.
class SettingValues {
 public:
  // Every table entry's DOOLY_<NAME> that is set and not empty. Throws InputError for a bad value. A deprecated
  // name is taken for its new one (which wins when both are set) and noted in warnings().
  static SettingValues from_env();
  // key=value words (Kokkos's tool arguments), the key any case without DOOLY_. A word without '=' is an error,
  // except the first (Kokkos passes the program's or the tool's name there). Throws InputError naming the word.
  void apply_args(const std::vector<std::string>& words);
  // Sets one value, checked against its spec; errors name it as given: DOOLY_X (environment) or x (argument).
  void set(const SettingSpec& spec, std::string value, bool from_args);

  bool has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  std::optional<std::string> text(std::string_view name) const;
  std::optional<bool> flag(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;
  std::optional<long long> whole(std::string_view name) const;
  std::optional<std::string> choice(std::string_view name) const { return text(name); }
  std::optional<std::vector<std::string>> list(std::string_view name) const;
  // One line per deprecated name in use ("DOOLY_MODEL is deprecated ..."), for the caller to log once.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }

 private:
  const std::string* raw(std::string_view name, SettingType type) const;
  std::map<std::string, std::string, std::less<>> values_;
  std::vector<std::string> warnings_;
};

}  // namespace dooly
