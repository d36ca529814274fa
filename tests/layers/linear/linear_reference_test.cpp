// Linear in one process (a 1x1x1 grid on MPI_COMM_SELF): forward and backward against the
// double reference on odd sizes, PyTorch's initialisation bound, finite differences,
// Flatten as the identity, options and configuration errors.
#include <gtest/gtest.h>

#include <stdexcept>

#include "layers/flatten.hpp"
#include "linear_test_support.hpp"

namespace tessera::layers::testing {
namespace {

const Shape4 kShape{3, 5, 7, 9};

TEST(LinearReference, ForwardAndBackwardMatchDoubleReference) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto x = random_array(kShape, 1), dy = random_array({3, 4, 1, 1}, 2);
  for (const char* spec : {"out=4", "out=4,bias=false"}) {
    SCOPED_TRACE(spec);
    const LinearResult got = run_linear_step(self, LinearOptions::parse(spec), kShape, x, dy);
    const LinearResult want = reference(flat(x), flat(dy), got.weight, got.bias, 3, 4);
    EXPECT_LE(relative_error(got.y, want.y), kTolerance);
    EXPECT_LE(relative_error(got.dx, want.dx), kTolerance);
    EXPECT_LE(relative_error(got.dweight, want.dweight), kTolerance);
    if (!got.bias.empty()) {
      EXPECT_LE(relative_error(got.dbias, want.dbias), kTolerance);
    }
  }
}

// Arrays with halos: x, dx, y and dy are not dense matrices, so Linear copies the tile and
// dy in and dx and the outputs out; the result is the same, and dx's halo cells are zero.
TEST(LinearReference, ArraysWithHalosMatchDoubleReference) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto x = random_array(kShape, 1), dy = random_array({3, 4, 1, 1}, 2);
  for (const char* spec : {"out=4", "out=4,bias=false"}) {
    SCOPED_TRACE(spec);
    const LinearResult got = run_linear_step(self, LinearOptions::parse(spec), kShape, x, dy, {}, with_halos());
    const LinearResult want = reference(flat(x), flat(dy), got.weight, got.bias, 3, 4);
    EXPECT_LE(relative_error(got.y, want.y), kTolerance);
    EXPECT_LE(relative_error(got.dx, want.dx), kTolerance);
    EXPECT_LE(relative_error(got.dweight, want.dweight), kTolerance);
    if (!got.bias.empty()) {
      EXPECT_LE(relative_error(got.dbias, want.dbias), kTolerance);
    }
  }
}

TEST(LinearReference, InitialisationIsPyTorchsBoundAndSeeded) {
  const Linear<float> a(LinearOptions::parse("out=4"), {5, 7, 9}, 3), b(LinearOptions::parse("out=4"), {5, 7, 9}, 3);
  auto pa = const_cast<Linear<float>&>(a).params(), pb = const_cast<Linear<float>&>(b).params();
  const double bound = 1 / std::sqrt(5.0 * 7 * 9);
  for (std::size_t i = 0; i < pa.size(); ++i) {
    const auto va = host_vector(pa[i]->value), vb = host_vector(pb[i]->value);
    EXPECT_EQ(va, vb);
    for (double v : va) EXPECT_LE(std::abs(v), bound);
  }
}

// L = sum(y * r) is linear in x, W, b: central differences are exact up to rounding.
TEST(LinearReference, FiniteDifferences) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 2, 3, 2};
  const auto x = random_array(shape, 3), r = random_array({2, 3, 1, 1}, 4);
  const LinearOptions options = LinearOptions::parse("out=3");
  const LinearResult analytic = run_linear_step(self, options, shape, x, r);
  auto loss = [&](const HostArray<float>& input) {
    const LinearResult out = run_linear_step(self, options, shape, input, r);
    double sum = 0;
    for (std::size_t i = 0; i < out.y.size(); ++i) sum += out.y[i] * r.data()[i];
    return sum;
  };
  const float step = 0.25f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    HostArray<float> plus("plus", 2, 2, 3, 2), minus("minus", 2, 2, 3, 2);
    Kokkos::deep_copy(plus, x), Kokkos::deep_copy(minus, x);
    plus.data()[i] += step, minus.data()[i] -= step;
    EXPECT_NEAR(analytic.dx[i], (loss(plus) - loss(minus)) / (2 * step), 1e-4) << "dx[" << i << "]";
  }
}

TEST(Flatten, IsTheIdentityOnTiles) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Flatten<float> flatten;
  const auto x = random_array(kShape, 5);
  Tensor<float> a(self, kShape), b(self, kShape);
  scatter(x, a);
  flatten.forward(a, b);
  EXPECT_EQ(flat(gather(b)), flat(x));
  // With halos (a strided copy of the owned cells); backward zeroes dx's halo.
  const HaloWidths halo{{0, 0, 1, 1}, {0, 0, 2, 0}};
  Tensor<float> c(self, kShape, halo), d(self, kShape, halo);
  scatter(x, c);
  flatten.forward(c, b);
  EXPECT_EQ(flat(gather(b)), flat(x));
  Kokkos::deep_copy(d.window(), 7.0f);
  flatten.backward(b, d);
  EXPECT_EQ(flat(gather(d)), flat(x));
  auto window = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d.window());
  EXPECT_EQ(window(0, 0, 0, 0), 0.0f);
  EXPECT_EQ(flatten.output_shape(kShape), kShape);
  EXPECT_EQ(flatten.kind(), "flatten");
}

TEST(LinearOptions, DefaultsRoundTripAndErrors) {
  const LinearOptions o = LinearOptions::parse("out=10");
  EXPECT_EQ(o.out, 10);
  EXPECT_TRUE(o.bias);
  EXPECT_EQ(LinearOptions::parse(LinearOptions::parse("out=3,bias=false").to_spec()).bias, false);
  for (const char* bad : {"", "out=0", "out=-2", "out=4,bais=true", "out=x"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(LinearOptions::parse(bad), std::invalid_argument);
  }
  const Linear<float> layer(LinearOptions::parse("out=4"), {5, 7, 9}, 0);
  EXPECT_THROW(layer.output_shape({3, 5, 7, 8}), std::invalid_argument);
  EXPECT_THROW(Linear<float>(LinearOptions::parse("out=4"), {0, 7, 9}, 0), std::invalid_argument);
  // An output not on the head grid (wrong shape) is refused before any work.
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Linear<float> l(LinearOptions::parse("out=4"), {5, 7, 9}, 0);
  Tensor<float> x(self, kShape), y(self, {3, 5, 1, 1});
  EXPECT_THROW(l.forward(x, y), std::invalid_argument);
}

}  // namespace
}  // namespace tessera::layers::testing
