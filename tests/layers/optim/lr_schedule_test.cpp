// LrSchedule: a constant rate; linear warm-up reaching the peak at step W; polynomial
// decay after it reaching the end rate and staying there; the linear scaling rule; bad
// settings rejected; and an optimizer stepping at the schedule's rate (SGD against the
// reference run with the schedule's rate of each step).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "layers/optim/lr_schedule.hpp"
#include "layers/optim/sgd.hpp"
#include "tests/layers/optim/parameter_values.hpp"
#include "tests/layers/optim/reference_optimizers.hpp"

namespace tessera::layers {
namespace {

TEST(LrSchedule, ANumberIsAConstantRate) {
  const LrSchedule s = 0.25;
  for (std::int64_t t = 1; t <= 10; ++t) EXPECT_EQ(s.at(t), 0.25);
}

TEST(LrSchedule, WarmupRisesLinearlyToThePeakAtStepW) {
  const double peak = 0.8, start = 0.1;
  const std::int64_t w = 5;
  const LrSchedule s = LrSchedule::linear_warmup(peak, w, start);
  for (std::int64_t t = 1; t <= w; ++t) EXPECT_DOUBLE_EQ(s.at(t), start + (peak - start) * double(t) / double(w)) << t;
  EXPECT_DOUBLE_EQ(s.at(w), peak);
  for (std::int64_t t = w + 1; t <= 3 * w; ++t) EXPECT_EQ(s.at(t), peak) << t;
  for (std::int64_t t = 2; t <= w; ++t) EXPECT_GT(s.at(t), s.at(t - 1));
}

TEST(LrSchedule, PolynomialDecayFollowsTheWarmupAndEndsAtTheEndRate) {
  const double peak = 2.0, end = 0.01, power = 2;
  const std::int64_t w = 3, d = 10;
  const LrSchedule s = LrSchedule::linear_warmup(peak, w).with_poly_decay(d, power, end);
  for (std::int64_t t = w + 1; t <= w + d; ++t) {
    const double left = 1.0 - double(t - w) / double(d);
    EXPECT_DOUBLE_EQ(s.at(t), end + (peak - end) * std::pow(left, power)) << t;
  }
  EXPECT_DOUBLE_EQ(s.at(w + d), end);
  EXPECT_DOUBLE_EQ(s.at(w + d + 7), end);
}

TEST(LrSchedule, LinearScalingRule) {
  const double base = 0.1;
  EXPECT_DOUBLE_EQ(linear_scaling(base, 1024, 256), base * 1024.0 / 256.0);
  EXPECT_DOUBLE_EQ(linear_scaling(base, 256, 256), base);
  EXPECT_DOUBLE_EQ(linear_scaling(base, 32, 256), base / 8);
}

TEST(LrSchedule, BadSettingsAreRejected) {
  EXPECT_THROW(LrSchedule(-0.1), std::invalid_argument);
  EXPECT_THROW(LrSchedule::linear_warmup(0.1, -1), std::invalid_argument);
  EXPECT_THROW(LrSchedule(0.1).with_poly_decay(10, 2, 0.5), std::invalid_argument);
  EXPECT_THROW(LrSchedule(0.1).with_poly_decay(10, 0), std::invalid_argument);
  EXPECT_THROW(linear_scaling(0.1, 0, 256), std::invalid_argument);
  EXPECT_THROW(linear_scaling(0.1, 256, -1), std::invalid_argument);
}

TEST(LrSchedule, AnOptimizerStepsAtTheScheduledRate) {
  const LrSchedule schedule = LrSchedule::linear_warmup(linear_scaling(0.1, 512, 256), 4).with_poly_decay(3);
  Parameter<double> p("weight", {5, 3}, "layer");
  testing::Values w = testing::random_values(p.local_size(), 3);
  testing::set_values(p.value, w);
  Sgd<double> sgd({&p}, {.lr = schedule, .momentum = 0.9});
  testing::ReferenceSgd reference{0, 0.9, 0, 0, false};
  for (std::int64_t t = 1; t <= 9; ++t) {
    const testing::Values g = testing::random_values(p.local_size(), static_cast<std::uint32_t>(100 + t));
    testing::set_values(p.grad, g);
    sgd.step();
    reference.lr = schedule.at(t);
    reference.step(w, g);
    EXPECT_EQ(sgd.lr(), schedule.at(t));
    EXPECT_LE(testing::max_relative_error(testing::host_values(p.value), w), 1e-14) << "step " << t;
  }
}

}  // namespace
}  // namespace tessera::layers
