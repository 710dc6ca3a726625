#include "dooly/cupti/kernel_names.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace dooly::cupti {

std::string demangle(const char* name) {
  if (!name) return "<unnamed>";
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

namespace {

// The text with every bracketed part at depth > 0 removed (<...>, (...), [...], {...}).
std::string top_level(std::string_view s) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    // "operator<" / "operator()" keep their brackets: not template arguments or parameters.
    if (depth == 0 && i >= 8 && s.substr(i - 8, 8) == "operator") {
      out += c;
      if (c == '(' && i + 1 < s.size() && s[i + 1] == ')') out += s[++i];
      continue;
    }
    if (c == '<' || c == '(' || c == '[' || c == '{') {
      ++depth;
      continue;
    }
    if (c == '>' || c == ')' || c == ']' || c == '}') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) out += c;
  }
  return out;
}

}  // namespace

std::string short_name(std::string_view demangled) {
  std::string s = top_level(demangled);
  // Drop the return type and qualifiers: the name is the last space-separated word that is not one.
  while (!s.empty() && s.back() == ' ') s.pop_back();
  for (const char* suffix : {" const", " volatile", " &&", " &"})
    if (s.size() > std::char_traits<char>::length(suffix) && s.ends_with(suffix))
      s.erase(s.size() - std::char_traits<char>::length(suffix));  // erase: never grows (resize made gcc 12 warn)
  if (const size_t sp = s.rfind(' '); sp != std::string::npos && s.find("operator") == std::string::npos)
    s.erase(0, sp + 1);
  if (const size_t colons = s.rfind("::"); colons != std::string::npos && colons + 2 < s.size())
    s = s.substr(colons + 2);
  return s.empty() ? std::string(demangled) : s;
}

}  // namespace dooly::cupti
