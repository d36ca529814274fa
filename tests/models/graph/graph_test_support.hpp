#pragma once
// Shared by the graph model tests: the graphs they run, one forward and backward of a
// model on a grid from global arrays, and the relative comparison they use
// (tests/layers/support/compare.hpp).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "models/sequential.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models::testing {

inline constexpr double kTolerance = 1e-5;
using Vec = std::vector<double>;

using tessera::layers::testing::random_array;
using tessera::layers::testing::host_vector;
using tessera::layers::testing::relative_error;

inline Vec gathered(const layers::Tensor<float>& t) {
  const HostArray<float> a = gather(t);
  return {a.data(), a.data() + a.size()};
}

struct StepResult {
  Vec output, dx;             // whole arrays, rank 0 only
  std::vector<Vec> dparams;   // reduced, every rank
  std::vector<Vec> params;    // values, every rank
};

// One forward and backward of `spec` on `grid`, the loss sum(y * w): dy = w.
inline StepResult run_step(const ProcessGrid& grid, const std::string& spec, const Shape4& shape,
                           const HostArray<float>& x, Passes passes = Passes::training) {
  Sequential<float> model(spec, shape, grid, /*seed=*/7, LayerRegistry::global(), passes);
  scatter(x, model.input());
  const layers::Tensor<float>& y = model.forward(model.input());
  scatter(random_array(y.distribution().global_shape(), 11), model.output_gradient());
  model.zero_grad();
  const layers::Tensor<float>& dx = model.backward(model.output_gradient());
  layers::reduce_gradients(model.parameters(), grid);
  StepResult r;
  r.output = gathered(y);
  r.dx = gathered(dx);
  for (layers::Parameter<float>* p : model.parameters()) {
    r.dparams.push_back(host_vector(p->grad));
    r.params.push_back(host_vector(p->value));
  }
  return r;
}

// got against want within `tolerance`: every parameter gradient on every rank, the output
// and dx on rank 0 (where run_step gathers them).
inline void expect_step_matches(const StepResult& got, const StepResult& want, double tolerance) {
  if (tessera::testing::world_rank() == 0) {
    EXPECT_LE(relative_error(got.output, want.output), tolerance);
    EXPECT_LE(relative_error(got.dx, want.dx), tolerance);
  }
  ASSERT_EQ(got.dparams.size(), want.dparams.size());
  for (std::size_t i = 0; i < got.dparams.size(); ++i)
    EXPECT_LE(relative_error(got.dparams[i], want.dparams[i]), tolerance) << "parameter " << i;
}

// The graphs the tests run.
inline const std::string kResidual =
    "conv(out=4,k=3,pad=1), s: relu, conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), add[prev, s], relu";
inline const std::string kResidualBlocks =
    "block res(c, k=3) { conv(out=$c,k=$k,pad=1), relu, conv(out=$c,k=$k,pad=1), add[prev, in], relu }"
    " conv(out=4,k=3,pad=1), relu, res(c=4)*2";
inline const std::string kUnetLevel =
    "e: conv(out=4,k=3,pad=1), relu, maxpool(k=2), conv(out=6,k=3,pad=1), relu, deconv(out=4,k=2,stride=2),"
    " concat[prev, e], conv(out=2,k=3,pad=1)";
inline const std::string kTwoWindows = "a: conv(out=3,k=3,pad=1)[input], b: conv(out=3,k=5,pad=2)[input], add[a, b]";
inline const std::string kJoins = "c: conv(out=2,k=3,pad=1), r: relu, t: tanh[c], add[c, r, t], concat[prev, prev, input]";
inline const std::string kHead =
    "conv(out=4,k=3,pad=1), s: relu, conv(out=4,k=3,pad=1), add[prev, s], gap, flatten, linear(out=3)";

}  // namespace tessera::models::testing
