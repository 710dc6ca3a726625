#include "dooly/power/nvml/nvml_provider.hpp"
#include "dooly/power/rapl/rapl_provider.hpp"
#include "dooly/power/registry.hpp"
#include "dooly/power/replay/replay_provider.hpp"
#include "dooly/power/variorum/variorum_provider.hpp"

namespace dooly::power {

// Detection order (documented in docs/power-sources.md): nvml, variorum, rapl; replay only when forced.
Registry make_default_registry() {
  Registry r;
  r.add(make_nvml_provider());
  r.add(make_variorum_provider());
  r.add(make_rapl_provider());
  r.add(make_replay_provider());
  return r;
}

}  // namespace dooly::power
