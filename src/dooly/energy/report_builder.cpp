#include "dooly/energy/report_builder.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "dooly/energy/model_fit.hpp"
#include "dooly/energy/nnls.hpp"

namespace dooly::energy {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Baseline: given > measured at start > median of quiet readings > lowest 5 % of all readings.
void choose_baseline(const ChannelEvidence& ev, const WindowCharger& charger, size_t c, ChannelReport& cr) {
  if (ev.given_baseline_w) {
    cr.baseline_w = *ev.given_baseline_w;
    cr.baseline_method = "given";
  } else if (const auto idle = charger.idle_measured(c)) {
    cr.baseline_w = idle->first;
    cr.baseline_method = fmt::format("measured at start ({} ms)", idle->second / 1'000'000);
  } else if (ev.quiet_w && ev.quiet_w->size() >= 5) {
    cr.baseline_w = median(*ev.quiet_w);
    cr.baseline_method = fmt::format("median of {} quiet readings", ev.quiet_seen);
  } else if (ev.all_w && !ev.all_w->empty()) {
    std::vector<double> v = *ev.all_w;
    auto k = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 20);
    std::nth_element(v.begin(), k, v.end());
    cr.baseline_w = *k;
    cr.baseline_method = "lowest 5% of readings (no quiet interval)";
  } else {
    cr.baseline_method = "none (no readings)";
  }
}

// The trapezoid's figures of every key charged on channel c.
std::vector<RegionRow> trapezoid_rows(size_t c, const WindowCharger& charger, const KeyTable& keys,
                                      std::vector<KeyId>& row_keys) {
  std::vector<RegionRow> rows;
  const std::vector<KeyInfo> infos = keys.snapshot();
  for (KeyId key = 0; key < charger.key_bound(); ++key) {
    const KeyTotals* t = charger.totals(key, c);
    if (!t || !t->calls) continue;
    RegionRow row;
    row.name = key < infos.size() ? infos[key].name : "<unknown>";
    row.kind = key < infos.size() ? infos[key].kind : Kind::other;
    row.calls = t->calls;
    row.time_s = static_cast<double>(t->time_ns) * 1e-9;
    row.energy_j = t->energy_j;
    row.excl_time_s = static_cast<double>(t->excl_time_ns) * 1e-9;
    row.excl_energy_j = t->excl_energy_j;
    row.short_windows = t->short_windows;
    row.extrapolated_windows = t->extrapolated;
    rows.push_back(std::move(row));
    row_keys.push_back(key);
  }
  return rows;
}

// The split of the readings set aside for concurrent kernels (occupancy_model.hpp): each one's energy above the
// floor over its slice, shared among the kernels of its span in proportion to calls x J/call alone, J/call alone
// being the kernel's fitted power times its mean duration. A kernel the regression never saw outside an overlap
// has no fitted power (nor one it can trust: less than three readings' worth, or inseparable): the J/calls alone
// of such kernels are fitted on the set-aside readings themselves (each
// reading's energy above the floor, scaled from its slice to its span, regressed on those kernels' calls in the
// span, the other kernels' share held fixed; where the readings do not determine them, the readings holding them
// are split by time), and they are flagged.
struct Split {
  std::unordered_map<KeyId, double> energy_j;  // per key, above the floor
  std::unordered_set<KeyId> never_alone;
};
double mean_duration_s(KeyId key, size_t c, const WindowCharger& charger) {
  const KeyTotals* t = charger.totals(key, c);
  return t && t->calls ? static_cast<double>(t->excl_time_ns) * 1e-9 / static_cast<double>(t->calls) : 0.0;
}
// The columns whose fitted power the split may use (from the main fit; the replicates use the same).
std::unordered_set<int> trusted_columns(const Fit& fit, const Design& d) {
  std::unordered_set<int> ok;
  for (int col = 1; col <= d.columns(); ++col)
    if (d.gram(col, 0) >= 3.0 && !fit.inseparable[static_cast<size_t>(col)]) ok.insert(col);
  return ok;
}
// What the split reads, at one set of coefficients.
struct SplitInput {
  const std::vector<std::pair<KeyId, double>>& shares;
  const std::vector<ConcurrentRow>& rows;
  const Eigen::VectorXd& beta;
  size_t c;
  const WindowCharger& charger;
  double above_j(const ConcurrentRow& r) const {  // the slice's energy above the floor
    return std::max(0.0, r.power_w - beta(0)) * static_cast<double>(r.slice_ns) * 1e-9;
  }
};
using KeyValues = std::unordered_map<KeyId, double>;

// The J/calls alone of the kernels without a trusted column (`unknown`: key -> index), fitted on the set-aside
// readings with the others' (`j`) held fixed; NaN where the readings do not determine them (fewer than two
// readings per unknown, or one not separable from the others, as model_fit.cpp judges a column).
void fit_never_alone(const SplitInput& in, const std::unordered_map<KeyId, int>& unknown, KeyValues& j) {
  const auto u = static_cast<Eigen::Index>(unknown.size());
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(u, u);
  Eigen::VectorXd xty = Eigen::VectorXd::Zero(u), x(u);
  for (const ConcurrentRow& r : in.rows) {
    // The slice's energy scaled to the span the calls were counted over.
    double y = in.above_j(r) * static_cast<double>(r.span_ns) / static_cast<double>(std::max<int64_t>(1, r.slice_ns));
    x.setZero();
    for (uint32_t i = 0; i < r.count; ++i) {
      const auto& [key, calls] = in.shares[r.first + i];
      if (auto it = unknown.find(key); it != unknown.end())
        x(it->second) += calls;
      else
        y -= j[key] * calls;
    }
    gram.selfadjointView<Eigen::Lower>().rankUpdate(x);
    xty += x * y;
  }
  gram = gram.selfadjointView<Eigen::Lower>();
  bool determined = in.rows.size() >= 2 * unknown.size() + 2;
  Eigen::MatrixXd g = gram;
  g.diagonal().array() += 1e-10 * std::max(1.0, g.diagonal().mean());
  const Eigen::MatrixXd ginv = g.ldlt().solve(Eigen::MatrixXd::Identity(u, u));
  for (Eigen::Index i = 0; i < u; ++i) determined &= gram(i, i) > 0 && 1.0 / ginv(i, i) >= 1e-4 * gram(i, i);
  const Eigen::VectorXd fitted = determined ? nnls_normal(gram, xty).x : Eigen::VectorXd();
  for (const auto& [key, i] : unknown) j[key] = determined ? fitted(i) : std::numeric_limits<double>::quiet_NaN();
}

// Each set-aside reading's energy above the floor shared by calls x J/call alone (by time, calls x mean duration,
// where no kernel of it draws anything alone or one has no J/call).
KeyValues share_out(const SplitInput& in, const KeyValues& j) {
  KeyValues energy;
  std::vector<double> w;
  for (const ConcurrentRow& r : in.rows) {
    w.assign(r.count, 0.0);
    double total = 0;
    for (uint32_t i = 0; i < r.count; ++i)
      total += w[i] = in.shares[r.first + i].second * j.at(in.shares[r.first + i].first);
    if (!(total > 0)) {
      total = 0;
      for (uint32_t i = 0; i < r.count; ++i)
        total += w[i] = in.shares[r.first + i].second * mean_duration_s(in.shares[r.first + i].first, in.c, in.charger);
    }
    if (total <= 0) continue;
    const double above = in.above_j(r);
    for (uint32_t i = 0; i < r.count; ++i) energy[in.shares[r.first + i].first] += above * w[i] / total;
  }
  return energy;
}

Split split_concurrent(const OccupancyModel& model, size_t c, const Eigen::VectorXd& beta, const Design& d,
                       const std::unordered_set<int>& trusted, const WindowCharger& charger) {
  const SplitInput in{model.split_shares(), model.concurrent_rows(c), beta, c, charger};
  // J/call alone of every key of the split: from the fit where it has a trusted column.
  KeyValues j;
  std::unordered_map<KeyId, int> unknown;  // key -> index among the others
  for (const ConcurrentRow& r : in.rows)   // (the pool holds every channel's: this channel's rows point into it)
    for (uint32_t i = 0; i < r.count; ++i) {
      const KeyId key = in.shares[r.first + i].first;
      if (j.count(key) || unknown.count(key)) continue;
      if (auto col = d.column.find(key); col != d.column.end() && trusted.count(col->second))
        j[key] = beta(col->second) * mean_duration_s(key, c, charger);
      else
        unknown.emplace(key, static_cast<int>(unknown.size()));
    }
  Split out;
  if (!unknown.empty()) {
    fit_never_alone(in, unknown, j);
    for (const auto& [key, i] : unknown) out.never_alone.insert(key);
  }
  out.energy_j = share_out(in, j);
  return out;
}

// Per key with split energy: the share of its innermost time that lay in set-aside slices (phi), for which the
// split's energy replaces power x time, and that energy per second of its innermost time (rate).
struct SplitTerms {
  Split split;
  std::unordered_map<KeyId, double> phi, rate;
  // Per key with a trusted column and calls alone: its split energy less its overlapped calls at its J/call alone,
  // per second of its innermost time. The split takes energy per call to be conserved under concurrency; a device
  // that spends more (or less) on kernels together puts the difference here, and the rows' intervals carry it.
  std::unordered_map<KeyId, double> excess_rate;
  std::vector<std::unordered_map<KeyId, double>> rate_replicates;  // the rate at each jackknife replicate
  bool any() const noexcept { return !phi.empty(); }
};
double innermost_s(KeyId key, size_t c, const WindowCharger& charger) {
  const KeyTotals* t = charger.totals(key, c);
  return t ? static_cast<double>(t->excl_time_ns) * 1e-9 : 0.0;
}
std::unordered_map<KeyId, double> rates_of(const Split& s, const WindowCharger& charger, size_t c) {
  std::unordered_map<KeyId, double> rate;
  for (const auto& [key, e] : s.energy_j)
    if (const double t = innermost_s(key, c, charger); t > 0) rate[key] = e / t;
  return rate;
}
// The split's departure from each key's overlapped calls (their share inside the set-aside slices) at its J/call
// alone, its fitted power over its mean duration outside the slices (overlapped calls may run longer), per second of
// its innermost time. Once, at the main fit. A key never seen alone has no alone figure to depart from.
std::unordered_map<KeyId, double> excess_rates(const Split& s, const OccupancyModel& model, size_t c,
                                               const Eigen::VectorXd& beta, const Design& d,
                                               const std::unordered_set<int>& trusted, const WindowCharger& charger) {
  std::unordered_map<KeyId, double> rate;
  const auto& slices = model.slice_totals(c);
  for (const auto& [key, e] : s.energy_j) {
    const auto st = slices.find(key);
    const auto col = d.column.find(key);
    const KeyTotals* t = charger.totals(key, c);
    if (st == slices.end() || col == d.column.end() || !trusted.count(col->second) || t == nullptr) continue;
    const double alone_calls = static_cast<double>(t->calls) - st->second.calls;
    const double alone_s = static_cast<double>(t->excl_time_ns - st->second.ns) * 1e-9;
    const double in = innermost_s(key, c, charger);
    if (alone_calls >= 1 && alone_s > 0 && in > 0)
      rate[key] = (e - beta(col->second) * alone_s / alone_calls * st->second.calls) / in;
  }
  return rate;
}
SplitTerms split_terms(const OccupancyModel& model, size_t c, const Fit& fit, const Design& d,
                       const WindowCharger& charger, bool replicates) {
  SplitTerms t;
  if (model.concurrent_rows(c).empty()) return t;
  const std::unordered_set<int> trusted = trusted_columns(fit, d);
  t.split = split_concurrent(model, c, fit.beta, d, trusted, charger);
  t.rate = rates_of(t.split, charger, c);
  t.excess_rate = excess_rates(t.split, model, c, fit.beta, d, trusted, charger);
  for (const auto& [key, st] : model.slice_totals(c))
    if (const double in = innermost_s(key, c, charger); in > 0)
      t.phi[key] = std::min(1.0, static_cast<double>(st.ns) * 1e-9 / in);
  if (replicates)
    for (const Eigen::VectorXd& b : fit.replicates)
      t.rate_replicates.push_back(rates_of(split_concurrent(model, c, b, d, trusted, charger), charger, c));
  return t;
}

// A row's model figures as weights on the fit's coefficients: its energy (the floor over its time plus each
// column's power over the time that column ran innermost inside the row's windows, outside set-aside slices) and
// its J/call (the same without the floor, per call).
struct RowWeights {
  Eigen::VectorXd energy, j_per_call;
};
RowWeights weights_of(const RegionRow& row, KeyId key, const Design& d, const WindowCharger& charger,
                      const SplitTerms* split = nullptr) {
  const int k = d.columns();
  RowWeights w{Eigen::VectorXd::Zero(k + 1), Eigen::VectorXd::Zero(k + 1)};
  w.energy(0) = row.time_s;
  for (int i = 1; i <= k; ++i) {
    double s = static_cast<double>(charger.overlap_ns(key, d.keys[i - 1])) * 1e-9;
    if (split)
      if (auto it = split->phi.find(d.keys[i - 1]); it != split->phi.end()) s *= 1.0 - it->second;
    w.energy(i) = s;
    w.j_per_call(i) = s / static_cast<double>(row.calls);
  }
  return w;
}

// The split's part of a row's energy: each key's split energy in proportion to the row's share of its time.
double split_energy(KeyId key, const std::unordered_map<KeyId, double>& rate, const WindowCharger& charger) {
  double e = 0;
  for (const auto& [inner, r] : rate) e += r * static_cast<double>(charger.overlap_ns(key, inner)) * 1e-9;
  return e;
}

// intercept * time + sum of power * overlap, summed in this order (the figures of earlier versions, to the bit).
double model_energy(const Fit& fit, const RowWeights& w) {
  double marginal = 0;
  for (int i = 1; i < w.energy.size(); ++i) marginal += fit.beta(i) * w.energy(i);
  return fit.beta(0) * w.energy(0) + marginal;
}

// The jackknife's half-width of the split's part of a row's energy (0 without replicates).
double split_half_width(KeyId key, const SplitTerms& split, const WindowCharger& charger) {
  const auto& reps = split.rate_replicates;
  if (reps.size() < 2) return 0.0;
  std::vector<double> v;
  v.reserve(reps.size());
  double mean = 0;
  for (const auto& r : reps) mean += v.emplace_back(split_energy(key, r, charger));
  const double nb = static_cast<double>(reps.size());
  mean /= nb;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return t_quantile_95(static_cast<int>(reps.size()) - 1) * std::sqrt((nb - 1) / nb * ss);
}

// Statistical half-widths first (the fit's own); the sensor check adds its part before the flags are set.
void model_rows(const Fit& fit, const Design& d, const std::vector<KeyId>& row_keys, const WindowCharger& charger,
                const OccupancyModel& model, size_t c, const SplitTerms& split, std::vector<RegionRow>& rows) {
  for (size_t r = 0; r < rows.size(); ++r) {
    RegionRow& row = rows[r];
    const KeyId key = row_keys[r];
    const RowWeights w = weights_of(row, key, d, charger, split.any() ? &split : nullptr);
    row.model_energy_j = model_energy(fit, w);
    row.model_energy_hw_j = fit.half_width(w.energy);
    row.model_j_per_call_hw_j = fit.half_width(w.j_per_call);
    double own_rate = 0, own_phi = 0;
    if (split.any()) {
      const double hw = split_half_width(key, split, charger);
      // The split's assumption, conserved energy per call: how far its shares (the row's own, and those of the
      // kernels inside it) are from those calls at their J/call alone (an H100 spent 14-17 % more on two kernels
      // together: docs/energy-attribution.md).
      const double assumed = std::fabs(split_energy(key, split.excess_rate, charger));
      const auto calls = static_cast<double>(row.calls);
      *row.model_energy_j += split_energy(key, split.rate, charger);
      row.model_energy_hw_j = std::hypot(*row.model_energy_hw_j, hw, assumed);
      row.model_j_per_call_hw_j = std::hypot(*row.model_j_per_call_hw_j, hw / calls, assumed / calls);
      if (auto it = split.split.energy_j.find(key); it != split.split.energy_j.end()) {
        // A key can have split energy without time in the slices: its calls lay in the span before them.
        const auto& slices = model.slice_totals(c);
        const auto st = slices.find(key);
        row.model_overlap_time_s = st == slices.end() ? 0.0 : static_cast<double>(st->second.ns) * 1e-9;
        row.model_overlap_calls = st == slices.end() ? 0.0 : st->second.calls;
        row.model_overlap_energy_j = it->second;
        row.model_never_alone = split.split.never_alone.count(key) > 0;
      }
      if (auto it = split.rate.find(key); it != split.rate.end()) own_rate = it->second;
      if (auto it = split.phi.find(key); it != split.phi.end()) own_phi = it->second;
    }
    if (auto it = d.column.find(key); it != d.column.end()) {
      const int col = it->second;
      Eigen::VectorXd unit = Eigen::VectorXd::Zero(d.columns() + 1);
      unit(col) = 1.0;
      row.model_power_w = fit.beta(col);
      row.model_power_hw_w = fit.half_width(unit);
      row.model_excl_energy_j = (fit.beta(0) + fit.beta(col) * (1.0 - own_phi) + own_rate) * row.excl_time_s;
      row.model_inseparable = fit.inseparable[static_cast<size_t>(col)];
      row.model_too_little_data = d.gram(col, 0) < 3.0;  // less than three readings' worth of occupancy
    } else if (own_rate > 0) {
      row.model_excl_energy_j = (fit.beta(0) + own_rate) * row.excl_time_s;
    }
  }
}

// How far each row's figures move at the neighbouring sensor settings (the largest move over them).
struct Moves {
  double j_per_call = 0, energy = 0, power = 0;
};

// The fit at each neighbouring sensor setting: its residual, and how far it moves each row's figures.
std::vector<Moves> check_sensor(size_t c, const OccupancyModel& model, const Fit& given, const FitOptions& fo,
                                const std::vector<KeyId>& row_keys, const WindowCharger& charger,
                                const std::vector<RegionRow>& rows, SensorCheck& check) {
  std::vector<Moves> moves(rows.size());
  const SensorSetting& gs = model.given_setting(c);
  check.given = {gs.window_ns, gs.delay_ns, true, given.residual_rms_w, 0};
  if (model.neighbours(c) == 0) {
    check.why_not = "no neighbouring settings (sensor check off)";
    return moves;
  }
  check.done = true;
  double best = given.residual_rms_w;
  for (size_t i = 0; i < model.neighbours(c); ++i) {
    const SensorSetting& s = model.neighbour_setting(c, i);
    const Design& d = model.neighbour(c, i);
    SensorSettingFit sf{s.window_ns, s.delay_ns, false, 0.0, 0};
    const Fit f = fit_design(d, nullptr, fo);
    if (f.fitted) {
      const SplitTerms ns = split_terms(model, c, f, d, charger, false);
      sf.fitted = true;
      sf.residual_rms_w = f.residual_rms_w;
      for (size_t r = 0; r < rows.size(); ++r) {
        const RegionRow& row = rows[r];
        const double energy = model_energy(f, weights_of(row, row_keys[r], d, charger, ns.any() ? &ns : nullptr)) +
                              split_energy(row_keys[r], ns.rate, charger);
        const double jpc = net_of(energy, f.beta(0) * row.time_s) / static_cast<double>(row.calls);
        const double moved = std::fabs(jpc - *row.model_j_per_call(given.beta(0)));
        if (moved > *row.model_j_per_call_hw_j) ++sf.rows_moved;
        Moves& m = moves[r];
        m.j_per_call = std::max(m.j_per_call, moved);
        m.energy = std::max(m.energy, std::fabs(energy - *row.model_energy_j));
        if (auto it = d.column.find(row_keys[r]); it != d.column.end() && row.model_power_w)
          m.power = std::max(m.power, std::fabs(f.beta(it->second) - *row.model_power_w));
      }
      if (sf.residual_rms_w < best) {
        best = sf.residual_rms_w;
        check.preferred = static_cast<int>(check.neighbours.size());
      }
    }
    check.neighbours.push_back(sf);
  }
  return moves;
}

// The reported interval: the fit's own and the sensor model's part (the largest move at a neighbouring setting),
// added in quadrature; the flags from it.
void finish_rows(const std::vector<Moves>& moves, double floor_w, const ModelReportOptions& o,
                 std::vector<RegionRow>& rows, SensorCheck& check) {
  for (size_t r = 0; r < rows.size(); ++r) {
    RegionRow& row = rows[r];
    const Moves& m = moves[r];
    row.model_sensor_sensitive = m.j_per_call > *row.model_j_per_call_hw_j;
    row.model_j_per_call_sensor_j = m.j_per_call;
    row.model_j_per_call_hw_j = std::hypot(*row.model_j_per_call_hw_j, m.j_per_call);
    row.model_energy_hw_j = std::hypot(*row.model_energy_hw_j, m.energy);
    if (row.model_power_hw_w) row.model_power_hw_w = std::hypot(*row.model_power_hw_w, m.power);
    const double jpc = *row.model_j_per_call(floor_w), hw = *row.model_j_per_call_hw_j;
    row.model_imprecise = !(hw <= o.imprecise_above * std::fabs(jpc)) && hw > 0;
    check.rows_sensitive += row.model_sensor_sensitive ? 1 : 0;
  }
}

void fill_split(const OccupancyModel& model, size_t c, const SplitTerms& split, ModelFit& out) {
  out.concurrent_readings = model.concurrent_rows(c).size();
  out.concurrent_unsplit = model.concurrent_unsplit(c);
  out.split_span_ms = static_cast<double>(model.split_span_ns()) * 1e-6;
  out.never_alone_keys = split.split.never_alone.size();
}

void fill_fit(const Fit& fit, const Design& d, bool intercept_fixed, ModelFit& out) {
  out.fitted = true;
  out.samples = d.n;
  out.columns = d.columns();
  out.intercept_w = fit.beta(0);
  out.intercept_fixed = intercept_fixed;
  out.residual_rms_w = fit.residual_rms_w;
  out.r_squared = fit.r_squared;
  out.keys_over_cap = d.over_cap;
  out.nnls_iterations = fit.iterations;
  out.interval_method = fit.interval_method();
  out.interval_blocks = fit.replicates.size();
}

}  // namespace

ChannelReport build_channel_report(size_t c, const ChannelEvidence& ev, const WindowCharger& charger,
                                   const OccupancyModel* model, const KeyTable& keys, const ModelReportOptions& o) {
  ChannelReport cr;
  cr.channel = ev.channel;
  cr.samples = ev.samples;
  cr.samples_dropped = ev.samples_dropped;
  cr.conservation = ev.conservation;
  cr.run_time_s = ev.run_time_s;
  choose_baseline(ev, charger, c, cr);
  std::vector<KeyId> row_keys;
  cr.rows = trapezoid_rows(c, charger, keys, row_keys);

  if (!o.model || !model) {
    cr.fit.why_not = "model mode off";
  } else {
    const Design& d = model->design(c);
    const FitOptions fo{ev.given_baseline_w, o.nnls_max_iterations};
    const Fit fit = fit_design(d, model->blocks_kept(c) ? &model->blocks(c) : nullptr, fo);
    cr.fit.nnls_converged = fit.converged;
    cr.fit.nnls_iterations = fit.iterations;
    if (!fit.fitted) {
      cr.fit.why_not = fit.why_not;
    } else {
      fill_fit(fit, d, ev.given_baseline_w.has_value(), cr.fit);
      const SplitTerms split = split_terms(*model, c, fit, d, charger, true);
      fill_split(*model, c, split, cr.fit);
      model_rows(fit, d, row_keys, charger, *model, c, split, cr.rows);
      const std::vector<Moves> moves = check_sensor(c, *model, fit, fo, row_keys, charger, cr.rows, cr.sensor_check);
      finish_rows(moves, fit.beta(0), o, cr.rows, cr.sensor_check);
    }
  }
  std::stable_sort(cr.rows.begin(), cr.rows.end(),
                   [](const RegionRow& x, const RegionRow& y) { return x.energy_j > y.energy_j; });
  return cr;
}

}  // namespace dooly::energy
