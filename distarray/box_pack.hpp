#pragma once
// Packing boxes of an NCHW array into one contiguous buffer and back. Every message set in
// distarray/ is a list of boxes laid end to end, one per peer in rank order — the layout
// MPI's v-collectives expect — so gather, scatter and redistribute share one pack and one
// unpack. Both are thin wrappers over the batched engine of segment_table.hpp: one kernel
// for all boxes, on the array's own execution space (device arrays are never walked by
// host loops).

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <vector>

#include "distarray/cuda_launch_check.hpp"
#include "distarray/box.hpp"
#include "distarray/segment_table.hpp"

namespace tessera {

// Where each box lies in a packed buffer: boxes[i].box occupies [boxes[i].buffer_offset,
// boxes[i].buffer_offset + boxes[i].box.size()) in row-major (n, c, h, w) order.
struct PackLayout {
  std::vector<BoxInBuffer> boxes;
  std::int64_t total = 0;  // buffer elements the layout needs

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

// The box an array holds in global coordinates: its element (0,0,0,0) is the cell `origin`.
template <class ArrayView>
Box held_box(const ArrayView& array, const Index4& origin) {
  Box held{origin, origin};
  for (int d = 0; d < kDims; ++d) held.hi[d] += static_cast<std::int64_t>(array.extent(static_cast<unsigned>(d)));
  return held;
}

}  // namespace detail

// Copy the boxes of `layout` (global coordinates) out of `array`, whose element (0,0,0,0)
// is the global cell `origin`, into `buffer`. `array` must be one contiguous row-major
// allocation (a DistArray's window(), a HostArray): a strided subview throws
// std::invalid_argument, a box outside the array or a short buffer std::out_of_range.
// Returns once the buffer is complete.
template <class ArrayView, class Buffer>
void pack(const ArrayView& array, const Index4& origin, const PackLayout& layout, const Buffer& buffer) {
  const SegmentTable<typename ArrayView::memory_space> table(detail::held_box(array, origin), layout.boxes);
  pack(table, array, buffer);
  fence_checked(typename ArrayView::execution_space());  // callers hand the buffer to MPI next
}

// The inverse of pack: write the boxes of `layout` from `buffer` into `array`.
template <class Buffer, class ArrayView>
void unpack(const Buffer& buffer, const PackLayout& layout, const ArrayView& array, const Index4& origin) {
  const SegmentTable<typename ArrayView::memory_space> table(detail::held_box(array, origin), layout.boxes);
  unpack(table, array, buffer);
  fence_checked(typename ArrayView::execution_space());  // callers hand the array to the user next
}

}  // namespace tessera
