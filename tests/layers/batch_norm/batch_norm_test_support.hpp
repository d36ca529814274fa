#pragma once
// Shared by the batch-norm tests: a naive double-precision reference that normalises each
// statistics group (a box of cells) on its own, running a BatchNorm2d on a grid from global
// arrays, and the statistics groups each `stats=` option implies on a grid.

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "distarray/distribution.hpp"
#include "distarray/gather_scatter.hpp"
#include "layers/batch_norm.hpp"
#include "layers/grad_reduce.hpp"

namespace tessera::layers::testing {

inline constexpr double kTolerance = 1e-5;

inline HostArray<double> random_array(const Shape4& s, std::uint32_t seed, double offset = 0) {
  HostArray<double> a("random", s[0], s[1], s[2], s[3]);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = uniform(gen) + offset;
  return a;
}

inline std::vector<double> random_vector(std::size_t n, std::uint32_t seed, double offset) {
  std::vector<double> v(n);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> uniform(-0.5, 0.5);
  for (double& e : v) e = uniform(gen) + offset;
  return v;
}

template <class To, class From>
HostArray<To> convert(const HostArray<From>& a) {
  HostArray<To> b("converted", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) b.data()[i] = static_cast<To>(a.data()[i]);
  return b;
}

// What one forward + backward step gives: whole arrays and the (reduced) parameter grads.
struct BatchNormResult {
  HostArray<double> y, dx;
  std::vector<double> dgamma, dbeta;
};

// The reference: every box of `groups` normalised with its own statistics (biased
// variance), backward by the textbook formula; dgamma, dbeta summed over all cells.
inline BatchNormResult reference(const HostArray<double>& x, const HostArray<double>& dy,
                                 const std::vector<double>& gamma, const std::vector<double>& beta, double eps,
                                 const std::vector<Box>& groups) {
  const std::size_t channels = x.extent(1);
  BatchNormResult r{HostArray<double>("y", x.extent(0), x.extent(1), x.extent(2), x.extent(3)),
                    HostArray<double>("dx", x.extent(0), x.extent(1), x.extent(2), x.extent(3)),
                    std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  for (const Box& g : groups)
    for (std::size_t c = 0; c < channels; ++c) {
      auto each = [&](auto&& f) {
        for (auto n = g.lo[N]; n < g.hi[N]; ++n)
          for (auto h = g.lo[H]; h < g.hi[H]; ++h)
            for (auto w = g.lo[W]; w < g.hi[W]; ++w) f(n, h, w);
      };
      double count = 0, mean = 0, var = 0, sum_dy = 0, sum_dy_xhat = 0;
      each([&](auto n, auto h, auto w) { mean += x(n, c, h, w), count += 1; });
      mean /= count;
      each([&](auto n, auto h, auto w) { var += (x(n, c, h, w) - mean) * (x(n, c, h, w) - mean); });
      const double inv_std = 1 / std::sqrt(var / count + eps);
      each([&](auto n, auto h, auto w) {
        const double xhat = (x(n, c, h, w) - mean) * inv_std;
        r.y(n, c, h, w) = gamma[c] * xhat + beta[c];
        sum_dy += dy(n, c, h, w), sum_dy_xhat += dy(n, c, h, w) * xhat;
      });
      each([&](auto n, auto h, auto w) {
        const double xhat = (x(n, c, h, w) - mean) * inv_std;
        r.dx(n, c, h, w) = gamma[c] * inv_std * (dy(n, c, h, w) - sum_dy / count - xhat * sum_dy_xhat / count);
      });
      r.dgamma[c] += sum_dy_xhat, r.dbeta[c] += sum_dy;
    }
  return r;
}

// The boxes whose cells share statistics under `stats` on grid `dims`.
inline std::vector<Box> statistics_groups(const Shape4& shape, const GridDims& dims, StatsGroup stats) {
  const Distribution dist(shape, dims);
  std::vector<Box> groups;
  for (int r = 0; r < dist.ranks(); ++r) {
    Box b = dist.owned_box(r);
    if (stats != StatsGroup::local) b.lo[H] = 0, b.hi[H] = shape[H], b.lo[W] = 0, b.hi[W] = shape[W];
    if (stats == StatsGroup::all) b = Box{{0, 0, 0, 0}, shape};
    bool seen = false;
    for (const Box& g : groups) seen = seen || g == b;
    if (!seen) groups.push_back(b);
  }
  return groups;
}

template <class T, class V>
void set_values(const V& view, const std::vector<double>& values) {
  auto host = Kokkos::create_mirror_view(view);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = static_cast<T>(values[i]);
  Kokkos::deep_copy(view, host);
}

template <class V>
std::vector<double> host_vector(const V& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<double>(host.data(), host.data() + host.size());
}

// Forward(x), backward(dy) of a fresh layer with the given gamma, beta on `grid`; x and dy
// matter on rank 0 only; y and dx come back on rank 0, gradients reduced on every rank.
template <class T>
BatchNormResult run_step(const ProcessGrid& grid, BatchNorm2d<T>& layer, const HostArray<double>& x_global,
                         const HostArray<double>& dy_global, const std::vector<double>& gamma,
                         const std::vector<double>& beta) {
  const Shape4 shape{static_cast<std::int64_t>(x_global.extent(0)), static_cast<std::int64_t>(x_global.extent(1)),
                     static_cast<std::int64_t>(x_global.extent(2)), static_cast<std::int64_t>(x_global.extent(3))};
  set_values<T>(layer.params()[0]->value, gamma);
  set_values<T>(layer.params()[1]->value, beta);
  Tensor<T> x = make_input(grid, shape, layer, "x"), dx = make_input(grid, shape, layer, "dx");
  Tensor<T> y = make_output(grid, shape, layer, "y"), dy = make_output(grid, shape, layer, "dy");
  scatter(convert<T>(x_global), x);
  scatter(convert<T>(dy_global), dy);
  layer.forward(x, y);
  for (Parameter<T>* p : layer.params()) p->zero_grad();
  layer.backward(dy, dx);
  reduce_gradients(layer.params(), grid);
  return {convert<double>(gather(y)), convert<double>(gather(dx)), host_vector(layer.params()[0]->grad),
          host_vector(layer.params()[1]->grad)};
}

// max |got - want| / max |want| over the whole array (one scale for all of it).
inline double relative_error(const double* got, const double* want, std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0 ? diff : diff / scale;
}
inline double relative_error(const HostArray<double>& got, const HostArray<double>& want) {
  return got.size() != want.size() ? INFINITY : relative_error(got.data(), want.data(), got.size());
}
inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  return got.size() != want.size() ? INFINITY : relative_error(got.data(), want.data(), got.size());
}

}  // namespace tessera::layers::testing
