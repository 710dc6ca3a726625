#include "dooly/plan/grid.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "dooly/common/error.hpp"
#include "dooly/common/utf8.hpp"
#include "dooly/signature/sha256.hpp"

namespace dooly::plan {
namespace {

using nlohmann::json;

constexpr const char* kFix = "see docs/profile.md for the grid file's fields (data/grids/default.json is the default)";

void only_keys(const json& j, const std::set<std::string>& allowed, const std::string& where) {
  if (!j.is_object()) DOOLY_THROW(InputError, kFix, "{}: must be a JSON object", where);
  for (const auto& [k, v] : j.items())
    if (!allowed.count(k)) DOOLY_THROW(InputError, kFix, "{}: unknown field '{}'", where, utf8::echo(k));
}

// Sizes are bounded: a step of more than 2^20 tokens (or requests), or a context of more than 2^30 tokens, is
// beyond any engine, and a grid must not make the planner allocate that many request slices.
constexpr int64_t kMaxSize = int64_t{1} << 30;
constexpr int64_t kMaxStep = int64_t{1} << 20;

int64_t positive(const json& v, const std::string& where, bool zero_ok = false, int64_t max = kMaxSize) {
  const bool integer = v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max));
  if (!integer || v.get<int64_t>() < (zero_ok ? 0 : 1) || v.get<int64_t>() > max)
    DOOLY_THROW(InputError, kFix, "{}: must be an integer in [{}, {}] (got {})", where, zero_ok ? 0 : 1, max, v.dump());
  return v.get<int64_t>();
}

std::vector<int64_t> int_list(const json& j, const std::string& key, const std::string& where, bool zero_ok = false) {
  if (!j.contains(key)) DOOLY_THROW(InputError, kFix, "{}: missing field '{}'", where, key);
  const json& v = j.at(key);
  if (!v.is_array() || v.empty()) DOOLY_THROW(InputError, kFix, "{}.{}: must be a non-empty list", where, key);
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(positive(v[i], fmt::format("{}.{}[{}]", where, key, i), zero_ok));
  return out;
}

double number(const json& j, const std::string& key, double fallback, const std::string& where, double lo, double hi) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
    DOOLY_THROW(InputError, kFix, "{}.{}: must be a number in [{}, {}] (got {})", where, key, lo, hi, v.dump());
  return v.get<double>();
}

}  // namespace

std::vector<Composition> Grid::compositions() const {
  std::vector<Composition> out;
  auto keep = [&](Composition c) {
    int64_t kv = 0;
    for (const auto& r : c.requests) kv += r.context + r.new_tokens;
    if (c.num_tokens() <= max_tokens && kv <= max_kv_tokens) out.push_back(std::move(c));
  };
  auto fits = [&](int64_t requests) { return requests <= max_tokens; };  // a decode brings one token at least
  auto keep_if = [&](int64_t requests, auto make) {
    if (fits(requests)) keep(make());
  };
  for (int64_t chunk : prefill_chunk)
    for (int64_t ctx : prefill_context) keep({{{chunk, ctx}}});
  for (int64_t b : decode_batch)
    for (int64_t ctx : decode_context)
      keep_if(b, [&] { return Composition{std::vector<RequestSlice>(static_cast<size_t>(b), {1, ctx})}; });
  for (const MixedPoint& m : mixed)
    keep_if(m.decodes + 1, [&] {
      Composition c{std::vector<RequestSlice>(static_cast<size_t>(m.decodes), {1, m.decode_context})};
      c.requests.push_back({m.chunk, m.chunk_context});
      return c;
    });
  return out;
}

std::vector<Composition> Grid::compositions_for(const std::string& op_class) const {
  std::vector<Composition> all = compositions();
  auto it = composition_stride_by_class.find(op_class);
  if (it == composition_stride_by_class.end() || it->second <= 1) return all;
  std::vector<Composition> out;
  for (size_t i = 0; i < all.size(); i += static_cast<size_t>(it->second)) out.push_back(all[i]);
  if ((all.size() - 1) % static_cast<size_t>(it->second) != 0) out.push_back(all.back());
  return out;
}

namespace {

void parse_compositions(const json& c, const std::string& origin, Grid& g) {
  const std::string cw = origin + ": compositions";
  only_keys(c, {"prefill", "decode", "mixed"}, cw);
  if (c.contains("prefill")) {
    only_keys(c.at("prefill"), {"chunk", "context"}, cw + ".prefill");
    g.prefill_chunk = int_list(c.at("prefill"), "chunk", cw + ".prefill");
    g.prefill_context = int_list(c.at("prefill"), "context", cw + ".prefill", true);
  }
  if (c.contains("decode")) {
    only_keys(c.at("decode"), {"batch", "context"}, cw + ".decode");
    g.decode_batch = int_list(c.at("decode"), "batch", cw + ".decode");
    g.decode_context = int_list(c.at("decode"), "context", cw + ".decode");
  }
  if (!c.contains("mixed")) return;
  if (!c.at("mixed").is_array()) DOOLY_THROW(InputError, kFix, "{}.mixed: must be a list", cw);
  for (size_t i = 0; i < c.at("mixed").size(); ++i) {
    const json& m = c.at("mixed")[i];
    const std::string mw = fmt::format("{}.mixed[{}]", cw, i);
    only_keys(m, {"decodes", "decode_context", "chunk", "chunk_context"}, mw);
    for (const char* k : {"decodes", "decode_context", "chunk", "chunk_context"})
      if (!m.contains(k)) DOOLY_THROW(InputError, kFix, "{}: missing field '{}'", mw, k);
    g.mixed.push_back({positive(m.at("decodes"), mw + ".decodes"),
                       positive(m.at("decode_context"), mw + ".decode_context"), positive(m.at("chunk"), mw + ".chunk"),
                       positive(m.at("chunk_context"), mw + ".chunk_context", true)});
  }
}

// An object of op class -> value, each checked by `one`.
template <typename F>
void by_class(const json& j, const char* key, const std::string& origin, F one) {
  if (!j.contains(key)) return;
  const json& c = j.at(key);
  if (!c.is_object()) DOOLY_THROW(InputError, kFix, "{}: {} must be an object keyed by op class", origin, key);
  for (const auto& [cls, v] : c.items()) one(cls, v, fmt::format("{}: {}.{}", origin, key, utf8::echo(cls)));
}

void parse_moe(const json& m, const std::string& origin, MoeRouting& r) {
  const std::string mw = origin + ": moe";
  only_keys(m, {"tokens", "experts", "skew"}, mw);
  r.tokens = int_list(m, "tokens", mw);
  if (m.contains("experts")) r.experts = int_list(m, "experts", mw);
  if (m.contains("skew")) {
    const json& v = m.at("skew");
    if (!v.is_array() || v.empty()) DOOLY_THROW(InputError, kFix, "{}.skew: must be a non-empty list", mw);
    for (size_t i = 0; i < v.size(); ++i) {
      // Stored in the point key as an integer percent: 0.01 steps, up to 10 (a share ~ 1/(i+1)^10 is one expert).
      const double s = v[i].is_number() ? v[i].get<double>() : -1;
      const double pct = std::round(s * 100);
      if (!(s > 0 && s <= 10) || std::abs(pct - s * 100) > 1e-6)
        DOOLY_THROW(InputError, kFix, "{}.skew[{}]: must be a number in (0, 10] in steps of 0.01 (got {})", mw, i,
                    v[i].dump());
      r.skew_percent.push_back(static_cast<int64_t>(pct));
    }
  }
  if (r.experts.empty() && r.skew_percent.empty())
    DOOLY_THROW(InputError, kFix, "{}: give 'experts' (forced routing), 'skew' (skewed routing) or both", mw);
}

void parse_measure(const json& m, const std::string& origin, MeasureSettings& s) {
  const std::string mw = origin + ": measure";
  only_keys(m,
            {"warmup_s", "min_time_s", "max_time_s", "min_reps", "rel_ci", "point_timeout_s", "settle_s",
             "settle_min_latency_s", "capped_settle_s", "settle_carry_gap_s", "inputs"},
            mw);
  s.warmup_s = number(m, "warmup_s", s.warmup_s, mw, 0, 60);
  s.min_time_s = number(m, "min_time_s", s.min_time_s, mw, 0, 600);
  s.max_time_s = number(m, "max_time_s", s.max_time_s, mw, 0, 3600);
  s.min_reps = m.contains("min_reps") ? positive(m.at("min_reps"), mw + ".min_reps") : s.min_reps;
  s.rel_ci = number(m, "rel_ci", s.rel_ci, mw, 1e-4, 1);
  s.point_timeout_s = number(m, "point_timeout_s", s.point_timeout_s, mw, 1, 86400);
  s.settle_s = number(m, "settle_s", s.settle_s, mw, 0, 60);
  s.settle_min_latency_s = number(m, "settle_min_latency_s", s.settle_min_latency_s, mw, 0, 60);
  s.capped_settle_s = number(m, "capped_settle_s", s.capped_settle_s, mw, 0, 60);
  s.settle_carry_gap_s = number(m, "settle_carry_gap_s", s.settle_carry_gap_s, mw, 0, 60);
  if (m.contains("inputs")) {
    const json& v = m.at("inputs");
    if (!v.is_string() || (v.get<std::string>() != "warm" && v.get<std::string>() != "cycled"))
      DOOLY_THROW(InputError, kFix, "{}.inputs must be \"warm\" or \"cycled\", not {}", mw, utf8::echo(v.dump()));
    s.inputs = v.get<std::string>();
  }
  if (s.capped_settle_s < s.settle_s)
    DOOLY_THROW(InputError, kFix, "{}: capped_settle_s {} is below settle_s {}", mw, s.capped_settle_s, s.settle_s);
  if (s.max_time_s < s.min_time_s)
    DOOLY_THROW(InputError, kFix, "{}: max_time_s {} is below min_time_s {}", mw, s.max_time_s, s.min_time_s);
}

}  // namespace

Grid parse_grid(const json& j, const std::string& origin) {
  only_keys(j,
            {"version", "comment", "tokens", "tokens_by_class", "requests", "compositions",
             "composition_stride_by_class", "moe", "bounds", "measure"},
            origin);
  if (!j.contains("version") || !j.at("version").is_number_integer() || j.at("version").get<int>() != kGridVersion)
    DOOLY_THROW(InputError, kFix, "{}: grid file version {} is not supported (this build reads version {})", origin,
                j.contains("version") ? j.at("version").dump() : "(missing)", kGridVersion);
  Grid g;
  g.origin = origin;
  g.tokens = int_list(j, "tokens", origin);
  g.requests = int_list(j, "requests", origin);
  by_class(j, "tokens_by_class", origin, [&](const std::string& cls, const json&, const std::string&) {
    g.tokens_by_class[cls] = int_list(j.at("tokens_by_class"), cls, origin + ": tokens_by_class");
  });
  by_class(j, "composition_stride_by_class", origin,
           [&](const std::string& cls, const json& v, const std::string& where) {
             g.composition_stride_by_class[cls] = positive(v, where);
           });
  if (!j.contains("compositions")) DOOLY_THROW(InputError, kFix, "{}: missing field 'compositions'", origin);
  parse_compositions(j.at("compositions"), origin, g);
  if (j.contains("bounds")) {
    const json& b = j.at("bounds");
    only_keys(b, {"max_tokens", "max_kv_tokens"}, origin + ": bounds");
    if (b.contains("max_tokens"))
      g.max_tokens = positive(b.at("max_tokens"), origin + ": bounds.max_tokens", false, kMaxStep);
    if (b.contains("max_kv_tokens"))
      g.max_kv_tokens = positive(b.at("max_kv_tokens"), origin + ": bounds.max_kv_tokens");
  }
  if (j.contains("measure")) parse_measure(j.at("measure"), origin, g.measure);
  if (j.contains("moe")) parse_moe(j.at("moe"), origin, g.moe);
  for (size_t i = 0; i < g.requests.size(); ++i)
    if (g.requests[i] > g.max_tokens)
      DOOLY_THROW(InputError, kFix, "{}: requests[{}] = {} exceeds bounds.max_tokens {} (a decode is one token)",
                  origin, i, g.requests[i], g.max_tokens);
  // Every composition is built as a list of request slices: bound their number before anything builds them.
  int64_t slices = static_cast<int64_t>(g.prefill_chunk.size() * g.prefill_context.size());
  for (int64_t b : g.decode_batch) slices += std::min(b, g.max_tokens) * static_cast<int64_t>(g.decode_context.size());
  for (const MixedPoint& m : g.mixed) slices += std::min(m.decodes, g.max_tokens) + 1;
  if (slices > (int64_t{1} << 22))
    DOOLY_THROW(InputError, kFix,
                "{}: compositions: {} request slices in all, more than 2^22 (fewer or smaller points)", origin, slices);
  if (g.prefill_chunk.empty() && g.decode_batch.empty() && g.mixed.empty())
    DOOLY_THROW(InputError, kFix, "{}: compositions: at least one of prefill, decode, mixed is needed", origin);
  if (g.compositions().empty())
    DOOLY_THROW(InputError, kFix, "{}: every composition exceeds the bounds (max_tokens {}, max_kv_tokens {})", origin,
                g.max_tokens, g.max_kv_tokens);
  return g;
}

Grid read_grid(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    DOOLY_THROW(InputError, "check the path, or leave --grid out for data/grids/default.json",
                "cannot open grid file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  json j;
  try {
    j = json::parse(bytes);
  } catch (const json::exception& e) {
    DOOLY_THROW(InputError, kFix, "grid file '{}' is not valid JSON ({})", path, e.what());
  }
  Grid g = parse_grid(j, path);
  g.sha256 = signature::sha256_hex(bytes);
  return g;
}

json measure_json(const MeasureSettings& m) {
  return {{"warmup_s", m.warmup_s},
          {"min_time_s", m.min_time_s},
          {"max_time_s", m.max_time_s},
          {"min_reps", m.min_reps},
          {"rel_ci", m.rel_ci},
          {"point_timeout_s", m.point_timeout_s},
          {"settle_s", m.settle_s},
          {"settle_min_latency_s", m.settle_min_latency_s},
          {"capped_settle_s", m.capped_settle_s},
          {"settle_carry_gap_s", m.settle_carry_gap_s},
          {"inputs", m.inputs}};
}

}  // namespace dooly::plan
