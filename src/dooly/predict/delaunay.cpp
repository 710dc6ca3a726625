#include "dooly/predict/delaunay.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace dooly::predict {
namespace {

struct Vertex {
  double x = 0, y = 0;
  double lift = 0;  // x^2 + y^2, plus the tie-breaking perturbation
};

double orient(const Vertex& a, const Vertex& b, const Vertex& c) noexcept {
  return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
}

// > 0 when d lies inside the circle through the counter-clockwise triangle (a, b, c), on the lifted (perturbed)
// paraboloid: the sign of the 3x3 determinant of the differences to d.
double in_circle(const Vertex& a, const Vertex& b, const Vertex& c, const Vertex& d) noexcept {
  const double adx = a.x - d.x, ady = a.y - d.y, adl = a.lift - d.lift;
  const double bdx = b.x - d.x, bdy = b.y - d.y, bdl = b.lift - d.lift;
  const double cdx = c.x - d.x, cdy = c.y - d.y, cdl = c.lift - d.lift;
  return adx * (bdy * cdl - bdl * cdy) - ady * (bdx * cdl - bdl * cdx) + adl * (bdx * cdy - bdy * cdx);
}

using Edge = std::pair<int, int>;

// The edges of the cavity's boundary: those of the bad triangles that only one of them has.
std::vector<Edge> cavity_boundary(const std::vector<std::array<int, 3>>& bad) {
  std::vector<Edge> edges;
  for (const auto& t : bad)
    for (int e = 0; e < 3; ++e) edges.emplace_back(t[e], t[(e + 1) % 3]);
  std::vector<Edge> boundary;
  for (const Edge& e : edges) {
    const bool shared = std::any_of(edges.begin(), edges.end(),
                                    [&](const Edge& o) { return o.first == e.second && o.second == e.first; });
    if (!shared) boundary.push_back(e);
  }
  return boundary;
}

}  // namespace

std::vector<std::array<int, 3>> delaunay_triangles(std::span<const std::array<double, 2>> points) {
  const int n = static_cast<int>(points.size());
  if (n < 3) return {};
  // Scale into the unit square so the super triangle and the perturbation mean the same for any input.
  double lo_x = points[0][0], hi_x = lo_x, lo_y = points[0][1], hi_y = lo_y;
  for (const auto& p : points) {
    lo_x = std::min(lo_x, p[0]), hi_x = std::max(hi_x, p[0]);
    lo_y = std::min(lo_y, p[1]), hi_y = std::max(hi_y, p[1]);
  }
  const double sx = hi_x > lo_x ? hi_x - lo_x : 1.0, sy = hi_y > lo_y ? hi_y - lo_y : 1.0;
  std::vector<int> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::sort(rank.begin(), rank.end(), [&](int a, int b) { return points[a] < points[b]; });
  std::vector<Vertex> v(n + 3);
  for (int r = 0; r < n; ++r) {
    const int i = rank[r];
    const double x = (points[i][0] - lo_x) / sx, y = (points[i][1] - lo_y) / sy;
    v[i] = {x, y, x * x + y * y + 1e-10 * (r + 1)};
  }
  constexpr double R = 100.0;
  // The super triangle, counter-clockwise, far around the unit square.
  const std::array<std::array<double, 2>, 3> super{
      {{0.5 - 0.8660254037844386 * R, 0.5 - 0.5 * R}, {0.5 + 0.8660254037844386 * R, 0.5 - 0.5 * R}, {0.5, 0.5 + R}}};
  for (int s = 0; s < 3; ++s)
    v[n + s] = {super[s][0], super[s][1], super[s][0] * super[s][0] + super[s][1] * super[s][1]};

  std::vector<std::array<int, 3>> tris{{n, n + 1, n + 2}};
  for (int r = 0; r < n; ++r) {  // insert in lexicographic order: the same result for any input order
    const int p = rank[r];
    std::vector<std::array<int, 3>> bad, keep;
    for (const auto& t : tris) (in_circle(v[t[0]], v[t[1]], v[t[2]], v[p]) > 0 ? bad : keep).push_back(t);
    for (const Edge& e : cavity_boundary(bad))
      if (orient(v[e.first], v[e.second], v[p]) > -1e-15) keep.push_back({e.first, e.second, p});
    tris = std::move(keep);
  }
  std::vector<std::array<int, 3>> out;
  for (const auto& t : tris) {
    const bool real = t[0] < n && t[1] < n && t[2] < n;
    if (real && orient(v[t[0]], v[t[1]], v[t[2]]) > 1e-14) out.push_back(t);
  }
  for (auto& t : out) std::rotate(t.begin(), std::min_element(t.begin(), t.end()), t.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dooly::predict
