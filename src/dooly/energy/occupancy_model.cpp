#include "dooly/energy/occupancy_model.hpp"

#include <algorithm>

namespace dooly::energy {

namespace {
constexpr size_t kMaxBlocks = 32;  // merged pairwise into 16 when full: 16-32 blocks however long the run
constexpr int64_t kMs = 1'000'000;

// The given setting, then its neighbours: lag one step earlier and later, window one step shorter and longer.
// The lag step is a twentieth of the update period (1 ms for a 20 ms sensor), the window step a tenth of the
// window; a window of 0 (a point sensor) and readings that carry their own window vary in lag only.
std::vector<SensorSetting> settings_for(const power::Channel& ch, bool check) {
  std::vector<SensorSetting> s{{ch.sensor.window_ns, ch.sensor.delay_ns}};
  if (!check) return s;
  const int64_t lag_step = std::clamp<int64_t>(ch.sensor.update_ns / 20, kMs / 10, kMs);
  if (ch.sensor.delay_ns >= lag_step) s.push_back({ch.sensor.window_ns, ch.sensor.delay_ns - lag_step});
  s.push_back({ch.sensor.window_ns, ch.sensor.delay_ns + lag_step});
  if (ch.sensor.window_ns > 0) {
    const int64_t w_step = std::max<int64_t>(kMs / 2, ch.sensor.window_ns / 10);
    if (ch.sensor.window_ns > w_step) s.push_back({ch.sensor.window_ns - w_step, ch.sensor.delay_ns});
    s.push_back({ch.sensor.window_ns + w_step, ch.sensor.delay_ns});
  }
  return s;
}

int column_of(Design& d, KeyId key, size_t max_keys) {
  auto it = d.column.find(key);
  if (it != d.column.end()) return it->second;
  if (d.keys.size() >= max_keys) return -1;
  const int col = static_cast<int>(d.keys.size()) + 1;
  d.column.emplace(key, col);
  d.keys.push_back(key);
  d.gram.conservativeResize(col + 1, col + 1);
  d.gram.row(col).setZero();
  d.gram.col(col).setZero();
  d.xty.conservativeResize(col + 1);
  d.xty(col) = 0;
  return col;
}

// Adds one row (sparse: (column, share) pairs, the intercept's first) to a set of normal equations.
template <typename Eq>
void add_row_to(Eq& eq, const std::vector<std::pair<int, double>>& x, double y) {
  for (const auto& [i, xi] : x) {
    eq.xty(i) += xi * y;
    for (const auto& [j, xj] : x) eq.gram(i, j) += xi * xj;
  }
  eq.yy += y * y;
  ++eq.n;
}

// The row of reading power y for the shares in `occ` (ns of a window of w ns; w == 0: a point, shares 0 or 1).
void build_row(Design& d, const DenseTally& occ, int64_t w, size_t max_keys, std::vector<std::pair<int, double>>& x) {
  x.clear();
  x.emplace_back(0, 1.0);
  const double per_ns = w == 0 ? 1.0 : 1.0 / static_cast<double>(w);
  occ.for_each([&](KeyId key, int64_t ns) {
    if (ns <= 0) return;
    const int col = column_of(d, key, max_keys);
    if (col < 0) {
      ++d.over_cap;
      return;
    }
    x.emplace_back(col, static_cast<double>(ns) * per_ns);
  });
}
}  // namespace

OccupancyModel::OccupancyModel(const std::vector<power::Channel>& channels, OccupancyOptions options)
    : options_(options), channels_(channels.size()) {
  segments_.cap = options_.max_segments;
  for (size_t c = 0; c < channels.size(); ++c) {
    const power::Channel& ch = channels[c];
    ChannelModel& m = channels_[c];
    if (ch.domain == power::Domain::gpu && ch.device >= 0) m.only_device = ch.device;
    m.settings = settings_for(ch, options_.sensor_check);
    m.others.resize(m.settings.size() - 1);
    m.update_ns = ch.sensor.update_ns;
    m.min_delay_ns = m.max_delay_ns = ch.sensor.delay_ns;
    m.max_window_ns = ch.sensor.window_ns;
    for (const SensorSetting& s : m.settings) {
      m.min_delay_ns = std::min(m.min_delay_ns, s.delay_ns);
      m.max_delay_ns = std::max(m.max_delay_ns, s.delay_ns);
      m.max_window_ns = std::max(m.max_window_ns, s.window_ns);
    }
  }
}

size_t OccupancyModel::retained_readings() const noexcept {
  size_t n = 0;
  for (const auto& m : channels_) n += m.pending.size() + m.deferred.size();
  return n;
}

void OccupancyModel::occupancy(const ChannelModel& m, int64_t x, int64_t y, int sign, const WindowCharger& open,
                               DenseTally& tally) {
  auto add = [&](KeyId key, int32_t, int64_t t0, int64_t t1, uint32_t) __attribute__((always_inline)) {
    const int64_t ns = std::min(y, t1) - std::max(x, t0);
    if (ns > 0) tally.add(key, sign * ns);
  };
  if (x == y)
    visit<true>(m, x, y, open, [&](KeyId key, int32_t, int64_t t0, int64_t t1, uint32_t) {
      if (t0 <= y && y < t1) tally.add(key, sign);
    });
  else
    visit<false>(m, x, y, open, add);
}

template <bool kPoint, typename F>
void OccupancyModel::visit(const ChannelModel& m, int64_t x, int64_t y, const WindowCharger& open, F&& f) {
  const int32_t only = m.only_device;
  auto mine = [only](int32_t device) { return only < 0 || device < 0 || only == device; };
  // Segments are in order of their end; each thread's are disjoint and in order, so once a thread shows a
  // segment starting after the window, none of its later ones can reach into it: stop when every thread has.
  const auto end = segments_.items.end();
  auto it = std::lower_bound(segments_.items.begin(), end, x, [](const Segment& s, int64_t t) { return s.t1 <= t; });
  const size_t n_threads = open.threads();
  past_.assign(n_threads, false);
  size_t threads_past = 0;
  for (; it != end && threads_past < n_threads; ++it) {
    if (kPoint ? it->t0 <= y : it->t0 < y) {
      if (mine(it->device)) f(it->key, it->device, it->t0, it->t1, it->thread);
    } else if (it->thread < n_threads && !past_[it->thread]) {
      past_[it->thread] = true;
      ++threads_past;
    }
  }
  open.for_each_open_innermost([&](uint32_t thread, const OpenInnermost& o) {
    if (mine(o.device)) f(o.key, o.device, o.since_ns, INT64_MAX, thread);
  });
}

namespace {
// The share of a call of [t0, t1) that `in` ns of it are; a window still open (t1: INT64_MAX) is taken to end at
// `now`, the instant the reading's window ends (its share is then an upper bound).
double call_share(int64_t in, int64_t t0, int64_t t1, int64_t now) {
  const int64_t d = (t1 == INT64_MAX ? now : t1) - t0;
  return static_cast<double>(in) / static_cast<double>(std::max<int64_t>(1, d));
}
}  // namespace

void OccupancyModel::release_deferred(ChannelModel& m, const WindowCharger& open, bool all) {
  while (!m.deferred.empty()) {
    const ChannelModel::Deferred d = m.deferred.front();
    if (!all) {
      bool reaches = false;  // a device window of this channel open since before the reading's window ended
      open.for_each_open_innermost([&](uint32_t, const OpenInnermost& o) {
        reaches |= o.device >= 0 && (m.only_device < 0 || o.device == m.only_device) && o.since_ns < d.b;
      });
      if (reaches) return;  // the later ones end later: they wait too
    }
    set_aside(m, d.power_w, d.b, d.w, d.since, open);
    m.deferred.pop_front();
  }
}

void OccupancyModel::set_aside(ChannelModel& m, double power_w, int64_t b, int64_t w, int64_t since,
                               const WindowCharger& open) {
  // The reading's own slice: the time since the channel's previous reading (at most two update periods or a
  // window), ending where its window ends.
  const int64_t slice = std::clamp<int64_t>(since, 0, std::max<int64_t>(2 * m.update_ns, w));
  // Calls of each device window in the split's span (the window widened back), each counted by the share of
  // its own duration inside it; a window still open counts the share of its time so far.
  const int64_t x = b - w - options_.split_span_ns;
  calls_.clear();
  slice_calls_.clear();
  visit<false>(m, x, b, open, [&](KeyId key, int32_t device, int64_t t0, int64_t t1, uint32_t) {
    const int64_t in = std::min(b, t1) - std::max(x, t0);
    if (device < 0 || in <= 0) return;
    calls_[key] += call_share(in, t0, t1, b);
    const int64_t in_slice = std::min(b, t1) - std::max(b - slice, t0);  // the slice ends the span
    if (in_slice > 0) slice_calls_.emplace_back(key, in_slice, call_share(in_slice, t0, t1, b));
  });
  if (calls_.empty()) return;
  ConcurrentRow row{power_w, slice, b - x, static_cast<uint32_t>(shares_.size()), static_cast<uint32_t>(calls_.size())};
  for (const auto& kv : calls_) shares_.push_back(kv);
  m.concurrent.push_back(row);
  for (const auto& [key, ns, calls] : slice_calls_) {
    SliceTotals& st = m.slices[key];
    st.ns += ns;
    st.calls += calls;
  }
}

bool OccupancyModel::given_occupancy(const ChannelModel& m, int64_t b, int64_t w, const WindowCharger& open) {
  if (!options_.split_overlaps || w == 0 || open.threads() < 2) {  // no overlap to look for: the plain scan
    occupancy(m, b - w, b, +1, open, occ_);
    return false;
  }
  spans_.clear();
  visit<false>(m, b - w, b, open, [&](KeyId key, int32_t device, int64_t t0, int64_t t1, uint32_t) {
    const int64_t ns = std::min(b, t1) - std::max(b - w, t0);
    if (ns <= 0) return;
    occ_.add(key, ns);
    if (device >= 0) spans_.emplace_back(std::max(b - w, t0), std::min(b, t1));
  });
  if (spans_.size() < 2) return false;
  // A track's own windows are disjoint (segments are innermost stretches), so any overlap is between tracks.
  std::sort(spans_.begin(), spans_.end());
  int64_t reach = INT64_MIN;
  for (const auto& [x, y] : spans_) {
    if (x < reach) return true;
    reach = std::max(reach, y);
  }
  return false;
}

bool OccupancyModel::defer_if_concurrent(ChannelModel& m, const power::Reading& r, int64_t b, int64_t w, bool overlap) {
  const int64_t since = m.last_reading_ns == INT64_MIN ? m.update_ns : r.t_ns - m.last_reading_ns;
  m.last_reading_ns = r.t_ns;
  if (!overlap) return false;
  if (shares_.size() >= options_.max_split_shares) {
    ++m.concurrent_unsplit;  // the pool is full: fitted as usual
    return false;
  }
  m.deferred.push_back({r.power_w, b, w, since});
  return true;
}

bool OccupancyModel::add_row(size_t c, const power::Reading& r, const WindowCharger& open) {
  ChannelModel& m = channels_[c];
  const bool own_window = r.window_ns >= 0;
  if (own_window) m.widest_own_window_ns = std::max(m.widest_own_window_ns, r.window_ns);
  // The given setting: the shares of its window.
  const SensorSetting& given = m.settings[0];
  const int64_t w = own_window ? r.window_ns : given.window_ns;
  const int64_t b = r.t_ns - given.delay_ns;
  occ_.clear();
  const bool overlap = given_occupancy(m, b, w, open);
  const bool quiet = occ_.empty();
  if (defer_if_concurrent(m, r, b, w, overlap)) return false;
  build_row(m.given, occ_, w, options_.max_keys, x_);
  add_row_to(m.given, x_, r.power_w);
  if (m.blocks_kept) add_to_block(m, x_, r.power_w);

  // Each neighbour: the same shares, corrected at the edges where its window differs (a window's shares are
  // additive over adjacent intervals), so a neighbour costs a scan of its edges, not of its whole window.
  for (size_t i = 0; i + 1 < m.settings.size(); ++i) {
    const SensorSetting& s = m.settings[i + 1];
    const int64_t wv = own_window ? r.window_ns : s.window_ns;
    const int64_t bv = r.t_ns - s.delay_ns, av = bv - wv;
    scratch_.clear();
    if (w == 0 || wv == 0) {
      occupancy(m, av, bv, +1, open, scratch_);
    } else {
      scratch_.merge(occ_);
      const int64_t a = b - w;
      if (av < a) occupancy(m, av, a, +1, open, scratch_);
      if (av > a) occupancy(m, a, av, -1, open, scratch_);
      if (bv > b) occupancy(m, b, bv, +1, open, scratch_);
      if (bv < b) occupancy(m, bv, b, -1, open, scratch_);
    }
    build_row(m.others[i], scratch_, wv, options_.max_keys, x_);
    add_row_to(m.others[i], x_, r.power_w);
  }
  return quiet;
}

void OccupancyModel::add_to_block(ChannelModel& m, const std::vector<std::pair<int, double>>& x, double y) {
  const int k = m.given.columns();
  if (static_cast<size_t>(k) > options_.max_block_columns) {
    m.blocks_kept = false;  // too many columns to keep a copy of X'X per block
    m.blocks.clear();
    m.blocks.shrink_to_fit();
    return;
  }
  if (m.blocks.empty() || m.blocks.back().n >= m.block_rows) {
    if (m.blocks.size() == kMaxBlocks) {
      // Merge neighbours pairwise: 16 blocks of twice the rows.
      for (size_t i = 0; i < kMaxBlocks / 2; ++i) {
        DesignBlock& a = m.blocks[2 * i];
        const DesignBlock& b = m.blocks[2 * i + 1];
        a.gram += b.gram;
        a.xty += b.xty;
        a.yy += b.yy;
        a.n += b.n;
        if (i != 2 * i) m.blocks[i] = std::move(a);
      }
      m.blocks.resize(kMaxBlocks / 2);
      m.block_rows *= 2;
    }
    m.blocks.push_back({Eigen::MatrixXd::Zero(k + 1, k + 1), Eigen::VectorXd::Zero(k + 1), 0.0, 0});
  }
  for (DesignBlock& blk : m.blocks)
    if (blk.gram.rows() != k + 1) {
      const auto old = static_cast<int>(blk.gram.rows());
      blk.gram.conservativeResize(k + 1, k + 1);
      blk.gram.bottomRows(k + 1 - old).setZero();
      blk.gram.rightCols(k + 1 - old).setZero();
      blk.xty.conservativeResize(k + 1);
      blk.xty.tail(k + 1 - old).setZero();
    }
  add_row_to(m.blocks.back(), x, y);
}

void OccupancyModel::trim(int64_t horizon_ns, const std::vector<int64_t>& trace_end, const std::vector<bool>& dead) {
  int64_t keep_from = horizon_ns;
  const int64_t span = options_.split_overlaps ? options_.split_span_ns : 0;  // the split looks this far further back
  for (size_t c = 0; c < channels_.size(); ++c) {
    const ChannelModel& m = channels_[c];
    if (!m.deferred.empty())
      keep_from = std::min(keep_from, m.deferred.front().b - m.deferred.front().w - options_.split_span_ns);
    if (!m.pending.empty()) {
      const power::Reading& r = m.pending.front();
      keep_from =
          std::min(keep_from, r.t_ns - m.max_delay_ns - (r.window_ns >= 0 ? r.window_ns : m.max_window_ns) - span);
    } else if (!dead[c]) {
      // Readings still to come lie after this channel's trace (they arrive in order), so their windows start at
      // most one window before its end: keep two, and an update period, of the widest. The trace's end, not the
      // horizon: a channel that lags more than the attributor's max lag is behind the horizon, and its late
      // readings still need their segments. A live channel with no reading yet needs everything.
      const int64_t end = trace_end[c] == INT64_MIN ? INT64_MIN : std::min(horizon_ns, trace_end[c]);
      const int64_t w = std::max({m.max_window_ns, m.widest_own_window_ns, m.update_ns});
      const int64_t reach = m.max_delay_ns + 2 * w + m.update_ns + span;
      keep_from = std::min(keep_from, end < INT64_MIN + reach ? INT64_MIN : end - reach);
    }
  }
  Fifo<Segment>& segs = segments_.items;
  while (!segs.empty() && segs.front().t1 < keep_from) segs.pop_front();
}

}  // namespace dooly::energy
