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
#include "tests/layers/pooling/layer_step.hpp"

namespace tessera::layers::testing {
namespace {

Dense to_dense(const HostArray<float>& a) {
  Dense d(tessera::detail::shape_of(a));
  std::copy(a.data(), a.data() + a.size(), d.v.begin());
  return d;
}

double error_against(const HostArray<float>& got, const Dense& want) {
  return got.size() == want.v.size() ? relative_error(got.data(), want.v.data(), want.v.size()) : INFINITY;
}

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

HostArray<double> to_double(const HostArray<float>& a) {
  HostArray<double> d("d", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) d.data()[i] = a.data()[i];
  return d;
}

// L = sum(layer(x) * r); central differences in double agree with dx.
double probe_loss(const ProcessGrid& grid, Layer<double>& layer, const Shape4& shape, const HostArray<double>& x,
                  const HostArray<double>& r) {
  Tensor<double> xt = make_input(grid, shape, layer), yt = make_output(grid, shape, layer);
  scatter(x, xt);
  layer.forward(xt, yt);
  const HostArray<double> y = gather(yt);
  double loss = 0;
  for (std::size_t i = 0; i < y.size(); ++i) loss += y.data()[i] * r.data()[i];
  return loss;
}

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
  auto message_of = [](auto make) -> std::string {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
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
