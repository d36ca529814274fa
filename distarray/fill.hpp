#pragma once
// fill(view, value): every element of a 1-D or 4-D view (any layout, a subview too) set to
// value, in one kernel. It replaces Kokkos::deep_copy(view, scalar) on the training step's
// path: Kokkos 3.4 names that kernel with a literal longer than the small-string buffer,
// which costs a heap allocation per call (distarray/kernel_label.hpp).
//
// Also allocation-free on CUDA, where the first GPU run traced a host allocation to each
// KOKKOS_LAMBDA launch (nvcc's wrapper copies a host-device lambda to the heap) and another
// to each policy built without an execution space instance (Kokkos 3.4's default Cuda()
// allocates a shared-pointer control block): the kernels are functors, launched on one held
// instance (distarray/held_instance.hpp). Host views go a row per iteration (contiguous
// inner loop); device views a cell per thread with w fastest, so a warp writes consecutive
// addresses.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera {

namespace fill_detail {

template <class View>
struct Fill1 {
  View v;
  typename View::non_const_value_type value;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const { v(i) = value; }
};

// Host rows through a pointer, so that the loop vectorises for any element type (bf16
// through View::operator() did not: a bf16 fill took twice an fp32 fill of twice the
// bytes). h == 1 and w == a plane's cells where short rows of a plane follow each other.
template <class View>
struct Fill4Rows {
  View v;
  typename View::non_const_value_type value;
  std::int64_t c, h, w, step;  // step: v's stride along w
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t r) const {
    const std::int64_t n = r / (c * h), ch = r % (c * h);
    auto* row = &v(n, ch / h, ch % h, 0);
    const auto fill_value = value;
    if (step == 1)
      for (std::int64_t x = 0; x < w; ++x) row[x] = fill_value;
    else
      for (std::int64_t x = 0; x < w; ++x) row[x * step] = fill_value;
  }
};

template <class View>
struct Fill4Cells {
  View v;
  typename View::non_const_value_type value;
  std::int64_t c, h, w;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    const std::int64_t x = i % w, r = i / w;
    const std::int64_t n = r / (c * h), ch = r % (c * h);
    v(n, ch / h, ch % h, x) = value;
  }
};

}  // namespace fill_detail

template <class View>
void fill(const View& v, typename View::non_const_value_type value) {
  using Exec = typename View::execution_space;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  const Exec& exec = held_instance<Exec>();
  if constexpr (View::rank == 1) {
    Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(exec, 0, std::int64_t(v.extent(0))),
                         fill_detail::Fill1<View>{v, value});
  } else {
    static_assert(View::rank == 4, "fill: 1-D or 4-D views");
    const std::int64_t c = v.extent(1), h = v.extent(2), w = v.extent(3);
    const std::int64_t rows = std::int64_t(v.extent(0)) * c * h;
    if (rows * w == 0) return;
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>::accessible) {
      // A row per plane where the rows follow each other and are short, while the planes are
      // enough to keep every thread busy (as layers::merge_plane_rows).
      const std::int64_t step = v.stride(3), planes = rows / h;
      const bool merge = step == 1 && std::int64_t(v.stride(2)) == w && h > 1 && w < 256 &&
                         planes >= 4 * std::int64_t(exec.concurrency());
      if (merge)
        Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(exec, 0, planes),
                             fill_detail::Fill4Rows<View>{v, value, c, 1, h * w, step});
      else
        Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(exec, 0, rows),
                             fill_detail::Fill4Rows<View>{v, value, c, h, w, step});
    } else
      Kokkos::parallel_for(kernel_label("tessera::fill"), Policy(exec, 0, rows * w),
                           fill_detail::Fill4Cells<View>{v, value, c, h, w});
  }
}

}  // namespace tessera
