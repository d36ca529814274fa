#pragma once
// Batched pack and unpack. All boxes of an exchange's messages form one SegmentTable and
// are copied by ONE kernel (as AMReX batches FillBoundary), so the launch count does not
// grow with the number of neighbours. Each thread finds its box by binary search over the
// table — a handful of cached loads — then copies.
//
// On host execution spaces a thread takes one (n, c) plane of a box: the index arithmetic
// (divisions) is paid once per plane, not once per row — rows of a W-halo are one to a few
// cells long — and the inner loop runs along w, contiguous in window and buffer alike.
// Parallelism is N * C planes per box, plenty for activations. On a GPU a thread takes one
// cell, so neighbouring threads touch neighbouring addresses.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "distarray/box.hpp"
#include "halo/plan.hpp"
#include "halo/transport.hpp"

namespace tessera::halo {

template <class T, class MemorySpace>
using WindowView = Kokkos::View<T****, Kokkos::LayoutRight, MemorySpace>;
template <class T, class MemorySpace>
using BufferView = Kokkos::View<T*, MemorySpace>;

// A box, and the buffer index where its cells start (row-major over the box, w fastest).
struct BoxInBuffer {
  Box box;
  std::int64_t buffer_offset = 0;
};

// Messages back to back in one buffer, in the plan's (ascending peer) order.
struct BufferLayout {
  std::vector<int> peers;
  std::vector<BoxInBuffer> boxes;  // one per message
  std::int64_t cells = 0;

  static BufferLayout of(const std::vector<Message>& messages) {
    BufferLayout layout;
    for (const Message& m : messages) {
      layout.peers.push_back(m.peer);
      layout.boxes.push_back({m.box, layout.cells});
      layout.cells += m.box.size();
    }
    return layout;
  }
  std::vector<Envelope> envelopes(std::size_t element_bytes) const {
    std::vector<Envelope> result;
    for (std::size_t i = 0; i < boxes.size(); ++i)
      result.push_back({peers[i], static_cast<std::size_t>(boxes[i].buffer_offset) * element_bytes,
                        static_cast<std::size_t>(boxes[i].box.size()) * element_bytes});
    return result;
  }
};

// One box of a batched copy, in the terms a kernel needs.
struct Segment {
  std::int64_t window_offset;  // flat index of the box's first cell in the window allocation
  std::int64_t buffer_offset;  // buffer index of the box's first cell
  std::int64_t extent[kDims];  // box shape (n, c, h, w)
  std::int64_t first_plane;    // (n, c) planes in the table's earlier segments
  std::int64_t first_cell;     // cells in the table's earlier segments
};

template <class MemorySpace>
struct SegmentTable {
  Kokkos::View<Segment*, MemorySpace> segments;
  std::int64_t planes = 0, cells = 0;
  std::int64_t stride_n = 0, stride_c = 0, stride_h = 0;  // of the window (stride_w is 1)

  SegmentTable() = default;
  // `window` is the allocation's box in global coordinates; every box must lie inside it.
  SegmentTable(const Box& window, const std::vector<BoxInBuffer>& boxes) {
    const Shape4 ws = window.shape();
    stride_h = ws[W];
    stride_c = ws[H] * stride_h;
    stride_n = ws[C] * stride_c;
    std::vector<Segment> host;
    for (const BoxInBuffer& b : boxes) {
      if (b.box.empty()) continue;  // keeps first_plane strictly increasing for the search
      if (!window.contains(b.box)) throw std::out_of_range("halo segment table: box outside the window");
      const Shape4 e = b.box.shape();
      host.push_back({window.linear(b.box.lo), b.buffer_offset, {e[0], e[1], e[2], e[3]}, planes, cells});
      planes += e[N] * e[C];
      cells += b.box.size();
    }
    segments = Kokkos::View<Segment*, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "halo::segments"),
                                                   host.size());
    Kokkos::deep_copy(segments, Kokkos::View<const Segment*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    host.data(), host.size()));
  }
};

// Splits boxes into groups whose boxes are pairwise disjoint, keeping the given order within
// and across groups. An accumulate adds several peers' contributions into the same owned
// cell (a corner sits in three neighbours' windows); adding one group per kernel needs no
// atomics and sums every cell in the same order on every run.
inline std::vector<std::vector<BoxInBuffer>> disjoint_groups(const std::vector<BoxInBuffer>& boxes) {
  std::vector<std::vector<BoxInBuffer>> groups;
  for (const BoxInBuffer& b : boxes) {
    auto fits = [&](const std::vector<BoxInBuffer>& g) {
      for (const BoxInBuffer& o : g)
        if (!o.box.intersect(b.box).empty()) return false;
      return true;
    };
    std::size_t g = 0;
    while (g < groups.size() && !fits(groups[g])) ++g;
    if (g == groups.size()) groups.emplace_back();
    groups[g].push_back(b);
  }
  return groups;
}

namespace detail {

// Index of the last segment whose first plane (ByPlane) or first cell is at or before i.
template <bool ByPlane, class Segments>
KOKKOS_INLINE_FUNCTION std::size_t find_segment(const Segments& segments, std::int64_t i) {
  std::size_t lo = 0, hi = segments.extent(0);
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if ((ByPlane ? segments(mid).first_plane : segments(mid).first_cell) <= i) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace detail

// How a kernel's threads divide the cells (see the top of this file).
enum class Traversal { planes, cells };

template <class ExecSpace>
constexpr Traversal default_traversal() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible
             ? Traversal::planes
             : Traversal::cells;
}

// Calls op(window_index, buffer_index) once for every cell of every segment, in one kernel.
// Tests force either traversal on the host, so the GPU's index arithmetic runs in CPU CI.
template <class ExecSpace, Traversal traversal = default_traversal<ExecSpace>(), class MemorySpace, class Op>
void for_each_cell(const char* label, const SegmentTable<MemorySpace>& table, const Op& op) {
  if (table.cells == 0) return;
  const auto segments = table.segments;
  const std::int64_t sn = table.stride_n, sc = table.stride_c, sh = table.stride_h;
  using Policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  if constexpr (traversal == Traversal::planes) {
    Kokkos::parallel_for(label, Policy(0, table.planes), KOKKOS_LAMBDA(const std::int64_t plane) {
      const Segment& s = segments(detail::find_segment<true>(segments, plane));
      const std::int64_t p = plane - s.first_plane, eh = s.extent[H], ew = s.extent[W];
      std::int64_t x = s.window_offset + (p / s.extent[C]) * sn + (p % s.extent[C]) * sc;
      std::int64_t b = s.buffer_offset + p * eh * ew;
      for (std::int64_t h = 0; h < eh; ++h, x += sh, b += ew)
        for (std::int64_t w = 0; w < ew; ++w) op(x + w, b + w);
    });
  } else {
    Kokkos::parallel_for(label, Policy(0, table.cells), KOKKOS_LAMBDA(const std::int64_t cell) {
      const Segment& s = segments(detail::find_segment<false>(segments, cell));
      const std::int64_t i = cell - s.first_cell;
      const std::int64_t w = i % s.extent[W], r = i / s.extent[W];
      const std::int64_t h = r % s.extent[H], nc = r / s.extent[H];
      op(s.window_offset + (nc / s.extent[C]) * sn + (nc % s.extent[C]) * sc + h * sh + w, s.buffer_offset + i);
    });
  }
}

// The cell operations of an exchange. Raw pointers keep the kernels free of View
// reference counting; the Views outlive the (fenced) kernels.

template <class T, class MemorySpace>
void pack(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
          const BufferView<T, MemorySpace>& buffer) {
  const T* const win = window.data();
  T* const buf = buffer.data();
  for_each_cell<typename MemorySpace::execution_space>(
      "tessera::halo::pack", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) { buf[b] = win[x]; });
}

// Accumulate's send side: the contribution leaves the window, so the cell is cleared.
template <class T, class MemorySpace>
void pack_and_clear(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
                    const BufferView<T, MemorySpace>& buffer) {
  T* const win = window.data();
  T* const buf = buffer.data();
  for_each_cell<typename MemorySpace::execution_space>(
      "tessera::halo::pack_and_clear", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) {
        buf[b] = win[x];
        win[x] = T(0);
      });
}

template <class T, class MemorySpace>
void unpack(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
            const BufferView<T, MemorySpace>& buffer) {
  T* const win = window.data();
  const T* const buf = buffer.data();
  for_each_cell<typename MemorySpace::execution_space>(
      "tessera::halo::unpack", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) { win[x] = buf[b]; });
}

// The boxes of `table` must be pairwise disjoint (see disjoint_groups).
template <class T, class MemorySpace>
void unpack_add(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
                const BufferView<T, MemorySpace>& buffer) {
  T* const win = window.data();
  const T* const buf = buffer.data();
  for_each_cell<typename MemorySpace::execution_space>(
      "tessera::halo::unpack_add", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) { win[x] += buf[b]; });
}

template <class T, class MemorySpace>
void set_cells(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window, T value) {
  T* const win = window.data();
  for_each_cell<typename MemorySpace::execution_space>(
      "tessera::halo::set_cells", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t) { win[x] = value; });
}

}  // namespace tessera::halo
