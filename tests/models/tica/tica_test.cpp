// Reconstruction TICA (models/tica.hpp), checked as follows:
//  - one stage's objective equals a naive double-precision evaluation of
//      1/N sum_i ||W2 W1^T x_i - x_i||^2 + lambda sum_ij sqrt(eps + H_j (W1^T x_i)^2)
//    from the layer's own weights, and its gradients w.r.t. W1, b1 and W2 equal central
//    finite differences of that reference;
//  - joint training's gradient of the first stage's weights, which flows through LCN, the
//    second stage's encoder and the second reconstruction's target, equals finite
//    differences of the objective;
//  - on every grid that fits, greedy (each stage) and joint: the terms and every reduced
//    gradient, assembled whole, equal the one-rank result within 1e-5;
//  - the decoder map is the adjoint of the local map on every grid: <W x, h> = <x, W^T h>;
//  - a model without a stage, a local layer not followed by l2pool and a negative lambda
//    are errors naming the problem.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "models/tica.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/whole_parameter.hpp"
#include "tests/support/error_message.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models {
namespace {

using layers::testing::random_array;
using layers::testing::relative_error;
using tessera::testing::error_message;

constexpr double kEps = 1e-3;  // the l2pool eps of the one-stage model
constexpr double kLambda = 0.1;

std::vector<double> host_values(const layers::Parameter<float>::View& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<double>(h.data(), h.data() + h.size());
}

// ---- the naive reference of one stage: local(out=K,k=R,stride=S,pad=P), l2pool(k=Q,pad=Q/2) ---

struct StageGeometry {
  std::int64_t n, c, h, w, k, r, s, pad, q;
  std::int64_t ho() const { return (h + 2 * pad - r) / s + 1; }
  std::int64_t wo() const { return (w + 2 * pad - r) / s + 1; }
  std::size_t weight(std::int64_t i, std::int64_t j, std::int64_t kk, std::int64_t cc, std::int64_t a,
                     std::int64_t b) const {
    return static_cast<std::size_t>(((((i * wo() + j) * k + kk) * c + cc) * r + a) * r + b);
  }
};

double reference_objective(const StageGeometry& g, const std::vector<double>& x, const std::vector<double>& w1,
                           const std::vector<double>& b1, const std::vector<double>& w2) {
  const std::int64_t ho = g.ho(), wo = g.wo();
  auto xi = [&](std::int64_t n, std::int64_t c, std::int64_t y, std::int64_t xx) {
    return x[static_cast<std::size_t>(((n * g.c + c) * g.h + y) * g.w + xx)];
  };
  std::vector<double> h(static_cast<std::size_t>(g.n * g.k * ho * wo), 0.0);
  std::vector<double> x_hat(x.size(), 0.0);
  auto hi = [&](std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j) -> double& {
    return h[static_cast<std::size_t>(((n * g.k + k) * ho + i) * wo + j)];
  };
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t i = 0; i < ho; ++i)
      for (std::int64_t j = 0; j < wo; ++j)
        for (std::int64_t k = 0; k < g.k; ++k) {
          double sum = b1[static_cast<std::size_t>((i * wo + j) * g.k + k)];
          for (std::int64_t c = 0; c < g.c; ++c)
            for (std::int64_t a = 0; a < g.r; ++a)
              for (std::int64_t b = 0; b < g.r; ++b) {
                const std::int64_t y = i * g.s + a - g.pad, xx = j * g.s + b - g.pad;
                if (y >= 0 && y < g.h && xx >= 0 && xx < g.w) sum += w1[g.weight(i, j, k, c, a, b)] * xi(n, c, y, xx);
              }
          hi(n, k, i, j) = sum;
        }
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t i = 0; i < ho; ++i)
      for (std::int64_t j = 0; j < wo; ++j)
        for (std::int64_t k = 0; k < g.k; ++k)
          for (std::int64_t c = 0; c < g.c; ++c)
            for (std::int64_t a = 0; a < g.r; ++a)
              for (std::int64_t b = 0; b < g.r; ++b) {
                const std::int64_t y = i * g.s + a - g.pad, xx = j * g.s + b - g.pad;
                if (y >= 0 && y < g.h && xx >= 0 && xx < g.w)
                  x_hat[static_cast<std::size_t>(((n * g.c + c) * g.h + y) * g.w + xx)] +=
                      w2[g.weight(i, j, k, c, a, b)] * hi(n, k, i, j);
              }
  double reconstruction = 0, sparsity = 0;
  for (std::size_t e = 0; e < x.size(); ++e) reconstruction += (x_hat[e] - x[e]) * (x_hat[e] - x[e]);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t k = 0; k < g.k; ++k)
      for (std::int64_t i = 0; i < ho; ++i)
        for (std::int64_t j = 0; j < wo; ++j) {
          double squares = 0;
          for (std::int64_t a = i - g.q / 2; a <= i + g.q / 2; ++a)
            for (std::int64_t b = j - g.q / 2; b <= j + g.q / 2; ++b)
              if (a >= 0 && a < ho && b >= 0 && b < wo) squares += hi(n, k, a, b) * hi(n, k, a, b);
          sparsity += std::sqrt(kEps + squares);
        }
  return (reconstruction + kLambda * sparsity) / static_cast<double>(g.n);
}

const StageGeometry kStage{2, 2, 11, 9, 3, 4, 2, 1, 3};
const std::string kStageSpec = "local(out=3,k=4,stride=2,pad=1),l2pool(k=3,stride=1,pad=1,eps=0.001)";

TEST(Tica, OneStageMatchesNaiveDoubleReferenceAndItsFiniteDifferences) {
  const Shape4 shape{kStage.n, kStage.c, kStage.h, kStage.w};
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model(kStageSpec, shape, self, 7, LayerRegistry::global(), Passes::training_with_activations_kept);
  TicaObjective tica(model, self, 7, {kLambda, TicaMode::greedy});
  ASSERT_EQ(tica.stages(), 1u);
  const HostArray<float> xf = random_array(shape, 3);
  scatter(xf, model.input());
  for (layers::Parameter<float>* p : tica.trained_parameters({0})) p->zero_grad();
  const TicaTerms terms = tica.gradients({0});

  const std::vector<double> x(xf.data(), xf.data() + xf.size());
  layers::Parameter<float>& w1 = *model.layer(0).params()[0];
  layers::Parameter<float>& b1 = *model.layer(0).params()[1];
  layers::Parameter<float>& w2 = *tica.decoder_params().at(0).second;
  std::vector<double> theta[3] = {host_values(w1.value), host_values(b1.value), host_values(w2.value)};
  const double want = reference_objective(kStage, x, theta[0], theta[1], theta[2]);
  EXPECT_NEAR(terms.objective, want, 1e-5 * std::abs(want));
  EXPECT_NEAR(terms.objective, terms.reconstruction + kLambda * terms.sparsity, 1e-9 * std::abs(want));

  const std::vector<double> analytic[3] = {host_values(w1.grad), host_values(b1.grad), host_values(w2.grad)};
  const char* names[3] = {"W1", "b1", "W2"};
  for (int which = 0; which < 3; ++which) {
    const double largest =
        std::abs(*std::max_element(analytic[which].begin(), analytic[which].end(),
                                   [](double a, double b) { return std::abs(a) < std::abs(b); }));
    ASSERT_GT(largest, 0) << names[which];
    for (std::size_t e = 0; e < theta[which].size(); e += 1 + theta[which].size() / 9) {
      const double keep = theta[which][e], delta = 1e-5;
      theta[which][e] = keep + delta;
      const double up = reference_objective(kStage, x, theta[0], theta[1], theta[2]);
      theta[which][e] = keep - delta;
      const double down = reference_objective(kStage, x, theta[0], theta[1], theta[2]);
      theta[which][e] = keep;
      EXPECT_NEAR(analytic[which][e], (up - down) / (2 * delta), 1e-4 * largest) << names[which] << "[" << e << "]";
    }
  }
}

// Two stages with an LCN between: the joint objective's gradient w.r.t. the first encoder.
const std::string kTwoStages =
    "local(out=3,k=4,stride=2),l2pool(k=3,stride=1,pad=1),lcn(k=3),local(out=2,k=3),l2pool(k=3,stride=1,pad=1)";
const Shape4 kTwoStageInput{2, 2, 21, 19};

TEST(Tica, JointGradientOfTheFirstStageMatchesFiniteDifferences) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model(kTwoStages, kTwoStageInput, self, 11, LayerRegistry::global(), Passes::training_with_activations_kept);
  TicaObjective tica(model, self, 11, {kLambda, TicaMode::joint});
  ASSERT_EQ(tica.stages(), 2u);
  scatter(random_array(kTwoStageInput, 5), model.input());
  const std::vector<std::size_t> all = tica.stages_at(1, 10);
  ASSERT_EQ(all.size(), 2u);
  for (layers::Parameter<float>* p : tica.trained_parameters(all)) p->zero_grad();
  tica.gradients(all);
  layers::Parameter<float>& w1 = *model.layer(0).params()[0];
  const std::vector<double> analytic = host_values(w1.grad);
  std::vector<std::size_t> order(analytic.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 6, order.end(),
                    [&](std::size_t a, std::size_t b) { return std::abs(analytic[a]) > std::abs(analytic[b]); });
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), w1.value);
  for (int t = 0; t < 6; ++t) {
    const std::size_t e = order[static_cast<std::size_t>(t)];
    const float keep = host(e), delta = 2e-3f;
    auto objective_at = [&](float v) {
      host(e) = v;
      Kokkos::deep_copy(w1.value, host);
      return tica.evaluate(all).objective;
    };
    const double numeric = (objective_at(keep + delta) - objective_at(keep - delta)) / (2.0 * double(delta));
    objective_at(keep);
    EXPECT_NEAR(analytic[e], numeric, 2e-2 * std::abs(analytic[order[0]])) << "W1[" << e << "]";
  }
}

// ---- every grid against one rank ------------------------------------------------------------

struct TicaRun {
  TicaTerms terms;
  std::vector<std::vector<double>> gradients;  // whole, every trained parameter in order
};

TicaRun run_tica(const ProcessGrid& grid, TicaMode mode, const std::vector<std::size_t>& stages,
                 const HostArray<float>& x) {
  Sequential<float> model(kTwoStages, kTwoStageInput, grid, 13, LayerRegistry::global(), Passes::training_with_activations_kept);
  TicaObjective tica(model, grid, 13, {kLambda, mode});
  scatter(x, model.input());
  const std::vector<layers::Parameter<float>*> trained = tica.trained_parameters(stages);
  for (layers::Parameter<float>* p : trained) p->zero_grad();
  TicaRun run{tica.gradients(stages), {}};
  layers::reduce_gradients(trained, grid);
  for (layers::Parameter<float>* p : trained) run.gradients.push_back(layers::testing::whole_grad(*p, grid));
  return run;
}

void broadcast(std::vector<double>& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

TEST(Tica, EveryGridEqualsOneRankGreedyAndJoint) {
  const HostArray<float> x = random_array(kTwoStageInput, 17);
  struct Case {
    const char* name;
    TicaMode mode;
    std::vector<std::size_t> stages;
  };
  const Case cases[] = {{"greedy stage 0", TicaMode::greedy, {0}},
                        {"greedy stage 1", TicaMode::greedy, {1}},
                        {"joint", TicaMode::joint, {0, 1}}};
  for (const Case& c : cases) {
    TicaRun one;
    if (tessera::testing::world_rank() == 0) one = run_tica(ProcessGrid(MPI_COMM_SELF, {1, 1, 1}), c.mode, c.stages, x);
    MPI_Bcast(&one.terms, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int count = static_cast<int>(one.gradients.size());
    MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
    one.gradients.resize(static_cast<std::size_t>(count));
    for (auto& g : one.gradients) broadcast(g);
    ASSERT_GE(count, 2) << c.name;  // an encoder's weight and bias, a decoder's weight at least
    for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
      if (dims[0] > kTwoStageInput[N]) continue;  // every rank needs a sample
      SCOPED_TRACE(std::string(c.name) + " on grid " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) +
                   "x" + std::to_string(dims[2]));
      const ProcessGrid grid(MPI_COMM_WORLD, dims);
      const TicaRun got = run_tica(grid, c.mode, c.stages, x);
      EXPECT_NEAR(got.terms.reconstruction, one.terms.reconstruction, 1e-5 * one.terms.reconstruction);
      EXPECT_NEAR(got.terms.sparsity, one.terms.sparsity, 1e-5 * one.terms.sparsity);
      ASSERT_EQ(got.gradients.size(), one.gradients.size());
      for (std::size_t p = 0; p < got.gradients.size(); ++p)
        EXPECT_LE(relative_error(got.gradients[p], one.gradients[p]), 1e-5) << "trained parameter " << p;
    }
  }
}

// <W x, h> = <x, W^T h>: the decoder map is the local map's adjoint, halos and seams included.
TEST(Tica, TransposedLocalMapIsTheAdjointOnEveryGrid) {
  const Shape4 input{2, 2, 13, 11};
  layers::LocalOptions options = layers::LocalOptions::parse("out=3,k=4,stride=2,pad=1,bias=false");
  const HostArray<float> x = random_array(input, 21);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > input[N]) continue;  // every rank needs a sample
    SCOPED_TRACE("grid " + std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" + std::to_string(dims[2]));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    layers::LocallyConnected2d<float> layer(options, input, 9);
    layer.place(layers::owned_output(grid, input, layer));
    layers::Tensor<float> xs = layers::make_input(grid, input, layer), y = layers::make_output(grid, input, layer);
    layers::Tensor<float> h = layers::make_output(grid, input, layer), x_hat = layers::make_input(grid, input, layer);
    scatter(x, xs);
    scatter(random_array(y.distribution().global_shape(), 23), h);
    layer.forward(xs, y);
    layer.transpose_forward(h, x_hat);
    const HostArray<float> yw = gather(y), hw = gather(h), xw = gather(x_hat);
    if (tessera::testing::world_rank() != 0) continue;
    double forward_side = 0, adjoint_side = 0, scale = 0;
    for (std::size_t e = 0; e < yw.size(); ++e) forward_side += double(yw.data()[e]) * hw.data()[e];
    for (std::size_t e = 0; e < xw.size(); ++e) {
      adjoint_side += double(x.data()[e]) * xw.data()[e];
      scale += std::abs(double(x.data()[e]) * xw.data()[e]);
    }
    EXPECT_NEAR(forward_side, adjoint_side, 1e-5 * scale);
  }
}

TEST(Tica, ModelsWithoutAStageOrWithABadStageAreNamedErrors) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 1, 12, 12};
  Sequential<float> conv("conv(out=2,k=3)", shape, self, 1);
  EXPECT_NE(error_message([&] { TicaObjective t(conv, self, 1, {}); }).find("at least one stage local(...),l2pool(...)"), std::string::npos);
  Sequential<float> maxpool("local(out=2,k=3),maxpool(k=2)", shape, self, 1);
  EXPECT_NE(error_message([&] { TicaObjective t(maxpool, self, 1, {}); }).find("layer 0 (local) must be followed by l2pool"), std::string::npos);
  Sequential<float> stage("local(out=2,k=3),l2pool(k=3,stride=1,pad=1)", shape, self, 1);
  EXPECT_NE(error_message([&] { TicaObjective t(stage, self, 1, {-1.0, TicaMode::greedy}); }).find("lambda must be >= 0"), std::string::npos);
  EXPECT_NE(error_message([&] { parse_tica_mode("both"); }).find("must be greedy or joint, got 'both'"), std::string::npos);
  // The objective reads the stages' activations between passes: a model that lets their
  // buffers be reused is refused.
  EXPECT_NE(error_message([&] { TicaObjective t(stage, self, 1, {}); }).find("Passes::training_with_activations_kept"),
            std::string::npos);
}

TEST(Tica, GreedySplitsTheStepsOverTheStagesInOrder) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model(kTwoStages, kTwoStageInput, self, 1, LayerRegistry::global(), Passes::training_with_activations_kept);
  TicaObjective tica(model, self, 1, {kLambda, TicaMode::greedy});
  EXPECT_EQ(tica.stages_at(1, 10), std::vector<std::size_t>{0});
  EXPECT_EQ(tica.stages_at(5, 10), std::vector<std::size_t>{0});
  EXPECT_EQ(tica.stages_at(6, 10), std::vector<std::size_t>{1});
  EXPECT_EQ(tica.stages_at(10, 10), std::vector<std::size_t>{1});
  EXPECT_EQ(tica.stages_at(3, 3), std::vector<std::size_t>{1});
}

}  // namespace
}  // namespace tessera::models
