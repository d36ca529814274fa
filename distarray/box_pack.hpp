#pragma once
// Packing boxes of an NCHW array into one contiguous buffer and back. Every message set in
// distarray/ is a list of boxes laid end to end, one per peer in rank order — the layout
// MPI's v-collectives expect — so gather, scatter and redistribute share one pack and one
// unpack. The copy is a Kokkos kernel on the array's own execution space: device arrays
// are never walked by host loops.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "distarray/box.hpp"

namespace tessera {

// Where each box lies in a packed buffer: box i occupies [offsets[i], offsets[i] +
// boxes[i].size()) in row-major (n, c, h, w) order.
struct PackLayout {
  std::vector<Box> boxes;
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;

  static PackLayout end_to_end(std::vector<Box> boxes);
};

// A PackLayout as MPI's per-peer element counts and displacements. MPI counts are int, so
// a layout past INT_MAX elements throws std::overflow_error instead of wrapping.
struct MpiCounts {
  std::vector<int> counts;
  std::vector<int> displs;
};
MpiCounts mpi_counts(const PackLayout& layout);
int mpi_count(std::int64_t elements);

namespace detail {

enum class PackDirection { into_buffer, out_of_buffer };

// `array` holds the cells of Box{origin, origin + extents} in global coordinates.
template <class ArrayView>
void check_boxes_inside(const ArrayView& array, const Index4& origin, const PackLayout& layout,
                        const char* op) {
  Box held{origin, origin};
  for (int d = 0; d < kDims; ++d) held.hi[d] += static_cast<std::int64_t>(array.extent(static_cast<unsigned>(d)));
  for (const Box& box : layout.boxes)
    if (!held.contains(box)) throw std::out_of_range(std::string(op) + ": box lies outside the array");
}

// Moves one box's cells between the array and its slot in the buffer. A functor rather
// than a lambda: nvcc's device lambdas cannot capture inside an `if constexpr`.
template <PackDirection direction, class ArrayView, class BufferView>
struct BoxCopy {
  // Plain scalars, not Index4: std::array is not usable in device code.
  ArrayView array;
  BufferView buffer;
  std::int64_t n0, c0, h0, w0;  // the box's corner in array indices
  std::int64_t ec, eh, ew;      // the box's extents in c, h, w
  std::int64_t start;           // the box's first element in the buffer

  BoxCopy(const ArrayView& a, const Index4& origin, const Box& box, const BufferView& b, std::int64_t offset)
      : array(a), buffer(b),
        n0(box.lo[N] - origin[N]), c0(box.lo[C] - origin[C]), h0(box.lo[H] - origin[H]), w0(box.lo[W] - origin[W]),
        ec(box.extent(C)), eh(box.extent(H)), ew(box.extent(W)), start(offset) {}

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    const std::int64_t k = start + ((n * ec + c) * eh + h) * ew + w;
    if constexpr (direction == PackDirection::into_buffer)
      buffer(k) = array(n0 + n, c0 + c, h0 + h, w0 + w);
    else
      array(n0 + n, c0 + c, h0 + h, w0 + w) = buffer(k);
  }
};

template <PackDirection direction, class ArrayView, class BufferView>
void copy_boxes(const ArrayView& array, const Index4& origin, const PackLayout& layout,
                const BufferView& buffer) {
  static_assert(ArrayView::rank == 4 && BufferView::rank == 1);
  static_assert(std::is_same_v<typename ArrayView::memory_space, typename BufferView::memory_space>,
                "pack/unpack: the buffer must live in the array's memory space");
  using ExecSpace = typename ArrayView::execution_space;
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<4>, Kokkos::IndexType<std::int64_t>>;
  constexpr bool packing = direction == PackDirection::into_buffer;
  check_boxes_inside(array, origin, layout, packing ? "pack" : "unpack");
  if (static_cast<std::int64_t>(buffer.extent(0)) < layout.total)
    throw std::out_of_range(packing ? "pack: buffer too small" : "unpack: buffer too small");

  for (std::size_t i = 0; i < layout.boxes.size(); ++i) {
    const Box& box = layout.boxes[i];
    if (box.empty()) continue;
    const BoxCopy<direction, ArrayView, BufferView> copy(array, origin, box, buffer, layout.offsets[i]);
    Kokkos::parallel_for(packing ? "tessera::pack" : "tessera::unpack",
                         Policy({0, 0, 0, 0}, {box.extent(N), box.extent(C), box.extent(H), box.extent(W)}), copy);
  }
  // Callers hand the buffer (or the array) to MPI or to the user next.
  ExecSpace().fence();
}

}  // namespace detail

// Copy the boxes of `layout` (global coordinates) out of `array`, whose element (0,0,0,0)
// is the global cell `origin`, into `buffer`.
template <class ArrayView, class BufferView>
void pack(const ArrayView& array, const Index4& origin, const PackLayout& layout, const BufferView& buffer) {
  detail::copy_boxes<detail::PackDirection::into_buffer>(array, origin, layout, buffer);
}

// The inverse of pack: write the boxes of `layout` from `buffer` into `array`.
template <class BufferView, class ArrayView>
void unpack(const BufferView& buffer, const PackLayout& layout, const ArrayView& array, const Index4& origin) {
  detail::copy_boxes<detail::PackDirection::out_of_buffer>(array, origin, layout, buffer);
}

}  // namespace tessera
