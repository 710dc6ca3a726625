#include "dooly/energy/report_builder.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dooly/energy/model_fit.hpp"

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

// A row's model figures as weights on the fit's coefficients: its energy (the floor over its time plus each
// column's power over the time that column ran innermost inside the row's windows) and its J/call (the same
// without the floor, per call).
struct RowWeights {
  Eigen::VectorXd energy, j_per_call;
};
RowWeights weights_of(const RegionRow& row, KeyId key, const Design& d, const WindowCharger& charger) {
  const int k = d.columns();
  RowWeights w{Eigen::VectorXd::Zero(k + 1), Eigen::VectorXd::Zero(k + 1)};
  w.energy(0) = row.time_s;
  for (int i = 1; i <= k; ++i) {
    const double s = static_cast<double>(charger.overlap_ns(key, d.keys[i - 1])) * 1e-9;
    w.energy(i) = s;
    w.j_per_call(i) = s / static_cast<double>(row.calls);
  }
  return w;
}

// intercept * time + sum of power * overlap, summed in this order (the figures of earlier versions, to the bit).
double model_energy(const Fit& fit, const RowWeights& w) {
  double marginal = 0;
  for (int i = 1; i < w.energy.size(); ++i) marginal += fit.beta(i) * w.energy(i);
  return fit.beta(0) * w.energy(0) + marginal;
}

// Statistical half-widths first (the fit's own); the sensor check adds its part before the flags are set.
void model_rows(const Fit& fit, const Design& d, const std::vector<KeyId>& row_keys, const WindowCharger& charger,
                std::vector<RegionRow>& rows) {
  for (size_t r = 0; r < rows.size(); ++r) {
    RegionRow& row = rows[r];
    const RowWeights w = weights_of(row, row_keys[r], d, charger);
    row.model_energy_j = model_energy(fit, w);
    row.model_energy_hw_j = fit.half_width(w.energy);
    row.model_j_per_call_hw_j = fit.half_width(w.j_per_call);
    if (auto it = d.column.find(row_keys[r]); it != d.column.end()) {
      const int col = it->second;
      Eigen::VectorXd unit = Eigen::VectorXd::Zero(d.columns() + 1);
      unit(col) = 1.0;
      row.model_power_w = fit.beta(col);
      row.model_power_hw_w = fit.half_width(unit);
      row.model_excl_energy_j = (fit.beta(0) + fit.beta(col)) * row.excl_time_s;
      row.model_inseparable = fit.inseparable[static_cast<size_t>(col)];
      row.model_too_little_data = d.gram(col, 0) < 3.0;  // less than three readings' worth of occupancy
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
      sf.fitted = true;
      sf.residual_rms_w = f.residual_rms_w;
      for (size_t r = 0; r < rows.size(); ++r) {
        const RegionRow& row = rows[r];
        const double energy = model_energy(f, weights_of(row, row_keys[r], d, charger));
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
      model_rows(fit, d, row_keys, charger, cr.rows);
      const std::vector<Moves> moves = check_sensor(c, *model, fit, fo, row_keys, charger, cr.rows, cr.sensor_check);
      finish_rows(moves, fit.beta(0), o, cr.rows, cr.sensor_check);
    }
  }
  std::stable_sort(cr.rows.begin(), cr.rows.end(),
                   [](const RegionRow& x, const RegionRow& y) { return x.energy_j > y.energy_j; });
  return cr;
}

}  // namespace dooly::energy
