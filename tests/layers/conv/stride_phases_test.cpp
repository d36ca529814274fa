// The oneDNN backend's strided bf16 backward data by row phases with the columns folded into
// channels (layers/onednn/stride_phases.hpp):
// - the split takes every kernel tap exactly once (zero taps fill the folded kernel), and
//   refuses what it cannot split;
// - deliver puts every phase value at its dx cell and zero where no phase holds one,
//   leaving a halo between rows untouched;
// - through the backend (the split where oneDNN has bf16 kernels, the one strided
//   primitive elsewhere), dx equals a naive double-precision data gradient of the same bf16
//   values within its one bf16 rounding, on odd and even sizes, strides 2 and 3, unequal
//   row and column strides, dense and halo layouts, every cell written.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "layers/conv_backend.hpp"
#include "layers/onednn/stride_phases.hpp"
#include "tests/layers/conv/conv_reference.hpp"
#include "tests/layers/conv/bf16_tensor.hpp"

namespace tessera::layers {
namespace {

using namespace tessera::layers::testing;

ConvGeometry strided(std::int64_t kh, std::int64_t kw, std::int64_t sh, std::int64_t sw) {
  ConvGeometry g;
  g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw;
  return g;
}

// Kernels and strides the split takes: square and not, the kernel as long as the stride,
// one axis unstrided.
std::vector<ConvGeometry> split_geometries() {
  return {strided(3, 3, 2, 2), strided(4, 4, 2, 2), strided(5, 5, 3, 3), strided(2, 2, 2, 2),
          strided(3, 5, 2, 3), strided(3, 3, 1, 2), strided(3, 1, 2, 1), strided(7, 4, 3, 2)};
}

TEST(StridePhases, SplitTakesEveryTapOnceAndRefusesWhatItCannotSplit) {
  for (const ConvGeometry& g : split_geometries()) {
    SCOPED_TRACE(::testing::Message() << "k " << g.kh << "x" << g.kw << " stride " << g.sh << "x" << g.sw);
    const auto split = stride_phases::split_of(g, 6, 5);
    ASSERT_TRUE(split);
    ASSERT_EQ(split->phases.size(), static_cast<std::size_t>(g.sh));
    EXPECT_EQ(split->cols, 5 + split->kw - 1);
    // The weight's taps numbered 1.. (one filter, one channel); each must appear once.
    std::vector<bf16> weight;
    for (std::int64_t t = 0; t < g.kh * g.kw; ++t) weight.push_back(bf16(static_cast<float>(t + 1)));
    std::multiset<std::int64_t> seen;
    for (const auto& p : split->phases) {
      EXPECT_EQ(p.rows, 6 + p.kh - 1);
      std::vector<bf16> taps(static_cast<std::size_t>(g.sw * p.kh * split->kw));
      stride_phases::gather_taps(weight.data(), g, *split, p, 1, 1, taps.data());
      for (std::int64_t b = 0; b < g.sw; ++b)
        for (std::int64_t i = 0; i < p.kh; ++i)
          for (std::int64_t j = 0; j < split->kw; ++j) {
            const auto got = static_cast<std::int64_t>(static_cast<float>(taps[(b * p.kh + i) * split->kw + j]));
            const std::int64_t row = p.a + g.sh * i, column = b + g.sw * j;
            EXPECT_EQ(got, column < g.kw ? row * g.kw + column + 1 : 0) << "phase " << p.a << " b " << b;
            if (got) seen.insert(got);
          }
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(g.kh * g.kw));
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), seen.size());
  }
  ConvGeometry dilated = strided(3, 3, 2, 2), grouped = strided(3, 3, 2, 2);
  dilated.dh = 2;
  grouped.groups = 2;
  for (const ConvGeometry& g : {strided(3, 3, 1, 1), strided(1, 3, 2, 2), dilated, grouped})
    EXPECT_FALSE(stride_phases::split_of(g, 6, 5));
}

TEST(StridePhases, DeliverPutsEveryPhaseValueAtItsCellAndZeroElsewhere) {
  // Kernel 5 x 4 at stride 3 x 2 over dx 2 x 3 x 9 x 7 with a halo column (an output of
  // 2 x 2): row phases of 3, 3 and 2 rows, so dx row 8 (phase 2's third) is held by none;
  // 3 folded columns, 6 cells, so dx column 6 is held by none.
  const ConvGeometry g = strided(5, 4, 3, 2);
  const auto split = stride_phases::split_of(g, 2, 2);
  ASSERT_TRUE(split);
  const Shape4 dims{2, 3, 9, 7};
  ASSERT_EQ(g.valid_h(dims[H]), 2);
  ASSERT_EQ(g.valid_w(dims[W]), 2);
  const Index4 strides = rows_apart(dims);
  std::vector<std::vector<std::uint16_t>> phases;
  std::vector<const std::uint16_t*> data;
  // Value of phase a, image n, row u, folded cell k (= b + sw*v), channel c: a code that
  // names them all, so a misplaced value is seen.
  const auto code = [](std::int64_t a, std::int64_t n, std::int64_t u, std::int64_t k, std::int64_t c) {
    return static_cast<std::uint16_t>(1 + c + 4 * (k + 8 * (u + 4 * (n + 2 * a))));
  };
  for (const auto& p : split->phases) {
    std::vector<std::uint16_t> values;
    for (std::int64_t n = 0; n < dims[N]; ++n)
      for (std::int64_t u = 0; u < p.rows; ++u)
        for (std::int64_t k = 0; k < g.sw * split->cols; ++k)
          for (std::int64_t c = 0; c < dims[C]; ++c) values.push_back(code(p.a, n, u, k, c));
    phases.push_back(std::move(values));
  }
  for (const auto& v : phases) data.push_back(v.data());
  const std::uint16_t halo = 0xBEEF;
  std::vector<std::uint16_t> dx(static_cast<std::size_t>(dims[N] * strides[N]), halo);
  stride_phases::deliver(*split, data.data(), dx.data(), dims, strides);
  for (std::int64_t n = 0; n < dims[N]; ++n)
    for (std::int64_t c = 0; c < dims[C]; ++c)
      for (std::int64_t h = 0; h < dims[H]; ++h) {
        const std::int64_t a = h % g.sh, u = h / g.sh;
        const auto& p = split->phases[static_cast<std::size_t>(a)];
        for (std::int64_t w = 0; w < dims[W] + 2; ++w) {
          const std::uint16_t got = dx[static_cast<std::size_t>(n * strides[N] + c * strides[C] + h * strides[H] + w)];
          const bool held = u < p.rows && w < g.sw * split->cols;
          if (w >= dims[W]) EXPECT_EQ(got, halo) << "the halo at n " << n << " c " << c << " h " << h << " w " << w;
          else EXPECT_EQ(got, held ? code(a, n, u, w, c) : std::uint16_t{0}) << "n " << n << " c " << c << " h " << h << " w " << w;
        }
      }
}

// dx of the valid convolution g for dy, weight (O, C, kh, kw), by the double reference.
std::vector<double> data_gradient(const ConvGeometry& g, const Bf16Tensor& dy, const std::vector<bf16>& weight,
                                  const Shape4& xd) {
  ReferenceConv reference;
  reference.o.out = dy.dims[C], reference.o.kh = g.kh, reference.o.kw = g.kw, reference.o.sh = g.sh, reference.o.sw = g.sw;
  reference.x_shape = xd;
  Dense d(dy.dims), w(reference.w_shape());
  for (std::int64_t i = 0; i < dy.cells(); ++i) d.v[static_cast<std::size_t>(i)] = dy.value(i);
  for (std::size_t i = 0; i < weight.size(); ++i) w.v[i] = static_cast<float>(weight[i]);
  return reference.input_gradient(d, w).v;
}

// Tolerance: dx is rounded to bf16 once (relative 2^-9 per value, 4e-3 of the largest with
// the fp32 sums). Before each call dx holds 3.0 in every cell, so a cell left unwritten shows.
TEST(StridePhases, BackwardDataMatchesTheDoubleReferenceThroughTheBackend) {
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto backend = make_conv_backend();
  // (geometry, x dims): odd and even sizes (13 rows at stride 2 read every row; 12 leave
  // the last unread), channels below and above a transpose block (16).
  const std::vector<std::tuple<ConvGeometry, Shape4, std::int64_t>> cases{
      {strided(3, 3, 2, 2), {2, 5, 13, 11}, 6},  {strided(3, 3, 2, 2), {2, 32, 12, 17}, 16},
      {strided(4, 4, 2, 2), {2, 16, 14, 14}, 32}, {strided(5, 5, 3, 3), {1, 7, 17, 16}, 5},
      {strided(2, 2, 2, 2), {2, 3, 9, 8}, 4},     {strided(3, 5, 2, 3), {2, 4, 11, 16}, 3},
      {strided(3, 3, 1, 2), {1, 6, 8, 13}, 4},    {strided(3, 1, 2, 1), {1, 6, 13, 5}, 4}};
  for (const auto& [g, xd, out] : cases) {
    SCOPED_TRACE(::testing::Message() << "k " << g.kh << "x" << g.kw << " stride " << g.sh << "x" << g.sw << " x "
                                    << xd[N] << "x" << xd[C] << "x" << xd[H] << "x" << xd[W]);
    const Shape4 yd{xd[N], out, g.valid_h(xd[H]), g.valid_w(xd[W])};
    std::vector<bf16> weight;
    for (std::int64_t i = 0; i < out * xd[C] * g.kh * g.kw; ++i) weight.push_back(bf16(uniform(random)));
    for (auto layout : {dense, rows_apart}) {
      SCOPED_TRACE(layout == dense ? "dense" : "rows apart");
      const Bf16Tensor dy(yd, layout(yd), &random);
      const std::vector<double> want = data_gradient(g, dy, weight, xd);
      Bf16Tensor dx(xd, layout(xd), nullptr);
      for (int step = 0; step < 2; ++step) {  // the second runs the kept primitives
        for (std::int64_t i = 0; i < dx.cells(); ++i) dx.at(i) = bf16(3.0f);
        backend->backward_data_bf16(g, dy.in(), weight.data(), dx.out());
        EXPECT_LE(relative_error([&](std::size_t i) { return dx.value(static_cast<std::int64_t>(i)); }, want), 4e-3);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::layers
