#pragma once
// DistArray<T>: one rank's part of a global NCHW array. The allocation is the rank's
// window — its owned tile grown by a halo whose width may differ on every side — as a
// Kokkos View in natural NCHW order (LayoutRight, w fastest). Halo cells are filled by
// halo::Exchange; cells of the window outside the global image are boundary cells.

#include <Kokkos_Core.hpp>

#include <stdexcept>
#include <utility>

#include "distarray/box.hpp"
#include "distarray/distribution.hpp"
#include "distarray/fill.hpp"
#include "distarray/process_grid.hpp"

namespace tessera {

// Halo widths below lo and above hi of the owned box, per dimension (n, c, h, w).
struct HaloWidths {
  Index4 below{};
  Index4 above{};
  static HaloWidths symmetric_hw(std::int64_t h, std::int64_t w) { return {{0, 0, h, w}, {0, 0, h, w}}; }
  friend bool operator==(const HaloWidths&, const HaloWidths&) = default;
};

template <class T, class MemorySpace = Kokkos::DefaultExecutionSpace::memory_space>
class DistArray {
 public:
  using value_type = T;
  using memory_space = MemorySpace;
  using execution_space = typename MemorySpace::execution_space;
  using View = Kokkos::View<T****, Kokkos::LayoutRight, MemorySpace>;
  using SubView = decltype(Kokkos::subview(std::declval<View>(), Kokkos::pair<int64_t, int64_t>(),
                                           Kokkos::pair<int64_t, int64_t>(), Kokkos::pair<int64_t, int64_t>(),
                                           Kokkos::pair<int64_t, int64_t>()));

  DistArray(const ProcessGrid& grid, const Shape4& global, HaloWidths halo = {}, std::string label = "distarray")
      : DistArray(grid, global, halo, GeometryOnly{}) {
    const Shape4 s = window_.shape();
    view_ = View(Kokkos::view_alloc(std::move(label)), s[0], s[1], s[2], s[3]);
  }
  // Over memory the caller owns and keeps alive while the array is used: at least
  // window_elements(grid, global, halo) elements of T in MemorySpace. Arrays whose
  // lifetimes do not meet may share one block (models/graph.hpp), each with its own shape
  // and halo.
  DistArray(const ProcessGrid& grid, const Shape4& global, HaloWidths halo, T* memory) : DistArray(grid, global, halo, GeometryOnly{}) {
    const Shape4 s = window_.shape();
    view_ = View(memory, s[0], s[1], s[2], s[3]);
  }
  // The elements this rank's window holds: what either constructor needs.
  static std::int64_t window_elements(const ProcessGrid& grid, const Shape4& global, const HaloWidths& halo) {
    return Distribution(global, grid.dims()).owned_box(grid.rank()).grow(halo.below, halo.above).size();
  }

  const ProcessGrid& grid() const { return *grid_; }
  const Distribution& distribution() const { return dist_; }
  const HaloWidths& halo() const { return halo_; }
  // Global coordinates of the owned tile and of the allocated window.
  const Box& owned_box() const { return owned_; }
  const Box& window_box() const { return window_; }

  // The whole allocation, indexed from the window's corner.
  const View& window() const { return view_; }
  // The owned tile, indexed from its own corner.
  SubView owned() const { return local(owned_); }
  // Any box inside the window, given in global coordinates.
  SubView local(const Box& global_box) const {
    if (!window_.contains(global_box)) throw std::out_of_range("box is not inside this rank's window");
    auto r = [&](int d) {
      return Kokkos::pair<int64_t, int64_t>(global_box.lo[d] - window_.lo[d], global_box.hi[d] - window_.lo[d]);
    };
    return Kokkos::subview(view_, r(0), r(1), r(2), r(3));
  }

  void fill(T value) const { tessera::fill(owned(), value); }
  void fill_window(T value) const { tessera::fill(view_, value); }

 private:
  struct GeometryOnly {};  // the boxes, before the storage
  DistArray(const ProcessGrid& grid, const Shape4& global, HaloWidths halo, GeometryOnly)
      : grid_(&grid), dist_(global, grid.dims()), halo_(halo) {
    for (int d = 0; d < kDims; ++d)
      if (halo_.below[d] < 0 || halo_.above[d] < 0) throw std::invalid_argument("halo widths must be >= 0");
    owned_ = dist_.owned_box(grid.rank());
    window_ = owned_.grow(halo_.below, halo_.above);
  }

  const ProcessGrid* grid_;
  Distribution dist_;
  HaloWidths halo_;
  Box owned_, window_;
  View view_;
};

}  // namespace tessera
