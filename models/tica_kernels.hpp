#pragma once
// The element-wise kernels of the reconstruction-TICA objective (models/tica.hpp) over a
// DistArray's owned cells, for fp32 and bf16 views alike. Every cell is read as float and
// computed in float (a bf16 cell widens exactly); sums are double; a bf16 result is rounded
// once, when it is stored (bf16 has no arithmetic of its own: distarray/bf16.hpp). Functors
// through the cell loops (on CUDA a KOKKOS_LAMBDA is copied to the heap at every launch).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include "layers/cell_loop.hpp"

namespace tessera::models::tica {

using layers::extents_of;
using layers::for_each_cell;
using layers::sum_each_cell;
using Int = std::int64_t;

template <class V>
struct SquaredError {
  V x_hat, x, d_x_hat;
  float scale;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w, double& s) const {
    const float diff = float(x_hat(n, c, h, w)) - float(x(n, c, h, w));
    s += double(diff) * double(diff);
    d_x_hat(n, c, h, w) = 2.0f * diff * scale;
  }
};

template <class V>
struct CellSum {
  V cells;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w, double& s) const {
    s += double(float(cells(n, c, h, w)));
  }
};

template <class V>
struct AddScaled {
  V into, from;
  float alpha;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const {
    into(n, c, h, w) = float(into(n, c, h, w)) + alpha * float(from(n, c, h, w));
  }
};

template <class V>
struct AddConstant {
  V into;
  float value;
  KOKKOS_INLINE_FUNCTION void operator()(Int n, Int c, Int h, Int w) const {
    into(n, c, h, w) = float(into(n, c, h, w)) + value;
  }
};

// sum (x_hat - x)^2 over the cells; writes d_x_hat = 2 (x_hat - x) * scale.
template <class V>
double squared_error(const V& x_hat, const V& x, const V& d_x_hat, float scale) {
  double sum = 0;
  sum_each_cell("tessera::tica::squared_error", extents_of(x_hat), SquaredError<V>{x_hat, x, d_x_hat, scale}, sum);
  return sum;
}

// sum of the cells of `pooled` (each sqrt(eps + a window's sum of squares) >= 0).
template <class V>
double cell_sum(const V& pooled) {
  double sum = 0;
  sum_each_cell("tessera::tica::cell_sum", extents_of(pooled), CellSum<V>{pooled}, sum);
  return sum;
}

// into += alpha * from (same extents).
template <class V>
void add_scaled(const V& into, const V& from, float alpha) {
  static_assert(layers::cell_kernel_by_value<AddScaled<V>>, "tica: kernel arguments over CUDA's by-value limit");
  for_each_cell("tessera::tica::add_scaled", into, AddScaled<V>{into, from, alpha});
}

// into += value.
template <class V>
void add_constant(const V& into, float value) {
  for_each_cell("tessera::tica::add_constant", into, AddConstant<V>{into, value});
}

}  // namespace tessera::models::tica
