#include "stub_script.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace stub {

double Trace::power_w(double t) const {
  if (points.empty()) return 100.0;
  if (t <= points.front().t_ms) return points.front().power_w;
  if (t >= points.back().t_ms) return points.back().power_w;
  for (size_t i = 1; i < points.size(); ++i) {
    const Point& a = points[i - 1];
    const Point& b = points[i];
    if (t <= b.t_ms) {
      if (b.t_ms == a.t_ms) return b.power_w;
      return a.power_w + (b.power_w - a.power_w) * (t - a.t_ms) / (b.t_ms - a.t_ms);
    }
  }
  return points.back().power_w;
}

double Trace::integral_wms(double a, double b) const {
  if (b < a) return -integral_wms(b, a);
  // Trapezoids between a, every breakpoint inside (a, b), and b: exact for a piecewise-linear trace.
  std::vector<double> xs = {a};
  for (const Point& p : points)
    if (p.t_ms > a && p.t_ms < b) xs.push_back(p.t_ms);
  xs.push_back(b);
  double sum = 0;
  for (size_t i = 1; i < xs.size(); ++i) sum += 0.5 * (power_w(xs[i - 1]) + power_w(xs[i])) * (xs[i] - xs[i - 1]);
  return sum;
}

bool load_script(Script& out, std::string& error) {
  const char* path = std::getenv("DOOLY_STUB_NVML_SCRIPT");
  if (!path || !*path) {
    error = "DOOLY_STUB_NVML_SCRIPT is not set";
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    error = std::string("cannot open ") + path;
    return false;
  }
  Script s;
  struct PowerLine {
    std::string device;
    double t_ms, w;
  };
  std::vector<PowerLine> power;
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream ls(line);
    std::string word;
    if (!(ls >> word)) continue;
    bool ok = true;
    if (word == "device") {
      Device d;
      ok = static_cast<bool>(ls >> d.pci_bus_id);
      std::getline(ls >> std::ws, d.name);
      s.devices.push_back(d);
    } else if (word == "cuda_order") {
      int i;
      while (ls >> i) s.cuda_order.push_back(i);
    } else if (word == "power") {
      PowerLine p;
      ok = static_cast<bool>(ls >> p.device >> p.t_ms >> p.w);
      power.push_back(p);
    } else if (word == "history_ms") {
      ok = static_cast<bool>(ls >> s.history_ms);
    } else if (word == "sample_period_ms") {
      ok = static_cast<bool>(ls >> s.sample_period_ms) && s.sample_period_ms > 0;
    } else if (word == "buffer_samples") {
      ok = static_cast<bool>(ls >> s.buffer_samples) && s.buffer_samples > 0;
    } else if (word == "field_period_ms") {
      ok = static_cast<bool>(ls >> s.field_period_ms) && s.field_period_ms > 0;
    } else if (word == "energy_base_mj") {
      ok = static_cast<bool>(ls >> s.energy_base_mj);
    } else if (word == "init_fail") {
      ok = static_cast<bool>(ls >> s.init_fail);
    } else if (word == "cuda_init_fail") {
      ok = static_cast<bool>(ls >> s.cuda_init_fail);
    } else if (word == "samples_not_supported") {
      s.samples_not_supported = true;
    } else if (word == "field_not_supported") {
      s.field_not_supported = true;
    } else if (word == "power_usage_not_supported") {
      s.power_usage_not_supported = true;
    } else if (word == "energy_not_supported") {
      s.energy_not_supported = true;
    } else if (word == "lost_after") {
      ok = static_cast<bool>(ls >> s.lost_after);
    } else {
      ok = false;
    }
    if (!ok) {
      error = std::string(path) + ":" + std::to_string(no) + ": cannot read '" + line + "'";
      return false;
    }
  }
  for (const PowerLine& p : power) {
    for (size_t i = 0; i < s.devices.size(); ++i)
      if (p.device == "*" || p.device == std::to_string(i)) s.devices[i].trace.points.push_back({p.t_ms, p.w});
  }
  for (Device& d : s.devices)
    std::stable_sort(d.trace.points.begin(), d.trace.points.end(),
                     [](const Point& a, const Point& b) { return a.t_ms < b.t_ms; });
  if (s.cuda_order.empty())
    for (size_t i = 0; i < s.devices.size(); ++i) s.cuda_order.push_back(static_cast<int>(i));
  out = std::move(s);
  return true;
}

namespace {
bool parse_pci(const std::string& s, unsigned long v[4]) {
  unsigned long domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(s.c_str(), "%lx:%lx:%lx.%lx", &domain, &bus, &dev, &fn) == 4) {
  } else if (std::sscanf(s.c_str(), "%lx:%lx.%lx", &bus, &dev, &fn) == 3) {
    domain = 0;
  } else {
    return false;
  }
  v[0] = domain, v[1] = bus, v[2] = dev, v[3] = fn;
  return true;
}
}  // namespace

bool same_pci_bus_id(const std::string& a, const std::string& b) {
  unsigned long x[4], y[4];
  if (!parse_pci(a, x) || !parse_pci(b, y)) return false;
  return std::equal(x, x + 4, y);
}

}  // namespace stub
