// Pool2d in one process (a 1x1x1 grid): forward and dx against the naive double reference
// for every configuration and kind, a finite-difference check in double precision, option
// parsing, and configuration errors.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "tests/layers/support/layer_step.hpp"
#include "tests/layers/support/non_finite.hpp"
#include "layers/pointwise_library.hpp"
#include "layers/pool2d_bf16_host.hpp"
#include "pool_reference.hpp"
#include "pool_test_support.hpp"
#include "tests/layers/conv/conv_test_support.hpp"

namespace tessera::layers::testing {
namespace {

class PoolAgainstReference : public ::testing::TestWithParam<PoolCase> {};

// Random values of shape s rounded to bf16, and the same values widened back to fp32.
std::pair<HostArray<bf16>, HostArray<float>> bf16_and_fp32(const Shape4& s, std::uint32_t seed) {
  const HostArray<float> random = random_array(s, seed);
  std::pair<HostArray<bf16>, HostArray<float>> both{HostArray<bf16>("v16", s[N], s[C], s[H], s[W]),
                                                    HostArray<float>("v32", s[N], s[C], s[H], s[W])};
  for (std::size_t i = 0; i < random.size(); ++i) {
    both.first.data()[i] = bf16(random.data()[i]);
    both.second.data()[i] = float(both.first.data()[i]);
  }
  return both;
}

TEST_P(PoolAgainstReference, ForwardAndGradientMatch) {
  const PoolCase& c = GetParam();
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (Overlap overlap : {Overlap::on, Overlap::off}) {
    Pool2dOptions options = c.options();
    options.windowed.overlap = overlap;
    const ReferencePool ref{options, c.input};
    Pool2d<float> pool(options);
    ASSERT_EQ(pool.output_shape(c.input), ref.y_shape());
    const HostArray<float> x = random_array(c.input, 1);
    const HostArray<float> dy = random_array(ref.y_shape(), 2);
    const LayerStep<float> step = run_layer_step(self, pool, c.input, x, dy);
    Dense xd = to_dense(x), dyd = to_dense(dy);
    SCOPED_TRACE(c.name + (overlap == Overlap::on ? " overlap on" : " overlap off"));
    EXPECT_LE(error_against(step.y, ref.forward(xd)), kTolerance);
    EXPECT_LE(error_against(step.dx, ref.input_gradient(xd, dyd)), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, PoolAgainstReference, ::testing::ValuesIn(pool_cases()),
                         [](const auto& info) { return info.param.name; });

// The flat route (one thread per cell, w fastest: the one CUDA builds take) run on the host
// against the host route, for every configuration, on the whole output and on a sub-box (a
// partial tile: its window starts inside the image). Padding cells hold garbage, not the
// halo's zeros, so a kernel that reads them fails. Forward and the workspace must agree
// exactly (same arithmetic in the same order); dx to rounding (overlapping windows add in
// a different order).
using Codes = Kokkos::View<pool_kernels::Code****, Kokkos::LayoutRight, Kokkos::HostSpace>;

// The output boxes the kernel tests pool: the whole output, and a sub-box that starts one
// row and column in (a partial tile: its window starts inside the image).
std::array<Box, 2> whole_and_part(const Pool2d<float>& pool, const Shape4& input) {
  const Box whole{{0, 0, 0, 0}, pool.output_shape(input)};
  Box part = whole;
  part.lo[H] = 1, part.lo[W] = 1;
  return {whole, part};
}

TEST_P(PoolAgainstReference, FlatRouteEqualsHostRoute) {
  const PoolCase& c = GetParam();
  const Pool2dOptions options = c.options();
  const Pool2d<float> pool(options);
  const auto boxes = whole_and_part(pool, c.input);
  const Box& whole = boxes[0];
  for (const Box& out : boxes) {
    const Box window = pool.input_window(out, c.input);
    const Shape4 ws = window.shape(), os = out.shape();
    HostArray<float> x = random_array(ws, 11);
    for (std::int64_t n = 0; n < ws[N]; ++n)
      for (std::int64_t ch = 0; ch < ws[C]; ++ch)
        for (std::int64_t h = 0; h < ws[H]; ++h)
          for (std::int64_t w = 0; w < ws[W]; ++w) {
            const std::int64_t gh = window.lo[H] + h, gw = window.lo[W] + w;
            if (gh < 0 || gh >= c.input[H] || gw < 0 || gw >= c.input[W]) x(n, ch, h, w) = 1e30f;
          }
    const HostArray<float> dy = random_array(os, 12);
    const pool_kernels::Placement at{window.lo[H], window.lo[W], c.input[H], c.input[W]};
    struct Result {
      HostArray<float> y, norms, dx;
      Codes codes;
    };
    auto run = [&](pool_kernels::Route route) {
      Result r{HostArray<float>("y", os[N], os[C], os[H], os[W]), HostArray<float>("norms", os[N], os[C], os[H], os[W]),
               HostArray<float>("dx", ws[N], ws[C], ws[H], ws[W]), Codes("codes", os[N], os[C], os[H], os[W])};
      const pool_kernels::Work<Codes, HostArray<float>> work{r.codes, r.norms};
      pool_kernels::forward(options, x, r.y, work, at, route);
      pool_kernels::backward(options, x, dy, r.dx, work, at, route);
      Kokkos::fence();
      return r;
    };
    const Result host = run(pool_kernels::Route::automatic), flat = run(pool_kernels::Route::flat);
    SCOPED_TRACE(c.name + (out == whole ? " whole output" : " sub-box"));
    for (std::size_t i = 0; i < host.y.size(); ++i) {
      ASSERT_EQ(host.y.data()[i], flat.y.data()[i]) << "y " << i;
      ASSERT_EQ(host.codes.data()[i], flat.codes.data()[i]) << "argmax " << i;
      ASSERT_EQ(host.norms.data()[i], flat.norms.data()[i]) << "norm " << i;
      ASSERT_LT(std::abs(host.y.data()[i]), 1e29f) << "padding read at y " << i;
    }
    EXPECT_LE(relative_error(host.dx, flat.dx), 1e-6);
    for (std::size_t i = 0; i < host.dx.size(); ++i) ASSERT_TRUE(std::isfinite(host.dx.data()[i])) << "dx " << i;
  }
}

// bf16 pooling reads its bf16 window directly, widening each tap as it reads it
// (layers/pool2d.hpp). Into an fp32 y that must be exactly the fp32 kernel on an fp32 copy
// of the window (what the fp32 tests above check): the same y, argmax and norms bit for
// bit, on both routes, for every configuration; a sub-box too. And into a bf16 y, that y
// rounded once.
TEST_P(PoolAgainstReference, Bf16WindowReadDirectlyEqualsTheKernelOnItsFp32Copy) {
  const PoolCase& c = GetParam();
  const Pool2dOptions options = c.options();
  const Pool2d<float> pool(options);
  const auto boxes = whole_and_part(pool, c.input);
  for (const Box& out : boxes) {
    const Box window = pool.input_window(out, c.input);
    const Shape4 ws = window.shape(), os = out.shape();
    const auto [x16, x32] = bf16_and_fp32(ws, 21);
    const pool_kernels::Placement at{window.lo[H], window.lo[W], c.input[H], c.input[W]};
    for (const auto route : {pool_kernels::Route::automatic, pool_kernels::Route::flat}) {
      struct Result {
        HostArray<float> y, norms;
        Codes codes;
      };
      auto run = [&](const auto& x) {
        Result r{HostArray<float>("y", os[N], os[C], os[H], os[W]), HostArray<float>("norms", os[N], os[C], os[H], os[W]),
                 Codes("codes", os[N], os[C], os[H], os[W])};
        pool_kernels::forward(options, x, r.y, pool_kernels::Work<Codes, HostArray<float>>{r.codes, r.norms}, at, route);
        Kokkos::fence();
        return r;
      };
      const Result read16 = run(x16), copy32 = run(x32);
      SCOPED_TRACE(c.name + (out == boxes[0] ? " whole output" : " sub-box") +
                   (route == pool_kernels::Route::flat ? ", flat route" : ", host route"));
      for (std::size_t i = 0; i < read16.y.size(); ++i) {
        ASSERT_EQ(read16.y.data()[i], copy32.y.data()[i]) << "y " << i;
        ASSERT_EQ(read16.codes.data()[i], copy32.codes.data()[i]) << "argmax " << i;
        ASSERT_EQ(read16.norms.data()[i], copy32.norms.data()[i]) << "norm " << i;
      }
      // A bf16 y: that fp32 y rounded once, in every cell (y starts as garbage), and the same
      // argmax and norms. The host route rounds each output as it stores it (the fused
      // windows from registers, the per-tap loops from fp32 chunks on the stack); the flat
      // route (CUDA's) writes each cell directly.
      HostArray<bf16> y16("y16", os[N], os[C], os[H], os[W]);
      for (std::size_t i = 0; i < y16.size(); ++i) y16.data()[i] = bf16(7.0f);
      const Result rows{HostArray<float>(), HostArray<float>("norms", os[N], os[C], os[H], os[W]),
                        Codes("codes", os[N], os[C], os[H], os[W])};
      const pool_kernels::Work<Codes, HostArray<float>> work{rows.codes, rows.norms};
      if (route != pool_kernels::Route::flat) {
        ASSERT_TRUE(pool_kernels::forward_host_route_fits(options, x16, y16, work));
      }
      pool_kernels::forward(options, x16, y16, work, at, route);
      Kokkos::fence();
      for (std::size_t i = 0; i < y16.size(); ++i) {
        ASSERT_EQ(y16.data()[i].bits, bf16(read16.y.data()[i]).bits) << "bf16 y " << i;
        ASSERT_EQ(rows.codes.data()[i], read16.codes.data()[i]) << "bf16 y's argmax " << i;
        ASSERT_EQ(rows.norms.data()[i], read16.norms.data()[i]) << "bf16 y's norm " << i;
      }
    }
  }
}

// bf16 backward writes the same bits as the fp32 kernel of the same route on fp32 copies of
// dy and x, rounded once: on the host plane by plane in fp32 scratch
// (layers/pool2d_bf16_host.hpp) against the host kernel adding into a zeroed fp32 dx; on
// the flat route (CUDA's), a cell per thread reading and writing bf16 directly, against the
// flat fp32 kernel. Every configuration, the whole output and a sub-box (whose window
// starts inside the image), every cell of dx written (it starts as garbage).
TEST_P(PoolAgainstReference, Bf16BackwardEqualsTheKernelOnFp32Copies) {
  const PoolCase& c = GetParam();
  const Pool2dOptions options = c.options();
  const Pool2d<float> pool(options);
  for (const Box& out : whole_and_part(pool, c.input)) {
    const Box window = pool.input_window(out, c.input);
    const Shape4 ws = window.shape(), os = out.shape();
    const auto [x16, x32] = bf16_and_fp32(ws, 31);
    const auto [dy16, dy32] = bf16_and_fp32(os, 32);
    const pool_kernels::Placement at{window.lo[H], window.lo[W], c.input[H], c.input[W]};
    HostArray<float> y("y", os[N], os[C], os[H], os[W]), norms("norms", os[N], os[C], os[H], os[W]);
    const Codes codes("codes", os[N], os[C], os[H], os[W]);
    const pool_kernels::Work<Codes, HostArray<float>> work{codes, norms};
    pool_kernels::forward(options, x32, y, work, at);
    for (const auto route : {pool_kernels::Route::automatic, pool_kernels::Route::flat}) {
      HostArray<float> dx32("dx32", ws[N], ws[C], ws[H], ws[W]);  // zero: the host kernel adds
      pool_kernels::backward(options, x32, dy32, dx32, work, at, route);
      HostArray<bf16> dx16("dx16", ws[N], ws[C], ws[H], ws[W]);
      for (std::size_t i = 0; i < dx16.size(); ++i) dx16.data()[i] = bf16(7.0f);
      if (route == pool_kernels::Route::flat) {
        pool_kernels::backward(options, x16, dy16, dx16, work, at, route);
      } else {
        ASSERT_TRUE(pool_kernels::backward_host_route_fits(options, x16, dy16, dx16, work));
        pool_kernels::backward_bf16_planes(options, x16, dy16, dx16, work, at);
      }
      Kokkos::fence();
      SCOPED_TRACE(c.name + (out.lo[H] == 0 ? " whole output" : " sub-box") +
                   (route == pool_kernels::Route::flat ? ", flat route" : ", host route"));
      for (std::size_t i = 0; i < dx16.size(); ++i)
        ASSERT_EQ(dx16.data()[i].bits, bf16(dx32.data()[i]).bits) << "dx " << i;
    }
  }
}

// Max pooling of an all-negative image with padding: padding must act as -infinity, so no
// output is 0 (a zero-filled pad cell would win every border window).
TEST(PoolPadding, MaxIgnoresZeroPadding) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 1, 5, 5};
  Pool2d<float> pool(Pool2dOptions::parse(PoolKind::max, "k=3,stride=2,pad=1"));
  HostArray<float> x("x", 1, 1, 5, 5);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = -1.0f - float(i);
  const HostArray<float> dy = random_array(pool.output_shape(shape), 3);
  const LayerStep<float> step = run_layer_step(self, pool, shape, x, dy);
  for (std::size_t i = 0; i < step.y.size(); ++i) EXPECT_LT(step.y.data()[i], -0.5f) << i;
}

// NaN and infinities as PyTorch treats them; 2x2 windows, stride 2, one window per quarter:
//   top left {1, NaN, 5, NaN}: NaN, from the last NaN; top right all -inf: -inf, from the
//   first tap; bottom left {2, inf, inf, 3}: inf, from the first inf; bottom right
//   {NaN, 7, 8, 1}: NaN, from the first tap (7 > NaN is false).
// max_pool2d's CPU kernel: maxval = -inf, maxindex = the first tap in the image, then per tap
// `if ((val > maxval) || std::isnan(val)) { maxval = val; maxindex = index; }`; its backward
// sends dy to maxindex only, so the NaN dy of the last window reaches one tap, not four.
// avg_pool2d sums (NaN and inf + -inf give NaN) and its backward gives every tap dy / 4;
// l2pool, sqrt(eps + sum of squares), propagates by arithmetic alike.
TEST(PoolNonFinite, MatchesPyTorch) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 1, 4, 4};
  const HostArray<float> x = array_of(4, 4, {1, kNan, -kInf, -kInf,  //
                                             5, kNan, -kInf, -kInf,  //
                                             2, kInf, kNan, 7,       //
                                             kInf, 3, 8, 1});
  const HostArray<float> dy = array_of(2, 2, {10, 20, 30, kNan});

  Pool2d<float> max(Pool2dOptions::parse(PoolKind::max, "k=2"));
  const LayerStep<float> m = run_layer_step(self, max, shape, x, dy);
  expect_same_values(m.y, {kNan, -kInf, kInf, kNan}, "max y");
  expect_same_values(m.dx, {0, 0, 20, 0, 0, 10, 0, 0, 0, 30, kNan, 0, 0, 0, 0, 0}, "max dx");

  Pool2d<float> avg(Pool2dOptions::parse(PoolKind::average, "k=2"));
  const LayerStep<float> a = run_layer_step(self, avg, shape, x, dy);
  expect_same_values(a.y, {kNan, -kInf, kInf, kNan}, "avg y");
  const float d = kNan;
  expect_same_values(a.dx, {2.5f, 2.5f, 5, 5, 2.5f, 2.5f, 5, 5, 7.5f, 7.5f, d, d, 7.5f, 7.5f, d, d}, "avg dx");

  Pool2d<float> l2(Pool2dOptions::parse(PoolKind::l2, "k=2"));
  expect_same_values(run_layer_step(self, l2, shape, x, dy).y, {kNan, kInf, kInf, kNan}, "l2 y");
}

// With padding, the taps outside the image never win, even against a window of -inf or NaN
// (PyTorch starts from the first tap inside the image).
TEST(PoolNonFinite, MaxPaddingNeverWins) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 1, 2, 2};
  Pool2d<float> pool(Pool2dOptions::parse(PoolKind::max, "k=2,stride=1,pad=1"));
  const HostArray<float> x = array_of(2, 2, {-kInf, -kInf, kNan, -kInf});
  const LayerStep<float> step = run_layer_step(self, pool, shape, x, array_of(3, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  expect_same_values(step.y, {-kInf, -kInf, -kInf, kNan, kNan, -kInf, kNan, kNan, -kInf}, "y");
  expect_same_values(step.dx, {1 + 2, 3 + 6, 4 + 5 + 7 + 8, 9}, "dx");
}

// L = sum(pool(x) * r) in double; central differences with a small step agree with dx
// (inputs spaced apart so no max or tie flips within the step).
TEST(PoolGradient, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 2, 6, 5};
  for (const char* kind_spec : {"max", "avg", "avg_exclude", "l2"}) {
    const std::string k(kind_spec);
    const PoolKind kind = k == "max" ? PoolKind::max : k == "l2" ? PoolKind::l2 : PoolKind::average;
    const std::string spec = std::string("k=3,stride=2,pad_top=1,pad_bottom=0,pad_left=1,pad_right=1") +
                             (k == "avg_exclude" ? ",count_include_pad=false" : "");
    Pool2d<double> pool(Pool2dOptions::parse(kind, spec));
    HostArray<double> x = to_double(random_array(shape, 7));
    const HostArray<double> r = to_double(random_array(pool.output_shape(shape), 8));
    const LayerStep<double> step = run_layer_step(self, pool, shape, x, r);
    constexpr double h = 1e-6;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double saved = x.data()[i];
      x.data()[i] = saved + h;
      const double up = probe_loss(self, pool, shape, x, r);
      x.data()[i] = saved - h;
      const double down = probe_loss(self, pool, shape, x, r);
      x.data()[i] = saved;
      EXPECT_NEAR((up - down) / (2 * h), step.dx.data()[i], 1e-6) << k << " dx element " << i;
    }
  }
}

TEST(PoolOptions, ParseAndPrint) {
  const Pool2dOptions o = Pool2dOptions::parse(PoolKind::max, "k=3");
  EXPECT_EQ(o.sh, 3);  // stride defaults to the window
  EXPECT_EQ(o.sw, 3);
  EXPECT_EQ(o.pad, Padding{});
  EXPECT_TRUE(Pool2dOptions::parse(PoolKind::average, "k=2").count_include_pad);
  EXPECT_EQ(Pool2dOptions::parse(PoolKind::average, "kh=3,kw=2,stride=1,count_include_pad=false,overlap=off").to_spec(),
            "kh=3,kw=2,stride=1,count_include_pad=false,overlap=off");
  for (const PoolCase& c : pool_cases())
    EXPECT_EQ(Pool2dOptions::parse(c.kind, c.options().to_spec()).to_spec(), c.options().to_spec()) << c.spec;
  EXPECT_EQ(Pool2d<float>(Pool2dOptions::parse(PoolKind::l2, "k=5,stride=1,pad=2")).kind(), "l2pool");
}

// l2pool's eps (the TICA penalty's): sqrt(eps + sum of squares); printed only when not the
// default, so existing specs keep their text.
TEST(PoolOptions, L2PoolEps) {
  EXPECT_EQ(Pool2dOptions::parse(PoolKind::l2, "k=3").eps, kL2PoolEps);
  EXPECT_EQ(Pool2dOptions::parse(PoolKind::l2, "k=3").to_spec(), "k=3");
  const Pool2dOptions o = Pool2dOptions::parse(PoolKind::l2, "k=3,stride=1,eps=0.5");
  EXPECT_EQ(o.eps, 0.5);
  EXPECT_EQ(Pool2dOptions::parse(PoolKind::l2, o.to_spec()).eps, 0.5);
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{1, 1, 3, 3};
  Pool2d<double> pool(o);
  HostArray<double> x("x", 1, 1, 3, 3);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = 1.0;
  const HostArray<double> dy = to_double(random_array(pool.output_shape(shape), 3));
  const LayerStep<double> step = run_layer_step(self, pool, shape, x, dy);
  EXPECT_NEAR(step.y.data()[0], std::sqrt(9.5), 1e-12);
  EXPECT_NEAR(step.dx.data()[0], dy.data()[0] / std::sqrt(9.5), 1e-12);
  auto has = [](const std::string& message, const char* part) { return message.find(part) != std::string::npos; };
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::l2, "k=2,eps=-1"); }), "eps must be >= 0"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::l2, "k=2,eps=small"); }), "eps=small is not a number"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,eps=0"); }), "unknown option 'eps'"));
}

TEST(PoolOptions, BadConfigurationsAreClearErrors) {
  auto has = [](const std::string& message, const char* part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,stride=0"); }), "stride must be >= 1"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,size=3"); }), "unknown option 'size'"));
  EXPECT_TRUE(
      has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,count_include_pad=false"); }), "count_include_pad"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::l2, "stride=2"); }), "'k'"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,kh=3"); }), "not both"));
  EXPECT_TRUE(has(message_of([] { Pool2dOptions::parse(PoolKind::max, "k=2,pad=-1"); }), "padding must be >= 0"));
  const Pool2d<float> big(Pool2dOptions::parse(PoolKind::max, "k=7,pad=1"));
  EXPECT_TRUE(has(message_of([&] { big.output_shape({1, 3, 4, 9}); }), "padded height is only 6"));
  const Pool2d<float> padding_only(Pool2dOptions::parse(PoolKind::average, "k=2,pad=2"));
  EXPECT_TRUE(has(message_of([&] { padding_only.output_shape({1, 3, 8, 8}); }), "pools padding only"));
  Pool2dOptions stride_zero;
  stride_zero.sh = 0;
  EXPECT_THROW(Pool2d<float>{stride_zero}, std::invalid_argument);
}

// The window rule: rows [o0*s - pad_top, (o1-1)*s - pad_top + (k-1)*d + 1); only the
// output's channels.
// Which poolings and activations CUDA builds hand to cuDNN: only where cuDNN's valid
// pooling computes Tessera's (average without padding, which would divide by the wrong
// count at the border; no dilation; not max, whose -inf windows cuDNN pools to -FLT_MAX;
// no L2 mode) and where a mode exists.
TEST(PoolLibrary, OnlyUnpaddedDenseAverageGoesToTheLibrary) {
  const auto library = [](PoolKind kind, const char* options) {
    return library_pooling(Pool2dOptions::parse(kind, options));
  };
  const auto avg = library(PoolKind::average, "kh=3,kw=2,sh=2,sw=1");
  ASSERT_TRUE(avg.has_value());
  EXPECT_EQ((std::array<std::int64_t, 4>{avg->kh, avg->kw, avg->sh, avg->sw}),
            (std::array<std::int64_t, 4>{3, 2, 2, 1}));
  EXPECT_FALSE(library(PoolKind::max, "k=3,stride=2"));
  EXPECT_FALSE(library(PoolKind::max, "k=3,pad=1"));
  EXPECT_FALSE(library(PoolKind::average, "k=3,pad=1,count_include_pad=false"));
  EXPECT_FALSE(library(PoolKind::max, "k=2,dilation=2"));
  EXPECT_FALSE(library(PoolKind::l2, "k=2"));
  EXPECT_EQ(library_activation("relu"), LibraryActivation::relu);
  EXPECT_EQ(library_activation("tanh"), LibraryActivation::tanh);
  EXPECT_EQ(library_activation("sigmoid"), LibraryActivation::sigmoid);
  EXPECT_FALSE(library_activation("leakyrelu"));  // no cuDNN mode
}

TEST(PoolWindow, WindowFollowsTheRule) {
  const Pool2d<float> pool(Pool2dOptions::parse(PoolKind::max, "kh=3,kw=2,sh=2,sw=3,pad_top=1,pad_left=1"));
  const Box out{{1, 1, 2, 1}, {2, 2, 4, 3}};
  EXPECT_EQ(pool.input_window(out, {2, 3, 20, 20}), (Box{{1, 1, 3, 2}, {2, 2, 3 + 2 + 3, 2 + 3 + 2}}));
}

}  // namespace
}  // namespace tessera::layers::testing
