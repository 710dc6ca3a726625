#pragma once
// The measured points a predictor is fitted to, read from the store: per (signature, measurement provenance), the
// newest ok row of every point key, the key's bindings as numbers, latency (mean seconds per call) and energy
// (joules per call, when the point has it), and what kind of step composition the point was.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dooly/store/records.hpp"

namespace dooly::store {
class Store;
}

namespace dooly::predict {

// What kind of step a sweep point was (from its measurement's composition columns): a prefill chunk (no decode
// in it), a decode batch, a mixed step (decodes plus a chunk), or none of these (token-only and engine sweeps).
enum class PointKind : uint8_t { other, prefill, decode, mixed };
inline constexpr size_t point_kind_count = 4;
std::string_view to_string(PointKind kind) noexcept;
PointKind point_kind(const store::Measurement& m) noexcept;

struct MeasuredPoint {
  std::string key;        // the canonical point key
  std::vector<double> x;  // its bindings, in SignatureData::quantities order
  double latency_s = 0;
  std::optional<double> energy_j;
  double latency_hw_s = 0;            // half-width of the 95 % interval of latency_s (1.96 std / sqrt(repetitions))
  std::optional<double> energy_hw_j;  // the same for energy_j, as measured; absent when not known
  PointKind kind = PointKind::other;
  std::string grid_sha256;  // extra_json.grid_sha256, '' when not recorded
};

// A point of a MoE routing sweep (keys binding MOE_EXPERTS and MOE_SKEW, docs/profile.md "MoE routing"): kept out
// of the signature's predictor, which is fitted on its uniformly routed points; the step model scales by them.
struct RoutedPoint {
  double tokens = 0;         // NUM_TOKS
  int64_t experts = 0;       // MOE_EXPERTS
  int64_t skew_percent = 0;  // MOE_SKEW
  double latency_s = 0;
  std::optional<double> energy_j;
};

struct SignatureData {
  int64_t signature_id = 0;
  int64_t provenance_id = 0;
  std::vector<std::string> quantities;  // the swept quantities, sorted (as in the keys)
  std::vector<MeasuredPoint> points;    // one per key, sorted by key
  size_t other_key_rows = 0;            // ok rows whose key binds other quantities than the newest row's (ignored)
  std::vector<RoutedPoint> routed;      // routing points (newest row per key), by key
};

// Every signature with ok, keyed measurements under the provenance, ordered by signature id (one query).
std::vector<SignatureData> load_measured(store::Store& store, int64_t provenance_id);
// The same for one signature; no points when it has none.
SignatureData load_measured(store::Store& store, int64_t signature_id, int64_t provenance_id);

// One target's points: all of them for latency, those with energy for energy. Row-major, quantities.size() each.
struct TargetPoints {
  std::vector<double> x;
  std::vector<double> y;
  std::vector<PointKind> kinds;
  std::vector<double> hw;  // each value's 95 % half-width (0: not known)
  std::vector<const MeasuredPoint*> from;
  size_t rows() const noexcept { return y.size(); }
};
TargetPoints target_points(const SignatureData& data, store::PredictorTarget target);

// SHA-256 of exactly what a fit of this target reads (quantities, keys, values): equal hashes, equal fits.
std::string data_sha256(const SignatureData& data, const TargetPoints& points, store::PredictorTarget target);
// The distinct grid hashes of the points, sorted and joined by ','; '' when none recorded.
std::string grid_sha256(const TargetPoints& points);

}  // namespace dooly::predict
