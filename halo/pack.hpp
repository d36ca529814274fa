#pragma once
// The halo-specific side of packing. The batched engine (SegmentTable, for_each_cell, pack
// and unpack) lives in distarray/segment_table.hpp and is shared with gather/scatter and
// redistribute; here are the layout of an exchange's messages and the cell operations only
// an exchange needs: accumulate's pack-and-clear and add-unpack, and the boundary fill.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "distarray/bf16.hpp"
#include "distarray/box.hpp"
#include "distarray/box_pack.hpp"
#include "distarray/segment_table.hpp"
#include "halo/plan.hpp"
#include "halo/transport.hpp"

namespace tessera::halo {

// Messages back to back in one buffer, in the plan's (ascending peer) order: a PackLayout
// whose i-th box goes to (or comes from) peers[i].
struct BufferLayout : PackLayout {
  std::vector<int> peers;

  static BufferLayout of(const std::vector<Message>& messages) {
    BufferLayout layout;
    std::vector<Box> boxes;
    for (const Message& m : messages) {
      layout.peers.push_back(m.peer);
      boxes.push_back(m.box);
    }
    static_cast<PackLayout&>(layout) = PackLayout::end_to_end(std::move(boxes));
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

// Accumulate's cell operations and the boundary fill, on the engine's tables; like pack and
// unpack they check the views and do not fence.

namespace detail {

template <class T>
struct PackAndClear {
  T* win;
  T* buf;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t x, std::int64_t b) const {
    buf[b] = win[x];
    win[x] = T(0);
  }
  KOKKOS_INLINE_FUNCTION const void* window_cell(std::int64_t x) const { return win + x; }
};

template <class T>
struct UnpackAdd {
  T* win;
  const T* buf;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t x, std::int64_t b) const {
    win[x] = T(Compute<T>(win[x]) + Compute<T>(buf[b]));
  }
  KOKKOS_INLINE_FUNCTION const void* window_cell(std::int64_t x) const { return win + x; }
};

template <class T>
struct SetCell {
  T* win;
  T value;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t x, std::int64_t) const { win[x] = value; }
  KOKKOS_INLINE_FUNCTION const void* window_cell(std::int64_t x) const { return win + x; }
};

}  // namespace detail

// Accumulate's send side: the contribution leaves the window, so the cell is cleared.
template <class T, class MemorySpace>
void pack_and_clear(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
                    const BufferView<T, MemorySpace>& buffer) {
  tessera::detail::check_views(table, window, buffer, "pack_and_clear");
  for_each_cell<typename MemorySpace::execution_space>("tessera::halo::pack_and_clear", table,
                                                       detail::PackAndClear<T>{window.data(), buffer.data()});
}

// The boxes of `table` must be pairwise disjoint (see disjoint_groups). The sum is taken in
// Compute<T> and rounded once (bf16 has no arithmetic of its own: distarray/bf16.hpp).
template <class T, class MemorySpace>
void unpack_add(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window,
                const BufferView<T, MemorySpace>& buffer) {
  tessera::detail::check_views(table, window, buffer, "unpack_add");
  for_each_cell<typename MemorySpace::execution_space>("tessera::halo::unpack_add", table,
                                                       detail::UnpackAdd<T>{window.data(), buffer.data()});
}

template <class T, class MemorySpace>
void set_cells(const SegmentTable<MemorySpace>& table, const WindowView<T, MemorySpace>& window, T value) {
  tessera::detail::check_window(table, window, "set_cells");
  for_each_cell<typename MemorySpace::execution_space>("tessera::halo::set_cells", table,
                                                       detail::SetCell<T>{window.data(), value});
}

}  // namespace tessera::halo
