#pragma once
// Holds the providers in their documented detection order; rejects duplicate names.
#include <memory>
#include <string_view>
#include <vector>

#include "dooly/power/power_source.hpp"

namespace dooly::power {

class Registry {
 public:
  void add(std::unique_ptr<Provider> provider);  // throws DuplicateError
  const Provider* find(std::string_view name) const noexcept;
  const std::vector<std::unique_ptr<Provider>>& providers() const noexcept { return providers_; }

 private:
  std::vector<std::unique_ptr<Provider>> providers_;
};

// Every built-in backend, in auto-detection order: nvml, variorum, rapl. (replay is never auto-detected.)
Registry make_default_registry();

struct Selection {
  std::unique_ptr<Session> session;
  std::string backend;
  std::vector<std::string> skipped;  // "variorum: libvariorum.so not found — ..." per backend passed over
};

// Opens `forced` if non-empty (DOOLY_POWER_SOURCE), else the first available backend in order.
// Throws InputError for an unknown name, SourceError when nothing can be opened.
Selection select(const Registry& registry, const Options& options, std::string_view forced);

}  // namespace dooly::power
