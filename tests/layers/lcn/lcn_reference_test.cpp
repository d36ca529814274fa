// LocalContrastNorm in one process (a 1x1x1 grid): forward and dx against the naive double
// reference for every configuration, finite differences in double precision, behaviour on
// flat and constant images, option parsing and configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "lcn_reference.hpp"
#include "lcn_test_support.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/layer_step.hpp"

namespace tessera::layers::testing {
namespace {

class LcnAgainstReference : public ::testing::TestWithParam<LcnCase> {};

TEST_P(LcnAgainstReference, ForwardAndGradientMatch) {
  const LcnCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (Overlap overlap : {Overlap::on, Overlap::off}) {
    LcnOptions options = c.options();
    options.windowed.overlap = overlap;
    const ReferenceLcn ref{options, c.input};
    LocalContrastNorm<float> lcn(options);
    const HostArray<float> x = random_array(c.input, 1);
    const HostArray<float> dy = random_array(c.input, 2);
    const LayerStep<float> step = run_layer_step(self, lcn, c.input, x, dy);
    Dense xd = to_dense(x), dyd = to_dense(dy);
    SCOPED_TRACE(c.name + (overlap == Overlap::on ? " overlap on" : " overlap off"));
    EXPECT_LE(error_against(step.y, ref.forward(xd)), kTolerance);
    EXPECT_LE(error_against(step.dx, ref.input_gradient(xd, dyd)), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, LcnAgainstReference, ::testing::ValuesIn(lcn_cases()),
                         [](const auto& info) { return info.param.name; });

// L = sum(lcn(x) * r) in double; central differences agree with dx through every step —
// the mean, the local sigma, the image-wide mean of sigma and the max between them.
TEST(LcnGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (const char* spec : {"k=3", "k=5,sigma=1"}) {
    SCOPED_TRACE(spec);
    const Shape4 shape{2, 2, 6, 5};
    LocalContrastNorm<double> lcn(LcnOptions::parse(spec));
    HostArray<double> x = to_double(random_array(shape, 3));
    const HostArray<double> r = to_double(random_array(shape, 4));
    const LayerStep<double> step = run_layer_step(self, lcn, shape, x, r);
    constexpr double h = 1e-6, tolerance = 1e-6;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double saved = x.data()[i];
      x.data()[i] = saved + h;
      const double up = probe_loss(self, lcn, shape, x, r);
      x.data()[i] = saved - h;
      const double down = probe_loss(self, lcn, shape, x, r);
      x.data()[i] = saved;
      EXPECT_NEAR((up - down) / (2 * h), step.dx.data()[i], tolerance) << "dx element " << i;
    }
  }
}

// A constant image has nothing to normalise: v = 0 everywhere, the border included (the
// renormalised mean of a constant is the constant), and the floor keeps y finite.
TEST(LcnImages, ConstantImageGivesZero) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 3, 9, 8};
  LocalContrastNorm<float> lcn(LcnOptions::parse("k=5"));
  HostArray<float> x("x", 1, 3, 9, 8);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = 0.75f;
  const LayerStep<float> step = run_layer_step(self, lcn, shape, x, random_array(shape, 5));
  for (std::size_t i = 0; i < step.y.size(); ++i) {
    EXPECT_LE(std::abs(step.y.data()[i]), 1e-3f) << i;
    EXPECT_TRUE(std::isfinite(step.dx.data()[i])) << i;
  }
}

// Output shape, window and halo: a k x k window needs 2*(k/2) cells of halo (sigma reads v
// within k/2, v reads x within k/2), every channel, and nothing outside the image (the
// border renormalises instead of padding), so one rank needs no halo at all.
TEST(LcnWindow, WindowIsTheBoxGrownByTwiceTheRadiusInsideTheImage) {
  const LocalContrastNorm<float> lcn(LcnOptions::parse("k=5"));
  const Shape4 shape{2, 3, 20, 20};
  EXPECT_EQ(lcn.output_shape(shape), shape);
  EXPECT_EQ(lcn.input_window(Box{{1, 0, 4, 6}, {2, 3, 8, 9}}, shape), (Box{{1, 0, 0, 2}, {2, 3, 12, 13}}));
  EXPECT_EQ(lcn.input_window(Box{{0, 0, 1, 17}, {1, 3, 2, 19}}, shape), (Box{{0, 0, 0, 13}, {1, 3, 6, 20}}));
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  EXPECT_EQ(input_halo(lcn, shape, self.dims()), HaloWidths{});
  EXPECT_EQ(input_halo(lcn, shape, GridDims{1, 2, 2}), (HaloWidths{{0, 0, 4, 4}, {0, 0, 4, 4}}));
}

TEST(LcnOptionsSpec, ParseAndPrint) {
  const LcnOptions o = LcnOptions::parse("k=9");
  EXPECT_EQ(o.k, 9);
  EXPECT_DOUBLE_EQ(o.sigma, 2.25);  // k/4
  EXPECT_EQ(o.windowed.overlap, Overlap::on);
  EXPECT_EQ(o.to_spec(), "k=9");
  EXPECT_DOUBLE_EQ(LcnOptions::parse("k=5, sigma=1.5").sigma, 1.5);
  for (const LcnCase& c : lcn_cases())
    EXPECT_EQ(LcnOptions::parse(c.options().to_spec()).to_spec(), c.options().to_spec()) << c.spec;
  EXPECT_EQ(LcnOptions::parse("k=3,sigma=0.1,overlap=off").to_spec(), "k=3,sigma=0.10000000000000001,overlap=off");
}

TEST(LcnOptionsSpec, BadConfigurationsAreClearErrors) {
  EXPECT_NE(message_of([] { LcnOptions::parse("k=4"); }).find("k must be odd"), std::string::npos);
  EXPECT_NE(message_of([] { LcnOptions::parse("k=0"); }).find("k must be >= 1"), std::string::npos);
  EXPECT_NE(message_of([] { LcnOptions::parse("sigma=2"); }).find("'k'"), std::string::npos);
  EXPECT_NE(message_of([] { LcnOptions::parse("k=5,sigma=0"); }).find("sigma must be"), std::string::npos);
  EXPECT_NE(message_of([] { LcnOptions::parse("k=5,sigma=wide"); }).find("not a number"), std::string::npos);
  EXPECT_NE(message_of([] { LcnOptions::parse("k=5,stride=2"); }).find("unknown option 'stride'"), std::string::npos);
  LcnOptions even;
  even.k = 2, even.sigma = 1;
  EXPECT_THROW(LocalContrastNorm<float>{even}, std::invalid_argument);
}

}  // namespace
}  // namespace tessera::layers::testing
