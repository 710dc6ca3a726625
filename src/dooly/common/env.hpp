#pragma once
// Typed reads of DOOLY_* environment variables. A malformed value is an InputError that names the
// variable, the value and what is accepted.
#include <optional>
#include <string>
#include <vector>

namespace dooly::env {

std::optional<std::string> get(const char* name);
std::optional<double> get_double(const char* name, double min, double max);
std::optional<long long> get_int(const char* name, long long min, long long max);
std::optional<bool> get_bool(const char* name);
// Comma-separated list; empty items are an error.
std::optional<std::vector<std::string>> get_list(const char* name);

}  // namespace dooly::env
