#include "dooly/predict/selection.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dooly/common/error.hpp"

namespace dooly::predict {
namespace {

uint64_t splitmix64(uint64_t& state) noexcept {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct Fold {
  std::vector<size_t> train, test;
  std::vector<double> lo, hi;  // the training points' range per free quantity
};

std::vector<Fold> make_folds(const Samples& s, const CrossValidation& cv) {
  const std::vector<size_t> of = assign_folds(s.rows(), cv);
  const size_t k = of.empty() ? 0 : *std::max_element(of.begin(), of.end()) + 1;
  std::vector<Fold> folds(k);
  for (size_t i = 0; i < s.rows(); ++i)
    for (size_t f = 0; f < k; ++f) (of[i] == f ? folds[f].test : folds[f].train).push_back(i);
  for (Fold& f : folds) {
    f.lo.assign(s.dims, INFINITY);
    f.hi.assign(s.dims, -INFINITY);
    for (size_t i : f.train)
      for (size_t d = 0; d < s.dims; ++d)
        f.lo[d] = std::min(f.lo[d], s.at(i, d)), f.hi[d] = std::max(f.hi[d], s.at(i, d));
  }
  return folds;
}

bool interior(const Samples& s, size_t i, const Fold& f) {
  for (size_t d = 0; d < s.dims; ++d)
    if (s.at(i, d) < f.lo[d] || s.at(i, d) > f.hi[d]) return false;
  return true;
}

void score_fold(const Candidate& c, const Samples& s, std::span<const PointKind> kinds, const Fold& fold,
                CandidateScore& score) {
  const std::unique_ptr<Model> m = fold.train.empty() ? nullptr : c.fit(s.subset(fold.train));
  for (size_t i : fold.test) {
    double error = 1.0;  // declined: as bad as predicting nothing
    if (m) {
      const double pred = m->evaluate(s.row(i));
      error = std::isfinite(pred) ? std::abs(pred - s.y[i]) / s.y[i] : 1.0;
    }
    const auto kind = static_cast<size_t>(kinds[i]);
    score.all_by_kind[kind].add(error);
    if (interior(s, i, fold)) {
      score.interior.add(error);
      score.interior_by_kind[kind].add(error);
    } else {
      score.extrapolated.add(error);
    }
  }
}

double basis_error(const CandidateScore& s, bool interior_basis) {
  ErrorTally t = s.interior;
  if (!interior_basis) t.add(s.extrapolated);
  return t.mape().value_or(INFINITY);
}

}  // namespace

std::vector<size_t> assign_folds(size_t n, const CrossValidation& cv) {
  std::vector<size_t> of(n);
  if (n <= cv.loo_up_to || n <= cv.folds) {
    std::iota(of.begin(), of.end(), size_t{0});
    return of;
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  uint64_t state = cv.seed;
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[splitmix64(state) % (i + 1)]);  // Fisher-Yates
  for (size_t r = 0; r < n; ++r) of[order[r]] = r % cv.folds;
  return of;
}

Selection select_model(const Samples& samples, std::span<const PointKind> kinds, const CandidateRegistry& registry,
                       const CrossValidation& cv) {
  Selection out;
  std::vector<std::unique_ptr<Model>> full;
  for (const Candidate& c : registry.all()) {
    CandidateScore score;
    score.name = c.name;
    full.push_back(c.fit(samples));
    score.applicable = full.back() != nullptr;
    out.scores.push_back(std::move(score));
  }
  if (samples.rows() >= 2) {
    const std::vector<Fold> folds = make_folds(samples, cv);
    for (size_t c = 0; c < registry.all().size(); ++c)
      if (out.scores[c].applicable)
        for (const Fold& f : folds) score_fold(registry.all()[c], samples, kinds, f, out.scores[c]);
  }
  out.interior_basis =
      std::any_of(out.scores.begin(), out.scores.end(), [](const auto& s) { return s.interior.n > 0; });
  double best = INFINITY;
  bool found = false;
  for (size_t c = 0; c < out.scores.size(); ++c) {
    if (!out.scores[c].applicable) continue;
    const double e = samples.rows() >= 2 ? basis_error(out.scores[c], out.interior_basis) : 0.0;
    if (!found || e < best - 1e-12 * std::max(1.0, best)) {
      best = e;
      out.chosen = c;
      found = true;
    }
  }
  if (!found)
    DOOLY_THROW(InputError, "a signature needs at least one measured point with a positive value",
                "no predictor candidate fits these {} points", samples.rows());
  out.model = std::move(full[out.chosen]);
  if (samples.rows() >= 2) out.held_out_mape = best;
  return out;
}

}  // namespace dooly::predict
