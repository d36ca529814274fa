#pragma once
// Tessera's one pack/unpack engine. A list of boxes of an NCHW window, each with its place
// in a buffer, forms one SegmentTable, and ONE kernel copies all of them (as AMReX batches
// FillBoundary), so the launch count does not grow with the number of boxes: halo
// exchanges, gather/scatter and redistribute all pack and unpack through it. Each thread
// finds its box by binary search over the table — a handful of cached loads — then copies.
//
// On host execution spaces a thread takes one (n, c) plane of a box: the index arithmetic
// (divisions) is paid once per plane, not once per row — rows of a W-halo are one to a few
// cells long — and the inner loop runs along w, contiguous in window and buffer alike.
// Parallelism is N * C planes per box, plenty for activations. On a GPU a thread takes one
// cell, so neighbouring threads touch neighbouring addresses.
//
// The window must be one contiguous row-major (LayoutRight) allocation: cells are addressed
// by flat index, with strides taken from the window's shape. pack and unpack check this.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera {

template <class T, class MemorySpace>
using WindowView = Kokkos::View<T****, Kokkos::LayoutRight, MemorySpace>;
template <class T, class MemorySpace>
using BufferView = Kokkos::View<T*, MemorySpace>;

// A box, and the buffer index where its cells start (row-major over the box, w fastest).
struct BoxInBuffer {
  Box box;
  std::int64_t buffer_offset = 0;
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
  Box window;                  // the allocation's box in global coordinates
  std::int64_t buffer_end = 0;  // one past the last buffer index any box uses

  SegmentTable() = default;
  // Every box must lie inside `window`; empty boxes are skipped. Throws std::out_of_range.
  SegmentTable(const Box& window_box, const std::vector<BoxInBuffer>& boxes) : window(window_box) {
    const Shape4 ws = window.shape();
    stride_h = ws[W];
    stride_c = ws[H] * stride_h;
    stride_n = ws[C] * stride_c;
    std::vector<Segment> host;
    for (const BoxInBuffer& b : boxes) {
      if (b.box.empty()) continue;  // keeps first_plane strictly increasing for the search
      if (!window.contains(b.box)) {
        std::ostringstream msg;
        msg << "tessera: box " << b.box << " lies outside the array's box " << window;
        throw std::out_of_range(msg.str());
      }
      const Shape4 e = b.box.shape();
      host.push_back({window.linear(b.box.lo), b.buffer_offset, {e[0], e[1], e[2], e[3]}, planes, cells});
      planes += e[N] * e[C];
      cells += b.box.size();
      if (b.buffer_offset + b.box.size() > buffer_end) buffer_end = b.buffer_offset + b.box.size();
    }
    segments = Kokkos::View<Segment*, MemorySpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::segments"),
                                                   host.size());
    Kokkos::deep_copy(segments, Kokkos::View<const Segment*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    host.data(), host.size()));
  }
};

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

namespace detail {

// The two traversals as functors, launched on a held instance (distarray/held_instance.hpp):
// on CUDA a KOKKOS_LAMBDA is copied to the heap each time its enclosing function runs, and a
// policy built without an instance allocates, so a halo exchange made per step would.
// A host plane of a narrow box (a halo column: a few cells per row, rows a window's width
// apart) touches a new cache line per row, and the hardware prefetcher, which follows a
// stride within a page, keeps losing it: the cells' lines are fetched kAhead rows early.
// A one-cell column of 256 planes x 129 rows took 0.40 ms plain, 0.17 ms prefetched, when
// the window was out of cache (as it is by the next step's exchange).
// Ops that name their window cells (window_cell(x)) get it; others (a test's lambda) not.
inline constexpr std::int64_t kNarrowRow = 16, kAhead = 32;
template <class Op, class = void>
struct names_window_cells : std::false_type {};
template <class Op>
struct names_window_cells<Op, std::void_t<decltype(std::declval<const Op&>().window_cell(std::int64_t{}))>>
    : std::true_type {};

template <class Segments, class Op>
struct PlaneTraversal {
  Segments segments;
  std::int64_t sn, sc, sh;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t plane) const {
    const Segment& s = segments(find_segment<true>(segments, plane));
    const std::int64_t p = plane - s.first_plane, eh = s.extent[H], ew = s.extent[W];
    std::int64_t x = s.window_offset + (p / s.extent[C]) * sn + (p % s.extent[C]) * sc;
    std::int64_t b = s.buffer_offset + p * eh * ew;
#if !defined(__CUDA_ARCH__) && (defined(__GNUC__) || defined(__clang__))
    if constexpr (names_window_cells<Op>::value) {
      if (ew <= kNarrowRow) {
        for (std::int64_t h = 0; h < eh; ++h, x += sh, b += ew) {
          if (h + kAhead < eh) __builtin_prefetch(op.window_cell(x + kAhead * sh), 1);
          for (std::int64_t w = 0; w < ew; ++w) op(x + w, b + w);
        }
        return;
      }
    }
#endif
    for (std::int64_t h = 0; h < eh; ++h, x += sh, b += ew)
      for (std::int64_t w = 0; w < ew; ++w) op(x + w, b + w);
  }
};

template <class Segments, class Op>
struct CellTraversal {
  Segments segments;
  std::int64_t sn, sc, sh;
  Op op;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t cell) const {
    const Segment& s = segments(find_segment<false>(segments, cell));
    const std::int64_t i = cell - s.first_cell;
    const std::int64_t w = i % s.extent[W], r = i / s.extent[W];
    const std::int64_t h = r % s.extent[H], nc = r / s.extent[H];
    op(s.window_offset + (nc / s.extent[C]) * sn + (nc % s.extent[C]) * sc + h * sh + w, s.buffer_offset + i);
  }
};

}  // namespace detail

// Calls op(window_index, buffer_index) once for every cell of every segment, in one kernel.
// Tests force either traversal on the host, so the GPU's index arithmetic runs in CPU CI.
template <class ExecSpace, Traversal traversal = default_traversal<ExecSpace>(), class MemorySpace, class Op>
void for_each_cell(const char* label, const SegmentTable<MemorySpace>& table, const Op& op) {
  if (table.cells == 0) return;
  using Policy = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  using Segments = decltype(table.segments);
  const ExecSpace& exec = held_instance<ExecSpace>();
  if constexpr (traversal == Traversal::planes)
    Kokkos::parallel_for(kernel_label(label), Policy(exec, 0, table.planes),
                         detail::PlaneTraversal<Segments, Op>{table.segments, table.stride_n, table.stride_c,
                                                              table.stride_h, op});
  else
    Kokkos::parallel_for(kernel_label(label), Policy(exec, 0, table.cells),
                         detail::CellTraversal<Segments, Op>{table.segments, table.stride_n, table.stride_c,
                                                             table.stride_h, op});
}

namespace detail {

// Throws std::invalid_argument unless `window` is one contiguous row-major allocation of
// exactly the table's window shape: the flat indices of the table address it directly.
template <class MemorySpace, class Window>
void check_window(const SegmentTable<MemorySpace>& table, const Window& window, const char* op) {
  static_assert(Window::rank == 4, "pack/unpack: the window is an NCHW (rank-4) View");
  static_assert(std::is_same_v<typename Window::memory_space, MemorySpace>,
                "pack/unpack: the window must live in the table's memory space");
  const Shape4 shape = table.window.shape();
  std::int64_t stride = 1;
  for (int d = kDims - 1; d >= 0; --d) {
    const auto u = static_cast<unsigned>(d);
    if (static_cast<std::int64_t>(window.extent(u)) != shape[d])
      throw std::invalid_argument(std::string(op) + ": the array's extents differ from the box it was planned for");
    if (shape[d] > 1 && static_cast<std::int64_t>(window.stride(u)) != stride)
      throw std::invalid_argument(std::string(op) +
                                  ": the array is not one contiguous row-major (LayoutRight) allocation; "
                                  "pass a whole window() or a copy of the subview");
    stride *= shape[d];
  }
}

template <class MemorySpace, class Window, class Buffer>
void check_views(const SegmentTable<MemorySpace>& table, const Window& window, const Buffer& buffer, const char* op) {
  static_assert(Buffer::rank == 1, "pack/unpack: the buffer is a rank-1 View");
  static_assert(std::is_same_v<typename Buffer::memory_space, MemorySpace>,
                "pack/unpack: the buffer must live in the array's memory space");
  static_assert(std::is_same_v<typename Window::non_const_value_type, typename Buffer::non_const_value_type>,
                "pack/unpack: the array and the buffer hold different element types");
  check_window(table, window, op);
  if (static_cast<std::int64_t>(buffer.extent(0)) < table.buffer_end)
    throw std::out_of_range(std::string(op) + ": buffer too small");
}

}  // namespace detail

// The cell operations everyone shares. They run asynchronously on the memory space's
// execution space: fence before the buffer (or window) leaves Kokkos. Raw pointers keep
// the kernels free of View reference counting; the Views outlive the fenced kernels.

namespace detail {

// Each operation also names the window cell at a flat index (PlaneTraversal's prefetch).
template <class T>
struct CopyToBuffer {
  const T* win;
  T* buf;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t x, std::int64_t b) const { buf[b] = win[x]; }
  KOKKOS_INLINE_FUNCTION const void* window_cell(std::int64_t x) const { return win + x; }
};

template <class T>
struct CopyToWindow {
  T* win;
  const T* buf;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t x, std::int64_t b) const { win[x] = buf[b]; }
  KOKKOS_INLINE_FUNCTION const void* window_cell(std::int64_t x) const { return win + x; }
};

}  // namespace detail

// Copies the cells of every box in `table` out of `window` into their places in `buffer`.
template <class MemorySpace, class Window, class Buffer>
void pack(const SegmentTable<MemorySpace>& table, const Window& window, const Buffer& buffer) {
  detail::check_views(table, window, buffer, "pack");
  using T = typename Buffer::non_const_value_type;
  for_each_cell<typename MemorySpace::execution_space>("tessera::pack", table,
                                                       detail::CopyToBuffer<T>{window.data(), buffer.data()});
}

// The inverse of pack: writes every box of `table` from `buffer` into `window`.
template <class MemorySpace, class Window, class Buffer>
void unpack(const SegmentTable<MemorySpace>& table, const Window& window, const Buffer& buffer) {
  detail::check_views(table, window, buffer, "unpack");
  using T = typename Window::non_const_value_type;
  for_each_cell<typename MemorySpace::execution_space>("tessera::unpack", table,
                                                       detail::CopyToWindow<T>{window.data(), buffer.data()});
}

}  // namespace tessera
