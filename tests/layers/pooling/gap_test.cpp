// Global average pooling on every process grid the rank count allows: its (N, C, 1, 1)
// output on the head grid — on every replica — equals the naive double mean over the whole
// image (so the tiles' partial sums were added over the spatial group), dx equals
// dy / (H*W) everywhere, a finite-difference check in double, and the option error.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/layers/support/grids_that_fit.hpp"
#include "layers/global_avg_pool.hpp"
#include "layers/head_grid.hpp"
#include "tests/layers/conv/conv_test_support.hpp"

namespace tessera::layers::testing {
namespace {

template <class T>
std::vector<double> owned_values(const Tensor<T>& t) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), t.owned());
  std::vector<double> v;
  for (std::size_t n = 0; n < host.extent(0); ++n)
    for (std::size_t c = 0; c < host.extent(1); ++c) v.push_back(host(n, c, 0, 0));
  return v;
}

// forward and backward on every grid that fits shape, dx with halo widths dx_halo.
void check_every_grid(const Shape4& shape, const HaloWidths& dx_halo) {
  const HostArray<float> x = random_array(shape, 5);
  const HostArray<float> dy_global = random_array({shape[N], shape[C], 1, 1}, 6);  // every rank draws the same
  const double cells = double(shape[H] * shape[W]);
  GlobalAvgPool<float> gap;
  for (const GridDims& dims : grids_that_fit(shape, shape)) {
    SCOPED_TRACE("grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const auto head = make_head_grid(grid);
    const Shape4 out = gap.output_shape(shape);
    Tensor<float> xt(grid, shape, HaloWidths{}, "x"), dxt(grid, shape, dx_halo, "dx");
    Tensor<float> y(*head, out, {}, "y"), dy(*head, out, {}, "dy");
    scatter(x, xt);
    gap.forward(xt, y);
    const Box owned = xt.owned_box();
    std::vector<double> want;
    for (std::int64_t n = owned.lo[N]; n < owned.hi[N]; ++n)
      for (std::int64_t c = 0; c < shape[C]; ++c) {
        double sum = 0;
        for (std::int64_t h = 0; h < shape[H]; ++h)
          for (std::int64_t w = 0; w < shape[W]; ++w) sum += x(n, c, h, w);
        want.push_back(sum / cells);
      }
    const std::vector<double> got = owned_values(y);
    EXPECT_EQ(got.size(), want.size());  // not ASSERT: every rank must reach the collectives below
    const std::vector<float> got_f(got.begin(), got.end());
    if (got.size() == want.size()) {
      EXPECT_LE(relative_error(got_f.data(), want.data(), want.size()), kTolerance);
    }

    EXPECT_EQ(y.owned_box().extent(N), owned.extent(N));
    scatter(dy_global, dy);  // each head grid (replica) gets the same dy
    gap.backward(dy, dxt);
    const HostArray<float> dx = gather(dxt);
    if (grid.rank() == 0) {
      std::vector<double> dx_want;
      for (std::int64_t n = 0; n < shape[N]; ++n)
        for (std::int64_t c = 0; c < shape[C]; ++c)
          for (std::int64_t i = 0; i < shape[H] * shape[W]; ++i) dx_want.push_back(dy_global(n, c, 0, 0) / cells);
      EXPECT_LE(relative_error(dx.data(), dx_want.data(), dx_want.size()), kTolerance);
    }
  }
}

TEST(GlobalAvgPool, EveryGridMatchesTheReference) { check_every_grid({2, 3, 13, 11}, HaloWidths::symmetric_hw(1, 1)); }

// Planes of more than one 1024-cell block (the host's block sums, cell_loop.hpp's
// host_sum), many planes, and dx without a halo.
TEST(GlobalAvgPool, ManyLargePlanesMatchTheReference) { check_every_grid({4, 40, 37, 45}, HaloWidths{}); }

// L = sum(gap(x) * r): central differences in double agree with dx.
TEST(GlobalAvgPool, FiniteDifferencesMatchBackward) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 2, 3, 4};
  GlobalAvgPool<double> gap;
  const Shape4 out = gap.output_shape(shape);
  Tensor<double> xt(self, shape), dxt(self, shape), y(self, out), r(self, out);
  auto x = Kokkos::create_mirror_view(xt.window());
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(double(i));
  auto rh = Kokkos::create_mirror_view(r.window());
  for (std::size_t i = 0; i < rh.size(); ++i) rh.data()[i] = 0.5 + double(i);
  Kokkos::deep_copy(r.window(), rh);
  auto loss = [&] {
    Kokkos::deep_copy(xt.window(), x);
    gap.forward(xt, y);
    const auto yh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y.window());
    double l = 0;
    for (std::size_t i = 0; i < yh.size(); ++i) l += yh.data()[i] * rh.data()[i];
    return l;
  };
  loss();
  gap.backward(r, dxt);
  const auto dx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dxt.window());
  constexpr double h = 1e-6;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x.data()[i];
    x.data()[i] = saved + h;
    const double up = loss();
    x.data()[i] = saved - h;
    const double down = loss();
    x.data()[i] = saved;
    EXPECT_NEAR((up - down) / (2 * h), dx.data()[i], 1e-8) << "dx element " << i;
  }
}

TEST(GlobalAvgPool, UnknownOptionIsAClearError) {
  EXPECT_NO_THROW(GlobalAvgPool<float>::parse(""));
  try {
    GlobalAvgPool<float>::parse("keepdim=true");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown option 'keepdim'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::layers::testing
