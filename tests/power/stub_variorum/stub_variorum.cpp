// A stub libvariorum for tests: variorum_get_power_json serves a scripted sequence of answers from the file
// named by DOOLY_STUB_VARIORUM_SCRIPT. One answer per line, consumed in order, the last one repeated:
//   json <text>      return 0 and a malloc'ed copy of <text> (which may be malformed on purpose)
//   file <path>      return 0 and the whole file, as it is: real Variorum writes its JSON over several lines
//                    (json_dumps with JSON_INDENT(4)); tests/power/fixtures/variorum/ holds such output
//   error <code>     return <code> and no string
//   null             return 0 and no string
// Blank lines and lines starting with '#' are skipped. The file is re-read (and the sequence restarted)
// whenever DOOLY_STUB_VARIORUM_SCRIPT names a different file.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Answer {
  enum Kind { json, error, null } kind = null;
  std::string text;
  int code = 0;
};

std::mutex mu;
std::string loaded_path;
std::vector<Answer> answers;
size_t next = 0;

bool load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  answers.clear();
  next = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Answer a;
    if (line.rfind("json ", 0) == 0) {
      a.kind = Answer::json;
      a.text = line.substr(5);
    } else if (line.rfind("file ", 0) == 0) {
      std::ifstream f(line.substr(5), std::ios::binary);
      if (!f) return false;
      a.kind = Answer::json;
      a.text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } else if (line.rfind("error ", 0) == 0) {
      a.kind = Answer::error;
      a.code = std::atoi(line.c_str() + 6);
    } else {
      a.kind = Answer::null;
    }
    answers.push_back(a);
  }
  loaded_path = path;
  return true;
}

}  // namespace

extern "C" {

int variorum_get_power_json(char** out) {
  try {
    std::lock_guard<std::mutex> lock(mu);
    *out = nullptr;
    const char* path = std::getenv("DOOLY_STUB_VARIORUM_SCRIPT");
    if (!path) return -1;
    if (loaded_path != path && !load(path)) return -1;
    if (answers.empty()) return -1;
    const Answer& a = answers[std::min(next, answers.size() - 1)];
    ++next;
    if (a.kind == Answer::error) return a.code;
    if (a.kind == Answer::json) {
      *out = static_cast<char*>(std::malloc(a.text.size() + 1));
      std::memcpy(*out, a.text.c_str(), a.text.size() + 1);
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

const char* variorum_get_current_version(void) { return "0.8.0-dooly-stub"; }

}  // extern "C"
