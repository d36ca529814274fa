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
#include "tests/layers/support/non_finite.hpp"

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

// NaN and infinities as PyTorch treats them. x holds NaN, +-inf, 0 and finite values; dy
// holds NaN where the slope is 0 (PyTorch's backward selects there, so dx is 0, not NaN)
// and where it is not (dx is NaN).
//   relu = clamp_min(x, 0): relu(NaN) = NaN, relu(-inf) = 0, relu(inf) = inf; backward is
//     threshold_backward(dy, y, 0): dy where NOT(y <= 0), so it passes at NaN, else 0.
//   leaky_relu: x > 0 ? x : x * slope (NaN -> NaN); backward x > 0 ? dy : dy * slope.
//   sigmoid, tanh: NaN propagates; +-inf saturate (sigmoid 1/0, tanh +-1) with slope 0;
//     backward dy * (1 - y) * y and dy * (1 - y * y).
TEST(PointwiseNonFinite, ActivationsMatchPyTorch) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::vector<float> x{kNan, kInf, -kInf, 0.0f, 1.5f, -2.0f, 3.0f, kNan};
  const std::vector<float> dy{1.0f, 2.0f, 3.0f, kNan, 5.0f, kNan, kNan, -1.0f};
  const float s = 0.01f;
  const auto sig = [](float v) { return 1.0f / (1.0f + std::exp(-v)); };
  const auto dtanh = [](float v) { return 1.0f - std::tanh(v) * std::tanh(v); };
  struct Expected {
    const char* kind;
    std::vector<float> y, dx;
  };
  const std::vector<Expected> cases{
      {"relu", {kNan, kInf, 0, 0, 1.5f, 0, 3, kNan}, {1, 2, 0, 0, 5, 0, kNan, -1}},
      {"leakyrelu", {kNan, kInf, -kInf, 0, 1.5f, -2 * s, 3, kNan}, {s, 2, 3 * s, kNan, 5, kNan, kNan, -s}},
      {"sigmoid", {kNan, 1, 0, 0.5f, sig(1.5f), sig(-2), sig(3), kNan},
       {kNan, 0, 0, kNan, 5 * sig(1.5f) * (1 - sig(1.5f)), kNan, kNan, kNan}},
      {"tanh", {kNan, 1, -1, 0, std::tanh(1.5f), std::tanh(-2.0f), std::tanh(3.0f), kNan},
       {kNan, 0, 0, kNan, 5 * dtanh(1.5f), kNan, kNan, kNan}},
  };
  for (const Expected& want : cases) {
    auto layer = make_activation<float>(want.kind);
    const Shape4 shape{1, 1, 2, 4};
    const LayerStep<float> step =
        run_layer_step(self, *layer, shape, array_of(2, 4, x), array_of(2, 4, dy));
    expect_same_values(step.y, want.y, std::string(want.kind) + " y");
    expect_same_values(step.dx, want.dx, std::string(want.kind) + " dx");
  }
}

// Nearest upsampling copies values forward and sums dy backward: NaN and infinities
// propagate by arithmetic (inf + -inf = NaN), as in PyTorch's upsample_nearest2d.
TEST(PointwiseNonFinite, UpsamplePropagates) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Upsample<float> up(UpsampleOptions::parse("scale=2"));
  const Shape4 shape{1, 1, 1, 4};
  const HostArray<float> dy = array_of(2, 8, {1, 1, kInf, 1, kInf, 1, 1, 1,  //
                                              1, 1, 1, -kInf, 1, 1, 1, kNan});
  const LayerStep<float> step = run_layer_step(self, up, shape, array_of(1, 4, {kNan, kInf, -kInf, 2}), dy);
  const std::vector<float> row{kNan, kNan, kInf, kInf, -kInf, -kInf, 2, 2};
  std::vector<float> y = row;
  y.insert(y.end(), row.begin(), row.end());
  expect_same_values(step.y, y, "upsample y");
  expect_same_values(step.dx, {4, kNan, kInf, kNan}, "upsample dx");
}

// bf16 upsampling's backward reads bf16 dy directly (each cell widened exactly) into its fp32
// copy of dx (layers/upsample.hpp): that must be the fp32 block sums of an fp32 copy of dy
// bit for bit — scale 2 (the vectorised host rows) and 3, whole blocks and blocks cut by a tile
// border (dy's box starting inside a block), on the build's row loops (the GPU's in a CUDA
// build: the operands live where the loops run).
TEST(UpsampleBf16, BlockSumsReadingBf16DyEqualThoseOfItsFp32Copy) {
  using Space = Kokkos::DefaultExecutionSpace::memory_space;
  struct Case {
    std::int64_t scale, rows, cols, row0, col0;  // dy's extents and global origin
  };
  for (const Case& k : {Case{2, 6, 40, 0, 0}, Case{2, 5, 37, 1, 3}, Case{3, 7, 20, 2, 1}}) {
    const std::int64_t in_row0 = k.row0 / k.scale, in_col0 = k.col0 / k.scale;
    const std::int64_t in_rows = (k.row0 + k.rows - 1) / k.scale + 1 - in_row0;
    const std::int64_t in_cols = (k.col0 + k.cols - 1) / k.scale + 1 - in_col0;
    const HostArray<float> random = random_array({2, 3, k.rows, k.cols}, 31);
    HostArray<bf16> dy16("dy16", 2, 3, k.rows, k.cols);
    HostArray<float> dy32("dy32", 2, 3, k.rows, k.cols);
    for (std::size_t i = 0; i < random.size(); ++i) {
      dy16.data()[i] = bf16(random.data()[i] * 100.0f);
      dy32.data()[i] = float(dy16.data()[i]);
    }
    const auto dy16_here = Kokkos::create_mirror_view_and_copy(Space(), dy16);
    const auto dy32_here = Kokkos::create_mirror_view_and_copy(Space(), dy32);
    Kokkos::View<float****, Kokkos::LayoutRight, Space> from16("from16", 2, 3, in_rows, in_cols),
        from32("from32", 2, 3, in_rows, in_cols);
    for_each_row("test::upsample_backward", extents_of(from16),
                 upsample_kernels::Backward<float, bf16>{rows_of(dy16_here), rows_of(from16), k.rows, k.cols, k.scale,
                                                         k.row0, k.col0, in_row0, in_col0});
    for_each_row("test::upsample_backward", extents_of(from32),
                 upsample_kernels::Backward<float>{rows_of(dy32_here), rows_of(from32), k.rows, k.cols, k.scale,
                                                   k.row0, k.col0, in_row0, in_col0});
    const auto got16 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from16);
    const auto got32 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), from32);
    for (std::size_t i = 0; i < got16.size(); ++i)
      ASSERT_EQ(got16.data()[i], got32.data()[i]) << "scale " << k.scale << " cell " << i;
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
