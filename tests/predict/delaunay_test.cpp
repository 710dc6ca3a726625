// The triangulation behind the 2-D interpolation: a full grid is cut into two triangles a cell, the same for any
// input order; collinear points have none.
#include "dooly/predict/delaunay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

namespace dooly::predict {
namespace {

double area(const std::vector<std::array<double, 2>>& p, const std::array<int, 3>& t) {
  return 0.5 * ((p[t[1]][0] - p[t[0]][0]) * (p[t[2]][1] - p[t[0]][1]) -
                (p[t[1]][1] - p[t[0]][1]) * (p[t[2]][0] - p[t[0]][0]));
}

TEST(Delaunay, GridCellsAreTwoTrianglesEachAndCoverTheHull) {
  std::vector<std::array<double, 2>> p;
  for (double x : {0.0, 1.0, 3.0, 7.0})
    for (double y : {0.0, 2.0, 5.0}) p.push_back({x, y});
  const auto tris = delaunay_triangles(p);
  ASSERT_EQ(tris.size(), 2u * 3u * 2u);
  double total = 0;
  for (const auto& t : tris) {
    EXPECT_GT(area(p, t), 0);  // counter-clockwise, not degenerate
    total += area(p, t);
  }
  EXPECT_NEAR(total, 7.0 * 5.0, 1e-9);
  // Any input order: the same triangles (as point sets).
  std::vector<std::array<double, 2>> reversed(p.rbegin(), p.rend());
  auto as_points = [](const std::vector<std::array<double, 2>>& pts, std::vector<std::array<int, 3>> ts) {
    std::vector<std::array<std::array<double, 2>, 3>> out;
    for (const auto& t : ts) {
      std::array<std::array<double, 2>, 3> c{pts[t[0]], pts[t[1]], pts[t[2]]};
      std::sort(c.begin(), c.end());
      out.push_back(c);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(as_points(p, tris), as_points(reversed, delaunay_triangles(reversed)));
}

TEST(Delaunay, CollinearPointsHaveNoTriangle) {
  const std::vector<std::array<double, 2>> p{{0, 0}, {1, 1}, {2, 2}, {5, 5}};
  EXPECT_TRUE(delaunay_triangles(p).empty());
  EXPECT_TRUE(delaunay_triangles(std::vector<std::array<double, 2>>{{0, 0}, {1, 0}}).empty());
}

}  // namespace
}  // namespace dooly::predict
