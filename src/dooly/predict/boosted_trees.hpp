#pragma once
// Gradient-boosted regression trees (gbt): an ensemble of depth-2 trees fitted in turn to the residuals of the
// logarithm of the value (so errors are relative), each shrunk by a learning rate. No sampling, so the fit is
// deterministic (the same points give the same trees); splits are midpoints between measured values. Piecewise
// constant: between and beyond the measured points it holds the nearest leaf's value. It wins where a cost steps
// (tile quantisation of a GEMM, a kernel switch at a size) more than any smooth candidate follows.
#include "dooly/predict/model.hpp"

namespace dooly::predict {

struct BoostingOptions {
  int rounds = 40;
  double learning_rate = 0.3;
  size_t min_points = 4;  // fewer: the candidate declines
};

Candidate boosted_trees_candidate(BoostingOptions options = {});

}  // namespace dooly::predict
