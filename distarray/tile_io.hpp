#pragma once
// Tile I/O: each rank reads or writes only its own tile of a global NCHW dataset, in one
// collective call (parallel HDF5 hyperslabs). Reading by sample rows lets a data loader
// take a shuffled batch: batch row b of the array is sample rows[b] of the file.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "distarray/dist_array.hpp"
#include "distarray/finite_check.hpp"
#include "distarray/hdf5_file.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera {

namespace detail {

// A host copy of `array`'s window (the array itself on host builds), so HDF5 can read and
// write it; halo cells keep their values.
template <class T, class MemorySpace>
auto host_window(const DistArray<T, MemorySpace>& array) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), array.window());
}

template <class HostWindow>
auto owned_part(const HostWindow& window, const Box& owned, const Box& window_box) {
  auto r = [&](int d) {
    return Kokkos::pair<std::int64_t, std::int64_t>(owned.lo[d] - window_box.lo[d], owned.hi[d] - window_box.lo[d]);
  };
  return Kokkos::subview(window, r(0), r(1), r(2), r(3));
}

template <class T>
using HostTile = Kokkos::View<T****, Kokkos::LayoutRight, Kokkos::HostSpace>;

template <class T>
HostTile<T> host_tile(const Box& owned) {
  const Shape4 s = owned.shape();
  return HostTile<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::tile_io"), s[0], s[1], s[2], s[3]);
}

// Copies `tile` into `owned` (the owned part of a host window, same extents) and returns
// the position in `tile` of its first non-finite value, tile.size() when none (or when T
// cannot hold one): the check rides on a copy the reader makes anyway.
template <class T, class Owned>
std::size_t copy_checking_finite(const HostTile<T>& tile, const Owned& owned) {
  const std::size_t none = tile.size(), width = tile.extent(3);
  if constexpr (!std::is_floating_point_v<T>) {
    Kokkos::deep_copy(owned, tile);
    return none;
  } else {
    if (none == 0) return none;
    const std::int64_t rows = static_cast<std::int64_t>(none / width);
    const std::int64_t channels = static_cast<std::int64_t>(tile.extent(1)), height = static_cast<std::int64_t>(tile.extent(2));
    std::size_t first = none;
    Kokkos::parallel_reduce(
        kernel_label("tessera::copy_checking_finite"), Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, rows),
        [&](std::int64_t row, std::size_t& found) {
          const std::int64_t h = row % height, c = row / height % channels, n = row / height / channels;
          const std::size_t at = static_cast<std::size_t>(row) * width;
          const std::size_t hit = tessera::copy_checking_finite(tile.data() + at, &owned(n, c, h, 0), width);
          if (hit < width && at + hit < found) found = at + hit;
        },
        Kokkos::Min<std::size_t>(first));
    return std::min(first, none);  // the reduction starts from the largest size_t
  }
}

inline void check_sample_shape(const Hdf5File& file, const std::string& name, const Shape4& global) {
  const Dims dims = file.shape(name);
  if (dims.size() != 4 || dims[1] != global[C] || dims[2] != global[H] || dims[3] != global[W])
    throw std::invalid_argument("data '" + name + "' in '" + file.path() + "' has shape " + dims_text(dims) +
                                ", but samples of " + std::to_string(global[C]) + "x" + std::to_string(global[H]) +
                                "x" + std::to_string(global[W]) + " (CxHxW) are expected");
}

}  // namespace detail

// Reads sample rows[b] of dataset `name` (N x C x H x W, any stored element type that
// converts to T) into batch row b of `into`, whose global shape is rows.size() x C x H x W.
// Collective over the array's grid; every rank passes the same `rows`. Returns the first
// non-finite value of this rank's tile (floating-point T), found while the tile is in
// cache, so a caller that refuses bad data needs no second pass.
template <class T, class MemorySpace>
std::optional<NonFinite> read_samples(const Hdf5File& file, const std::string& name, const std::vector<std::int64_t>& rows,
                  const DistArray<T, MemorySpace>& into) {
  const Shape4 global = into.distribution().global_shape();
  if (static_cast<std::int64_t>(rows.size()) != global[N])
    throw std::invalid_argument("read_samples: " + std::to_string(rows.size()) + " rows for a batch of " +
                                std::to_string(global[N]));
  detail::check_sample_shape(file, name, global);
  const Box owned = into.owned_box();
  const std::vector<std::int64_t> mine(rows.begin() + owned.lo[N], rows.begin() + owned.hi[N]);
  auto tile = detail::host_tile<T>(owned);
  const Dims offset{0, owned.lo[C], owned.lo[H], owned.lo[W]};
  file.read_rows(name, mine, offset, {1, owned.extent(C), owned.extent(H), owned.extent(W)}, tile.data());
  auto window = detail::host_window(into);
  const std::size_t bad = detail::copy_checking_finite(tile, detail::owned_part(window, owned, into.window_box()));
  Kokkos::deep_copy(into.window(), window);
  if (bad == tile.size()) return std::nullopt;
  const Dims extent{owned.extent(N), owned.extent(C), owned.extent(H), owned.extent(W)};
  return NonFinite{block_element_index(bad, offset, extent, mine), static_cast<double>(tile.data()[bad])};
}

// Reads the whole dataset into `into` (same global shape); returns as read_samples.
template <class T, class MemorySpace>
std::optional<NonFinite> read_array(const Hdf5File& file, const std::string& name, const DistArray<T, MemorySpace>& into) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(into.distribution().global_shape()[N]));
  std::iota(rows.begin(), rows.end(), 0);
  const Dims dims = file.shape(name);
  if (dims.size() == 4 && dims[0] != static_cast<std::int64_t>(rows.size()))
    throw std::invalid_argument("data '" + name + "' has " + std::to_string(dims[0]) +
                                " samples, the array " + std::to_string(rows.size()));
  return read_samples(file, name, rows, into);
}

// Writes every rank's owned tile of `from` into dataset `name` (created with the global
// shape if absent).
template <class T, class MemorySpace>
void write_array(Hdf5File& file, const std::string& name, const DistArray<T, MemorySpace>& from) {
  const Box owned = from.owned_box();
  auto window = detail::host_window(from);
  auto tile = detail::host_tile<T>(owned);
  Kokkos::deep_copy(tile, detail::owned_part(window, owned, from.window_box()));
  const Shape4 g = from.distribution().global_shape();
  file.write_block(name, {g[0], g[1], g[2], g[3]}, {owned.lo[0], owned.lo[1], owned.lo[2], owned.lo[3]},
                   {owned.extent(0), owned.extent(1), owned.extent(2), owned.extent(3)}, tile.data());
}

}  // namespace tessera
