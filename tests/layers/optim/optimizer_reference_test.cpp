// SGD (plain, momentum with dampening and weight decay, Nesterov), Adam, AdamW and LARS
// against naive double-precision reimplementations of the PyTorch / paper formulas
// (reference_optimizers.hpp), over several steps on a weight and a bias of odd sizes whose
// gradients change every step; the state buffers too. Also: the state() layout a
// checkpoint relies on, and options that PyTorch rejects are rejected.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "layers/optim/optim.hpp"
#include "tests/layers/optim/parameter_values.hpp"
#include "tests/layers/optim/reference_optimizers.hpp"

namespace tessera::layers {
namespace {

using testing::host_values;
using testing::max_relative_error;
using testing::Values;

constexpr int kSteps = 6;

// A weight (3, 5, 7) and a bias (5) with random values, as a layer would own them.
template <class T>
struct SmallLayer {
  std::vector<Parameter<T>> params;
  std::vector<Values> reference;  // the same values, in double, for the reference to update

  SmallLayer() {
    params.emplace_back("weight", std::vector<std::int64_t>{3, 5, 7}, "layer");
    params.emplace_back("bias", std::vector<std::int64_t>{5}, "layer");
    for (std::size_t i = 0; i < params.size(); ++i) {
      reference.push_back(testing::rounded_to<T>(testing::random_values(params[i].local_size(), 7 + i)));
      testing::set_values(params[i].value, reference[i]);
    }
  }
  std::vector<Parameter<T>*> pointers() {
    std::vector<Parameter<T>*> out;
    for (Parameter<T>& p : params) out.push_back(&p);
    return out;
  }
};

// A gradient that depends on the weights (as from a quadratic loss) plus noise that
// changes every step; rounded to T so that both sides see the same numbers.
template <class T>
Values gradient_for(const Values& w, int step, std::size_t param) {
  Values g = testing::random_values(w.size(), static_cast<std::uint32_t>(1000 * step + param));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] += 0.5 * w[i];
  return testing::rounded_to<T>(g);
}

// Steps the optimizer and one reference per parameter side by side, checking the values
// after every step. Returns the references for checks of their state.
template <class T, class Reference>
std::vector<Reference> expect_same_trajectory(Optimizer<T>& optimizer, SmallLayer<T>& layer, Reference prototype,
                                              std::vector<Reference> references = {}) {
  if (references.empty()) references.assign(layer.params.size(), prototype);
  for (int step = 1; step <= kSteps; ++step) {
    std::vector<Values> grads;
    for (std::size_t i = 0; i < layer.params.size(); ++i) {
      grads.push_back(gradient_for<T>(layer.reference[i], step, i));
      testing::set_values(layer.params[i].grad, grads[i]);
    }
    optimizer.step();
    for (std::size_t i = 0; i < layer.params.size(); ++i) {
      references[i].step(layer.reference[i], grads[i]);
      EXPECT_LE(max_relative_error(host_values(layer.params[i].value), layer.reference[i]),
                testing::kOptimizerTolerance<T>)
          << layer.params[i].name << " after step " << step;
    }
  }
  return references;
}

template <class T>
Values state_values(const Optimizer<T>& optimizer, std::size_t param, const std::string& name) {
  for (const auto& b : optimizer.state()[param].buffers)
    if (b.name == name) return host_values(b.view);
  ADD_FAILURE() << "no state buffer " << name;
  return {};
}

template <class T>
class OptimizerReference : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OptimizerReference, ElementTypes);

TYPED_TEST(OptimizerReference, PlainSgd) {
  SmallLayer<TypeParam> layer;
  Sgd<TypeParam> sgd(layer.pointers(), {.lr = 0.1});
  expect_same_trajectory(sgd, layer, testing::ReferenceSgd{0.1, 0, 0, 0, false});
  EXPECT_TRUE(sgd.state()[0].buffers.empty()) << "no momentum, no buffer (as PyTorch)";
}

TYPED_TEST(OptimizerReference, SgdWithMomentumDampeningAndWeightDecay) {
  SmallLayer<TypeParam> layer;
  Sgd<TypeParam> sgd(layer.pointers(), {.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 1e-2});
  const auto refs = expect_same_trajectory(sgd, layer, testing::ReferenceSgd{0.05, 0.9, 0.3, 1e-2, false});
  for (std::size_t i = 0; i < refs.size(); ++i)
    EXPECT_LE(max_relative_error(state_values(sgd, i, "momentum_buffer"), refs[i].buf),
              testing::kOptimizerTolerance<TypeParam>);
}

TYPED_TEST(OptimizerReference, SgdWithNesterovMomentum) {
  SmallLayer<TypeParam> layer;
  Sgd<TypeParam> sgd(layer.pointers(), {.lr = 0.05, .momentum = 0.8, .weight_decay = 1e-3, .nesterov = true});
  expect_same_trajectory(sgd, layer, testing::ReferenceSgd{0.05, 0.8, 0, 1e-3, true});
}

TYPED_TEST(OptimizerReference, AdamWithL2WeightDecay) {
  SmallLayer<TypeParam> layer;
  Adam<TypeParam> adam(layer.pointers(), {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1});
  const auto refs = expect_same_trajectory(adam, layer, testing::ReferenceAdam{0.01, 0.8, 0.99, 1e-6, 0.1, false});
  for (std::size_t i = 0; i < refs.size(); ++i) {
    EXPECT_LE(max_relative_error(state_values(adam, i, "exp_avg"), refs[i].m), testing::kOptimizerTolerance<TypeParam>);
    EXPECT_LE(max_relative_error(state_values(adam, i, "exp_avg_sq"), refs[i].v),
              testing::kOptimizerTolerance<TypeParam>);
  }
  EXPECT_EQ(adam.kind(), "adam");
}

TYPED_TEST(OptimizerReference, AdamWDecouplesWeightDecay) {
  SmallLayer<TypeParam> layer;
  Adam<TypeParam> adamw(layer.pointers(), adamw_options(0.01, 0.05));
  const AdamOptions o = adamw.options();
  expect_same_trajectory(adamw, layer, testing::ReferenceAdam{0.01, o.beta1, o.beta2, o.eps, 0.05, true});
  EXPECT_EQ(adamw.kind(), "adamw");
}

TYPED_TEST(OptimizerReference, LarsAdaptsWeightsAndLeavesBiasesAlone) {
  SmallLayer<TypeParam> layer;
  const ProcessGrid grid(MPI_COMM_SELF, {1, 1, 1});
  Lars<TypeParam> lars(layer.pointers(), grid, {.lr = 0.5, .momentum = 0.9, .weight_decay = 5e-3, .eta = 0.02});
  const testing::ReferenceLars weight{0.5, 0.9, 5e-3, 0.02, true}, bias{0.5, 0.9, 5e-3, 0.02, false};
  const auto refs = expect_same_trajectory(lars, layer, weight, {weight, bias});
  EXPECT_NE(lars.trust_ratios()[0], 1.0);
  EXPECT_EQ(lars.trust_ratios()[1], 1.0);
  for (std::size_t i = 0; i < refs.size(); ++i)
    EXPECT_LE(max_relative_error(state_values(lars, i, "momentum_buffer"), refs[i].v),
              testing::kOptimizerTolerance<TypeParam>);
}

TYPED_TEST(OptimizerReference, LarsWithoutExclusionsAdaptsBiasesToo) {
  SmallLayer<TypeParam> layer;
  const ProcessGrid grid(MPI_COMM_SELF, {1, 1, 1});
  Lars<TypeParam> lars(layer.pointers(), grid, {.lr = 0.5, .momentum = 0.9, .weight_decay = 5e-3, .eta = 0.02, .skip = nullptr});
  expect_same_trajectory(lars, layer, testing::ReferenceLars{0.5, 0.9, 5e-3, 0.02, true});
}

TEST(Lars, ZeroWeightsTakeTheUnscaledRate) {
  // ||w|| = 0 (a freshly zeroed layer) would give a trust ratio of 0 and freeze the layer.
  Parameter<double> p("weight", {4, 3}, "layer");
  testing::set_values(p.grad, testing::random_values(p.local_size(), 5));
  const ProcessGrid grid(MPI_COMM_SELF, {1, 1, 1});
  Lars<double> lars({&p}, grid, {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2});
  lars.step();
  Values expected(p.local_size(), 0.0);
  testing::ReferenceLars{0.1, 0.9, 1e-2, 1e-3, true}.step(expected, host_values(p.grad));
  EXPECT_LE(max_relative_error(host_values(p.value), expected), 1e-15);
  EXPECT_EQ(lars.trust_ratios()[0], 1.0);
}

TEST(OptimizerState, EveryParameterHasNamedBuffersShapedLikeItsValueAndAStepCount) {
  SmallLayer<float> layer;
  Adam<float> adam(layer.pointers());
  adam.step();
  adam.step();
  ASSERT_EQ(adam.state().size(), layer.params.size());
  for (std::size_t i = 0; i < layer.params.size(); ++i) {
    const auto& s = adam.state()[i];
    EXPECT_EQ(s.step, 2);
    ASSERT_EQ(s.buffers.size(), 2u);
    EXPECT_EQ(s.buffers[0].name, "exp_avg");
    EXPECT_EQ(s.buffers[1].name, "exp_avg_sq");
    for (const auto& b : s.buffers) EXPECT_EQ(b.view.extent(0), layer.params[i].local_size());
  }
  EXPECT_EQ(adam.steps(), 2);
}

TEST(OptimizerState, ZeroGradClearsEveryGradient) {
  SmallLayer<float> layer;
  for (auto& p : layer.params) Kokkos::deep_copy(p.grad, 3.0f);
  Sgd<float> sgd(layer.pointers());
  sgd.zero_grad();
  for (auto& p : layer.params)
    for (double g : host_values(p.grad)) EXPECT_EQ(g, 0.0);
}

// Runs make(), which must throw std::invalid_argument mentioning `needle`.
template <class F>
void expect_rejected(F&& make, const std::string& needle) {
  try {
    make();
    ADD_FAILURE() << "accepted; expected a rejection mentioning \"" << needle << "\"";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(OptimizerOptions, ThoseTorchRejectsAreRejected) {
  SmallLayer<float> layer;
  const ProcessGrid grid(MPI_COMM_SELF, {1, 1, 1});
  expect_rejected([&] { Sgd<float>(layer.pointers(), {.lr = -1.0}); }, "learning rate");
  expect_rejected([&] { Sgd<float>(layer.pointers(), {.lr = 0.1, .nesterov = true}); }, "Nesterov");
  expect_rejected([&] { Sgd<float>(layer.pointers(), {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
                  "Nesterov");
  expect_rejected([&] { Adam<float>(layer.pointers(), {.beta1 = 1.0}); }, "beta1");
  expect_rejected([&] { Adam<float>(layer.pointers(), {.eps = -1e-8}); }, "eps");
  expect_rejected([&] { Lars<float>(layer.pointers(), grid, {.eta = 0}); }, "eta");
  expect_rejected([&] { Sgd<float>({nullptr}); }, "null");
}

}  // namespace
}  // namespace tessera::layers
