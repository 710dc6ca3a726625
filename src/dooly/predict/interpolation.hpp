#pragma once
// Interpolation on the measured points, in linear space (interp_linear) or in log-log space (interp_loglog: both the
// quantities and the value by their logarithm, so a power law t = a * T^b is a straight line).
//
// One free quantity: piecewise linear between the sorted points. Two (attention over NUM_TOKS x KV_TOKS): linear
// on the triangles of a Delaunay triangulation of the points (scaled to their ranges in the chosen space). On a
// rectilinear grid each grid line is made of triangle edges, so along a grid line it is the 1-D scheme; inside a
// grid cell it is linear on one of the cell's two triangles (not bilinear). Scattered points need no grid.
//
// Outside the points (flagged by the domain, never silently): clamp-and-scale. The value at the nearest point of the
// region (the end point in 1-D; in 2-D the nearest triangle's point closest to the query, the triangle whose
// smallest barycentric coordinate is largest) times the ratio of a trend between the query and that point; the
// trend is ls_linear's fit of all the points (non-negative, relative error), so the extension follows the measured
// growth without trusting one end segment's slope. Three or more free quantities: not applicable (the
// least-squares and tree candidates take those).
#include <array>
#include <memory>
#include <span>
#include <vector>

#include "dooly/predict/model.hpp"

namespace dooly::predict {

enum class InterpolationScale { linear, loglog };

Candidate interpolation_candidate(InterpolationScale scale);

}  // namespace dooly::predict
