#include "dooly/predict/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/signature/sha256.hpp"
#include "dooly/store/store.hpp"

namespace dooly::predict {
namespace {

constexpr std::string_view kSelect =
    "SELECT signature_id, point_key, latency_mean_s, energy_j, is_prefill, batch, prefill_chunk, "
    "coalesce(json_extract(extra_json, '$.grid_sha256'), ''), latency_std_s, repetitions, energy_hw_j FROM "
    "measurements "
    "WHERE provenance_id = :prov AND status = 'ok' AND point_key <> ''";

// A key's bindings in key order (the keys are canonical: sorted); throws InputError for a key that is not an
// object of numbers.
std::vector<std::pair<std::string, double>> bindings(const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(key, nullptr, false);
  std::vector<std::pair<std::string, double>> out;
  bool numbers = j.is_object();
  if (numbers)
    for (const auto& [name, value] : j.items()) {
      if (!value.is_number())
        numbers = false;
      else
        out.emplace_back(name, value.get<double>());
    }
  if (!numbers)
    DOOLY_THROW(InputError, "the row was written outside dooly; remove it or measure the point again",
                "point key '{}' does not bind quantities to numbers", key.substr(0, 80));
  return out;
}

using Bindings = std::vector<std::pair<std::string, double>>;

// A routing point's bindings as a RoutedPoint; nullopt for any other key.
std::optional<RoutedPoint> routed_of(const Bindings& b, const MeasuredPoint& p) {
  std::optional<double> experts, skew, tokens;
  for (const auto& [name, value] : b) {
    if (name == "MOE_EXPERTS") experts = value;
    if (name == "MOE_SKEW") skew = value;
    if (name == "NUM_TOKS") tokens = value;
  }
  if (!experts) return std::nullopt;
  return RoutedPoint{tokens.value_or(0), static_cast<int64_t>(*experts), static_cast<int64_t>(skew.value_or(0)),
                     p.latency_s, p.energy_j};
}

// Keeps, per key, the newest row (rows arrive in id order) and the quantity set of the newest row overall that is
// not a routing point; routing points go to `routed`.
void finish(SignatureData& d, std::vector<std::pair<Bindings, MeasuredPoint>>& rows) {
  std::map<std::string, RoutedPoint> routed;
  for (auto it = rows.begin(); it != rows.end();) {
    if (auto r = routed_of(it->first, it->second)) {
      routed[it->second.key] = *r;
      it = rows.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [key, r] : routed) d.routed.push_back(r);
  if (rows.empty()) return;
  const auto& newest = rows.back().first;
  for (const auto& [name, value] : newest) d.quantities.push_back(name);
  std::map<std::string, MeasuredPoint> by_key;
  for (auto& [b, p] : rows) {
    bool same = b.size() == newest.size();
    for (size_t i = 0; same && i < b.size(); ++i) same = b[i].first == newest[i].first;
    if (!same) {
      ++d.other_key_rows;
      continue;
    }
    for (const auto& kv : b) p.x.push_back(kv.second);
    by_key[p.key] = std::move(p);
  }
  for (auto& [key, p] : by_key) d.points.push_back(std::move(p));
}

std::vector<SignatureData> read(store::Store& store, int64_t provenance_id, std::optional<int64_t> signature_id) {
  std::string sql(kSelect);
  if (signature_id) sql += " AND signature_id = :sig";
  sql += " ORDER BY signature_id, id";
  store::Statement select = store.database().prepare(sql);
  select.bind(":prov", provenance_id);
  if (signature_id) select.bind(":sig", *signature_id);
  std::vector<SignatureData> out;
  std::vector<std::pair<Bindings, MeasuredPoint>> rows;
  while (select.step()) {
    const int64_t sig = select.column_int64(0);
    if (out.empty() || out.back().signature_id != sig) {
      if (!out.empty()) finish(out.back(), rows);
      rows.clear();
      out.push_back({sig, provenance_id, {}, {}, 0, {}});
    }
    MeasuredPoint p;
    p.key = select.column_text(1);
    p.latency_s = select.column_double(2);
    p.energy_j = select.column_optional_double(3);
    store::Measurement m;
    m.is_prefill = select.column_int64(4) != 0;
    m.batch = select.column_int64(5);
    m.prefill_chunk = select.column_int64(6);
    p.kind = point_kind(m);
    p.grid_sha256 = select.column_text(7);
    p.latency_hw_s = 1.96 * select.column_double(8) / std::sqrt(std::max<double>(1, select.column_double(9)));
    p.energy_hw_j = select.column_optional_double(10);
    rows.emplace_back(bindings(p.key), std::move(p));
  }
  if (!out.empty()) finish(out.back(), rows);
  return out;
}

}  // namespace

std::string_view to_string(PointKind kind) noexcept {
  switch (kind) {
    case PointKind::prefill:
      return "prefill";
    case PointKind::decode:
      return "decode";
    case PointKind::mixed:
      return "mixed";
    case PointKind::other:
      break;
  }
  return "other";
}

PointKind point_kind(const store::Measurement& m) noexcept {
  if (m.batch > 0) return m.prefill_chunk > 0 ? PointKind::mixed : PointKind::decode;
  return m.is_prefill ? PointKind::prefill : PointKind::other;
}

std::vector<SignatureData> load_measured(store::Store& store, int64_t provenance_id) {
  return read(store, provenance_id, std::nullopt);
}

SignatureData load_measured(store::Store& store, int64_t signature_id, int64_t provenance_id) {
  std::vector<SignatureData> one = read(store, provenance_id, signature_id);
  if (one.empty()) return {signature_id, provenance_id, {}, {}, 0, {}};
  return std::move(one.front());
}

TargetPoints target_points(const SignatureData& data, store::PredictorTarget target) {
  TargetPoints t;
  for (const MeasuredPoint& p : data.points) {
    const bool energy = target == store::PredictorTarget::energy_j;
    if (energy && !p.energy_j) continue;
    const double y = energy ? *p.energy_j : p.latency_s;
    if (!(y > 0)) continue;  // a relative error needs a positive value
    t.x.insert(t.x.end(), p.x.begin(), p.x.end());
    t.y.push_back(y);
    t.kinds.push_back(p.kind);
    t.hw.push_back(energy ? p.energy_hw_j.value_or(0.0) : p.latency_hw_s);
    t.from.push_back(&p);
  }
  return t;
}

std::string data_sha256(const SignatureData& data, const TargetPoints& points, store::PredictorTarget target) {
  std::string text = fmt::format("dooly-predict-data v1\n{}\n", store::to_string(target));
  for (const std::string& q : data.quantities) text += q + ",";
  text += "\n";
  for (size_t i = 0; i < points.rows(); ++i)
    text += fmt::format("{} {:.17g} {}\n", points.from[i]->key, points.y[i], to_string(points.kinds[i]));
  return signature::sha256_hex(text);
}

std::string grid_sha256(const TargetPoints& points) {
  std::set<std::string> grids;
  for (const MeasuredPoint* p : points.from)
    if (!p->grid_sha256.empty()) grids.insert(p->grid_sha256);
  std::string out;
  for (const std::string& g : grids) out += (out.empty() ? "" : ",") + g;
  return out;
}

}  // namespace dooly::predict
