// The oneDNN backend's bf16 1x1 route (layers/onednn/pointwise_conv.hpp): it takes only
// bf16 1x1 stride-1 ungrouped convolutions whose operands hold each (n, c) plane's cells in
// a row and agree on the images and cells, and leaves every other call to the convolution
// path; through the backend, both routes give y, dx, dW and db equal to a naive
// double-precision convolution of the same bf16 values (y and dx within their one bf16
// rounding, the fp32 gradients within fp32 sums) and add into the gradients, including a
// weight gradient taken in image chunks.
// The layers that use it are checked against fp32 and across grids by the bf16 layer tests.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "layers/conv_backend.hpp"
#include "layers/onednn/onednn_bf16.hpp"
#include "layers/onednn/pointwise_conv.hpp"
#include "tests/layers/conv/bf16_tensor.hpp"

namespace tessera::layers {
namespace {

using namespace tessera::layers::testing;

// One bf16 1x1 problem, its inputs and the double reference of its four results.
struct Problem {
  std::int64_t images = 0, in = 0, out = 0, rows = 0, cols = 0;
  std::vector<bf16> weight, bias;
  std::vector<double> y, dx, dweight, dbias;  // dweight and dbias: the first gradient added to
  std::vector<float> grad_start;              // this start (dW's values, then db's)

  std::int64_t cells() const { return rows * cols; }
  Shape4 x_dims() const { return {images, in, rows, cols}; }
  Shape4 y_dims() const { return {images, out, rows, cols}; }

  void reference(const Bf16Tensor& x, const Bf16Tensor& dy) {
    const auto w = [&](std::int64_t o, std::int64_t c) { return static_cast<double>(static_cast<float>(weight[o * in + c])); };
    y.assign(images * out * cells(), 0.0);
    dx.assign(images * in * cells(), 0.0);
    dweight.assign(grad_start.begin(), grad_start.begin() + out * in);
    dbias.assign(grad_start.begin() + out * in, grad_start.end());
    for (std::int64_t n = 0; n < images; ++n)
      for (std::int64_t o = 0; o < out; ++o)
        for (std::int64_t p = 0; p < cells(); ++p) {
          const std::int64_t yi = (n * out + o) * cells() + p;
          y[yi] = static_cast<float>(bias[o]);
          dbias[o] += dy.value(yi);
          for (std::int64_t c = 0; c < in; ++c) {
            const std::int64_t xi = (n * in + c) * cells() + p;
            y[yi] += w(o, c) * x.value(xi);
            dx[xi] += w(o, c) * dy.value(yi);
            dweight[o * in + c] += dy.value(yi) * x.value(xi);
          }
        }
  }
};

Problem make_problem(std::int64_t images, std::int64_t in, std::int64_t out, std::int64_t rows, std::int64_t cols,
                     std::mt19937& random) {
  Problem p;
  p.images = images, p.in = in, p.out = out, p.rows = rows, p.cols = cols;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < out * in; ++i) p.weight.push_back(bf16(uniform(random)));
  for (std::int64_t i = 0; i < out; ++i) p.bias.push_back(bf16(uniform(random)));
  for (std::int64_t i = 0; i < out * in + out; ++i) p.grad_start.push_back(uniform(random));
  return p;
}

constexpr ConvGeometry kOneByOne{};

TEST(PointwiseConv, TakesOnlyBf16OneByOneConvolutionsOnPlanes) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  onednn::PointwiseConv route(engine);
  std::mt19937 random(3);
  const Shape4 xd{2, 3, 4, 5}, yd{2, 4, 4, 5};
  const std::vector<bf16> weight(12, bf16(0.5f));
  const bf16* no_bias = nullptr;
  Bf16Tensor x(xd, dense(xd), &random), y(yd, dense(yd), nullptr);
  const bool native = onednn_bf16_native();  // elsewhere the convolution path widens to fp32
  EXPECT_EQ(route.forward(kOneByOne, x.in(), weight.data(), no_bias, y.out(), stream), native);
  Bf16Tensor apart(xd, planes_apart(xd), &random);
  EXPECT_EQ(route.forward(kOneByOne, apart.in(), weight.data(), no_bias, y.out(), stream), native);

  Bf16Tensor halo(xd, rows_apart(xd), &random);
  EXPECT_FALSE(route.forward(kOneByOne, halo.in(), weight.data(), no_bias, y.out(), stream));
  Bf16Tensor halo_y(yd, rows_apart(yd), nullptr);
  EXPECT_FALSE(route.forward(kOneByOne, x.in(), weight.data(), no_bias, halo_y.out(), stream));
  Bf16Tensor swapped({2, 4, 5, 4}, dense({2, 4, 5, 4}), nullptr);  // as many cells, other rows
  EXPECT_FALSE(route.forward(kOneByOne, x.in(), weight.data(), no_bias, swapped.out(), stream));
  ConvGeometry strided = kOneByOne, grouped = kOneByOne, wide = kOneByOne;
  strided.sh = 2;
  grouped.groups = 2;
  wide.kh = wide.kw = 3;
  for (const ConvGeometry& g : {strided, grouped, wide})
    EXPECT_FALSE(route.forward(g, x.in(), weight.data(), no_bias, y.out(), stream));

  std::vector<float> x32(120), y32(160), w32(12);
  const Tensor4Ref<const float> x_fp32{x32.data(), xd, dense(xd)};
  const Tensor4Ref<float> y_fp32{y32.data(), yd, dense(yd)};
  const float* no_fp32_bias = nullptr;
  EXPECT_FALSE(route.forward(kOneByOne, x_fp32, w32.data(), no_fp32_bias, y_fp32, stream));  // fp32: the conv path
}

// Through the backend, each layout (the route's dense planes and planes apart; the
// convolution path's rows apart) against the double reference. Tolerances: y and dx are
// rounded to bf16 once (relative 2^-9 per value, 4e-3 of the largest with the fp32 sums);
// dW and db are fp32 sums of exact products of bf16 values (1e-5).
void expect_reference(Problem& p, Index4 (*layout)(const Shape4&), bool with_bias, std::mt19937& random) {
  const Shape4 xd = p.x_dims(), yd = p.y_dims();
  const Bf16Tensor x(xd, layout(xd), &random), dy(yd, layout(yd), &random);
  Bf16Tensor y(yd, layout(yd), nullptr), dx(xd, layout(xd), nullptr);
  if (!with_bias) std::fill(p.bias.begin(), p.bias.end(), bf16(0.0f));
  p.reference(x, dy);
  std::vector<float> dweight(p.grad_start.begin(), p.grad_start.begin() + p.out * p.in);
  std::vector<float> dbias(p.grad_start.begin() + p.out * p.in, p.grad_start.end());

  const auto backend = make_conv_backend();
  for (int step = 0; step < 2; ++step) {  // the second step runs the kept primitives
    if (step == 1) {
      std::copy(p.grad_start.begin(), p.grad_start.begin() + p.out * p.in, dweight.begin());
      std::copy(p.grad_start.begin() + p.out * p.in, p.grad_start.end(), dbias.begin());
    }
    backend->forward_bf16(kOneByOne, x.in(), p.weight.data(), with_bias ? p.bias.data() : nullptr, y.out());
    backend->backward_data_bf16(kOneByOne, dy.in(), p.weight.data(), dx.out());
    backend->backward_weights_bf16(kOneByOne, x.in(), dy.in(), dweight.data(), with_bias ? dbias.data() : nullptr);
  }
  EXPECT_LE(relative_error([&](std::size_t i) { return y.value(static_cast<std::int64_t>(i)); }, p.y), 4e-3);
  EXPECT_LE(relative_error([&](std::size_t i) { return dx.value(static_cast<std::int64_t>(i)); }, p.dx), 4e-3);
  EXPECT_LE(relative_error([&](std::size_t i) { return static_cast<double>(dweight[i]); }, p.dweight), 1e-5);
  if (with_bias) {
    EXPECT_LE(relative_error([&](std::size_t i) { return static_cast<double>(dbias[i]); }, p.dbias), 1e-5);
  }
}

TEST(PointwiseConv, EveryLayoutMatchesTheDoubleReferenceThroughTheBackend) {
  std::mt19937 random(5);
  for (auto layout : {dense, planes_apart, rows_apart})
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(layout == dense ? "dense" : layout == planes_apart ? "planes apart" : "rows apart");
      SCOPED_TRACE(with_bias ? "with bias" : "no bias");
      Problem p = make_problem(3, 5, 7, 6, 9, random);
      expect_reference(p, layout, with_bias, random);
    }
}

TEST(PointwiseConv, WeightGradientInImageChunksMatchesTheReference) {
  // 300 x 300 weights: the route's scratch holds two images' gradients, so three images
  // go as a chunk of two and a chunk of one.
  std::mt19937 random(9);
  Problem p = make_problem(3, 300, 300, 2, 3, random);
  expect_reference(p, dense, true, random);
}

}  // namespace
}  // namespace tessera::layers
