// Chains through the head grid on every process grid the rank count allows (pn <= 3
// samples, so every grid with ph*pw > 1 that 2-4 ranks make is included), each against the
// one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5 relative:
//   conv -> gap -> linear -> cross-entropy   (gap's head-grid output is Linear's input)
//   linear -> linear -> cross-entropy        (a Linear on a head-grid input)
// The loss, dx and every parameter's gradient after reduce_gradients must agree: the
// head-grid Linear's gradients are whole on each of the ph*pw spatial replicas, and
// reduce_gradients must count them once (Parameter::head_replica), not ph*pw times.
#include <gtest/gtest.h>

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "layers/conv2d.hpp"
#include "layers/global_avg_pool.hpp"
#include "layers/head_grid.hpp"
#include "layers/windowed.hpp"
#include "linear_test_support.hpp"
#include "tests/layers/support/broadcast.hpp"

namespace tessera::layers::testing {
namespace {

const Shape4 kShape{3, 2, 6, 5};
const std::vector<std::int64_t> kLabels{2, 0, 1};

struct ChainResult {
  double loss = 0;
  std::vector<double> dx;     // the whole input gradient, rank 0 only
  std::vector<double> grads;  // every parameter's reduced gradient, in layer order
};

ChainResult finish(const ProcessGrid& grid, double loss, const Tensor<float>& dx,
                   const std::vector<Parameter<float>*>& params) {
  reduce_gradients(params, grid);
  ChainResult r;
  r.loss = loss;
  r.dx = flat(gather(dx));
  for (const Parameter<float>* p : params) {
    const std::vector<double> g = host_vector(p->grad);
    r.grads.insert(r.grads.end(), g.begin(), g.end());
  }
  return r;
}

std::vector<Parameter<float>*> zeroed(std::vector<Parameter<float>*> a, const std::vector<Parameter<float>*>& b) {
  a.insert(a.end(), b.begin(), b.end());
  for (Parameter<float>* p : a) p->zero_grad();
  return a;
}

// conv(out=4,k=3,pad=1) -> gap -> linear(out=3) -> cross-entropy.
ChainResult conv_gap_linear(const ProcessGrid& grid, const HostArray<float>& x_global) {
  Conv2d<float> conv(Conv2dOptions::parse("out=4,k=3,pad=1"), kShape[C], /*seed=*/5);
  GlobalAvgPool<float> gap;
  const Shape4 features = conv.output_shape(kShape), pooled = gap.output_shape(features);
  Linear<float> linear(LinearOptions::parse("out=3"), {pooled[C], pooled[H], pooled[W]}, /*seed=*/6);
  const auto head = make_head_grid(grid);
  const Shape4 out = linear.output_shape(pooled);
  Tensor<float> x = make_input(grid, kShape, conv, "x"), dx = make_input(grid, kShape, conv, "dx");
  Tensor<float> c = make_output(grid, kShape, conv, "c"), dc = make_output(grid, kShape, conv, "dc");
  Tensor<float> g(*head, pooled, {}, "g"), dg(*head, pooled, {}, "dg");
  Tensor<float> y(*head, out, {}, "y"), dy(*head, out, {}, "dy");
  scatter(x_global, x);
  const auto params = zeroed(conv.params(), linear.params());
  conv.forward(x, c);
  gap.forward(c, g);
  linear.forward(g, y);
  const double loss = cross_entropy(y, kLabels, dy);
  linear.backward(dy, dg);
  gap.backward(dg, dc);
  conv.backward(dc, dx);
  return finish(grid, loss, dx, params);
}

// linear(out=5) -> linear(out=3) -> cross-entropy: the second Linear's input is on the
// head grid, replicated over the spatial group.
ChainResult linear_linear(const ProcessGrid& grid, const HostArray<float>& x_global) {
  Linear<float> first(LinearOptions::parse("out=5"), {kShape[C], kShape[H], kShape[W]}, /*seed=*/7);
  const Shape4 hidden = first.output_shape(kShape);
  Linear<float> second(LinearOptions::parse("out=3"), {hidden[C], hidden[H], hidden[W]}, /*seed=*/8);
  const Shape4 out = second.output_shape(hidden);
  const auto head = make_head_grid(grid);
  const auto head_of_head = make_head_grid(*head);  // where the second Linear's output lives
  Tensor<float> x(grid, kShape, {}, "x"), dx(grid, kShape, {}, "dx");
  Tensor<float> h(*head, hidden, {}, "h"), dh(*head, hidden, {}, "dh");
  Tensor<float> y(*head_of_head, out, {}, "y"), dy(*head_of_head, out, {}, "dy");
  scatter(x_global, x);
  const auto params = zeroed(first.params(), second.params());
  first.forward(x, h);
  second.forward(h, y);
  const double loss = cross_entropy(y, kLabels, dy);
  second.backward(dy, dh);
  first.backward(dh, dx);
  return finish(grid, loss, dx, params);
}

using Chain = ChainResult (*)(const ProcessGrid&, const HostArray<float>&);

void expect_every_grid_matches_one_rank(Chain chain) {
  const bool root = tessera::testing::world_rank() == 0;
  const auto x = random_array(kShape, 31);
  ChainResult one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = chain(self, x);
  }
  broadcast(one.grads);
  MPI_Bcast(&one.loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (const GridDims& dims : grids_for(kShape[N])) {
    SCOPED_TRACE("grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const ChainResult got = chain(grid, x);
    EXPECT_NEAR(got.loss, one.loss, kTolerance * std::abs(one.loss));
    EXPECT_LE(relative_error(got.grads, one.grads), kTolerance);
    if (root) {
      EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
    }
  }
}

TEST(HeadChainOnGrids, ConvGapLinearCrossEntropyMatchesOneRank) { expect_every_grid_matches_one_rank(conv_gap_linear); }
TEST(HeadChainOnGrids, LinearAfterLinearMatchesOneRank) { expect_every_grid_matches_one_rank(linear_linear); }

}  // namespace
}  // namespace tessera::layers::testing
