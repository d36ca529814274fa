// Each layer of the main job in bf16 against the same layer in fp32 on one rank: forward y,
// dx and the parameter gradients within kBf16Tolerance (argued in bf16_test_support.hpp),
// exactly for the layers that only move or compare values. Also: cross-entropy on bf16
// logits against fp32 logits holding the same values, the rounding of parameters (fp32
// masters, bf16 copies), and the error a layer without a bf16 path gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bf16_test_support.hpp"
#include "layers/loss/cross_entropy.hpp"
#include "layers/loss/mse.hpp"

namespace tessera::layers::testing {
namespace {

class Bf16VsFp32 : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16VsFp32, OneRankWithinBf16Tolerance) {
  const Bf16Case& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const HostArray<float> x = bf16_rounded(random_array(c.input, 5));
  const Shape4 out_shape = make_case_layer<float>(c.name, c.input)->output_shape(c.input);
  const HostArray<float> dy = bf16_rounded(random_array(out_shape, 6));
  const Bf16Step fp32 = run_case<float>(self, c, x, dy), low = run_case<bf16>(self, c, x, dy);
  ASSERT_EQ(low.grads.size(), fp32.grads.size());
  if (c.exact) {
    EXPECT_EQ(low.y, fp32.y);
    EXPECT_EQ(low.dx, fp32.dx);
  } else {
    EXPECT_LE(relative_error(low.y, fp32.y), kBf16Tolerance);
    EXPECT_LE(relative_error(low.dx, fp32.dx), kBf16Tolerance);
    // Not vacuous: a bf16 result is not the fp32 one (the inputs' rounding aside, the
    // weights and outputs were rounded).
    if (!fp32.grads.empty()) {
      EXPECT_GT(relative_error(low.y, fp32.y), 0.0);
    }
  }
  double worst_grad = 0;
  for (std::size_t i = 0; i < fp32.grads.size(); ++i) {
    const double e = relative_error(low.grads[i], fp32.grads[i]);
    EXPECT_LE(e, kBf16Tolerance) << "parameter " << i;
    worst_grad = std::max(worst_grad, e);
  }
  // The measured errors, against which the tolerance's margin can be judged.
  std::printf("[   INFO   ] %s: relative error y %.2e, dx %.2e, parameter gradients %.2e\n", c.name.c_str(),
              relative_error(low.y, fp32.y), relative_error(low.dx, fp32.dx), worst_grad);
}

INSTANTIATE_TEST_SUITE_P(Layers, Bf16VsFp32, ::testing::ValuesIn(bf16_cases()),
                         [](const auto& info) { return info.param.name; });

// Softmax cross-entropy is computed in fp32 from bf16 logits: loss and accuracy equal those
// of fp32 logits holding the same values (up to the order of fp32 sums), and dlogits is the
// fp32 gradient rounded once.
TEST(Bf16Loss, CrossEntropyOnBf16LogitsIsFp32Arithmetic) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{6, 5, 2, 3};
  const HostArray<float> logits = bf16_rounded(random_array(shape, 9));
  Kokkos::View<std::int64_t***, Kokkos::LayoutRight, LossMemorySpace> labels("labels", 6, 2, 3);
  auto host = Kokkos::create_mirror_view(labels);
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<std::int64_t>(i % 5);
  Kokkos::deep_copy(labels, host);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Tensor<T> x(self, shape, HaloWidths{}, "logits"), dx(self, shape, HaloWidths{}, "dlogits");
    scatter(as_type<T>(logits), x);
    const double loss = cross_entropy_loss(x, OwnedLabels(labels), dx);
    return std::make_pair(loss, widened(gather(dx)));
  };
  const auto [loss32, grad32] = run(0.0f);
  const auto [loss16, grad16] = run(bf16(0.0f));
  EXPECT_NEAR(loss16, loss32, 1e-6 * std::abs(loss32));
  ASSERT_EQ(grad16.size(), grad32.size());
  for (std::size_t i = 0; i < grad32.size(); ++i) EXPECT_EQ(grad16[i], float(bf16(grad32[i]))) << i;
}

// MSE on a bf16 output is computed in fp32 against fp32 targets: the loss equals that of an
// fp32 output holding the same values (up to the order of the double sums), and dy is the
// fp32 gradient rounded once.
TEST(Bf16Loss, MseOnBf16OutputIsFp32Arithmetic) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{3, 2, 5, 7};
  const HostArray<float> y = bf16_rounded(random_array(shape, 11));
  const HostArray<float> target = random_array(shape, 12);  // not bf16 values: the targets stay fp32
  Tensor<float> target_tensor(self, shape, HaloWidths{}, "target");
  scatter(target, target_tensor);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    Tensor<T> x(self, shape, HaloWidths{}, "y"), dx(self, shape, HaloWidths{}, "dy");
    scatter(as_type<T>(y), x);
    const double loss = mse_loss(x, target_tensor.owned(), dx);
    return std::make_pair(loss, widened(gather(dx)));
  };
  const auto [loss32, grad32] = run(0.0f);
  const auto [loss16, grad16] = run(bf16(0.0f));
  EXPECT_NEAR(loss16, loss32, 1e-12 * loss32);
  ASSERT_EQ(grad16.size(), grad32.size());
  for (std::size_t i = 0; i < grad32.size(); ++i) EXPECT_EQ(grad16[i], float(bf16(grad32[i]))) << i;
}

// A bf16 parameter's master is the fp32 draw and its value the master rounded once; after
// an update of the master, refresh_value() rounds again.
TEST(Bf16Parameters, MasterIsFp32ValueIsItsRounding) {
  const models::LayerRecipe& conv = models::LayerRegistry::global().find("conv");
  const std::unique_ptr<Layer<float>> wide = conv.make("out=4,k=3", {1, 3, 8, 8}, 7);
  const std::unique_ptr<Layer<bf16>> narrow = conv.make_bf16("out=4,k=3", {1, 3, 8, 8}, 7);
  const std::vector<float> w32 = widened(wide->params()[0]->value);
  Parameter<bf16>& p = *narrow->params()[0];
  EXPECT_EQ(widened(p.master), w32);
  const std::vector<float> rounded = widened(p.value);
  for (std::size_t i = 0; i < w32.size(); ++i) EXPECT_EQ(rounded[i], float(bf16(w32[i])));
  tessera::fill(p.master, 1.0f / 3.0f);
  p.refresh_value();
  for (float v : widened(p.value)) EXPECT_EQ(v, float(bf16(1.0f / 3.0f)));
}

}  // namespace
}  // namespace tessera::layers::testing
