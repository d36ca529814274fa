// LocallyConnected2d in one process (a 1x1x1 grid): both engines against the naive double
// reference, a finite-difference gradient check, option parsing, placement, and
// configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "local_reference.hpp"
#include "local_test_support.hpp"

namespace tessera::layers::testing {
namespace {

std::vector<float> host_vector(const Parameter<float>::View& v) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<float>(host.data(), host.data() + host.size());
}

class LocalAgainstReference : public ::testing::TestWithParam<LocalCase> {};

// Forward y, dx, dW and db of every configuration, with both engines and overlap on and
// off, equal the naive double-precision layer to fp32 rounding.
TEST_P(LocalAgainstReference, ForwardAndGradientsMatch) {
  const LocalCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (LocalEngine engine : both_engines())
    for (Overlap overlap : {Overlap::on, Overlap::off}) {
      LocalOptions options = c.options(engine);
      options.windowed.overlap = overlap;
      const ReferenceLocal ref{options, c.input};
      const HostArray<float> x = random_array(c.input, 1);
      const HostArray<float> dy = random_array(ref.y_shape(), 2);
      const LocalStep step = run_local_step(self, options, c.input, x, dy);

      Dense xd = to_dense(x), dyd = to_dense(dy);
      SCOPED_TRACE(c.name + ", " + engine_text(engine) + (overlap == Overlap::on ? ", overlap on" : ", overlap off"));
      ASSERT_EQ(step.weight.size(), ref.weight_count());
      EXPECT_LE(error_against(step.y, ref.forward(xd, step.weight, step.bias)), kTolerance);
      EXPECT_LE(error_against(step.dx, ref.input_gradient(dyd, step.weight)), kTolerance);
      EXPECT_LE(relative_error(step.dweight, ref.weight_gradient(xd, dyd)), kTolerance);
      if (options.bias == Bias::with) EXPECT_LE(relative_error(step.dbias, ref.bias_gradient(dyd)), kTolerance);
      else EXPECT_TRUE(step.dbias.empty());
    }
}

INSTANTIATE_TEST_SUITE_P(Configurations, LocalAgainstReference, ::testing::ValuesIn(local_cases()),
                         [](const auto& info) { return info.param.name; });

// Nudges element i of a 1-D parameter view by delta.
void nudge(const Parameter<float>::View& v, std::size_t i, float delta) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  host(i) += delta;
  Kokkos::deep_copy(v, host);
}

// Finite differences of L = sum(y * r) agree with backward's dx, dW and db on a tiny strided,
// padded case (fp32 kernels: step 1e-2, tolerance 2e-3; the layer is linear in each
// argument, so the central difference is exact up to rounding).
TEST(LocalGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 2, 6, 5};
  for (LocalEngine engine : both_engines()) {
    SCOPED_TRACE(engine_text(engine));
    LocalOptions options = LocalOptions::parse("out=2,k=3,stride=2,pad_top=1,pad_bottom=0,pad_left=2,pad_right=1");
    options.engine = engine;
    LocallyConnected2d<float> layer(options, shape, 11);
    layer.place(owned_output(self, shape, layer));
    HostArray<float> x = random_array(shape, 3);
    const HostArray<float> r = random_array(layer.output_shape(shape), 4);

    for (Parameter<float>* p : layer.params()) p->zero_grad();
    const LayerStep<float> step = run_layer_step(self, layer, shape, x, r);

    constexpr float h = 1e-2f;
    constexpr double tolerance = 2e-3;
    for (std::size_t i = 0; i < x.size(); i += 3) {
      const float saved = x.data()[i];
      x.data()[i] = saved + h;
      const double up = probe_loss(self, layer, shape, x, r);
      x.data()[i] = saved - h;
      const double down = probe_loss(self, layer, shape, x, r);
      x.data()[i] = saved;
      EXPECT_NEAR((up - down) / (2 * h), step.dx.data()[i], tolerance) << "dx element " << i;
    }
    for (Parameter<float>* p : layer.params()) {
      const std::vector<float> grad = host_vector(p->grad);
      for (std::size_t i = 0; i < grad.size(); i += 5) {
        nudge(p->value, i, h);
        const double up = probe_loss(self, layer, shape, x, r);
        nudge(p->value, i, -2 * h);
        const double down = probe_loss(self, layer, shape, x, r);
        nudge(p->value, i, h);
        EXPECT_NEAR((up - down) / (2 * h), grad[i], tolerance) << p->name << " element " << i;
      }
    }
  }
}

// The weights are drawn from the seed like a conv's (uniform in ±1/sqrt(C*kh*kw)), the
// same numbers for the same seed, in the global layout (Hout, Wout, K, C, kh, kw).
TEST(LocalParameters, ShapesLayoutAndInitialisation) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 3, 7, 6};
  LocallyConnected2d<float> a(LocalOptions::parse("out=4,k=3"), shape, 7), b(LocalOptions::parse("out=4,k=3"), shape, 7);
  a.place(owned_output(self, shape, a));
  b.place(owned_output(self, shape, b));
  const auto params = a.params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "weight");
  EXPECT_EQ(params[0]->shape, (std::vector<std::int64_t>{5, 4, 4, 3, 3, 3}));
  EXPECT_EQ(params[0]->sharing, Sharing::tiled);
  EXPECT_EQ(params[1]->shape, (std::vector<std::int64_t>{5, 4, 4}));
  const std::vector<float> w = host_vector(params[0]->value);
  EXPECT_EQ(w, host_vector(b.params()[0]->value));
  const double bound = 1.0 / std::sqrt(27.0);
  for (const float v : w) EXPECT_LE(std::abs(v), bound);
  EXPECT_NE(w[0], w[1]);
}

// A layer holds no weights until it knows its output box; placing it elsewhere later, or
// running it on an output of other rows and columns, is refused.
TEST(LocalParameters, PlacementIsRequiredAndChecked) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 8, 8};
  LocallyConnected2d<float> layer(LocalOptions::parse("out=2,k=3"), shape, 1);
  EXPECT_THROW(layer.params(), std::logic_error);
  const Tensor<float> x = make_input(self, shape, layer), y = make_output(self, shape, layer);
  EXPECT_THROW(layer.forward(x, y), std::logic_error);
  const Box part{{0, 0, 0, 0}, {1, 2, 3, 6}};
  layer.place(part);
  layer.place(part);  // the same box again: nothing happens
  EXPECT_EQ(layer.params()[0]->extent, (std::vector<std::int64_t>{3, 6, 2, 2, 3, 3}));
  EXPECT_EQ(layer.params()[0]->offset, (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0}));
  EXPECT_THROW(layer.place(owned_output(self, shape, layer)), std::logic_error);
  const std::string wrong = message_of([&] { layer.forward(x, y); });
  EXPECT_NE(wrong.find("holds the weights of rows [0, 3)"), std::string::npos) << wrong;
  LocallyConnected2d<float> other(LocalOptions::parse("out=2,k=3"), shape, 1);
  const std::string outside = message_of([&] { other.place(Box{{0, 0, 4, 0}, {1, 2, 7, 6}}); });
  EXPECT_NE(outside.find("cannot place"), std::string::npos) << outside;
}

// Spec options round-trip through to_spec(), shorthands expand, defaults are conv's.
TEST(LocalOptionsSpec, ParseAndPrint) {
  const LocalOptions o = LocalOptions::parse("out=8, k=18, stride=2, pad_top=0, pad=1");
  EXPECT_EQ(o.out, 8);
  EXPECT_EQ(o.kh, 18);
  EXPECT_EQ(o.kw, 18);
  EXPECT_EQ(o.sw, 2);
  EXPECT_EQ(o.pad, (Padding{0, 1, 1, 1}));
  EXPECT_EQ(o.bias, Bias::with);
  EXPECT_EQ(o.engine, default_local_engine());
  EXPECT_EQ(o.windowed.overlap, Overlap::on);
  for (const LocalCase& c : local_cases())
    for (LocalEngine engine : both_engines()) {
      const LocalOptions parsed = c.options(engine);
      EXPECT_EQ(LocalOptions::parse(parsed.to_spec()).to_spec(), parsed.to_spec()) << c.spec;
      EXPECT_EQ(LocalOptions::parse(parsed.to_spec()).engine, engine) << c.spec;
    }
  EXPECT_EQ(LocalOptions::parse("out=4,kh=3,kw=5,overlap=off,bias=false").to_spec(),
            "out=4,kh=3,kw=5,bias=false,overlap=off");
}

// Bad configurations are std::invalid_argument with a message naming the problem.
TEST(LocalOptionsSpec, BadConfigurationsAreClearErrors) {
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,k=3,stride=0"); }).find("stride must be >= 1"),
            std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,k=0"); }).find("kernel must be >= 1"), std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,k=3,dilation=2"); }).find("unknown option 'dilation'"),
            std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("k=3"); }).find("'out'"), std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,k=3,kh=5"); }).find("not both"), std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,k=3,pad=-1"); }).find("padding must be >= 0"),
            std::string::npos);
  EXPECT_NE(message_of([] { LocalOptions::parse("out=4,engine=fast"); }).find("engine=fast is not one of gemm, team"),
            std::string::npos);
  EXPECT_NE(message_of([] { LocallyConnected2d<float>(LocalOptions::parse("out=4,k=7,pad=1"), {1, 3, 4, 9}, 0); })
                .find("padded image is only 6x11"),
            std::string::npos);
  const LocallyConnected2d<float> layer(LocalOptions::parse("out=4,k=3"), {1, 3, 9, 9}, 0);
  EXPECT_NE(message_of([&] { layer.output_shape({1, 2, 9, 9}); }).find("made for 3x9x9"), std::string::npos);
  EXPECT_NE(message_of([&] { layer.output_shape({1, 3, 9, 10}); }).find("untied"), std::string::npos);
  EXPECT_NO_THROW(layer.output_shape({5, 3, 9, 9}));  // another batch size is fine
  LocalOptions stride_zero;
  stride_zero.out = 4, stride_zero.sh = 0;
  EXPECT_THROW(LocallyConnected2d<float>(stride_zero, {1, 3, 9, 9}, 0), std::invalid_argument);
}

// The window is a convolution's; an input without the halo it needs is refused.
TEST(LocalWindow, WindowFollowsTheRuleAndHaloIsRequired) {
  const LocallyConnected2d<float> layer(LocalOptions::parse("out=2,kh=3,kw=5,sh=2,sw=3,pad_top=1,pad_left=2"),
                                        {2, 3, 20, 20}, 0);
  const Box out{{1, 0, 2, 1}, {2, 2, 4, 3}};
  EXPECT_EQ(layer.input_window(out, {2, 3, 20, 20}), (Box{{1, 0, 3, 1}, {2, 3, 3 + 2 + 2 + 1, 1 + 3 + 4 + 1}}));

  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 3, 8, 8};
  LocallyConnected2d<float> padded(LocalOptions::parse("out=2,k=3,pad=1"), shape, 0);
  padded.place(owned_output(self, shape, padded));
  const Tensor<float> bare(self, shape), y = make_output(self, shape, padded);
  EXPECT_NE(message_of([&] { padded.forward(bare, y); }).find("make_input"), std::string::npos);
  EXPECT_EQ(input_halo(padded, shape, self.dims()), (HaloWidths{{0, 0, 1, 1}, {0, 0, 1, 1}}));
}

}  // namespace
}  // namespace tessera::layers::testing
