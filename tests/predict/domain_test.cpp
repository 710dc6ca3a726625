// The measured region: aliases collapse tied quantities, ranges and the 2-D hull flag what lies outside.
#include "dooly/predict/domain.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "dooly/common/error.hpp"

namespace dooly::predict {
namespace {

bool inside(const Domain& d, std::vector<double> x) {
  double free[max_quantities];
  return d.reduce(x, std::span<double>(free, max_quantities));
}

TEST(Domain, PrefillAttentionAlongTheDiagonalIsOneQuantity) {
  // KV_TOKS == NUM_TOKS on every point (a prefill step without cache reads).
  const std::vector<double> x{16, 16, 64, 64, 256, 256, 1024, 1024, 4096, 4096};
  const Domain d = Domain::of_points({"KV_TOKS", "NUM_TOKS"}, x, 5);
  EXPECT_EQ(d.free_dims(), 1u);
  ASSERT_EQ(d.aliases().size(), 1u);
  EXPECT_EQ(d.aliases()[0].dim, 1u);
  EXPECT_EQ(d.aliases()[0].scale, 1.0);
  EXPECT_TRUE(inside(d, {100, 100}));
  EXPECT_FALSE(inside(d, {100, 50}));     // off the diagonal: a mixed step's attention, not measured
  EXPECT_FALSE(inside(d, {8192, 8192}));  // beyond the range
  EXPECT_FALSE(inside(d, {8, 8}));
  double free[max_quantities];
  d.reduce(std::vector<double>{300, 300}, std::span<double>(free, max_quantities));
  EXPECT_EQ(free[0], 300);
}

TEST(Domain, ConstantQuantityIsFixed) {
  const Domain d = Domain::of_points({"NUM_REQS", "NUM_TOKS"}, std::vector<double>{1, 16, 1, 64, 1, 256}, 3);
  EXPECT_EQ(d.free_dims(), 1u);
  EXPECT_TRUE(inside(d, {1, 100}));
  EXPECT_FALSE(inside(d, {2, 100}));
}

TEST(Domain, TwoFreeQuantitiesAreCheckedAgainstTheHull) {
  // Decode batches and prefill chunks: KV >= T; (T = 1000, KV = 200) is inside both ranges but outside the hull.
  const std::vector<double> x{1, 129, 1, 16385, 16, 16, 1024, 1024, 1024, 17408, 64, 65600};
  const Domain d = Domain::of_points({"NUM_TOKS", "KV_TOKS"}, x, 6);
  EXPECT_EQ(d.free_dims(), 2u);
  EXPECT_TRUE(inside(d, {100, 5000}));
  EXPECT_TRUE(inside(d, {1, 129}));  // a corner
  EXPECT_FALSE(inside(d, {1000, 200}));
  EXPECT_FALSE(inside(d, {1, 70000}));
}

TEST(Domain, RoundTripsThroughJson) {
  const std::vector<double> x{1, 129, 1, 16385, 16, 16, 1024, 1024, 1024, 17408, 64, 65600};
  const Domain d = Domain::of_points({"NUM_TOKS", "KV_TOKS"}, x, 6);
  const Domain back = Domain::from_json(d.to_json());
  EXPECT_EQ(back.to_json(), d.to_json());
  for (const auto& q : std::vector<std::vector<double>>{{100, 5000}, {1000, 200}, {1, 70000}})
    EXPECT_EQ(inside(back, q), inside(d, q));
  EXPECT_THROW(Domain::from_json(nlohmann::json::object()), InputError);
  EXPECT_THROW(Domain::of_points({"A"}, std::vector<double>{}, 0), InputError);
}

}  // namespace
}  // namespace dooly::predict
