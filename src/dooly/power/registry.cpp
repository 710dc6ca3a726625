#include "dooly/power/registry.hpp"

#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::power {

std::string_view to_string(Domain d) noexcept {
  switch (d) {
    case Domain::gpu:
      return "gpu";
    case Domain::cpu:
      return "cpu";
    case Domain::dram:
      return "dram";
    case Domain::node:
      return "node";
    case Domain::other:
      break;
  }
  return "other";
}

void Registry::add(std::unique_ptr<Provider> provider) {
  if (find(provider->name()))
    DOOLY_THROW(DuplicateError, "register each backend once", "power backend '{}' is already registered",
                provider->name());
  providers_.push_back(std::move(provider));
}

const Provider* Registry::find(std::string_view name) const noexcept {
  for (const auto& p : providers_)
    if (p->name() == name) return p.get();
  return nullptr;
}

Selection select(const Registry& registry, const Options& options, std::string_view forced) {
  Selection sel;
  if (!forced.empty()) {
    const Provider* p = registry.find(forced);
    if (!p) {
      std::string names;
      for (const auto& q : registry.providers()) names += (names.empty() ? "" : ", ") + std::string(q->name());
      DOOLY_THROW(InputError, fmt::format("set DOOLY_POWER_SOURCE to one of: {}", names), "unknown power source '{}'",
                  forced);
    }
    sel.session = p->open(options);
    sel.backend = std::string(p->name());
    return sel;
  }
  for (const auto& p : registry.providers()) {
    if (!p->auto_detected()) continue;
    Probe probe = p->probe(options);
    if (!probe.available) {
      sel.skipped.push_back(fmt::format("{}: {}", p->name(), probe.reason));
      continue;
    }
    try {
      sel.session = p->open(options);
      sel.backend = std::string(p->name());
      return sel;
    } catch (const Error& e) {
      sel.skipped.push_back(fmt::format("{}: {}", p->name(), e.what()));
    }
  }
  std::string why;
  for (const auto& s : sel.skipped) why += "\n  " + s;
  throw SourceError("power", 0, fmt::format("no power source could be opened:{}", why),
                    "install the NVIDIA driver (NVML) or Variorum, make /sys/class/powercap readable, "
                    "or set DOOLY_POWER_SOURCE=replay with DOOLY_REPLAY_FILE");
}

}  // namespace dooly::power
