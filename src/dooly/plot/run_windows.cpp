#include "dooly/plot/run_windows.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

namespace dooly::plot {

namespace {

std::optional<int64_t> meta_ns(const energy::Recording& rec, std::string_view key) {
  for (const auto& [k, v] : rec.meta) {
    int64_t ns = 0;
    if (k == key && std::from_chars(v.data(), v.data() + v.size(), ns).ec == std::errc()) return ns;
  }
  return std::nullopt;
}

// Follows one thread's window stack and records each outermost window as [begin, end] under its key.
class OutermostTracker {
 public:
  OutermostTracker(std::map<energy::KeyId, std::vector<XRange>>& out, RunWindows& totals, int64_t start_ns)
      : out_(out), totals_(totals), start_ns_(start_ns) {}

  void begin(const energy::Event& e) {
    if (stack_.empty()) begin_ns_ = e.t_ns;
    stack_.push_back(e.key);
  }

  // An end closes the innermost open window of its key and any opened inside it (mis-nested ones, repaired as
  // the attributor repairs them).
  void end(const energy::Event& e) {
    const auto it = std::find(stack_.rbegin(), stack_.rend(), e.key);
    if (it == stack_.rend()) {
      ++totals_.unmatched_ends;
      return;
    }
    stack_.resize(static_cast<size_t>(stack_.rend() - it) - 1);
    if (stack_.empty()) record(e.key, e.t_ns);
  }

  // The thread's events are over: whatever is still open closes at the run's end.
  void finish(int64_t end_ns) {
    if (stack_.empty()) return;
    ++totals_.closed_at_end;
    record(stack_.front(), std::max(end_ns, begin_ns_));
    stack_.clear();
  }

 private:
  void record(energy::KeyId key, int64_t end_ns) {
    out_[key].push_back(
        {static_cast<double>(begin_ns_ - start_ns_) / 1e9, static_cast<double>(end_ns - start_ns_) / 1e9});
  }

  std::map<energy::KeyId, std::vector<XRange>>& out_;
  RunWindows& totals_;
  int64_t start_ns_;
  std::vector<energy::KeyId> stack_;
  int64_t begin_ns_ = 0;
};

// Sorted, with overlapping and touching ranges joined.
std::vector<XRange> merged(std::vector<XRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const XRange& a, const XRange& b) { return a.x0 < b.x0; });
  std::vector<XRange> out;
  for (const XRange& r : ranges) {
    if (!out.empty() && r.x0 <= out.back().x1)
      out.back().x1 = std::max(out.back().x1, r.x1);
    else
      out.push_back(r);
  }
  return out;
}

}  // namespace

std::pair<int64_t, int64_t> run_span_ns(const energy::Recording& rec) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& s : rec.samples) lo = std::min(lo, s.t_ns), hi = std::max(hi, s.t_ns);
  for (const auto& e : rec.events) lo = std::min(lo, e.t_ns), hi = std::max(hi, e.t_ns);
  if (lo > hi) lo = hi = 0;
  return {meta_ns(rec, "run_start_ns").value_or(lo), meta_ns(rec, "run_end_ns").value_or(hi)};
}

RunWindows outermost_windows(const energy::Recording& rec, std::optional<int> device) {
  RunWindows out;
  std::tie(out.start_ns, out.end_ns) = run_span_ns(rec);
  std::vector<size_t> order;
  for (size_t i = 0; i < rec.events.size(); ++i) {
    const energy::Event& e = rec.events[i];
    if ((e.flags & energy::flags::nested) && (!device || e.device == -1 || e.device == *device)) order.push_back(i);
  }
  // Per thread in time; events of one instant keep the file's order (a begin written before an end stays so).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const energy::Event &x = rec.events[a], &y = rec.events[b];
    return x.thread != y.thread ? x.thread < y.thread : x.t_ns < y.t_ns;
  });
  std::map<energy::KeyId, std::vector<XRange>> ranges;
  std::optional<OutermostTracker> thread;
  uint32_t current = 0;
  for (const size_t i : order) {
    const energy::Event& e = rec.events[i];
    if (!thread || e.thread != current) {
      if (thread) thread->finish(out.end_ns);
      thread.emplace(ranges, out, out.start_ns);
      current = e.thread;
    }
    if (e.begin)
      thread->begin(e);
    else
      thread->end(e);
  }
  if (thread) thread->finish(out.end_ns);

  for (auto& [id, list] : ranges) {
    const energy::KeyId key = id;  // a lambda below cannot capture a structured binding (before C++20 in clang)
    RegionTime r;
    r.windows = list.size();
    r.ranges_s = merged(std::move(list));
    r.open_s = std::accumulate(r.ranges_s.begin(), r.ranges_s.end(), 0.0,
                               [](double sum, const XRange& x) { return sum + (x.x1 - x.x0); });
    const auto named = std::find_if(rec.keys.begin(), rec.keys.end(), [&](const auto& k) { return k.id == key; });
    r.name = named != rec.keys.end() ? named->name : "key " + std::to_string(key);
    r.kind = named != rec.keys.end() ? named->kind : "other";
    out.regions.push_back(std::move(r));
  }
  std::sort(out.regions.begin(), out.regions.end(), [](const RegionTime& a, const RegionTime& b) {
    return a.open_s != b.open_s ? a.open_s > b.open_s : a.name < b.name;
  });
  return out;
}

}  // namespace dooly::plot
