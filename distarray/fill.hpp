#pragma once
// fill(view, value): every element of a 1-D or 4-D view (any layout, a subview too) set to
// value, in one kernel. It replaces Kokkos::deep_copy(view, scalar) on the training step's
// path: Kokkos 3.4 names that kernel with a literal longer than the small-string buffer,
// which costs a heap allocation per call (distarray/kernel_label.hpp).

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/kernel_label.hpp"

namespace tessera {

template <class View>
void fill(const View& v, typename View::non_const_value_type value) {
  using Exec = typename View::execution_space;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  if constexpr (View::rank == 1) {
    Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(0, std::int64_t(v.extent(0))),
                         KOKKOS_LAMBDA(std::int64_t i) { v(i) = value; });
  } else {
    static_assert(View::rank == 4, "fill: 1-D or 4-D views");
    const std::int64_t c = v.extent(1), h = v.extent(2), w = v.extent(3);
    const std::int64_t rows = std::int64_t(v.extent(0)) * c * h;
    if (rows * w == 0) return;
    // One row of w cells per iteration: the inner loop runs over contiguous memory.
    Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
      const std::int64_t n = r / (c * h), ch = r % (c * h);
      for (std::int64_t x = 0; x < w; ++x) v(n, ch / h, ch % h, x) = value;
    });
  }
}

}  // namespace tessera
