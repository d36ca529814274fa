#pragma once
// Host-side access to cells by global index, for checks: tests read and write cells on the
// host with plain loops; kernels are the code under test.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/box.hpp"

namespace tessera::testing {

// Calls f(global index) for every cell of `box`, in row-major (n, c, h, w) order.
template <class F>
void for_each_index(const Box& box, F&& f) {
  for (std::int64_t n = box.lo[N]; n < box.hi[N]; ++n)
    for (std::int64_t c = box.lo[C]; c < box.hi[C]; ++c)
      for (std::int64_t h = box.lo[H]; h < box.hi[H]; ++h)
        for (std::int64_t w = box.lo[W]; w < box.hi[W]; ++w) f(Index4{n, c, h, w});
}

// `at(view, corner, i)` is the element for global cell i of a view whose corner is global
// cell `corner`.
template <class View>
auto& at(const View& view, const Index4& corner, const Index4& i) {
  return view(i[N] - corner[N], i[C] - corner[C], i[H] - corner[H], i[W] - corner[W]);
}

// Sets every cell of a DistArray's allocation to value(global index).
template <class Array, class F>
void set_window(const Array& array, F&& value) {
  auto host = Kokkos::create_mirror_view(array.window());
  const Box& wb = array.window_box();
  for_each_index(wb, [&](const Index4& g) { at(host, wb.lo, g) = value(g); });
  Kokkos::deep_copy(array.window(), host);
}

}  // namespace tessera::testing
