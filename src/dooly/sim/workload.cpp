#include "dooly/sim/workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/common/error.hpp"
#include "dooly/common/json_int.hpp"
#include "dooly/common/utf8.hpp"

namespace dooly::sim {

namespace {

using utf8::echo;

constexpr const char* kSpecFix =
    "a workload is poisson:rate=R,n=N,prompt=DIST,output=DIST[,seed=S], gamma:...,cv=C, constant:..., "
    "closed:users=U,... or trace:FILE.jsonl; DIST is fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA:MIN:MAX or "
    "empirical:FILE (docs/simulate.md)";
constexpr const char* kTraceFix =
    "one JSON object per line: {\"id\": \"r1\", \"arrival_s\": 0.0, \"prompt_tokens\": 412, \"output_tokens\": 128} "
    "(docs/simulate.md)";

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

double number(std::string_view text, const std::string& where, double lo, double hi, const char* fix) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < lo || v > hi)
    DOOLY_THROW(InputError, fix, "{}: '{}' is not a number in [{}, {}]", where, echo(text), lo, hi);
  return v;
}

int64_t integer(std::string_view text, const std::string& where, int64_t lo, int64_t hi, const char* fix) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    DOOLY_THROW(InputError, fix, "{}: '{}' is not an integer in [{}, {}]", where, echo(text), lo, hi);
  return v;
}

std::vector<int64_t> read_lengths(const std::string& path, const std::string& where) {
  std::ifstream in(path);
  if (!in) DOOLY_THROW(InputError, kSpecFix, "{}: cannot open '{}'", where, echo(path));
  std::vector<int64_t> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    const std::string_view t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    out.push_back(integer(t, fmt::format("{}:{}", path, n), 1, kMaxTokens, "one length (a positive integer) per line"));
    if (static_cast<int64_t>(out.size()) > kMaxRequests)
      DOOLY_THROW(InputError, "sample it down", "{}: more than {} lengths", path, kMaxRequests);
  }
  if (out.empty()) DOOLY_THROW(InputError, "one length (a positive integer) per line", "{}: holds no length", path);
  return out;
}

// "key=value,key=value" into a map: every key one of `allowed`, none twice.
std::map<std::string_view, std::string_view> fields_of(std::string_view rest, const std::set<std::string_view>& allowed,
                                                       const std::string& where, std::string_view kind) {
  std::map<std::string_view, std::string_view> kv;
  for (std::string_view item : split(rest, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) DOOLY_THROW(InputError, kSpecFix, "{}: '{}' is not key=value", where, echo(item));
    const std::string_view key = item.substr(0, eq);
    if (!allowed.count(key)) {
      std::string known;
      for (std::string_view a : allowed) known += fmt::format("{}{}", known.empty() ? "" : ", ", a);
      DOOLY_THROW(InputError, kSpecFix, "{}: unknown field '{}' for {} (known: {})", where, echo(key), kind, known);
    }
    if (!kv.emplace(key, item.substr(eq + 1)).second)
      DOOLY_THROW(InputError, kSpecFix, "{}: '{}' given twice", where, echo(key));
  }
  return kv;
}

// One trace line's request (`index`: its place in the file, for the default id).
Request request_of(const nlohmann::json& j, const std::string& at, size_t index) {
  if (!j.is_object()) DOOLY_THROW(InputError, kTraceFix, "{}: not a JSON object", at);
  Request r;
  if (const auto id = j.find("id"); id == j.end()) {
    r.id = fmt::format("r{}", index);
  } else if (id->is_string() && !id->get_ref<const std::string&>().empty()) {
    r.id = id->get<std::string>();
  } else if (const auto i = json_integer<int64_t>(*id)) {
    r.id = std::to_string(*i);
  } else {
    DOOLY_THROW(InputError, kTraceFix, "{}: id must be a non-empty string or an integer", at);
  }
  const auto arrival = j.find("arrival_s");
  if (arrival == j.end() || !arrival->is_number() || !std::isfinite(arrival->get<double>()) ||
      arrival->get<double>() < 0)
    DOOLY_THROW(InputError, kTraceFix, "{}: arrival_s must be a number of seconds >= 0", at);
  r.arrival_s = arrival->get<double>();
  for (auto [key, field] : {std::pair{"prompt_tokens", &r.prompt_tokens}, {"output_tokens", &r.output_tokens}}) {
    const auto v = j.find(key);
    const std::optional<int64_t> x = v == j.end() ? std::nullopt : json_integer<int64_t>(*v);
    if (!x || *x < 1 || *x > kMaxTokens)
      DOOLY_THROW(InputError, kTraceFix, "{}: {} must be an integer in [1, {}]", at, key, kMaxTokens);
    *field = *x;
  }
  return r;
}

}  // namespace

LengthDist parse_length(std::string_view spec, const std::string& where) {
  LengthDist d;
  d.spec = std::string(spec);
  const size_t colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view rest = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
  const std::vector<std::string_view> p = split(rest, ':');
  auto want = [&](size_t k, const char* form) {
    if (colon == std::string_view::npos || p.size() != k)
      DOOLY_THROW(InputError, kSpecFix, "{}: '{}' is not {}", where, echo(spec), form);
  };
  const std::string w = fmt::format("{} '{}'", where, echo(spec));
  if (kind == "fixed") {
    want(1, "fixed:N");
    d.kind = LengthDist::Kind::fixed;
    d.fixed = integer(p[0], w, 1, kMaxTokens, kSpecFix);
  } else if (kind == "uniform") {
    want(2, "uniform:A:B");
    d.kind = LengthDist::Kind::uniform;
    d.lo = integer(p[0], w, 1, kMaxTokens, kSpecFix);
    d.hi = integer(p[1], w, d.lo, kMaxTokens, kSpecFix);
  } else if (kind == "lognormal") {
    want(4, "lognormal:MEDIAN:SIGMA:MIN:MAX");
    d.kind = LengthDist::Kind::lognormal;
    d.median = number(p[0], w + " median", 1e-3, static_cast<double>(kMaxTokens), kSpecFix);
    d.sigma = number(p[1], w + " sigma", 0, 10, kSpecFix);
    d.lo = integer(p[2], w + " min", 1, kMaxTokens, kSpecFix);
    d.hi = integer(p[3], w + " max", d.lo, kMaxTokens, kSpecFix);
  } else if (kind == "empirical") {
    if (colon == std::string_view::npos || rest.empty())
      DOOLY_THROW(InputError, kSpecFix, "{}: '{}' is not empirical:FILE", where, echo(spec));
    d.kind = LengthDist::Kind::empirical;
    d.values = read_lengths(std::string(rest), w);
  } else {
    DOOLY_THROW(InputError, kSpecFix, "{}: unknown length distribution '{}'", where, echo(kind));
  }
  return d;
}

int64_t LengthDist::sample(Rng& rng) const {
  switch (kind) {
    case Kind::fixed:
      return fixed;
    case Kind::uniform:
      return std::min(hi, lo + static_cast<int64_t>(rng.uniform() * static_cast<double>(hi - lo + 1)));
    case Kind::lognormal: {
      const double x = std::round(median * std::exp(sigma * rng.normal()));
      return std::clamp(static_cast<int64_t>(std::min(x, static_cast<double>(kMaxTokens))), lo, hi);
    }
    case Kind::empirical:
      return values[std::min(values.size() - 1,
                             static_cast<size_t>(rng.uniform() * static_cast<double>(values.size())))];
  }
  return fixed;
}

Workload parse_workload(std::string_view spec) {
  Workload w;
  w.spec = std::string(spec);
  const std::string where = fmt::format("workload '{}'", echo(spec));
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos) DOOLY_THROW(InputError, kSpecFix, "{}: no kind (kind:...)", where);
  const std::string_view kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  if (kind == "trace") {
    if (rest.empty()) DOOLY_THROW(InputError, kSpecFix, "{}: trace:FILE.jsonl names no file", where);
    w.arrivals = Workload::Arrivals::trace;
    w.trace_path = std::string(rest);
    return w;
  }
  static const std::map<std::string_view, Workload::Arrivals> kinds = {{"poisson", Workload::Arrivals::poisson},
                                                                       {"gamma", Workload::Arrivals::gamma},
                                                                       {"constant", Workload::Arrivals::constant},
                                                                       {"closed", Workload::Arrivals::closed}};
  const auto k = kinds.find(kind);
  if (k == kinds.end()) DOOLY_THROW(InputError, kSpecFix, "{}: unknown kind '{}'", where, echo(kind));
  w.arrivals = k->second;
  const bool closed = w.arrivals == Workload::Arrivals::closed;
  std::set<std::string_view> allowed = {"n", "prompt", "output", "seed"};
  if (closed) {
    allowed.insert({"users", "think"});
  } else {
    allowed.insert("rate");
  }
  if (w.arrivals == Workload::Arrivals::gamma) allowed.insert("cv");
  const std::map<std::string_view, std::string_view> kv = fields_of(rest, allowed, where, kind);
  auto need = [&](std::string_view key) {
    const auto it = kv.find(key);
    if (it == kv.end()) DOOLY_THROW(InputError, kSpecFix, "{}: {} is missing", where, key);
    return it->second;
  };
  w.n = integer(need("n"), where + ": n", 1, kMaxRequests, kSpecFix);
  w.prompt = parse_length(need("prompt"), where + ": prompt");
  w.output = parse_length(need("output"), where + ": output");
  if (kv.count("seed"))
    w.seed = static_cast<uint64_t>(
        integer(kv.at("seed"), where + ": seed", 0, std::numeric_limits<int64_t>::max(), kSpecFix));
  if (closed) {
    w.users = integer(need("users"), where + ": users", 1, kMaxRequests, kSpecFix);
    if (kv.count("think")) w.think_s = number(kv.at("think"), where + ": think", 0, 1e6, kSpecFix);
  } else {
    w.rate = number(need("rate"), where + ": rate", 1e-9, 1e9, kSpecFix);
  }
  if (w.arrivals == Workload::Arrivals::gamma) w.cv = number(need("cv"), where + ": cv", 1e-3, 100, kSpecFix);
  return w;
}

std::vector<Request> generate(const Workload& w) {
  if (w.arrivals == Workload::Arrivals::trace) return read_trace(w.trace_path);
  // Two streams of one seed: the lengths do not change with the arrival process or its rate, so workloads that
  // differ only in load serve the same requests.
  Rng lengths(w.seed), gaps(w.seed ^ 0x6a09e667f3bcc909ULL);
  std::vector<Request> out;
  out.reserve(static_cast<size_t>(w.n));
  double t = 0;
  const double k = 1.0 / (w.cv * w.cv);  // gamma: shape 1/cv^2, scale cv^2/rate (mean 1/rate)
  for (int64_t i = 0; i < w.n; ++i) {
    switch (w.arrivals) {
      case Workload::Arrivals::poisson:
        t += gaps.exponential(w.rate);
        break;
      case Workload::Arrivals::gamma:
        t += gaps.gamma(k, 1.0 / (k * w.rate));
        break;
      case Workload::Arrivals::constant:
        t = static_cast<double>(i) / w.rate;
        break;
      case Workload::Arrivals::closed:
      case Workload::Arrivals::trace:
        break;
    }
    Request r;
    r.id = fmt::format("r{}", i);
    r.arrival_s = t;
    r.prompt_tokens = w.prompt.sample(lengths);
    r.output_tokens = w.output.sample(lengths);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Request> parse_trace(std::istream& in, const std::string& path) {
  std::vector<Request> out;
  std::map<std::string, size_t> line_of_id;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty()) continue;
    const std::string at = fmt::format("{}:{}", path, n);
    Request r = request_of(nlohmann::json::parse(line, nullptr, false), at, out.size());
    if (const auto [it, fresh] = line_of_id.emplace(r.id, n); !fresh)
      DOOLY_THROW(InputError, "give every request its own id", "{}: id '{}' is already on line {}", at, echo(r.id),
                  it->second);
    if (static_cast<int64_t>(out.size()) >= kMaxRequests)
      DOOLY_THROW(InputError, "split the trace", "{}: more than {} requests", path, kMaxRequests);
    out.push_back(std::move(r));
  }
  if (out.empty()) DOOLY_THROW(InputError, kTraceFix, "{}: holds no request", path);
  std::stable_sort(out.begin(), out.end(),
                   [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

std::vector<Request> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) DOOLY_THROW(InputError, "check the path given after trace:", "workload trace '{}': cannot open", echo(path));
  return parse_trace(in, path);
}

}  // namespace dooly::sim
