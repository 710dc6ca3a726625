#pragma once
// `dooly profile --report`: what the store holds for a plan's units under its measurement context — coverage of the
// op occurrences by measured units, points by status, the GPU time the measurements took (each point's wall time
// as the worker recorded it), per op class, and every uncovered signature with its reason.
#include <string>

#include "dooly/plan/plan.hpp"
#include "dooly/store/store.hpp"

namespace dooly::plan {

std::string render_report(store::Store& store, const Plan& plan);

}  // namespace dooly::plan
