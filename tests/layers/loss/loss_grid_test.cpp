// Losses on every process grid the rank count allows (1x1x2, 1x2x1, 2x1x1 on 2 ranks;
// 1x3x1 on 3; 1x2x2, 2x1x2, 4x1x1, ... on 4) give the one-rank result: the loss and the
// accuracy within 1e-6 relative on every rank, and the gradient cells — gathered to rank 0 —
// equal to the one-rank gradient. Classification logits (N, K, 1, 1) run on the grids that
// split only samples; per-pixel logits (N, K, H, W) run on all. A bad label on one rank
// makes every rank throw, and none is left waiting in the reduction.
#include <gtest/gtest.h>

#include <string>

#include "layers/loss/loss.hpp"
#include "tests/support/grid_cases.hpp"
#include "tests/layers/loss/loss_test_data.hpp"

namespace tessera::layers {
namespace {

using testing::all_grids;
using testing::DeviceLabels;
using testing::HostLabels;
using testing::max_abs_difference;
using testing::owned_labels;
using testing::owned_part;
using testing::random_global;
using testing::random_labels;
using testing::world_size;

using testing::kClassifierShape;
using testing::kPixelShape;
constexpr double kSameAsOneRank = 1e-6;

bool fits(const Shape4& shape, const GridDims& dims) {
  return shape[N] >= dims[0] && shape[H] >= dims[1] && shape[W] >= dims[2];
}

// Every rank holds the same global inputs (same seeds); each distributes its owned part.
template <class T>
Tensor<T> distributed(const ProcessGrid& grid, const HostArray<T>& global) {
  Tensor<T> t(grid, testing::shape_of_host(global), {}, "tensor");
  scatter(grid.rank() == 0 ? global : HostArray<T>(), t, 0);
  return t;
}

template <class T>
class LossOnGrids : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LossOnGrids, ElementTypes);

TYPED_TEST(LossOnGrids, CrossEntropyEqualsTheOneRankResult) {
  using T = TypeParam;
  const ProcessGrid one(MPI_COMM_SELF, {1, 1, 1});
  for (const Shape4& shape : {kPixelShape, kClassifierShape}) {
    const HostArray<T> x = random_global<T>(shape, 101);
    const HostLabels labels = random_labels(shape, 102);
    Tensor<T> d_one(one, shape);
    const Tensor<T> x_one = distributed(one, x);
    const ClassificationStats alone = classification_stats(x_one, owned_labels(labels, x_one.owned_box()), d_one);
    const HostArray<T> grad_alone = gather(d_one);

    for (const GridDims& dims : all_grids(world_size())) {
      if (!fits(shape, dims)) continue;
      SCOPED_TRACE(testing::describe_shape(shape) + " on " + format_grid(dims));
      const ProcessGrid grid(MPI_COMM_WORLD, dims);
      const Tensor<T> logits = distributed(grid, x);
      Tensor<T> dlogits(grid, shape);
      const ClassificationStats stats =
          classification_stats(logits, owned_labels(labels, logits.owned_box()), dlogits);
      EXPECT_NEAR(stats.loss, alone.loss, kSameAsOneRank * alone.loss);
      EXPECT_NEAR(stats.accuracy, alone.accuracy, kSameAsOneRank);
      const HostArray<T> grad = gather(dlogits);
      if (grid.rank() == 0) {
        EXPECT_EQ(max_abs_difference(grad, grad_alone), 0.0);
      }
    }
  }
}

TYPED_TEST(LossOnGrids, MseEqualsTheOneRankResult) {
  using T = TypeParam;
  const ProcessGrid one(MPI_COMM_SELF, {1, 1, 1});
  const HostArray<T> y = random_global<T>(kPixelShape, 201);
  const HostArray<T> target = random_global<T>(kPixelShape, 202);
  Tensor<T> dy_one(one, kPixelShape);
  const Tensor<T> y_one = distributed(one, y);
  const double alone = mse_loss(y_one, owned_part(target, y_one.owned_box()), dy_one);
  const HostArray<T> grad_alone = gather(dy_one);

  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const Tensor<T> out = distributed(grid, y);
    Tensor<T> dy(grid, kPixelShape);
    EXPECT_NEAR(mse_loss(out, owned_part(target, out.owned_box()), dy), alone, kSameAsOneRank * alone);
    const HostArray<T> grad = gather(dy);
    if (grid.rank() == 0) {
      EXPECT_EQ(max_abs_difference(grad, grad_alone), 0.0);
    }
  }
}

TEST(LossOnGridsInput, ABadLabelOnTheLastRankThrowsOnEveryRank) {
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const Tensor<float> logits = distributed(grid, random_global<float>(kPixelShape, 301));
    HostLabels labels = random_labels(kPixelShape, 302);
    // The last cell of the image is owned by the last rank of every grid.
    labels(kPixelShape[N] - 1, kPixelShape[H] - 1, kPixelShape[W] - 1) = kPixelShape[C];
    const bool holds_bad_label = grid.rank() == grid.size() - 1;
    const DeviceLabels mine = owned_labels(labels, logits.owned_box());
    try {
      cross_entropy_loss(logits, mine);
      ADD_FAILURE() << "a label out of range was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(holds_bad_label ? "outside [0, 7)" : "another rank"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace tessera::layers
