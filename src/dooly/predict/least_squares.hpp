#pragma once
// Low-order least squares over features of the free quantities, roofline-informed: a unit's cost is a fixed part
// (launch, the weights it streams) plus parts that grow with the work, so every coefficient is non-negative and the
// fit minimises the *relative* error, sum(((f(x) - y) / y)^2), as the held-out MAPE that selects it does.
//
//   ls_linear   1, x_1, ..., x_d                       (any number of quantities; the engine's host cost)
//   ls_product  1, x, x^2 (one quantity: prefill attention, whose KV_TOKS is NUM_TOKS)
//               1, T, KV, T*KV (two: attention over new tokens x KV tokens)
//
// The non-negative solution is exact: every subset of the (at most five) features is solved unconstrained, and the
// best subset whose coefficients are all >= 0 wins. Declines with fewer points than features.
#include <span>
#include <vector>

#include "dooly/predict/model.hpp"

namespace dooly::predict {

enum class FeatureSet { linear, product };

Candidate least_squares_candidate(FeatureSet features);

// min ||W (A c - y)||^2 subject to c >= 0, with W = diag(1 / y): A is rows x cols, row-major. Exposed for tests.
// Empty when no subset of columns has a non-negative solution of full rank.
std::vector<double> nonnegative_relative_fit(std::span<const double> a, size_t cols, std::span<const double> y);

}  // namespace dooly::predict
