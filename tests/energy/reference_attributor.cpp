#include "reference_attributor.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "brute_nnls.hpp"
#include "dooly/energy/model_fit.hpp"

namespace dooly::energy::testing {

namespace {

constexpr int64_t kMs = 1'000'000;

// One channel's power as the piecewise-linear function through its readings, each placed at the centre of what
// it measures; held constant outside.
class Trace {
 public:
  bool add(int64_t t, double p) {
    if (!t_.empty() && t <= t_.back()) return false;
    if (!t_.empty())
      e_.push_back(e_.back() + 0.5 * (p_.back() + p) * static_cast<double>(t - t_.back()) * 1e-9);
    else
      e_.push_back(0.0);
    t_.push_back(t);
    p_.push_back(p);
    return true;
  }
  bool empty() const { return t_.empty(); }
  double energy(int64_t t, bool& extrapolated) const {
    if (t_.empty()) {
      extrapolated = true;
      return 0;
    }
    if (t >= t_.back()) {
      if (t > t_.back()) extrapolated = true;
      return e_.back() + p_.back() * static_cast<double>(t - t_.back()) * 1e-9;
    }
    if (t < t_.front()) {
      extrapolated = true;
      return -p_.front() * static_cast<double>(t_.front() - t) * 1e-9;
    }
    const size_t i = static_cast<size_t>(std::upper_bound(t_.begin(), t_.end(), t) - t_.begin()) - 1;
    const double dt = static_cast<double>(t - t_[i]);
    const double slope = (p_[i + 1] - p_[i]) / static_cast<double>(t_[i + 1] - t_[i]);
    return e_[i] + (p_[i] + 0.5 * slope * dt) * dt * 1e-9;
  }

 private:
  std::vector<int64_t> t_;
  std::vector<double> p_, e_;
};

struct Totals {
  uint64_t calls = 0;
  int64_t time_ns = 0, excl_ns = 0;
  double energy_j = 0, excl_j = 0;
  uint64_t short_w = 0, extrapolated = 0;
};

struct Segment {
  int64_t t0, t1;
  KeyId key;
  int32_t device;
};

struct Frame {
  KeyId key;
  int32_t device;
  int64_t t0, seg_t0;
  std::vector<double> e0, seg_e0;
};

struct Setting {
  int64_t window, delay;
};

// The sensor settings the check tries (docs/energy-attribution.md): the given one, then lag one step earlier
// (when it stays >= 0) and later, then window one step shorter (when it stays > 0) and longer; the lag step is a
// twentieth of the update period within [0.1, 1] ms, the window step a tenth of the window, at least 0.5 ms.
std::vector<Setting> settings_of(const power::Channel& ch, bool check) {
  std::vector<Setting> s{{ch.sensor.window_ns, ch.sensor.delay_ns}};
  if (!check) return s;
  const int64_t lag = std::clamp<int64_t>(ch.sensor.update_ns / 20, kMs / 10, kMs);
  if (ch.sensor.delay_ns >= lag) s.push_back({ch.sensor.window_ns, ch.sensor.delay_ns - lag});
  s.push_back({ch.sensor.window_ns, ch.sensor.delay_ns + lag});
  if (ch.sensor.window_ns > 0) {
    const int64_t step = std::max<int64_t>(kMs / 2, ch.sensor.window_ns / 10);
    if (ch.sensor.window_ns > step) s.push_back({ch.sensor.window_ns - step, ch.sensor.delay_ns});
    s.push_back({ch.sensor.window_ns + step, ch.sensor.delay_ns});
  }
  return s;
}

// Block sizes of the jackknife for n readings: blocks of 1 reading until 32 are full, then pairs merged into 16
// of twice the size, and so on.
std::vector<size_t> block_sizes(size_t n) {
  std::vector<size_t> sizes;
  size_t rows = 1;
  for (size_t i = 0; i < n; ++i) {
    if (sizes.empty() || sizes.back() >= rows) {
      if (sizes.size() == 32) {
        std::vector<size_t> merged;
        for (size_t j = 0; j < 16; ++j) merged.push_back(sizes[2 * j] + sizes[2 * j + 1]);
        sizes = merged;
        rows *= 2;
      }
      sizes.push_back(0);
    }
    ++sizes.back();
  }
  return sizes;
}

struct Model {
  std::vector<KeyId> keys;                // column - 1 -> key
  std::vector<std::vector<double>> rows;  // per reading: shares per column (0: the intercept, 1)
  std::vector<double> y;
};

Eigen::VectorXd solve(const Eigen::MatrixXd& g, const Eigen::VectorXd& h, std::optional<double> intercept) {
  const auto k = static_cast<int>(h.size()) - 1;
  if (!intercept) return brute_force_nnls(g, h);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(k + 1);
  b(0) = *intercept;
  b.tail(k) = brute_force_nnls(g.bottomRightCorner(k, k), h.tail(k) - *intercept * g.col(0).tail(k));
  return b;
}

struct Normal {
  Eigen::MatrixXd g;
  Eigen::VectorXd h;
  double yy = 0;
};
Normal normal(const Model& m, size_t from, size_t to) {
  const size_t k = m.keys.size();
  Normal n{Eigen::MatrixXd::Zero(static_cast<int>(k) + 1, static_cast<int>(k) + 1),
           Eigen::VectorXd::Zero(static_cast<int>(k) + 1), 0.0};
  for (size_t r = from; r < to; ++r) {
    Eigen::VectorXd x = Eigen::VectorXd::Zero(static_cast<int>(k) + 1);
    for (size_t j = 0; j < m.rows[r].size(); ++j) x(static_cast<int>(j)) = m.rows[r][j];
    n.g += x * x.transpose();
    n.h += x * m.y[r];
    n.yy += m.y[r] * m.y[r];
  }
  return n;
}

class Reference {
 public:
  Reference(const ReferenceRun& run, const KeyTable& keys) : run_(run), keys_(keys), n_(run.channels.size()) {}

  Report build() {
    load_readings();
    process_events();
    Report rep;
    rep.unmatched_events = unmatched_;
    for (size_t c = 0; c < n_; ++c) rep.channels.push_back(channel_report(c));
    return rep;
  }

 private:
  bool relevant(size_t c, int32_t device) const {
    const power::Channel& ch = run_.channels[c];
    const int32_t only = ch.domain == power::Domain::gpu && ch.device >= 0 ? ch.device : -1;
    return only < 0 || device < 0 || only == device;
  }
  std::vector<double> energies(int64_t t, bool& extrapolated) const {
    std::vector<double> e(n_);
    for (size_t c = 0; c < n_; ++c) e[c] = traces_[c].energy(t, extrapolated);
    return e;
  }

  void load_readings() {
    traces_.resize(n_);
    samples_.assign(n_, 0);
    dropped_.assign(n_, 0);
    in_run_.resize(n_);
    for (const power::Reading& r : run_.readings) {
      const power::Channel& ch = run_.channels[r.channel];
      const int64_t w = r.window_ns >= 0 ? r.window_ns : ch.sensor.window_ns;
      if (!traces_[r.channel].add(r.t_ns - ch.sensor.delay_ns - w / 2, r.power_w)) {
        ++dropped_[r.channel];
        continue;
      }
      ++samples_[r.channel];
      if (r.t_ns >= run_.run_t0) in_run_[r.channel].push_back(r);
    }
  }

  // Time `key` ran innermost under each of the thread's open windows (its own included).
  void segment(const std::vector<Frame>& stack, KeyId key, int32_t device, int64_t t0, int64_t t1) {
    segments_.push_back({t0, t1, key, device});
    for (const Frame& f : stack) overlap_[{f.key, key}] += t1 - t0;
  }

  void begin(const Event& ev) {
    auto& stack = stacks_[ev.thread];
    bool ignored = false;
    const std::vector<double> e = energies(ev.t_ns, ignored);
    if (!stack.empty()) {
      Frame& top = stack.back();
      if (ev.t_ns > top.seg_t0) {
        for (size_t c = 0; c < n_; ++c)
          if (relevant(c, top.device)) {
            totals_[{top.key, c}].excl_ns += ev.t_ns - top.seg_t0;
            totals_[{top.key, c}].excl_j += e[c] - top.seg_e0[c];
          }
        segment(stack, top.key, top.device, top.seg_t0, ev.t_ns);
      }
    } else {
      for (size_t c = 0; c < n_; ++c)
        if (relevant(c, ev.device) && busy_[c]++ == 0) busy_e0_[c] = e[c];
    }
    stack.push_back({ev.key, ev.device, ev.t_ns, ev.t_ns, e, e});
  }

  void pop(std::vector<Frame>& stack, int64_t t) {
    bool extrapolated = false;
    const std::vector<double> e = energies(t, extrapolated);
    const Frame f = stack.back();
    const bool outermost = stack.size() == 1;
    for (size_t c = 0; c < n_; ++c) {
      if (!relevant(c, f.device)) continue;
      Totals& x = totals_[{f.key, c}];
      ++x.calls;
      x.time_ns += t - f.t0;
      x.energy_j += e[c] - f.e0[c];
      if (t > f.seg_t0) {
        x.excl_ns += t - f.seg_t0;
        x.excl_j += e[c] - f.seg_e0[c];
      }
      if (t - f.t0 < run_.channels[c].sensor.update_ns) ++x.short_w;
      if (extrapolated) ++x.extrapolated;
      if (outermost && --busy_[c] == 0) attributed_[c] += e[c] - busy_e0_[c];
    }
    if (t > f.seg_t0) segment(stack, f.key, f.device, f.seg_t0, t);
    stack.pop_back();
    if (!stack.empty()) {
      stack.back().seg_t0 = t;
      stack.back().seg_e0 = e;
    }
  }

  void end(const Event& ev) {
    auto& stack = stacks_[ev.thread];
    size_t depth = stack.size();
    while (depth > 0 && stack[depth - 1].key != ev.key) --depth;
    if (depth == 0) {
      ++unmatched_;
      return;
    }
    while (stack.size() > depth) {
      ++unmatched_;
      pop(stack, ev.t_ns);
    }
    pop(stack, ev.t_ns);
  }

  void free_window(const Event& ev) {
    bool extrapolated = false;
    const std::vector<double> e = energies(ev.t_ns, extrapolated);
    auto& opens = free_[ev.key];
    if (ev.begin) {
      opens.push_back({ev.key, ev.device, ev.t_ns, ev.t_ns, e, e});
      return;
    }
    if (opens.empty()) {
      ++unmatched_;
      return;
    }
    const Frame f = opens.back();
    opens.pop_back();
    const int64_t dt = ev.t_ns - f.t0;
    const bool idle = keys_.info(ev.key).kind == Kind::idle;
    if (!idle) closed_free_.push_back({f.key, f.t0, ev.t_ns});
    for (size_t c = 0; c < n_; ++c) {
      if (!relevant(c, f.device)) continue;
      if (idle) {
        if (dt > 0) idle_[c] = {(e[c] - f.e0[c]) / (static_cast<double>(dt) * 1e-9), dt};
        continue;
      }
      Totals& x = totals_[{f.key, c}];
      ++x.calls;
      x.time_ns += dt;
      x.energy_j += e[c] - f.e0[c];
      if (dt < run_.channels[c].sensor.update_ns) ++x.short_w;
      if (extrapolated) ++x.extrapolated;
    }
  }

  void process_events() {
    busy_.assign(n_, 0);
    busy_e0_.assign(n_, 0);
    attributed_.assign(n_, 0);
    idle_.resize(n_);
    int64_t last = INT64_MIN;
    for (const Event& ev : run_.events) {
      last = std::max(last, ev.t_ns);
      if (!(ev.flags & flags::nested))
        free_window(ev);
      else if (ev.begin)
        begin(ev);
      else
        end(ev);
    }
    const int64_t t_close = std::max(run_.t_end, last);
    for (auto& [thread, stack] : stacks_)
      while (!stack.empty()) {
        ++unmatched_;
        pop(stack, t_close);
      }
    // A free window's overlaps: the time each key was innermost (on any thread) while it was open.
    for (const ClosedFree& w : closed_free_)
      for (const Segment& s : segments_) {
        const int64_t ns = std::min(w.t1, s.t1) - std::max(w.t0, s.t0);
        if (ns > 0) overlap_[{w.key, s.key}] += ns;
      }
  }

  // ns of [b - w, b) each key was innermost (w == 0: whether it was at b).
  std::map<KeyId, int64_t> occupancy(size_t c, int64_t w, int64_t b) const {
    std::map<KeyId, int64_t> occ;
    for (const Segment& s : segments_) {
      if (!relevant(c, s.device)) continue;
      const int64_t ns = w == 0 ? int64_t{s.t0 <= b && b < s.t1} : std::min(b, s.t1) - std::max(b - w, s.t0);
      if (ns > 0) occ[s.key] += ns;
    }
    return occ;
  }

  // Readings whose (given) window holds device windows that overlap each other: set aside for the split, out of
  // the fit. Per reading: calls of each device window in the window and the span before it (each window counted
  // by the share of its own duration inside), and per key its time and calls in the reading's slice (the time
  // since the channel's previous reading, at most two update periods or a window).
  struct Aside {
    double power_w;
    int64_t slice_ns, span_ns;
    std::map<KeyId, double> calls;
  };
  void set_aside(size_t c) {
    const power::Channel& ch = run_.channels[c];
    aside_.resize(n_);
    slices_.resize(n_);
    concurrent_.resize(n_);
    int64_t prev = INT64_MIN;
    for (const power::Reading& r : in_run_[c]) {
      const int64_t since = prev == INT64_MIN ? ch.sensor.update_ns : r.t_ns - prev;
      prev = r.t_ns;
      const int64_t w = r.window_ns >= 0 ? r.window_ns : ch.sensor.window_ns, b = r.t_ns - ch.sensor.delay_ns;
      std::vector<std::pair<int64_t, int64_t>> spans;
      for (const Segment& g : segments_)
        if (g.device >= 0 && relevant(c, g.device) && std::min(b, g.t1) > std::max(b - w, g.t0))
          spans.emplace_back(std::max(b - w, g.t0), std::min(b, g.t1));
      std::sort(spans.begin(), spans.end());
      bool overlap = false;
      for (size_t i = 1; i < spans.size(); ++i)
        for (size_t j = 0; j < i; ++j) overlap |= spans[i].first < spans[j].second;
      const bool aside = run_.split_overlaps && w > 0 && overlap;
      concurrent_[c].push_back(aside);
      if (!aside) continue;
      const int64_t slice = std::clamp<int64_t>(since, 0, std::max<int64_t>(2 * ch.sensor.update_ns, w));
      Aside a{r.power_w, slice, w + run_.split_span_ns, {}};
      for (const Segment& g : segments_) {
        if (g.device < 0 || !relevant(c, g.device)) continue;
        const double d = static_cast<double>(g.t1 - g.t0);
        const int64_t in = std::min(b, g.t1) - std::max(b - a.span_ns, g.t0);
        if (in > 0) a.calls[g.key] += static_cast<double>(in) / d;
        const int64_t in_slice = std::min(b, g.t1) - std::max(b - slice, g.t0);
        if (in_slice > 0) {
          slices_[c][g.key].first += in_slice;
          slices_[c][g.key].second += static_cast<double>(in_slice) / d;
        }
      }
      if (!a.calls.empty()) aside_[c].push_back(a);
    }
  }

  Model model_of(size_t c, const Setting& s, std::vector<double>* quiet) const {
    Model m;
    std::map<KeyId, size_t> col;
    size_t i = 0;
    for (const power::Reading& r : in_run_[c]) {
      if (concurrent_[c][i++]) continue;
      const int64_t w = r.window_ns >= 0 ? r.window_ns : s.window;
      const auto occ = occupancy(c, w, r.t_ns - s.delay);
      if (quiet && occ.empty()) quiet->push_back(r.power_w);
      std::vector<double> x(m.keys.size() + 1, 0.0);
      x[0] = 1.0;
      for (const auto& [key, ns] : occ) {
        auto it = col.find(key);
        if (it == col.end()) {
          it = col.emplace(key, m.keys.size() + 1).first;
          m.keys.push_back(key);
          x.push_back(0.0);
        }
        x[it->second] = w == 0 ? static_cast<double>(ns) : static_cast<double>(ns) / static_cast<double>(w);
      }
      m.rows.push_back(x);
      m.y.push_back(r.power_w);
    }
    return m;
  }

  int64_t overlap(KeyId outer, KeyId inner) const {
    auto it = overlap_.find({outer, inner});
    return it == overlap_.end() ? 0 : it->second;
  }

  ChannelReport channel_report(size_t c) {
    ChannelReport cr;
    cr.channel = run_.channels[c];
    cr.samples = samples_[c];
    cr.samples_dropped = dropped_[c];
    std::vector<double> quiet;
    const std::vector<Setting> settings = settings_of(run_.channels[c], run_.sensor_check);
    set_aside(c);
    const Model m = model_of(c, settings[0], &quiet);
    baseline(c, quiet, cr);
    conservation(c, cr);
    rows(c, cr);
    if (run_.model) fit(c, m, settings, cr);
    return cr;
  }

  void baseline(size_t c, std::vector<double> quiet, ChannelReport& cr) const {
    if (run_.baseline_w) {
      cr.baseline_w = *run_.baseline_w;
    } else if (idle_[c]) {
      cr.baseline_w = idle_[c]->first;
    } else if (quiet.size() >= 5) {
      std::nth_element(quiet.begin(), quiet.begin() + static_cast<std::ptrdiff_t>(quiet.size() / 2), quiet.end());
      cr.baseline_w = quiet[quiet.size() / 2];
    } else if (!in_run_[c].empty()) {
      std::vector<double> all;
      for (const auto& r : in_run_[c]) all.push_back(r.power_w);
      std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(all.size() / 20), all.end());
      cr.baseline_w = all[all.size() / 20];
    }
  }

  void conservation(size_t c, ChannelReport& cr) const {
    std::optional<ReferenceCounter> first, last;
    for (const auto& k : run_.counters)
      if (k.channel == c) {
        if (!first) first = k;
        last = k;
      }
    const bool span = first && last && last->t_ns > first->t_ns;
    const int64_t t0 = span ? first->t_ns : run_.run_t0, t1 = span ? last->t_ns : run_.t_end;
    bool ignored = false;
    if (!traces_[c].empty()) {
      cr.conservation.run_energy_j = traces_[c].energy(t1, ignored) - traces_[c].energy(t0, ignored);
      cr.run_time_s = static_cast<double>(t1 - t0) * 1e-9;
    }
    cr.conservation.attributed_j = attributed_[c];
    cr.conservation.unattributed_j = cr.conservation.run_energy_j - attributed_[c];
    if (span) cr.conservation.counter_delta_j = last->energy_j - first->energy_j;
  }

  void rows(size_t c, ChannelReport& cr) {
    for (const auto& [kc, x] : totals_) {
      if (kc.second != c || x.calls == 0) continue;
      RegionRow r;
      r.name = keys_.info(kc.first).name;
      r.kind = keys_.info(kc.first).kind;
      r.calls = x.calls;
      r.time_s = static_cast<double>(x.time_ns) * 1e-9;
      r.energy_j = x.energy_j;
      r.excl_time_s = static_cast<double>(x.excl_ns) * 1e-9;
      r.excl_energy_j = x.excl_j;
      r.short_windows = x.short_w;
      r.extrapolated_windows = x.extrapolated;
      cr.rows.push_back(r);
      row_keys_[r.name] = kc.first;
    }
  }

  struct Fitted {
    Eigen::VectorXd beta;
    double rss = 0;
    Eigen::MatrixXd cov;
    int dof = 0;
    std::vector<Eigen::VectorXd> replicates;
  };

  Fitted fit_model(const Model& m, bool with_intervals) const {
    const size_t n = m.rows.size(), k = m.keys.size();
    const Normal all = normal(m, 0, n);
    Fitted f;
    f.beta = solve(all.g, all.h, run_.baseline_w);
    f.rss = std::max(0.0, all.yy - 2 * f.beta.dot(all.h) + f.beta.dot(all.g * f.beta));
    if (!with_intervals) return f;
    f.dof = static_cast<int>(n) - static_cast<int>(k) - (run_.baseline_w ? 0 : 1);
    const double ridge = 1e-10 * std::max(1.0, all.g.diagonal().mean());
    const double s2 = f.dof > 0 ? f.rss / f.dof : 0.0;
    const int kk = static_cast<int>(k);
    f.cov = Eigen::MatrixXd::Zero(kk + 1, kk + 1);
    if (run_.baseline_w) {
      Eigen::MatrixXd g = all.g.bottomRightCorner(kk, kk);
      g.diagonal().array() += ridge;
      f.cov.bottomRightCorner(kk, kk) = s2 * g.inverse();
    } else {
      Eigen::MatrixXd g = all.g;
      g.diagonal().array() += ridge;
      f.cov = s2 * g.inverse();
    }
    const std::vector<size_t> sizes = block_sizes(n);
    if (sizes.size() >= 8 && k <= 64) {
      size_t from = 0;
      for (size_t s : sizes) {
        const Normal b = normal(m, from, from + s);
        from += s;
        f.replicates.push_back(solve(all.g - b.g, all.h - b.h, run_.baseline_w));
      }
    }
    return f;
  }

  static double half_width(const Fitted& f, const Eigen::VectorXd& c) {
    double hw = t_quantile_95(f.dof) * std::sqrt(std::max(0.0, c.dot(f.cov * c)));
    if (f.replicates.size() >= 8) {
      const double nb = static_cast<double>(f.replicates.size());
      double mean = 0, ss = 0;
      for (const auto& r : f.replicates) mean += c.dot(r) / nb;
      for (const auto& r : f.replicates) ss += (c.dot(r) - mean) * (c.dot(r) - mean);
      hw = std::max(hw, t_quantile_95(static_cast<int>(f.replicates.size()) - 1) * std::sqrt((nb - 1) / nb * ss));
    }
    return hw;
  }

  double innermost_s(KeyId key, size_t c) const {
    auto it = totals_.find({key, c});
    return it == totals_.end() ? 0.0 : static_cast<double>(it->second.excl_ns) * 1e-9;
  }

  // The split at coefficients beta of model m: per key, its share of the set-aside readings' energy above the
  // floor, in proportion to calls x J/call alone (fitted power x mean duration, for a column with at least three
  // readings' worth of occupancy; the others' J/call fitted on the set-aside readings, the rest held fixed), or
  // by time (calls x mean duration) where no kernel of a reading draws anything; then divided by the key's
  // innermost time (a rate, W).
  // With `excess_rate`: per key with a trusted column, its split energy less its calls in the slices at its J/call
  // alone (its power over its mean duration outside the slices), per second of its innermost time.
  std::map<KeyId, double> split_rates(size_t c, const Model& m, const Eigen::VectorXd& beta,
                                      std::map<KeyId, double>* excess_rate = nullptr) const {
    std::map<KeyId, double> j, energy;
    std::map<KeyId, int> unknown, column;
    auto mean_duration = [&](KeyId key) {
      auto it = totals_.find({key, c});
      return it == totals_.end() || !it->second.calls
                 ? 0.0
                 : static_cast<double>(it->second.excl_ns) * 1e-9 / static_cast<double>(it->second.calls);
    };
    for (const Aside& a : aside_[c])
      for (const auto& [key, calls] : a.calls) {
        if (j.count(key) || unknown.count(key)) continue;
        const auto it = std::find(m.keys.begin(), m.keys.end(), key);
        double occupancy = 0;
        const size_t col = static_cast<size_t>(it - m.keys.begin()) + 1;
        if (it != m.keys.end())
          for (const auto& row : m.rows) occupancy += col < row.size() ? row[col] : 0.0;
        if (it != m.keys.end() && occupancy >= 3.0) {
          j[key] = beta(static_cast<int>(col)) * mean_duration(key);
          column[key] = static_cast<int>(col);
        } else {
          unknown.emplace(key, static_cast<int>(unknown.size()));
        }
      }
    auto above = [&](const Aside& a) {
      return std::max(0.0, a.power_w - beta(0)) * static_cast<double>(a.slice_ns) * 1e-9;
    };
    if (!unknown.empty()) {
      const auto u = static_cast<int>(unknown.size());
      Eigen::MatrixXd g = Eigen::MatrixXd::Zero(u, u);
      Eigen::VectorXd h = Eigen::VectorXd::Zero(u);
      for (const Aside& a : aside_[c]) {
        Eigen::VectorXd x = Eigen::VectorXd::Zero(u);
        double y = above(a) * static_cast<double>(a.span_ns) / static_cast<double>(std::max<int64_t>(1, a.slice_ns));
        for (const auto& [key, calls] : a.calls) {
          if (auto it = unknown.find(key); it != unknown.end())
            x(it->second) += calls;
          else
            y -= j.at(key) * calls;
        }
        g += x * x.transpose();
        h += x * y;
      }
      bool determined = aside_[c].size() >= 2 * unknown.size() + 2;
      Eigen::MatrixXd gr = g;
      gr.diagonal().array() += 1e-10 * std::max(1.0, g.diagonal().mean());
      const Eigen::MatrixXd inv = gr.inverse();
      for (int i = 0; i < u; ++i) determined &= g(i, i) > 0 && 1.0 / inv(i, i) >= 1e-4 * g(i, i);
      const Eigen::VectorXd b = determined ? brute_force_nnls(g, h) : Eigen::VectorXd();
      for (const auto& [key, i] : unknown) j[key] = determined ? b(i) : std::nan("");
    }
    for (const Aside& a : aside_[c]) {
      std::map<KeyId, double> w;
      double total = 0;
      for (const auto& [key, calls] : a.calls) total += w[key] = calls * j.at(key);
      if (!(total > 0)) {
        total = 0;
        for (const auto& [key, calls] : a.calls) total += w[key] = calls * mean_duration(key);
      }
      if (total <= 0) continue;
      for (const auto& [key, x] : w) energy[key] += above(a) * x / total;
    }
    std::map<KeyId, double> rate;
    for (const auto& [key, e] : energy)
      if (const double t = innermost_s(key, c); t > 0) rate[key] = e / t;
    if (excess_rate != nullptr)
      for (const auto& [key, e] : energy) {
        const auto col = column.find(key);
        const auto st = slices_[c].find(key);
        const auto tot = totals_.find({key, c});
        if (col == column.end() || st == slices_[c].end() || tot == totals_.end()) continue;
        const double alone_calls = static_cast<double>(tot->second.calls) - st->second.second;
        const double alone_s = static_cast<double>(tot->second.excl_ns - st->second.first) * 1e-9;
        const double t = innermost_s(key, c);
        if (alone_calls >= 1 && alone_s > 0 && t > 0)
          (*excess_rate)[key] = (e - beta(col->second) * alone_s / alone_calls * st->second.second) / t;
      }
    return rate;
  }
  // Per key: the share of its innermost time in set-aside slices.
  std::map<KeyId, double> phi(size_t c) const {
    std::map<KeyId, double> p;
    for (const auto& [key, st] : slices_[c])
      if (const double t = innermost_s(key, c); t > 0) p[key] = std::min(1.0, static_cast<double>(st.first) * 1e-9 / t);
    return p;
  }
  double split_energy(const RegionRow& r, const std::map<KeyId, double>& rate) const {
    double e = 0;
    for (const auto& [key, x] : rate) e += x * static_cast<double>(overlap(row_keys_.at(r.name), key)) * 1e-9;
    return e;
  }

  // The row's energy and J/call weights on the coefficients of model m (each column's time outside set-aside
  // slices, where the split's energy replaces power x time).
  std::pair<Eigen::VectorXd, Eigen::VectorXd> weights(const RegionRow& r, const Model& m, size_t c) const {
    const int k = static_cast<int>(m.keys.size());
    const std::map<KeyId, double> p = phi(c);
    Eigen::VectorXd energy = Eigen::VectorXd::Zero(k + 1), jpc = Eigen::VectorXd::Zero(k + 1);
    energy(0) = r.time_s;
    for (int i = 1; i <= k; ++i) {
      const KeyId key = m.keys[static_cast<size_t>(i) - 1];
      energy(i) = static_cast<double>(overlap(row_keys_.at(r.name), key)) * 1e-9;
      if (auto it = p.find(key); it != p.end()) energy(i) *= 1.0 - it->second;
      jpc(i) = energy(i) / static_cast<double>(r.calls);
    }
    return {energy, jpc};
  }

  void fit(size_t c, const Model& m, const std::vector<Setting>& settings, ChannelReport& cr) const {
    const size_t n = m.rows.size(), k = m.keys.size();
    if (n < k + 2) return;
    const Fitted f = fit_model(m, true);
    cr.fit.fitted = true;
    cr.fit.samples = n;
    cr.fit.columns = static_cast<int>(k);
    cr.fit.intercept_w = f.beta(0);
    cr.fit.residual_rms_w = std::sqrt(f.rss / static_cast<double>(n));
    cr.fit.interval_blocks = f.replicates.size();
    cr.fit.concurrent_readings = aside_[c].size();
    std::map<KeyId, double> excess_rate;
    const std::map<KeyId, double> rate = split_rates(c, m, f.beta, &excess_rate);
    std::vector<std::map<KeyId, double>> rate_reps;
    for (const auto& b : f.replicates) rate_reps.push_back(split_rates(c, m, b));
    // The row's model J/call at a fit: its weights (floor excluded) and its split energy, per call.
    auto jpc_of = [&](const RegionRow& r, const Model& mm, const Eigen::VectorXd& beta,
                      const std::map<KeyId, double>& rt) {
      return weights(r, mm, c).second.dot(beta) + split_energy(r, rt) / static_cast<double>(r.calls);
    };
    for (RegionRow& r : cr.rows) {
      const auto [we, wj] = weights(r, m, c);
      r.model_energy_j = we.dot(f.beta) + split_energy(r, rate);
      r.model_energy_hw_j = half_width(f, we);
      r.model_j_per_call_hw_j = half_width(f, wj);
      if (rate_reps.size() >= 2) {  // the split's part: a jackknife over the same replicates
        const double nb = static_cast<double>(rate_reps.size());
        double mean = 0, ss = 0;
        for (const auto& rr : rate_reps) mean += split_energy(r, rr) / nb;
        for (const auto& rr : rate_reps) ss += (split_energy(r, rr) - mean) * (split_energy(r, rr) - mean);
        const double hw = t_quantile_95(static_cast<int>(rate_reps.size()) - 1) * std::sqrt((nb - 1) / nb * ss);
        r.model_energy_hw_j = std::hypot(*r.model_energy_hw_j, hw);
        r.model_j_per_call_hw_j = std::hypot(*r.model_j_per_call_hw_j, hw / static_cast<double>(r.calls));
      }
      if (!excess_rate.empty()) {  // the split's assumption: its departure from the calls at their J/call alone
        const double assumed = std::fabs(split_energy(r, excess_rate));
        r.model_energy_hw_j = std::hypot(*r.model_energy_hw_j, assumed);
        r.model_j_per_call_hw_j = std::hypot(*r.model_j_per_call_hw_j, assumed / static_cast<double>(r.calls));
      }
      for (size_t i = 0; i < k; ++i)
        if (m.keys[i] == row_keys_.at(r.name)) {
          Eigen::VectorXd u = Eigen::VectorXd::Zero(static_cast<int>(k) + 1);
          u(static_cast<int>(i) + 1) = 1;
          r.model_power_w = f.beta(static_cast<int>(i) + 1);
          r.model_power_hw_w = half_width(f, u);
        }
    }
    // The sensor check: each neighbouring setting's fit, from its own occupancies (the same readings set aside);
    // the largest move of each row's figures joins its interval in quadrature.
    cr.sensor_check.done = settings.size() > 1;
    cr.sensor_check.given = {settings[0].window, settings[0].delay, true, cr.fit.residual_rms_w, 0};
    std::vector<double> move_j(cr.rows.size(), 0.0), move_e(cr.rows.size(), 0.0), move_p(cr.rows.size(), 0.0);
    double best = cr.fit.residual_rms_w;
    for (size_t i = 1; i < settings.size(); ++i) {
      const Model mv = model_of(c, settings[i], nullptr);
      SensorSettingFit sf{settings[i].window, settings[i].delay, false, 0, 0};
      if (mv.rows.size() >= mv.keys.size() + 2) {
        const Fitted fv = fit_model(mv, false);
        const std::map<KeyId, double> rv = split_rates(c, mv, fv.beta);
        sf.fitted = true;
        sf.residual_rms_w = std::sqrt(fv.rss / static_cast<double>(mv.rows.size()));
        for (size_t r = 0; r < cr.rows.size(); ++r) {
          const RegionRow& row = cr.rows[r];
          const double moved = std::fabs(jpc_of(row, mv, fv.beta, rv) - jpc_of(row, m, f.beta, rate));
          if (moved > *row.model_j_per_call_hw_j) ++sf.rows_moved;
          move_j[r] = std::max(move_j[r], moved);
          move_e[r] = std::max(move_e[r], std::fabs(weights(row, mv, c).first.dot(fv.beta) + split_energy(row, rv) -
                                                    *row.model_energy_j));
          for (size_t j = 0; j < mv.keys.size(); ++j)
            if (mv.keys[j] == row_keys_.at(row.name) && row.model_power_w)
              move_p[r] = std::max(move_p[r], std::fabs(fv.beta(static_cast<int>(j) + 1) - *row.model_power_w));
        }
        if (sf.residual_rms_w < best) {
          best = sf.residual_rms_w;
          cr.sensor_check.preferred = static_cast<int>(cr.sensor_check.neighbours.size());
        }
      }
      cr.sensor_check.neighbours.push_back(sf);
    }
    for (size_t r = 0; r < cr.rows.size(); ++r) {
      RegionRow& row = cr.rows[r];
      row.model_sensor_sensitive = move_j[r] > *row.model_j_per_call_hw_j;
      row.model_j_per_call_hw_j = std::hypot(*row.model_j_per_call_hw_j, move_j[r]);
      row.model_energy_hw_j = std::hypot(*row.model_energy_hw_j, move_e[r]);
      if (row.model_power_hw_w) row.model_power_hw_w = std::hypot(*row.model_power_hw_w, move_p[r]);
      row.model_imprecise = *row.model_j_per_call_hw_j > 0.05 * std::fabs(jpc_of(row, m, f.beta, rate));
    }
  }

  const ReferenceRun& run_;
  const KeyTable& keys_;
  size_t n_;
  std::vector<Trace> traces_;
  std::vector<uint64_t> samples_, dropped_;
  std::vector<std::vector<power::Reading>> in_run_;
  std::map<uint32_t, std::vector<Frame>> stacks_;
  std::map<KeyId, std::vector<Frame>> free_;
  std::map<std::pair<KeyId, size_t>, Totals> totals_;
  std::map<std::pair<KeyId, KeyId>, int64_t> overlap_;
  std::map<std::string, KeyId> row_keys_;
  std::vector<Segment> segments_;
  std::vector<std::vector<Aside>> aside_;
  std::vector<std::map<KeyId, std::pair<int64_t, double>>> slices_;  // per key: ns and calls in set-aside slices
  std::vector<std::vector<bool>> concurrent_;                        // per in-run reading: set aside
  struct ClosedFree {
    KeyId key;
    int64_t t0, t1;
  };
  std::vector<ClosedFree> closed_free_;
  std::vector<int> busy_;
  std::vector<double> busy_e0_, attributed_;
  std::vector<std::optional<std::pair<double, int64_t>>> idle_;
  uint64_t unmatched_ = 0;
};

}  // namespace

Report reference_attribute(const ReferenceRun& run, const KeyTable& keys) { return Reference(run, keys).build(); }

}  // namespace dooly::energy::testing
