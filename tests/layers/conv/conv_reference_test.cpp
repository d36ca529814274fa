// Conv2d in one process (a 1x1x1 grid): results against the naive double reference, a
// finite-difference gradient check, option parsing, configuration errors, and the log
// line that says which forward path ran.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv_reference.hpp"
#include "conv_test_support.hpp"

namespace tessera::layers::testing {
namespace {

class ConvAgainstReference : public ::testing::TestWithParam<ConvCase> {};

// Forward y, dx, dW and db of every configuration, with overlap on and off, equal the naive
// double-precision convolution to fp32 rounding (1e-5 of the largest magnitude).
TEST_P(ConvAgainstReference, ForwardAndGradientsMatch) {
  const ConvCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (Overlap overlap : {Overlap::on, Overlap::off}) {
    Conv2dOptions options = Conv2dOptions::parse(c.spec);
    options.windowed.overlap = overlap;
    const ReferenceConv ref{options, c.input};
    const HostArray<float> x = random_array(c.input, 1);
    const HostArray<float> dy = random_array(ref.y_shape(), 2);
    const ConvStep step = run_conv_step(self, options, c.input, x, dy);

    Dense xd = to_dense(x), dyd = to_dense(dy), w = to_dense(step.weight, ref.w_shape());
    const std::vector<double> b(step.bias.begin(), step.bias.end());
    SCOPED_TRACE(c.name + (overlap == Overlap::on ? " overlap on" : " overlap off"));
    EXPECT_LE(error_against(step.y, ref.forward(xd, w, b)), kTolerance);
    EXPECT_LE(error_against(step.dx, ref.input_gradient(dyd, w)), kTolerance);
    EXPECT_LE(error_against(step.dweight, ref.weight_gradient(xd, dyd).v), kTolerance);
    if (options.bias == Bias::with) EXPECT_LE(error_against(step.dbias, ref.bias_gradient(dyd)), kTolerance);
    else EXPECT_TRUE(step.dbias.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, ConvAgainstReference, ::testing::ValuesIn(conv_cases()),
                         [](const auto& info) { return info.param.name; });

// Finite differences of L = sum(y * r) agree with backward's dx, dW and db on a tiny strided,
// padded case (fp32 kernels: step 1e-2, tolerance 2e-3 of the gradient's scale). conv is
// linear in each argument, so a central difference is exact up to fp32 rounding of y.
TEST(ConvGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 6, 5};
  Conv2d<float> conv(Conv2dOptions::parse("out=2,k=3,stride=2,pad_top=1,pad_bottom=0,pad_left=2,pad_right=1"),
                     shape[C], 11);
  HostArray<float> x = random_array(shape, 3);
  const HostArray<float> r = random_array(conv.output_shape(shape), 4);

  Tensor<float> xt = make_input(self, shape, conv), yt = make_output(self, shape, conv);
  Tensor<float> rt = make_output(self, shape, conv), dxt = make_input(self, shape, conv);
  scatter(x, xt);
  scatter(r, rt);
  conv.forward(xt, yt);
  for (auto* p : conv.params()) p->zero_grad();
  conv.backward(rt, dxt);
  const HostArray<float> dx = gather(dxt);

  constexpr float h = 1e-2f;
  constexpr double tolerance = 2e-3;
  for (std::size_t i = 0; i < x.size(); i += 7) {
    const float saved = x.data()[i];
    x.data()[i] = saved + h;
    const double up = probe_loss(self, conv, shape, x, r);
    x.data()[i] = saved - h;
    const double down = probe_loss(self, conv, shape, x, r);
    x.data()[i] = saved;
    EXPECT_NEAR((up - down) / (2 * h), dx.data()[i], tolerance) << "dx element " << i;
  }
  for (Parameter<float>* p : conv.params()) {
    const std::vector<float> grad = to_host_vector(p->grad);
    for (std::size_t i = 0; i < grad.size(); i += 5) {
      nudge(*p, i, h);
      const double up = probe_loss(self, conv, shape, x, r);
      nudge(*p, i, -2 * h);
      const double down = probe_loss(self, conv, shape, x, r);
      nudge(*p, i, h);
      EXPECT_NEAR((up - down) / (2 * h), grad[i], tolerance) << p->name << " element " << i;
    }
  }
}

// Spec options round-trip through to_spec(), shorthands expand, and defaults are PyTorch's.
TEST(ConvOptions, ParseAndPrint) {
  const Conv2dOptions o = Conv2dOptions::parse("out=8, k=3, stride=2, pad_top=0, pad_bottom=2, pad=1");
  EXPECT_EQ(o.out, 8);
  EXPECT_EQ(o.kh, 3);
  EXPECT_EQ(o.kw, 3);
  EXPECT_EQ(o.sw, 2);
  EXPECT_EQ(o.pad, (Padding{0, 2, 1, 1}));
  EXPECT_EQ(o.bias, Bias::with);
  EXPECT_EQ(o.groups, 1);
  EXPECT_EQ(o.windowed.overlap, Overlap::on);
  for (const ConvCase& c : conv_cases()) {
    const Conv2dOptions parsed = Conv2dOptions::parse(c.spec);
    EXPECT_EQ(Conv2dOptions::parse(parsed.to_spec()).to_spec(), parsed.to_spec()) << c.spec;
  }
  EXPECT_EQ(Conv2dOptions::parse("out=4,kh=3,kw=5,overlap=off,bias=false").to_spec(),
            "out=4,kh=3,kw=5,bias=false,overlap=off");
}

// Bad configurations are std::invalid_argument with a message naming the problem.
TEST(ConvOptions, BadConfigurationsAreClearErrors) {
  EXPECT_NE(message_of([] { Conv2dOptions::parse("out=4,k=3,stride=0"); }).find("stride must be >= 1"),
            std::string::npos);
  EXPECT_NE(message_of([] { Conv2dOptions::parse("out=4,k=3,kernel=5"); }).find("unknown option 'kernel'"),
            std::string::npos);
  EXPECT_NE(message_of([] { Conv2dOptions::parse("k=3"); }).find("'out'"), std::string::npos);
  EXPECT_NE(message_of([] { Conv2dOptions::parse("out=4,k=3,kh=5"); }).find("not both"), std::string::npos);
  EXPECT_NE(message_of([] { Conv2dOptions::parse("out=4,k=three"); }).find("not an integer"), std::string::npos);
  EXPECT_NE(message_of([] { Conv2dOptions::parse("out=4,k=3,groups=3"); }).find("divisible"), std::string::npos);
  const Conv2d<float> conv(Conv2dOptions::parse("out=4,k=7,pad=1"), 3, 0);
  EXPECT_NE(message_of([&] { conv.output_shape({1, 3, 4, 9}); }).find("padded image is only 6x11"),
            std::string::npos);
  EXPECT_NE(message_of([&] { conv.output_shape({1, 2, 9, 9}); }).find("channels"), std::string::npos);
  Conv2dOptions stride_zero;
  stride_zero.out = 4, stride_zero.sh = 0;
  EXPECT_THROW(Conv2d<float>(stride_zero, 3, 0), std::invalid_argument);
}

// An input allocated without the halo its window needs is refused before any work.
TEST(ConvWindow, InputWithoutHaloIsRefused) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 3, 8, 8};
  Conv2d<float> conv(Conv2dOptions::parse("out=2,k=3,pad=1"), 3, 0);
  const Tensor<float> bare(self, shape), y = make_output(self, shape, conv);
  try {
    conv.forward(bare, y);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("make_input"), std::string::npos) << e.what();
  }
  EXPECT_EQ(input_halo(conv, shape, self.dims()), (HaloWidths{{0, 0, 1, 1}, {0, 0, 1, 1}}));
}

// The window rule: rows [o0*s - pad_top, (o1-1)*s - pad_top + (k-1)*d + 1), all channels.
TEST(ConvWindow, WindowFollowsTheRule) {
  const Conv2d<float> conv(Conv2dOptions::parse("out=2,kh=3,kw=5,sh=2,sw=3,dh=2,dw=1,pad_top=1,pad_left=2"), 3, 0);
  const Box out{{1, 0, 2, 1}, {2, 2, 4, 3}};
  const Box window = conv.input_window(out, {2, 3, 20, 20});
  EXPECT_EQ(window, (Box{{1, 0, 3, 1}, {2, 3, 3 + 2 + 4 + 1, 1 + 3 + 4 + 1}}));
}

// Which forward path ran is logged once per layer: overlapped, plain by choice.
TEST(ConvLog, ForwardPathIsLoggedOnce) {
  std::vector<std::string> lines;
  const LogSink previous = set_log_sink([&](const std::string& line) { lines.push_back(line); });
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 8, 8};
  for (const char* spec : {"out=2,k=3,pad=1", "out=2,k=3,pad=1,overlap=off"}) {
    Conv2d<float> conv(Conv2dOptions::parse(spec), 2, 0);
    Tensor<float> x = make_input(self, shape, conv), y = make_output(self, shape, conv);
    conv.forward(x, y);
    conv.forward(x, y);
  }
  set_log_sink(previous);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("forward overlapped"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("forward plain (overlap off)"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace tessera::layers::testing
