// BatchNorm2d in one process (a 1x1x1 grid on MPI_COMM_SELF): forward and backward against
// the double reference on odd sizes, running statistics and evaluation mode, finite
// differences in double, options and configuration errors; the GPU's two-pass channel sums
// run on the host against a plain double sum.
#include <gtest/gtest.h>

#include <stdexcept>

#include "batch_norm_test_support.hpp"

namespace tessera::layers::testing {
namespace {

const Shape4 kShape{3, 5, 7, 9};

TEST(BatchNormReference, ForwardAndBackwardMatchDoubleReference) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto x = random_array(kShape, 1, /*offset=*/0.7), dy = random_array(kShape, 2);
  const auto gamma = random_vector(5, 3, 1.0), beta = random_vector(5, 4, 0.0);
  for (const char* spec : {"", "stats=local", "stats=all", "eps=0.001"}) {
    SCOPED_TRACE(spec);
    const BatchNormOptions options = BatchNormOptions::parse(spec);
    BatchNorm2d<float> layer(options, kShape[C]);
    const BatchNormResult got = run_step(self, layer, x, dy, gamma, beta);
    const BatchNormResult want = reference(x, dy, gamma, beta, options.eps, {Box{{0, 0, 0, 0}, kShape}});
    EXPECT_LE(relative_error(got.y, want.y), kTolerance);
    EXPECT_LE(relative_error(got.dx, want.dx), kTolerance);
    EXPECT_LE(relative_error(got.dgamma, want.dgamma), kTolerance);
    EXPECT_LE(relative_error(got.dbeta, want.dbeta), kTolerance);
  }
}

TEST(BatchNormReference, RunningStatisticsAndEvaluationMode) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto x = random_array(kShape, 5, 2.0), dy = random_array(kShape, 6);
  const std::vector<double> ones(5, 1.0), zeros(5, 0.0);
  BatchNorm2d<double> layer(BatchNormOptions::parse("momentum=0.25"), kShape[C]);
  run_step(self, layer, x, dy, ones, zeros);
  const double cells = 3 * 7 * 9;
  for (int c = 0; c < 5; ++c) {
    double mean = 0, sq = 0;
    for (int n = 0; n < 3; ++n)
      for (int h = 0; h < 7; ++h)
        for (int w = 0; w < 9; ++w) mean += x(n, c, h, w) / cells;
    for (int n = 0; n < 3; ++n)
      for (int h = 0; h < 7; ++h)
        for (int w = 0; w < 9; ++w) sq += (x(n, c, h, w) - mean) * (x(n, c, h, w) - mean);
    EXPECT_NEAR(layer.running_mean()[c], 0.25 * mean, 1e-12);
    EXPECT_NEAR(layer.running_var()[c], 0.75 + 0.25 * sq / (cells - 1), 1e-12);  // unbiased
  }
  // Evaluation: y = (x - running_mean) / sqrt(running_var + eps), dx = dy / sqrt(...).
  layer.set_training(false);
  const BatchNormResult got = run_step(self, layer, x, dy, ones, zeros);
  HostArray<double> want_y("y", 3, 5, 7, 9), want_dx("dx", 3, 5, 7, 9);
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 5; ++c)
      for (int h = 0; h < 7; ++h)
        for (int w = 0; w < 9; ++w) {
          const double inv_std = 1 / std::sqrt(layer.running_var()[c] + 1e-5);
          want_y(n, c, h, w) = (x(n, c, h, w) - layer.running_mean()[c]) * inv_std;
          want_dx(n, c, h, w) = dy(n, c, h, w) * inv_std;
        }
  EXPECT_LE(relative_error(got.y, want_y), 1e-12);
  EXPECT_LE(relative_error(got.dx, want_dx), 1e-12);
}

// L = sum(y * r): backward with dy = r must give dL/dx, dL/dgamma, dL/dbeta.
TEST(BatchNormReference, FiniteDifferences) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 2, 3, 3};
  const auto x = random_array(shape, 7), r = random_array(shape, 8);
  const auto gamma = random_vector(2, 9, 1.0), beta = random_vector(2, 10, 0.0);
  auto loss = [&](const HostArray<double>& input, const std::vector<double>& g, const std::vector<double>& b) {
    BatchNorm2d<double> layer(BatchNormOptions{}, shape[C]);
    const BatchNormResult out = run_step(self, layer, input, r, g, b);
    double sum = 0;
    for (std::size_t i = 0; i < out.y.size(); ++i) sum += out.y.data()[i] * r.data()[i];
    return sum;
  };
  BatchNorm2d<double> layer(BatchNormOptions{}, shape[C]);
  const BatchNormResult analytic = run_step(self, layer, x, r, gamma, beta);
  const double step = 1e-6;
  for (std::size_t i = 0; i < x.size(); i += 5) {
    HostArray<double> plus("plus", 2, 2, 3, 3), minus("minus", 2, 2, 3, 3);
    Kokkos::deep_copy(plus, x), Kokkos::deep_copy(minus, x);
    plus.data()[i] += step, minus.data()[i] -= step;
    EXPECT_NEAR(analytic.dx.data()[i], (loss(plus, gamma, beta) - loss(minus, gamma, beta)) / (2 * step), 1e-6)
        << "dx[" << i << "]";
  }
  for (std::size_t c = 0; c < 2; ++c) {
    auto g_plus = gamma, g_minus = gamma, b_plus = beta, b_minus = beta;
    g_plus[c] += step, g_minus[c] -= step, b_plus[c] += step, b_minus[c] -= step;
    EXPECT_NEAR(analytic.dgamma[c], (loss(x, g_plus, beta) - loss(x, g_minus, beta)) / (2 * step), 1e-6);
    EXPECT_NEAR(analytic.dbeta[c], (loss(x, gamma, b_plus) - loss(x, gamma, b_minus)) / (2 * step), 1e-6);
  }
}

TEST(BatchNormOptions, DefaultsAndRoundTrip) {
  const BatchNormOptions o = BatchNormOptions::parse("");
  EXPECT_EQ(o.eps, 1e-5);
  EXPECT_EQ(o.momentum, 0.1);
  EXPECT_TRUE(o.affine);
  EXPECT_EQ(o.stats, StatsGroup::spatial);
  const BatchNormOptions p = BatchNormOptions::parse("eps=0.001,momentum=0.3,affine=false,stats=all");
  const BatchNormOptions q = BatchNormOptions::parse(p.to_spec());
  EXPECT_EQ(q.eps, 0.001);
  EXPECT_EQ(q.momentum, 0.3);
  EXPECT_FALSE(q.affine);
  EXPECT_EQ(q.stats, StatsGroup::all);
  EXPECT_TRUE(BatchNorm2d<float>(p, 4).params().empty());
}

// The device path's blocked sums (blocks of kSumBlockCells cells per channel, then the
// blocks added in order) on the host execution space: against a sum in double for channel
// sizes below, at and across block boundaries, and again after the scratch has grown.
TEST(BatchNormChannelSums, BlockedDevicePassesEqualADoubleSum) {
  using Exec = Kokkos::DefaultHostExecutionSpace;
  BlockPartials<Exec> scratch;
  const std::int64_t block = kSumBlockCells;
  for (const Shape4 shape : {Shape4{1, 3, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{1, 2, 64, block / 64},
                             Shape4{3, 2, 41, 67}, Shape4{2, 5, 3, 11}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const HostArray<double> x = random_array(shape, 17, /*offset=*/0.5);
    Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace> v("x", shape[N], shape[C], shape[H], shape[W]);
    for (std::size_t i = 0; i < x.size(); ++i) v.data()[i] = static_cast<float>(x.data()[i]);
    Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> sums("sums", 2, shape[C]);
    batch_norm::blocked_channel_sums<Exec>(batch_norm::Moments<float>{rows_of(v)}, extents_of(v), sums, scratch);
    Kokkos::fence();
    for (std::int64_t c = 0; c < shape[C]; ++c) {
      double first = 0, second = 0;
      for (std::int64_t n = 0; n < shape[N]; ++n)
        for (std::int64_t h = 0; h < shape[H]; ++h)
          for (std::int64_t w = 0; w < shape[W]; ++w) {
            const double value = v(n, c, h, w);
            first += value, second += double(float(value * value));
          }
      EXPECT_NEAR(sums(0, c), first, 1e-9 * (1 + std::abs(first))) << "channel " << c;
      EXPECT_NEAR(sums(1, c), second, 1e-9 * (1 + std::abs(second))) << "channel " << c;
    }
  }
  EXPECT_GE(static_cast<std::int64_t>(scratch.extent(1)), 3);  // blocks: grown for the 41x67x3 case
}

TEST(BatchNormOptions, BadConfigurationsAreClearErrors) {
  for (const char* bad : {"epsilon=1", "eps=0", "eps=-1", "eps=abc", "eps=1e-5x", "momentum=1.5",
                          "stats=global", "affine=maybe"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(BatchNormOptions::parse(bad), std::invalid_argument);
  }
  EXPECT_THROW(BatchNorm2d<float>(BatchNormOptions{}, 0), std::invalid_argument);
  const BatchNorm2d<float> layer(BatchNormOptions{}, 5);
  EXPECT_THROW(layer.output_shape({3, 4, 7, 9}), std::invalid_argument);
  try {
    BatchNormOptions::parse("eps=0");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("eps must be > 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::layers::testing
