#pragma once
// The element-wise kernels of the reconstruction-TICA objective (models/tica.hpp) over a
// DistArray's owned cells, for fp32 and bf16 views alike. Every cell is read as float and
// computed in float (a bf16 cell widens exactly); sums are double; a bf16 result is rounded
// once, when it is stored (bf16 has no arithmetic of its own: distarray/bf16.hpp). Free
// functions: CUDA allows extended lambdas only outside member functions.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include "layers/cell_loop.hpp"

namespace tessera::models::tica {

using layers::extents_of;
using layers::for_each_cell;
using layers::sum_each_cell;

// sum (x_hat - x)^2 over the cells; writes d_x_hat = 2 (x_hat - x) * scale.
template <class V>
double squared_error(const V& x_hat, const V& x, const V& d_x_hat, float scale) {
  double sum = 0;
  sum_each_cell(
      "tessera::tica::squared_error", extents_of(x_hat),
      KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, double& s) {
        const float diff = float(x_hat(n, c, h, w)) - float(x(n, c, h, w));
        s += double(diff) * double(diff);
        d_x_hat(n, c, h, w) = 2.0f * diff * scale;
      },
      sum);
  return sum;
}

// sum of the cells of `pooled` (each sqrt(eps + a window's sum of squares) >= 0).
template <class V>
double cell_sum(const V& pooled) {
  double sum = 0;
  sum_each_cell(
      "tessera::tica::cell_sum", extents_of(pooled),
      KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, double& s) {
        s += double(float(pooled(n, c, h, w)));
      },
      sum);
  return sum;
}

// into += alpha * from (same extents).
template <class V>
void add_scaled(const V& into, const V& from, float alpha) {
  for_each_cell(
      "tessera::tica::add_scaled", into,
      KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
        into(n, c, h, w) = float(into(n, c, h, w)) + alpha * float(from(n, c, h, w));
      });
}

// into += value.
template <class V>
void add_constant(const V& into, float value) {
  for_each_cell(
      "tessera::tica::add_constant", into, KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
        into(n, c, h, w) = float(into(n, c, h, w)) + value;
      });
}

}  // namespace tessera::models::tica
