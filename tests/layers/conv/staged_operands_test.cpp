// ConvBackend's weight gradient reads the operands it is given, whichever call came before:
// a backend may keep the copy of x its forward staged, or of dy its backward data staged,
// and read it in the backward_weights that follows on the same operand (deconv's backward
// runs forward then backward_weights on one embedded dy; conv's runs backward data then
// backward_weights on one dy) — but never for another operand, nor after a call that
// staged something else — its own call or another layer's: every layer stages into the same
// per-role buffers of the process (layers/onednn/staging_arena.hpp), which is also why a
// second layer of the same shapes takes no more memory. Each sequence's dW against the
// double reference, fp32 and (where the backend runs it) bf16.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "layers/conv_backend.hpp"
#include "layers/onednn/staging_arena.hpp"
#include "tests/layers/conv/conv_reference.hpp"

namespace tessera::layers {
namespace {

using namespace tessera::layers::testing;

template <class T>
struct Operand {
  Shape4 dims;
  std::vector<T> values;
  Operand(const Shape4& d, std::mt19937& random) : dims(d) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < d[N] * d[C] * d[H] * d[W]; ++i) values.push_back(T(uniform(random)));
  }
  explicit Operand(const Shape4& d) : dims(d), values(static_cast<std::size_t>(d[N] * d[C] * d[H] * d[W]), T(0.0f)) {}
  Tensor4Ref<const T> in() const { return {values.data(), dims, packed_strides(dims)}; }
  Tensor4Ref<T> out() { return {values.data(), dims, packed_strides(dims)}; }
  Dense dense() const {
    Dense d(dims);
    for (std::size_t i = 0; i < values.size(); ++i) d.v[i] = static_cast<float>(values[i]);
    return d;
  }
};

template <class T>
void expect_weight_gradients_of_their_operands(std::int64_t stride) {
  const auto backend = make_conv_backend();
  // The oneDNN backend (CPU builds, the only ones that compile this test) runs bf16
  // everywhere, natively or widened to f32.
  if (std::is_same_v<T, bf16>) {
    ASSERT_TRUE(backend->runs_bf16()) << backend->why_no_bf16();
  }
  SCOPED_TRACE(::testing::Message() << "stride " << stride);
  std::mt19937 random(17);
  ReferenceConv reference;
  reference.o.out = 16, reference.o.kh = reference.o.kw = 3, reference.o.sh = reference.o.sw = stride;
  reference.x_shape = {2, 16, 10, 9};  // 16 channels: the backends stage them (blocked or NHWC)
  const ConvGeometry g = reference.o.geometry();
  const Shape4 xd = reference.x_shape, yd = reference.y_shape();
  const Operand<T> x(xd, random), other_x(xd, random), dy(yd, random), other_dy(yd, random), weight(reference.w_shape(), random);
  Operand<T> y(yd), dx(xd);

  const auto weight_gradient = [&](const Operand<T>& a, const Operand<T>& b) {
    std::vector<float> dw(weight.values.size(), 0.0f);
    conv_backward_weights<T>(*backend, g, a.in(), b.in(), dw.data(), nullptr);
    Dense da = a.dense(), db = b.dense();
    return error_against(dw, reference.weight_gradient(da, db).v);
  };
  const double tolerance = 1e-5;  // fp32 sums of products (exact for bf16 values)
  // After forward on x: the same x, then another x.
  conv_forward<T>(*backend, g, x.in(), weight.values.data(), nullptr, y.out());
  EXPECT_LE(weight_gradient(x, dy), tolerance) << "forward(x), then dW of x";
  conv_forward<T>(*backend, g, x.in(), weight.values.data(), nullptr, y.out());
  EXPECT_LE(weight_gradient(other_x, dy), tolerance) << "forward(x), then dW of another x";
  // After backward data on dy: the same dy, then another dy.
  conv_backward_data<T>(*backend, g, dy.in(), weight.values.data(), dx.out());
  EXPECT_LE(weight_gradient(x, dy), tolerance) << "backward data(dy), then dW of dy";
  conv_backward_data<T>(*backend, g, dy.in(), weight.values.data(), dx.out());
  EXPECT_LE(weight_gradient(x, other_dy), tolerance) << "backward data(dy), then dW of another dy";
  // Backward data between (conv's backward; at stride 2 in bf16 it runs by phases, which
  // leave forward's staged x in place): dW of forward's x, then of another x.
  conv_forward<T>(*backend, g, x.in(), weight.values.data(), nullptr, y.out());
  conv_backward_data<T>(*backend, g, other_dy.in(), weight.values.data(), dx.out());
  EXPECT_LE(weight_gradient(x, dy), tolerance) << "forward(x), backward data(another dy), then dW of x and dy";
  conv_forward<T>(*backend, g, x.in(), weight.values.data(), nullptr, y.out());
  conv_backward_data<T>(*backend, g, dy.in(), weight.values.data(), dx.out());
  EXPECT_LE(weight_gradient(other_x, dy), tolerance) << "forward(x), backward data(dy), then dW of another x";

  // Another layer of the same shapes (its own backend) stages between: x and dy as this
  // layer staged them are overwritten in the shared buffers, so dW must stage them again.
  const auto other_layer = make_conv_backend();
  conv_forward<T>(*backend, g, x.in(), weight.values.data(), nullptr, y.out());
  conv_forward<T>(*other_layer, g, other_x.in(), weight.values.data(), nullptr, y.out());
  EXPECT_LE(weight_gradient(x, dy), tolerance) << "forward(x), another layer's forward(another x), then dW of x";
  conv_backward_data<T>(*backend, g, dy.in(), weight.values.data(), dx.out());
  conv_backward_data<T>(*other_layer, g, other_dy.in(), weight.values.data(), dx.out());
  EXPECT_LE(weight_gradient(x, dy), tolerance)
      << "backward data(dy), another layer's backward data(another dy), then dW of dy";
}

TEST(ConvBackendCalls, WeightGradientReadsItsOwnOperandsFp32) {
  for (const std::int64_t stride : {1, 2}) expect_weight_gradients_of_their_operands<float>(stride);
}
TEST(ConvBackendCalls, WeightGradientReadsItsOwnOperandsBf16) {
  for (const std::int64_t stride : {1, 2}) expect_weight_gradients_of_their_operands<bf16>(stride);
}

// Layers share the staging buffers rather than each holding its own: a second layer of
// the same shapes, run through forward and backward, adds no bytes to what the first grew.
TEST(ConvBackendCalls, LayersShareTheirStagingBuffers) {
  std::mt19937 random(5);
  ReferenceConv reference;
  reference.o.out = 32, reference.o.kh = reference.o.kw = 3;
  reference.x_shape = {2, 32, 40, 36};  // 32 channels: staged in blocked formats
  const ConvGeometry g = reference.o.geometry();
  const Operand<float> x(reference.x_shape, random), dy(reference.y_shape(), random), weight(reference.w_shape(), random);
  Operand<float> y(reference.y_shape()), dx(reference.x_shape);
  std::vector<float> dw(weight.values.size(), 0.0f);
  const auto step = [&](ConvBackend& layer) {
    conv_forward<float>(layer, g, x.in(), weight.values.data(), nullptr, y.out());
    conv_backward_data<float>(layer, g, dy.in(), weight.values.data(), dx.out());
    conv_backward_weights<float>(layer, g, x.in(), dy.in(), dw.data(), nullptr);
  };
  const onednn::StagingArena& arena = onednn::StagingArena::shared();
  const auto first = make_conv_backend(), second = make_conv_backend();
  step(*first);
  const std::size_t after_first = arena.bytes();
  const std::size_t operand_bytes = (x.values.size() + dy.values.size()) * sizeof(float);
  ASSERT_GE(after_first, operand_bytes) << "the first layer staged x and dy in the shared buffers";
  step(*second);
  EXPECT_EQ(arena.bytes(), after_first) << "a second layer of the same shapes allocated its own staging buffers";
}

}  // namespace
}  // namespace tessera::layers
