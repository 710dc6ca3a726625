#pragma once
// The constant candidate: the median of the measured values. The one model of a signature measured at a single
// point (or with no swept quantity), and the baseline every other candidate must beat on held-out points.
#include "dooly/predict/model.hpp"

namespace dooly::predict {

Candidate constant_candidate();

}  // namespace dooly::predict
