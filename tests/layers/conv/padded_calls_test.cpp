// The oneDNN backend's padded calls (ConvBackend::takes_padding, ConvGeometry::pad), which
// the transposed convolution runs instead of cropping and embedding in scratch:
// - forward, backward data and backward weights (with the bias gradient) over zero padding
//   equal the naive double reference with the same padding, fp32 and bf16, dense and
//   halo layouts, unequal pads on every side, strides 1, 2 and 3; backward data writes the
//   unpadded cells only (every one of them: each starts at 3.0) and backward weights adds;
// - the transposed forward with a bias: where it fuses (bf16 strided calls, by phases) y
//   holds exactly the bits of backward data plus the bias rounded into bf16 — what the
//   layer's crop writes, so tiles on either path agree bit for bit; where it does not, it
//   writes nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layers/conv_backend.hpp"
#include "layers/onednn/onednn_bf16.hpp"
#include "layers/onednn/stride_phases.hpp"
#include "tests/layers/conv/bf16_tensor.hpp"
#include "tests/layers/conv/conv_reference.hpp"

namespace tessera::layers {
namespace {

using namespace tessera::layers::testing;

ConvGeometry padded(std::int64_t k, std::int64_t s, const Padding& pad) {
  ConvGeometry g;
  g.kh = g.kw = k, g.sh = g.sw = s, g.pad = pad;
  return g;
}

// (geometry, unpadded input dims, output channels)
std::vector<std::tuple<ConvGeometry, Shape4, std::int64_t>> cases() {
  return {{padded(3, 1, {1, 2, 0, 1}), {2, 5, 9, 8}, 4},
          {padded(4, 2, {1, 1, 1, 1}), {2, 16, 14, 14}, 8},
          {padded(3, 2, {2, 0, 1, 2}), {1, 6, 11, 10}, 5},
          {padded(5, 3, {0, 2, 3, 1}), {2, 3, 13, 12}, 6}};
}

template <class E>
Dense dense_of(const StridedTensor<E>& t) {
  Dense d(t.dims);
  for (std::int64_t i = 0; i < t.cells(); ++i) d.v[static_cast<std::size_t>(i)] = t.value(i);
  return d;
}

template <class E>
double error_of(const StridedTensor<E>& got, const std::vector<double>& want) {
  return relative_error([&](std::size_t i) { return got.value(static_cast<std::int64_t>(i)); }, want);
}

template <class E>
void check_padded_calls(double tolerance) {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto backend = make_conv_backend();
  ASSERT_TRUE(backend->takes_padding());
  for (const auto& [g, xd, out] : cases()) {
    SCOPED_TRACE(::testing::Message() << "k " << g.kh << " stride " << g.sh << " pad " << g.pad.top << ","
                                    << g.pad.bottom << "," << g.pad.left << "," << g.pad.right);
    ReferenceConv reference;
    reference.o.out = out, reference.o.kh = g.kh, reference.o.kw = g.kw, reference.o.sh = g.sh, reference.o.sw = g.sw;
    reference.o.pad = g.pad;
    reference.x_shape = xd;
    const Shape4 yd = reference.y_shape();
    ASSERT_EQ(yd[H], g.valid_h(xd[H]));
    ASSERT_EQ(yd[W], g.valid_w(xd[W]));
    std::vector<E> weight, bias, in_bias;
    for (std::int64_t i = 0; i < out * xd[C] * g.kh * g.kw; ++i) weight.push_back(E(uniform(random)));
    for (std::int64_t i = 0; i < out; ++i) bias.push_back(E(uniform(random)));
    for (std::int64_t i = 0; i < xd[C]; ++i) in_bias.push_back(E(uniform(random)));
    Dense w(reference.w_shape());
    for (std::size_t i = 0; i < weight.size(); ++i) w.v[i] = static_cast<float>(weight[i]);
    std::vector<double> b, b_in;
    for (const E& v : bias) b.push_back(static_cast<float>(v));
    for (const E& v : in_bias) b_in.push_back(static_cast<float>(v));
    for (auto layout : {dense, rows_apart}) {
      SCOPED_TRACE(layout == dense ? "dense" : "rows apart");
      const StridedTensor<E> x(xd, layout(xd), &random), dy(yd, layout(yd), &random);
      Dense xs = dense_of(x), dys = dense_of(dy);

      StridedTensor<E> y(yd, layout(yd), nullptr);
      for (std::int64_t i = 0; i < y.cells(); ++i) y.at(i) = E(3.0f);
      conv_forward<E>(*backend, g, x.in(), weight.data(), bias.data(), y.out());
      EXPECT_LE(error_of(y, reference.forward(xs, w, b).v), tolerance) << "forward";

      StridedTensor<E> dx(xd, layout(xd), nullptr);
      for (std::int64_t i = 0; i < dx.cells(); ++i) dx.at(i) = E(3.0f);
      conv_backward_data<E>(*backend, g, dy.in(), weight.data(), dx.out());
      const std::vector<double> want_dx = reference.input_gradient(dys, w).v;
      EXPECT_LE(error_of(dx, want_dx), tolerance) << "backward data";

      std::vector<float> dweight(weight.size(), 0.5f), dbias(bias.size(), 0.5f);
      conv_backward_weights<E>(*backend, g, x.in(), dy.in(), dweight.data(), dbias.data());
      const std::vector<double> want_dw = reference.weight_gradient(xs, dys).v, want_db = reference.bias_gradient(dys);
      EXPECT_LE(relative_error([&](std::size_t i) { return dweight[i] - 0.5; }, want_dw), tolerance) << "weights";
      EXPECT_LE(relative_error([&](std::size_t i) { return dbias[i] - 0.5; }, want_db), tolerance) << "bias";

      // The transposed forward: dy plays x, the input-sized dx plays y.
      StridedTensor<E> fused(xd, layout(xd), nullptr);
      for (std::int64_t i = 0; i < fused.cells(); ++i) fused.at(i) = E(3.0f);
      const bool took = conv_transposed_forward<E>(*backend, g, dy.in(), weight.data(), in_bias.data(), fused.out());
      const bool phased = stride_phases::split_of(g, yd[H], yd[W]).has_value();
      if (std::is_same_v<E, bf16> && onednn_bf16_native() && phased) {
        EXPECT_TRUE(took) << "the phases fuse the bias";
      }
      for (std::int64_t i = 0; i < fused.cells(); ++i) {
        const auto c = static_cast<std::size_t>(i / (xd[H] * xd[W]) % xd[C]);
        const E want = took ? E(static_cast<float>(in_bias[c]) + static_cast<float>(dx.at(i))) : E(3.0f);
        ASSERT_EQ(static_cast<float>(fused.at(i)), static_cast<float>(want))
            << (took ? "fused transposed forward, cell " : "a refused call wrote cell ") << i;
      }
    }
  }
}

TEST(PaddedCalls, Fp32MatchTheReferenceWithTheSamePadding) { check_padded_calls<float>(1e-5); }

// Tolerance: each bf16 result is rounded once (relative 2^-9, 4e-3 of the largest with the
// fp32 sums); the weight and bias gradients are fp32 sums of bf16 products.
TEST(PaddedCalls, Bf16MatchTheReferenceAndTheFusedBiasIsTheCropsBits) { check_padded_calls<bf16>(4e-3); }

}  // namespace
}  // namespace tessera::layers
