// Losses on one rank against naive double-precision references written from their
// definitions: softmax cross-entropy (classification (N, K, 1, 1) and per-pixel
// (N, K, H, W)), accuracy and MSE — values and gradients on random inputs of odd sizes;
// the gradients against central finite differences of the loss; numerical stability for
// large logits; and bad input as a clear std::invalid_argument.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "layers/loss/loss.hpp"
#include "tests/layers/loss/loss_test_data.hpp"

namespace tessera::layers {
namespace {

using testing::DeviceLabels;
using testing::HostLabels;
using testing::max_abs_difference;
using testing::owned_labels;
using testing::owned_part;
using testing::random_global;
using testing::random_labels;

using testing::kClassifierShape;
using testing::kPixelShape;

// Rounding allowed between a loss computed in T and the double reference.
template <class T>
constexpr double kLossTolerance = sizeof(T) == 4 ? 1e-5 : 1e-12;

struct OneRank {
  ProcessGrid grid{MPI_COMM_SELF, {1, 1, 1}};
};

template <class T>
Tensor<T> tensor_holding(const ProcessGrid& grid, const HostArray<T>& global) {
  Tensor<T> t(grid, testing::shape_of_host(global), {}, "tensor");
  scatter(global, t, 0);
  return t;
}

template <class T>
class LossReference : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LossReference, ElementTypes);

TYPED_TEST(LossReference, CrossEntropyAndAccuracyMatchTheDefinition) {
  using T = TypeParam;
  OneRank one;
  for (const Shape4& shape : {kPixelShape, kClassifierShape}) {
    SCOPED_TRACE(testing::describe_shape(shape));
    const HostArray<T> x = random_global<T>(shape, 11);
    const HostLabels labels = random_labels(shape, 12);
    const testing::ReferenceLoss expected = testing::reference_cross_entropy(x, labels);

    const Tensor<T> logits = tensor_holding(one.grid, x);
    Tensor<T> dlogits(one.grid, shape);
    const DeviceLabels mine = owned_labels(labels, logits.owned_box());
    const ClassificationStats stats = classification_stats(logits, mine, dlogits);

    EXPECT_NEAR(stats.loss, expected.loss, kLossTolerance<T> * expected.loss);
    EXPECT_NEAR(stats.accuracy, expected.accuracy, 1e-12);
    EXPECT_LE(max_abs_difference(gather(dlogits), expected.grad), kLossTolerance<T> / static_cast<double>(shape[N]));
    // The single-purpose entry points give the same numbers.
    EXPECT_EQ(cross_entropy_loss(logits, mine), stats.loss);
    EXPECT_EQ(accuracy(logits, mine), stats.accuracy);
  }
}

TYPED_TEST(LossReference, IgnoredLabelsCountForNothing) {
  using T = TypeParam;
  OneRank one;
  const HostArray<T> x = random_global<T>(kPixelShape, 13);
  HostLabels labels = random_labels(kPixelShape, 14);
  for (std::size_t i = 0; i < labels.span(); i += 3) labels.data()[i] = kIgnoreLabel;
  const testing::ReferenceLoss expected = testing::reference_cross_entropy(x, labels);

  const Tensor<T> logits = tensor_holding(one.grid, x);
  Tensor<T> dlogits(one.grid, kPixelShape);
  const ClassificationStats stats = classification_stats(logits, owned_labels(labels, logits.owned_box()), dlogits);
  EXPECT_EQ(stats.cells, static_cast<double>(labels.span() - (labels.span() + 2) / 3));
  EXPECT_NEAR(stats.loss, expected.loss, kLossTolerance<T> * expected.loss);
  EXPECT_NEAR(stats.accuracy, expected.accuracy, 1e-12);
  EXPECT_LE(max_abs_difference(gather(dlogits), expected.grad), kLossTolerance<T> / static_cast<double>(kPixelShape[N]));
}

TYPED_TEST(LossReference, MseMatchesTheDefinition) {
  using T = TypeParam;
  OneRank one;
  const HostArray<T> y = random_global<T>(kPixelShape, 21);
  const HostArray<T> target = random_global<T>(kPixelShape, 22);
  const testing::ReferenceLoss expected = testing::reference_mse(y, target);

  const Tensor<T> out = tensor_holding(one.grid, y);
  Tensor<T> dy(one.grid, kPixelShape);
  const double loss = mse_loss(out, owned_part(target, out.owned_box()), dy);

  EXPECT_NEAR(loss, expected.loss, kLossTolerance<T> * expected.loss);
  EXPECT_LE(max_abs_difference(gather(dy), expected.grad), kLossTolerance<T>);
  // A target held as a tensor passes as its owned() view.
  const Tensor<T> target_tensor = tensor_holding(one.grid, target);
  EXPECT_EQ(mse_loss(out, target_tensor.owned()), loss);
}

// Central differences of the loss in double: checks the gradient's formula, including its
// 1 / (number of cells) scale, independently of the reference's algebra.
template <class LossOf>
double worst_finite_difference_error(HostArray<double> x, const HostArray<double>& analytic, LossOf&& loss_of) {
  constexpr double step = 1e-6;
  double worst = 0;
  for (std::size_t i = 0; i < x.span(); ++i) {
    const double saved = x.data()[i];
    x.data()[i] = saved + step;
    const double up = loss_of(x);
    x.data()[i] = saved - step;
    const double down = loss_of(x);
    x.data()[i] = saved;
    worst = std::max(worst, std::abs((up - down) / (2 * step) - analytic.data()[i]));
  }
  return worst;
}

TEST(LossGradient, CrossEntropyMatchesFiniteDifferences) {
  OneRank one;
  const Shape4 shape{3, 5, 3, 2};
  const HostArray<double> x = random_global<double>(shape, 31);
  const HostLabels labels = random_labels(shape, 32);
  const DeviceLabels mine = owned_labels(labels, Box::from_shape(shape));
  Tensor<double> dlogits(one.grid, shape);
  cross_entropy_loss(tensor_holding(one.grid, x), mine, dlogits);
  const double worst = worst_finite_difference_error(
      x, gather(dlogits), [&](const HostArray<double>& at) { return cross_entropy_loss(tensor_holding(one.grid, at), mine); });
  EXPECT_LT(worst, 1e-8);
}

TEST(LossGradient, MseMatchesFiniteDifferences) {
  OneRank one;
  const Shape4 shape{3, 2, 3, 5};
  const HostArray<double> y = random_global<double>(shape, 41);
  const auto target = owned_part(random_global<double>(shape, 42), Box::from_shape(shape));
  Tensor<double> dy(one.grid, shape);
  mse_loss(tensor_holding(one.grid, y), target, dy);
  const double worst = worst_finite_difference_error(
      y, gather(dy), [&](const HostArray<double>& at) { return mse_loss(tensor_holding(one.grid, at), target); });
  EXPECT_LT(worst, 1e-8);
}

TEST(LossStability, LargeLogitsGiveTheSameLossAsShiftedOnes) {
  // Softmax is invariant under adding a constant per cell; exp(1000) overflows a double,
  // so a loss that did not subtract the maximum would return inf or nan here.
  OneRank one;
  const HostArray<double> x = random_global<double>(kPixelShape, 51);
  HostArray<double> shifted("shifted", kPixelShape[N], kPixelShape[C], kPixelShape[H], kPixelShape[W]);
  for (std::size_t i = 0; i < x.span(); ++i) shifted.data()[i] = x.data()[i] + 1000.0;
  const DeviceLabels mine = owned_labels(random_labels(kPixelShape, 52), Box::from_shape(kPixelShape));
  Tensor<double> d_plain(one.grid, kPixelShape), d_shifted(one.grid, kPixelShape);
  const double plain = cross_entropy_loss(tensor_holding(one.grid, x), mine, d_plain);
  const double big = cross_entropy_loss(tensor_holding(one.grid, shifted), mine, d_shifted);
  EXPECT_TRUE(std::isfinite(big));
  EXPECT_NEAR(big, plain, 1e-9 * plain);
  EXPECT_LT(max_abs_difference(gather(d_shifted), gather(d_plain)), 1e-12);
}

// Runs f, which must throw std::invalid_argument whose message contains `needle`.
template <class F>
void expect_invalid_argument(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning \"" << needle << "\"";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LossInput, LabelOutsideTheClassesIsRejected) {
  OneRank one;
  const HostArray<float> x = random_global<float>(kPixelShape, 61);
  const Tensor<float> logits = tensor_holding(one.grid, x);
  for (const std::int64_t bad : {std::int64_t{-1}, kPixelShape[C]}) {
    HostLabels labels = random_labels(kPixelShape, 62);
    labels(2, 3, 4) = bad;
    const DeviceLabels mine = owned_labels(labels, logits.owned_box());
    expect_invalid_argument([&] { cross_entropy_loss(logits, mine); }, "outside [0, 7)");
    expect_invalid_argument([&] { accuracy(logits, mine); }, "outside [0, 7)");
  }
}

TEST(LossInput, MismatchedShapesAreRejected) {
  OneRank one;
  const Tensor<float> logits = tensor_holding(one.grid, random_global<float>(kPixelShape, 71));
  const DeviceLabels short_labels("labels", kPixelShape[N], kPixelShape[H] - 1, kPixelShape[W]);
  expect_invalid_argument([&] { cross_entropy_loss(logits, short_labels); }, "labels are 5x8x11");

  const DeviceLabels labels = owned_labels(random_labels(kPixelShape, 72), logits.owned_box());
  Tensor<float> wrong_grad(one.grid, {kPixelShape[N], kPixelShape[C] + 1, kPixelShape[H], kPixelShape[W]});
  expect_invalid_argument([&] { cross_entropy_loss(logits, labels, wrong_grad); }, "gradient tensor");

  const testing::DeviceTargets<float> wrong_targets("targets", kPixelShape[N], kPixelShape[C], kPixelShape[H], 1);
  expect_invalid_argument([&] { mse_loss(logits, wrong_targets); }, "targets are 5x7x9x1");
}

}  // namespace
}  // namespace tessera::layers
