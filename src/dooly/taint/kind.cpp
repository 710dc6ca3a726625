#include "dooly/taint/kind.hpp"

#include "dooly/common/error.hpp"

namespace dooly::taint {
namespace {

// Each kind maps to a point of a product lattice with three axes: config (absent < present),
// tokens (absent < limit < scheduled) and requests (same). combine() is the join of the two points,
// mapped back: no axis -> NONE, one axis -> that kind, two or more -> MIX. MIX maps to "every axis
// scheduled" and UNKNOWN is the top. Because every point with >= 2 axes maps to MIX and back to a point
// with >= 2 axes, combine stays associative although MIX forgets which axes it holds.
struct Point {
  bool unknown = false;
  bool config = false;
  uint8_t toks = 0;  // 0 absent, 1 limit, 2 scheduled
  uint8_t reqs = 0;
};

Point to_point(Kind k) noexcept {
  switch (k) {
    case Kind::none:
      return {};
    case Kind::model_config:
      return {false, true, 0, 0};
    case Kind::num_toks:
      return {false, false, 2, 0};
    case Kind::num_reqs:
      return {false, false, 0, 2};
    case Kind::max_num_toks:
      return {false, false, 1, 0};
    case Kind::max_num_reqs:
      return {false, false, 0, 1};
    case Kind::mix:
      return {false, true, 2, 2};
    case Kind::unknown:
      return {true, false, 0, 0};
  }
  return {true, false, 0, 0};
}

Kind from_point(Point p) noexcept {
  if (p.unknown) return Kind::unknown;
  const int axes = int(p.config) + int(p.toks != 0) + int(p.reqs != 0);
  if (axes == 0) return Kind::none;
  if (axes > 1) return Kind::mix;
  if (p.config) return Kind::model_config;
  if (p.toks) return p.toks == 1 ? Kind::max_num_toks : Kind::num_toks;
  return p.reqs == 1 ? Kind::max_num_reqs : Kind::num_reqs;
}

}  // namespace

std::string_view to_string(Kind k) noexcept {
  switch (k) {
    case Kind::none:
      return "NONE";
    case Kind::model_config:
      return "MODEL_CONFIG";
    case Kind::num_toks:
      return "NUM_TOKS";
    case Kind::num_reqs:
      return "NUM_REQS";
    case Kind::max_num_toks:
      return "MAX_NUM_TOKS";
    case Kind::max_num_reqs:
      return "MAX_NUM_REQS";
    case Kind::mix:
      return "MIX";
    case Kind::unknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

Kind kind_from_string(std::string_view s) {
  for (Kind k : kAllKinds)
    if (to_string(k) == s) return k;
  DOOLY_THROW(InputError, "use one of NONE, MODEL_CONFIG, NUM_TOKS, NUM_REQS, MAX_NUM_TOKS, MAX_NUM_REQS, MIX, UNKNOWN",
              "'{}' is not a taint kind", s);
}

Kind combine(Kind a, Kind b) noexcept {
  const Point x = to_point(a), y = to_point(b);
  Point z;
  z.unknown = x.unknown || y.unknown;
  z.config = x.config || y.config;
  z.toks = x.toks > y.toks ? x.toks : y.toks;
  z.reqs = x.reqs > y.reqs ? x.reqs : y.reqs;
  return from_point(z);
}

Kind bound_by(Kind k) noexcept {
  if (k == Kind::max_num_toks) return Kind::num_toks;
  if (k == Kind::max_num_reqs) return Kind::num_reqs;
  return k;
}

bool varies_with_requests(Kind k) noexcept { return k == Kind::num_toks || k == Kind::num_reqs || k == Kind::mix; }

bool hashed_by_value(Kind k) noexcept { return k == Kind::none || k == Kind::model_config; }

}  // namespace dooly::taint
