// Activations and nearest upsampling in one process: forward and dx against the naive
// double reference, finite differences in double precision, the local (no exchange) path
// of activations, options and configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "pointwise_cases.hpp"
#include "tests/layers/conv/conv_test_support.hpp"
#include "tests/layers/support/layer_step.hpp"

namespace tessera::layers::testing {
namespace {

class PointwiseAgainstReference : public ::testing::TestWithParam<PointwiseCase> {};

TEST_P(PointwiseAgainstReference, ForwardAndGradientMatch) {
  const PointwiseCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  auto layer = make_pointwise<float>(c);
  const HostArray<float> x = random_array(c.input, 1);
  const HostArray<float> dy = random_array(layer->output_shape(c.input), 2);
  const LayerStep<float> step = run_layer_step(self, *layer, c.input, x, dy);
  Dense xd = to_dense(x), dyd = to_dense(dy), y, dx;
  reference_pointwise(c, xd, dyd, y, dx);
  EXPECT_LE(error_against(step.y, y), kTolerance);
  EXPECT_LE(error_against(step.dx, dx), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Configurations, PointwiseAgainstReference, ::testing::ValuesIn(pointwise_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(PointwiseGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 4, 3};
  for (PointwiseCase c : pointwise_cases()) {
    c.input = shape;
    auto layer = make_pointwise<double>(c);
    HostArray<double> x = to_double(random_array(shape, 9));
    const HostArray<double> r = to_double(random_array(layer->output_shape(shape), 10));
    const LayerStep<double> step = run_layer_step(self, *layer, shape, x, r);
    constexpr double h = 1e-6;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double saved = x.data()[i];
      x.data()[i] = saved + h;
      const double up = probe_loss(self, *layer, shape, x, r);
      x.data()[i] = saved - h;
      const double down = probe_loss(self, *layer, shape, x, r);
      x.data()[i] = saved;
      EXPECT_NEAR((up - down) / (2 * h), step.dx.data()[i], 1e-6) << c.name << " dx element " << i;
    }
  }
}

// An activation's window is its owned tile: no halo is allocated and no exchange is made.
TEST(ActivationWindow, TakesTheLocalPath) {
  std::vector<std::string> lines;
  const LogSink previous = set_log_sink([&](const std::string& line) { lines.push_back(line); });
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 5, 5};
  auto relu = make_activation<float>("relu");
  EXPECT_EQ(input_halo(*relu, shape, self.dims()), HaloWidths{});
  Tensor<float> x = make_input(self, shape, *relu), y = make_output(self, shape, *relu);
  relu->forward(x, y);
  set_log_sink(previous);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("forward local"), std::string::npos) << lines[0];
}

TEST(PointwiseOptions, ParseAndPrint) {
  EXPECT_EQ(make_activation<float>("leakyrelu")->options(), "");
  EXPECT_EQ(make_activation<float>("leakyrelu", "slope=0.25")->options(), "slope=0.25");
  EXPECT_EQ(make_activation<float>("tanh")->kind(), "tanh");
  EXPECT_TRUE(is_activation("sigmoid"));
  EXPECT_FALSE(is_activation("maxpool"));
  EXPECT_EQ(UpsampleOptions::parse("").scale, 2);
  EXPECT_EQ(UpsampleOptions::parse("scale=3,overlap=off").to_spec(), "scale=3,overlap=off");
  EXPECT_EQ(Upsample<float>(UpsampleOptions::parse("scale=3")).output_shape({2, 3, 5, 4}), (Shape4{2, 3, 15, 12}));
}

TEST(PointwiseOptions, BadConfigurationsAreClearErrors) {
  auto has = [](const std::string& message, const char* part) { return message.find(part) != std::string::npos; };
  EXPECT_TRUE(has(message_of([] { make_activation<float>("relu", "slope=0.1"); }), "unknown option 'slope'"));
  EXPECT_TRUE(has(message_of([] { make_activation<float>("leakyrelu", "slope=abc"); }), "not a number"));
  EXPECT_TRUE(has(message_of([] { make_activation<float>("leakyrelu", "slope=0.1x"); }), "not a number"));
  EXPECT_TRUE(has(message_of([] { make_activation<float>("gelu"); }), "not an activation"));
  EXPECT_TRUE(has(message_of([] { UpsampleOptions::parse("scale=0"); }), "scale must be >= 1"));
  EXPECT_TRUE(has(message_of([] { UpsampleOptions::parse("mode=bilinear"); }), "unknown option 'mode'"));
}

}  // namespace
}  // namespace tessera::layers::testing
