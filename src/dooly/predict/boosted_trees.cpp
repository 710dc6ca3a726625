#include "dooly/predict/boosted_trees.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dooly/predict/json_numbers.hpp"

namespace dooly::predict {
namespace {

constexpr std::string_view kName = "gbt";

// A depth-2 tree: the root splits on (feature[0], threshold[0]); its left child on (feature[1], threshold[1]), its
// right child on (feature[2], threshold[2]); feature -1 = no split there (both of that side's leaves are equal).
// Leaves, left to right, already shrunk by the learning rate.
struct Tree {
  std::array<int, 3> feature{-1, -1, -1};
  std::array<double, 3> threshold{};
  std::array<double, 4> leaf{};

  double evaluate(std::span<const double> x) const noexcept {
    const size_t side = x[static_cast<size_t>(feature[0])] <= threshold[0] ? 0 : 1;
    const int f = feature[1 + side];
    const size_t below = f < 0 || x[static_cast<size_t>(f)] <= threshold[1 + side] ? 0 : 1;
    return leaf[2 * side + below];
  }
};

struct Split {
  int feature = -1;
  double threshold = 0;
  double left = 0, right = 0;  // mean residual on each side
  double sse = 0;              // after the split
};

double mean(const std::vector<size_t>& rows, const std::vector<double>& r) {
  double sum = 0;
  for (size_t i : rows) sum += r[i];
  return rows.empty() ? 0 : sum / static_cast<double>(rows.size());
}

// The split of `rows` that leaves the least squared error of the residuals, or feature -1 when none separates them.
Split best_split(const Samples& s, const std::vector<size_t>& rows, const std::vector<double>& r) {
  Split best;
  best.sse = std::numeric_limits<double>::infinity();
  std::vector<size_t> order = rows;
  for (size_t f = 0; f < s.dims; ++f) {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.at(a, f) < s.at(b, f); });
    double total = 0, total_sq = 0;
    for (size_t i : order) total += r[i], total_sq += r[i] * r[i];
    double left = 0, left_sq = 0;
    for (size_t k = 0; k + 1 < order.size(); ++k) {
      left += r[order[k]], left_sq += r[order[k]] * r[order[k]];
      const double here = s.at(order[k], f), next = s.at(order[k + 1], f);
      if (here == next) continue;
      const auto nl = static_cast<double>(k + 1), nr = static_cast<double>(order.size() - k - 1);
      const double right = total - left;
      const double sse = (left_sq - left * left / nl) + (total_sq - left_sq - right * right / nr);
      if (sse < best.sse - 1e-15) best = {static_cast<int>(f), (here + next) / 2, left / nl, right / nr, sse};
    }
  }
  return best;
}

// One side of the root: its own split into two leaves, or one leaf twice.
void grow_child(const Samples& s, const std::vector<size_t>& rows, const std::vector<double>& r, double rate,
                Tree& tree, size_t side) {
  const Split split = rows.size() >= 2 ? best_split(s, rows, r) : Split{};
  tree.feature[1 + side] = split.feature;
  tree.threshold[1 + side] = compact(split.threshold);
  const double lo = split.feature < 0 ? mean(rows, r) : split.left, hi = split.feature < 0 ? lo : split.right;
  tree.leaf[2 * side] = compact(rate * lo);
  tree.leaf[2 * side + 1] = compact(rate * hi);
}

// The ensemble is piecewise constant on the grid its thresholds cut each quantity into, so it is compiled into a
// table over the grid's cells: an evaluation is one binary search per quantity and a lookup, whatever the number of
// trees (when the grid has at most kMaxCells cells; else the trees are walked).
constexpr size_t kMaxCells = size_t{1} << 16;

class BoostedTrees final : public Model {
 public:
  BoostedTrees(size_t dims, double base, std::vector<Tree> trees) : dims_(dims), base_(base), trees_(std::move(trees)) {
    compile();
  }
  std::string_view name() const noexcept override { return kName; }
  double evaluate(std::span<const double> x) const noexcept override {
    if (table_.empty()) return walk(x);
    size_t cell = 0;
    for (size_t d = 0; d < dims_; ++d) {
      const auto& c = cuts_[d];
      cell = cell * (c.size() + 1) + static_cast<size_t>(std::lower_bound(c.begin(), c.end(), x[d]) - c.begin());
    }
    return table_[cell];
  }
  nlohmann::json params() const override {
    nlohmann::json trees = nlohmann::json::array();
    for (const Tree& t : trees_)
      trees.push_back({t.feature[0], t.threshold[0], t.feature[1], t.threshold[1], t.feature[2], t.threshold[2],
                       t.leaf[0], t.leaf[1], t.leaf[2], t.leaf[3]});
    return {{"dims", dims_}, {"base", base_}, {"trees", trees}};
  }

 private:
  double walk(std::span<const double> x) const noexcept {
    double v = base_;
    for (const Tree& t : trees_) v += t.evaluate(x);
    return std::exp(v);
  }

  void compile() {
    cuts_.assign(dims_, {});
    for (const Tree& t : trees_)
      for (size_t k = 0; k < 3; ++k)
        if (t.feature[k] >= 0) cuts_[static_cast<size_t>(t.feature[k])].push_back(t.threshold[k]);
    size_t cells = 1;
    for (auto& c : cuts_) {
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
      cells *= c.size() + 1;
      if (cells > kMaxCells) return;
    }
    // A representative of each cell: x <= cut[i] and above cut[i - 1] is cut[i] itself; beyond the last, last + 1.
    std::vector<double> x(dims_);
    table_.resize(cells);
    for (size_t cell = 0; cell < cells; ++cell) {
      size_t rest = cell;
      for (size_t d = dims_; d-- > 0;) {
        const auto& c = cuts_[d];
        const size_t i = rest % (c.size() + 1);
        rest /= c.size() + 1;
        x[d] = i < c.size() ? c[i] : (c.empty() ? 0.0 : c.back() + 1.0);
      }
      table_[cell] = walk(x);
    }
  }

  size_t dims_;
  double base_;
  std::vector<Tree> trees_;
  std::vector<std::vector<double>> cuts_;  // per quantity, the sorted thresholds
  std::vector<double> table_;              // per grid cell, row-major over the quantities
};

std::unique_ptr<Model> fit(const BoostingOptions& o, const Samples& s) {
  if (s.dims == 0 || s.rows() < o.min_points) return nullptr;
  if (std::any_of(s.y.begin(), s.y.end(), [](double v) { return v <= 0; })) return nullptr;
  std::vector<double> r(s.rows());
  for (size_t i = 0; i < s.rows(); ++i) r[i] = std::log(s.y[i]);
  const double base = compact(std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(r.size()));
  for (double& v : r) v -= base;
  std::vector<size_t> all(s.rows());
  std::iota(all.begin(), all.end(), 0);
  std::vector<Tree> trees;
  for (int round = 0; round < o.rounds; ++round) {
    const Split root = best_split(s, all, r);
    if (root.feature < 0) break;
    Tree tree;
    tree.feature[0] = root.feature;
    tree.threshold[0] = compact(root.threshold);
    std::vector<size_t> left, right;
    for (size_t i : all) (s.at(i, static_cast<size_t>(root.feature)) <= tree.threshold[0] ? left : right).push_back(i);
    grow_child(s, left, r, o.learning_rate, tree, 0);
    grow_child(s, right, r, o.learning_rate, tree, 1);
    double change = 0;
    for (size_t i : all) {
      const double step = tree.evaluate(s.row(i));
      r[i] -= step;
      change += step * step;
    }
    trees.push_back(tree);
    if (change < 1e-18) break;  // nothing left to explain
  }
  return std::make_unique<BoostedTrees>(s.dims, base, std::move(trees));
}

std::unique_ptr<Model> load(const nlohmann::json& params) {
  const char* fix = "refit the store's predictors (`dooly predict fit --db FILE`)";
  if (!params.is_object() || !params.contains("trees") || !params["trees"].is_array() || !params.contains("base"))
    DOOLY_THROW(InputError, fix, "gbt parameters lack base or trees: '{}'", params.dump().substr(0, 120));
  const size_t dims = params.value("dims", size_t{0});
  std::vector<Tree> trees;
  for (const auto& t : params["trees"]) {
    if (!t.is_array() || t.size() != 10)
      DOOLY_THROW(InputError, fix, "gbt tree '{}' is not 10 numbers", t.dump().substr(0, 80));
    Tree tree;
    for (size_t k = 0; k < 3; ++k) {
      tree.feature[k] = t[2 * k].get<int>();
      tree.threshold[k] = t[2 * k + 1].get<double>();
      if (tree.feature[k] >= static_cast<int>(dims) || (k == 0 && tree.feature[k] < 0))
        DOOLY_THROW(InputError, fix, "gbt tree '{}' splits on a quantity it does not have", t.dump().substr(0, 80));
    }
    for (size_t k = 0; k < 4; ++k) tree.leaf[k] = t[6 + k].get<double>();
    trees.push_back(tree);
  }
  return std::make_unique<BoostedTrees>(dims, params["base"].get<double>(), std::move(trees));
}

}  // namespace

Candidate boosted_trees_candidate(BoostingOptions options) {
  return {std::string(kName), [options](const Samples& s) { return fit(options, s); },
          [](const nlohmann::json& p) { return load(p); }};
}

}  // namespace dooly::predict
