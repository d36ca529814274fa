// Deconv2d in one process (a 1x1x1 grid): results against the naive double reference, a
// finite-difference gradient check, output shapes, option parsing, configuration errors,
// the window rule, and PyTorch's initialization bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "deconv_reference.hpp"
#include "deconv_test_support.hpp"

namespace tessera::layers::testing {
namespace {

class DeconvAgainstReference : public ::testing::TestWithParam<DeconvCase> {};

// Forward y, dx, dW and db of every configuration, with overlap on and off, equal the naive
// double-precision transposed convolution to fp32 rounding (1e-5 of the largest magnitude).
TEST_P(DeconvAgainstReference, ForwardAndGradientsMatch) {
  const DeconvCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (Overlap overlap : {Overlap::on, Overlap::off}) {
    Deconv2dOptions options = Deconv2dOptions::parse(c.spec);
    options.windowed.overlap = overlap;
    const ReferenceDeconv ref{options, c.input};
    const HostArray<float> x = random_array(c.input, 1);
    const HostArray<float> dy = random_array(ref.y_shape(), 2);
    const ConvStep step = run_deconv_step(self, options, c.input, x, dy);

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

INSTANTIATE_TEST_SUITE_P(Configurations, DeconvAgainstReference, ::testing::ValuesIn(deconv_cases()),
                         [](const auto& info) { return info.param.name; });

// Finite differences of L = sum(y * r) agree with backward's dx, dW and db on a tiny strided,
// padded case with output padding (fp32 kernels: step 1e-2, tolerance 2e-3 of the
// gradient's scale). deconv is linear in each argument, so a central difference is exact up
// to fp32 rounding of y.
TEST(DeconvGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 4, 3};
  Deconv2d<float> deconv(Deconv2dOptions::parse("out=2,k=3,stride=2,pad_top=1,pad_bottom=0,pad_left=2,out_pad=1"),
                         shape[C], 11);
  HostArray<float> x = random_array(shape, 3);
  const HostArray<float> r = random_array(deconv.output_shape(shape), 4);

  Tensor<float> xt = make_input(self, shape, deconv), yt = make_output(self, shape, deconv);
  Tensor<float> rt = make_output(self, shape, deconv), dxt = make_input(self, shape, deconv);
  scatter(x, xt);
  scatter(r, rt);
  deconv.forward(xt, yt);
  for (auto* p : deconv.params()) p->zero_grad();
  deconv.backward(rt, dxt);
  const HostArray<float> dx = gather(dxt);

  constexpr float h = 1e-2f;
  constexpr double tolerance = 2e-3;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x.data()[i];
    x.data()[i] = saved + h;
    const double up = probe_loss(self, deconv, shape, x, r);
    x.data()[i] = saved - h;
    const double down = probe_loss(self, deconv, shape, x, r);
    x.data()[i] = saved;
    EXPECT_NEAR((up - down) / (2 * h), dx.data()[i], tolerance) << "dx element " << i;
  }
  for (Parameter<float>* p : deconv.params()) {
    const std::vector<float> grad = to_host_vector(p->grad);
    for (std::size_t i = 0; i < grad.size(); i += 3) {
      nudge(*p, i, h);
      const double up = probe_loss(self, deconv, shape, x, r);
      nudge(*p, i, -2 * h);
      const double down = probe_loss(self, deconv, shape, x, r);
      nudge(*p, i, h);
      EXPECT_NEAR((up - down) / (2 * h), grad[i], tolerance) << p->name << " element " << i;
    }
  }
}

// Output sizes PyTorch's ConvTranspose2d gives for the same arguments:
// (H-1)*s - 2p + d*(k-1) + out_pad + 1.
TEST(DeconvShape, OutputSizesArePyTorchs) {
  const Shape4 in{2, 3, 7, 5};
  const auto out = [&](const char* spec) {
    return Deconv2d<float>(Deconv2dOptions::parse(spec), 3, 0).output_shape(in);
  };
  EXPECT_EQ(out("out=4,k=4,stride=2,pad=1"), (Shape4{2, 4, 14, 10}));
  EXPECT_EQ(out("out=1,k=3,stride=2,pad=1,out_pad=1"), (Shape4{2, 1, 14, 10}));
  EXPECT_EQ(out("out=2,k=3,dilation=2,out_pad=1"), (Shape4{2, 2, 12, 10}));
  EXPECT_EQ(out("out=2,kh=3,kw=1,sh=3,sw=2,pad=1,out_pad_h=2,out_pad_w=1"), (Shape4{2, 2, 21, 8}));
  EXPECT_EQ(out("out=2,k=1"), (Shape4{2, 2, 7, 5}));
}

// Weight (C_in, C_out, kh, kw) and bias (C_out), uniform in ±1/sqrt(C_out*kh*kw) as
// PyTorch draws a ConvTranspose2d's (its fan_in is the weight's second extent times the
// kernel), the same for the same seed.
TEST(DeconvParameters, LayoutAndInitializationArePyTorchs) {
  const Deconv2dOptions options = Deconv2dOptions::parse("out=5,kh=3,kw=2");
  Deconv2d<float> a(options, 4, 7), b(options, 4, 7);
  const auto params = a.params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->shape, (std::vector<std::int64_t>{4, 5, 3, 2}));
  EXPECT_EQ(params[1]->name, "bias");
  EXPECT_EQ(params[1]->shape, (std::vector<std::int64_t>{5}));
  const double bound = 1.0 / std::sqrt(5.0 * 3 * 2);
  for (Parameter<float>* p : params) {
    const std::vector<float> v = to_host_vector(p->value);
    double largest = 0;
    for (const float e : v) largest = std::max(largest, std::abs(static_cast<double>(e)));
    EXPECT_LE(largest, bound) << p->name;
    EXPECT_GT(largest, 0.5 * bound) << p->name;
  }
  EXPECT_EQ(to_host_vector(a.params()[0]->value), to_host_vector(b.params()[0]->value));
  EXPECT_EQ(Deconv2d<float>(Deconv2dOptions::parse("out=5,k=3,bias=false"), 4, 7).params().size(), 1u);
}

// Spec options round-trip through to_spec(), shorthands expand, and defaults are PyTorch's.
TEST(DeconvOptions, ParseAndPrint) {
  const Deconv2dOptions o = Deconv2dOptions::parse("out=8, k=4, stride=2, pad_top=0, pad=1, out_pad_w=1");
  EXPECT_EQ(o.out, 8);
  EXPECT_EQ(o.kh, 4);
  EXPECT_EQ(o.kw, 4);
  EXPECT_EQ(o.sh, 2);
  EXPECT_EQ(o.sw, 2);
  EXPECT_EQ(o.dh, 1);
  EXPECT_EQ(o.pad, (Padding{0, 1, 1, 1}));
  EXPECT_EQ(o.out_pad_h, 0);
  EXPECT_EQ(o.out_pad_w, 1);
  EXPECT_EQ(o.bias, Bias::with);
  EXPECT_EQ(o.windowed.overlap, Overlap::on);
  for (const DeconvCase& c : deconv_cases()) {
    const Deconv2dOptions parsed = Deconv2dOptions::parse(c.spec);
    EXPECT_EQ(Deconv2dOptions::parse(parsed.to_spec()).to_spec(), parsed.to_spec()) << c.spec;
  }
  EXPECT_EQ(Deconv2dOptions::parse("out=4,k=4,stride=2,pad=1,out_pad=1,overlap=off,bias=false").to_spec(),
            "out=4,k=4,stride=2,pad=1,out_pad=1,bias=false,overlap=off");
}

// Bad configurations are std::invalid_argument with a message naming the problem.
TEST(DeconvOptions, BadConfigurationsAreClearErrors) {
  const auto error = [](const char* spec) { return message_of([&] { Deconv2dOptions::parse(spec); }); };
  const auto says = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << "\"" << message << "\"";
  };
  EXPECT_TRUE(says(error("out=4,k=3,stride=0"), "stride must be >= 1"));
  EXPECT_TRUE(says(error("out=4,k=0"), "kernel must be >= 1"));
  EXPECT_TRUE(says(error("out=4,k=3,dilation=0"), "dilation must be >= 1"));
  EXPECT_TRUE(says(error("out=4,k=3,pad=-1"), "padding must be >= 0"));
  EXPECT_TRUE(says(error("out=4,k=3,stride=2,out_pad=2"),
                   "out_pad 2x2 must be smaller than the stride (2x2) or the dilation (1x1)"));
  EXPECT_TRUE(says(error("out=4,k=3,out_pad_w=1"), "must be smaller than the stride"));
  EXPECT_TRUE(says(error("out=4,k=3,out_pad=-1"), "out_pad must be >= 0"));
  EXPECT_TRUE(says(error("out=4,k=3,groups=2"), "unknown option 'groups'"));
  EXPECT_TRUE(says(error("out=4,k=3,kernel=5"), "unknown option 'kernel'"));
  EXPECT_TRUE(says(error("k=3"), "deconv: option 'out'"));
  EXPECT_TRUE(says(error("out=4,k=3,kh=5"), "not both"));
  EXPECT_TRUE(says(error("out=4,k=three"), "not an integer"));
  // Padding that cuts away everything the input spreads over: a kernel too small (or
  // padding too large) for the image leaves no output.
  const Deconv2d<float> deconv(Deconv2dOptions::parse("out=4,k=3,pad=3"), 3, 0);
  EXPECT_TRUE(says(message_of([&] { deconv.output_shape({1, 3, 2, 9}); }),
                   "a 2x9 input spreads over 4x11 cells, which padding of 6x6 cuts away entirely"));
  EXPECT_TRUE(says(message_of([&] { deconv.output_shape({1, 2, 9, 9}); }), "channels"));
  EXPECT_EQ(deconv.output_shape({1, 3, 5, 5}), (Shape4{1, 4, 1, 1}));  // 7 cells less 6: PyTorch's size
  Deconv2dOptions stride_zero;
  stride_zero.out = 4, stride_zero.sh = 0;
  EXPECT_THROW(Deconv2d<float>(stride_zero, 3, 0), std::invalid_argument);
  EXPECT_TRUE(says(message_of([] { Deconv2d<float>(Deconv2dOptions::parse("out=2"), 0, 0); }), "in_channels=0"));
}

// The window rule: output rows [o0, o1) read input rows
// [ceil((o0 + pad_top - d*(k-1)) / s), floor((o1-1 + pad_top) / s) + 1), cut to the image.
TEST(DeconvWindow, WindowFollowsTheRule) {
  const Deconv2d<float> deconv(Deconv2dOptions::parse("out=2,kh=4,kw=3,sh=2,sw=3,dw=2,pad_top=1,pad_left=2"), 3, 0);
  const Shape4 in{2, 3, 20, 20};
  // rows [5, 9): ceil((5+1-3)/2) = 2 .. floor((8+1)/2) = 4; columns [4, 8): ceil((4+2-4)/3) = 1 .. floor((7+2)/3) = 3
  EXPECT_EQ(deconv.input_window(Box{{1, 0, 5, 4}, {2, 2, 9, 8}}, in), (Box{{1, 0, 2, 1}, {2, 3, 5, 4}}));
  // At the image's top the window is cut to row 0 (row -1 would be zero anyway).
  EXPECT_EQ(deconv.input_window(Box{{0, 0, 0, 0}, {1, 2, 2, 2}}, in), (Box{{0, 0, 0, 0}, {1, 3, 2, 2}}));
  // A stride longer than the kernel leaves output rows no input reaches: an empty window.
  const Deconv2d<float> gaps(Deconv2dOptions::parse("out=2,k=1,stride=3"), 3, 0);
  EXPECT_TRUE(gaps.input_window(Box{{0, 0, 4, 0}, {1, 2, 6, 3}}, in).empty());
  EXPECT_EQ(gaps.input_window(Box{{0, 0, 4, 0}, {1, 2, 7, 3}}, in), (Box{{0, 0, 2, 0}, {1, 3, 3, 1}}));
}

// The halo an input needs follows from the windows of every rank's output tile: on one
// rank none (the window is cut to the image), on two row tiles one row from the neighbour
// that rank 1's outputs reach back into — and for a k=4, stride 2 upsampling only there.
TEST(DeconvWindow, HaloFollowsTheWindows) {
  const Deconv2d<float> same(Deconv2dOptions::parse("out=2,k=3,pad=1"), 3, 0);
  EXPECT_EQ(input_halo(same, {1, 3, 8, 8}, {1, 1, 1}), HaloWidths{});
  EXPECT_EQ(input_halo(same, {1, 3, 8, 8}, {1, 2, 1}), (HaloWidths{{0, 0, 1, 0}, {0, 0, 1, 0}}));
  const Deconv2d<float> up(Deconv2dOptions::parse("out=2,k=4,stride=2,pad=1"), 3, 0);
  EXPECT_EQ(input_halo(up, {1, 3, 7, 8}, {1, 2, 1}), (HaloWidths{{0, 0, 1, 0}, {0, 0, 0, 0}}));
}

}  // namespace
}  // namespace tessera::layers::testing
