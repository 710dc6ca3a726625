#pragma once
// A Delaunay triangulation of a few dozen points in the plane (Bowyer-Watson), for the 2-D interpolation of
// scattered sweep points (attention over NUM_TOKS x KV_TOKS). Points on a common circle (every cell of a
// rectilinear grid) are told apart by a fixed, tiny lift of each point's paraboloid height by its rank in
// lexicographic order, so the result is one triangulation, the same for any input order. On a rectilinear grid
// every grid line is made of triangle edges: interpolation along a grid line is the 1-D interpolation between its
// points. Collinear input has no triangle.
#include <array>
#include <span>
#include <vector>

namespace dooly::predict {

// Triangles as counter-clockwise index triples into `points`, sorted. Duplicate points are the caller's to remove.
std::vector<std::array<int, 3>> delaunay_triangles(std::span<const std::array<double, 2>> points);

}  // namespace dooly::predict
