#include "dooly/power/registry.hpp"

namespace dooly::power {

// Detection order (documented in docs/power-sources.md): nvml, variorum, rapl; replay only when forced.
Registry make_default_registry() {
  Registry r;
  return r;
}

}  // namespace dooly::power
