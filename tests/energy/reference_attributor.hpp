#pragma once
// A reference attributor for tests: the whole run in memory, no streaming, no queues, no trimming, written to be
// read against docs/energy-attribution.md rather than to be fast. Random streams fed to the engine and to this
// must give the same report (tests/energy/reference_test.cpp).
//
// What it shares with the engine is the definition of the figures, not code: its own E(t), its own window
// stacks, occupancy computed directly for every reading and sensor setting (the engine corrects the given
// setting's at the edges), the design matrix built in full, NNLS by enumeration (brute_nnls.hpp), the jackknife's
// blocks laid out from the reading count.
#include <cstdint>
#include <optional>
#include <vector>

#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy::testing {

struct ReferenceCounter {
  uint32_t channel;
  int64_t t_ns;
  double energy_j;
};

struct ReferenceRun {
  std::vector<power::Channel> channels;
  std::vector<power::Reading> readings;  // per channel in time order
  std::vector<Event> events;             // in time order
  std::vector<ReferenceCounter> counters;  // in the order they were read
  int64_t run_t0 = 0;
  int64_t t_end = 0;
  std::optional<double> baseline_w;
  bool model = true;
  bool sensor_check = true;
  bool split_overlaps = true;  // readings with concurrent kernels set aside and split (AttributorOptions)
  int64_t split_span_ns = 100'000'000;
};

Report reference_attribute(const ReferenceRun& run, const KeyTable& keys);

}  // namespace dooly::energy::testing
