#include "dooly/plot/run_input.hpp"

#include <cctype>
#include <fstream>
#include <iterator>
#include <string_view>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/energy/report_writers.hpp"

namespace dooly::plot {

namespace {

constexpr std::string_view kRecordingPrefix = "# dooly-recording";
constexpr const char* kWhatToPass =
    "pass a recording (DOOLY_RECORD=run.recording) or a JSON report (DOOLY_OUTPUT's .json, dooly analyze --json)";

// What the file starts with: the recording's header (any version: its reader names the one it found), a JSON
// object, or something else ('\0' for an empty file).
enum class Start { recording, json, other, empty };
Start start_of(std::ifstream& in) {
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  if (!in) return Start::empty;
  if (c == '{') return Start::json;
  std::string head(1, c);
  for (size_t i = 1; i < kRecordingPrefix.size() && in.get(c); ++i) head += c;
  return head == kRecordingPrefix ? Start::recording : Start::other;
}

energy::Report read_report(std::ifstream& in, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const nlohmann::json::exception& e) {
    DOOLY_THROW(InputError, kWhatToPass, "'{}' is not valid JSON ({})", path, e.what());
  }
  try {
    return energy::report_from_json(j);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.problem()), e.fix());
  }
}

}  // namespace

RunInput read_run_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) DOOLY_THROW(InputError, "check the path and that the file is readable", "cannot read '{}'", path);
  const Start start = start_of(in);
  RunInput input;
  if (start == Start::recording) {
    in.close();
    input.recording = energy::read_recording(path);  // checks the header's version and every line
  } else if (start == Start::json) {
    in.clear();
    in.seekg(0);
    input.report = read_report(in, path);
  } else {
    DOOLY_THROW(InputError, kWhatToPass, "'{}' is neither a dooly recording nor a JSON report{}", path,
                start == Start::empty ? " (it is empty)" : "");
  }
  return input;
}

std::vector<size_t> chosen_channels(const std::vector<std::string>& names, const std::optional<std::string>& wanted,
                                    const std::string& source) {
  std::vector<size_t> out;
  for (size_t i = 0; i < names.size(); ++i)
    if (!wanted || names[i] == *wanted) out.push_back(i);
  if (out.empty() && wanted)
    DOOLY_THROW(InputError, "pass one of them to --channel, or leave --channel out for all",
                "no channel '{}' in '{}' (its channels: {})", *wanted, source,
                names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  return out;
}

}  // namespace dooly::plot
