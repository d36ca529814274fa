#pragma once
// WideStaging: fp32 copies of bf16 boxes, for kernels written for one element type that
// a bf16 layer runs in fp32 (upsample's and the locally connected layer's backward add
// into dx, which in bf16 would round after every term). A box is widened into an fp32
// scratch view, the fp32 kernel runs there, and its result is narrowed into the bf16 box,
// rounded once. The scratch is one buffer per role that only grows, so the interior and
// border strips of an overlapped forward reuse it without allocating.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "distarray/bf16.hpp"
#include "layers/cell_loop.hpp"

namespace tessera::layers {

// to = from as a row op (cell_loop.hpp): vectorised rows; From and To are float or bf16.
template <class From, class To>
struct CopyRows {
  Rows<const From> from;
  Rows<To> to;
  struct Row {
    const From* from;
    To* to;
    static constexpr bool wide_vectors = std::is_same_v<To, bf16>;  // cell_loop.hpp: bf16 rounding
    KOKKOS_INLINE_FUNCTION void operator()(std::int64_t w) const { to[w] = To(float(from[w])); }
  };
  KOKKOS_INLINE_FUNCTION Row operator()(std::int64_t n, std::int64_t c, std::int64_t h) const {
    return {from.row(n, c, h), to.row(n, c, h)};
  }
};

template <class MemorySpace>
class WideStaging {
 public:
  using Wide = Kokkos::View<float****, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  // An fp32 view shaped like `box` in role `role` (0 .. kRoles-1); contents undefined.
  template <class View>
  Wide shaped_like(int role, const View& box) {
    const std::size_t n = box.extent(0), c = box.extent(1), h = box.extent(2), w = box.extent(3);
    Buffer& b = buffers_[role];
    if (b.extent(0) < n * c * h * w)
      b = Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::wide_staging"), n * c * h * w);
    return Wide(b.data(), n, c, h, w);
  }

  // to = from, element by element (float <-> bf16 rounds to nearest even): the cell loops'
  // layout (vectorised rows on the host, a cell per thread with w fastest on CUDA), launched
  // with a functor (nothing allocated per call). Both views' rows (w) are contiguous.
  template <class From, class To>
  static void copy(const From& from, const To& to) {
    static_assert(std::is_same_v<typename MemorySpace::execution_space, Kokkos::DefaultExecutionSpace>,
                  "WideStaging: the cell loops run on the default execution space");
    using Op = CopyRows<typename From::non_const_value_type, typename To::non_const_value_type>;
    const Op op{rows_of(from), rows_of(to)};
    for_each_row("tessera::wide_staging::copy", merge_plane_rows(extents_of(to), op.from, op.to), op);
  }

  static constexpr int kRoles = 4;

 private:
  using Buffer = Kokkos::View<float*, MemorySpace>;
  Buffer buffers_[kRoles];
};

}  // namespace tessera::layers
