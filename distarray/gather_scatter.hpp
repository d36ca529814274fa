#pragma once
// gather and scatter: move every rank's owned tile between a DistArray and one global
// array held by a root rank — for checkpoints, data loading and tests. Only owned cells
// travel; halo cells are neither read nor written. Both are collective over the array's
// process grid. The global array matters on the root only; other ranks pass an empty View.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/box_pack.hpp"
#include "distarray/dist_array.hpp"
#include "distarray/mpi_datatype.hpp"
#include "distarray/staged_buffer.hpp"

namespace tessera {

// A whole global NCHW array in host memory.
template <class T>
using HostArray = Kokkos::View<T****, Kokkos::LayoutRight, Kokkos::HostSpace>;

namespace detail {

// The root's message buffer: the global array's cells, tile after tile.
template <class T>
using HostBuffer = Kokkos::View<T*, Kokkos::HostSpace>;
template <class T>
HostBuffer<T> host_buffer(std::int64_t size) {
  return HostBuffer<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::root_message"),
                       static_cast<std::size_t>(size));
}

template <class T>
Shape4 shape_of(const HostArray<T>& a) {
  return {static_cast<std::int64_t>(a.extent(0)), static_cast<std::int64_t>(a.extent(1)),
          static_cast<std::int64_t>(a.extent(2)), static_cast<std::int64_t>(a.extent(3))};
}

// Collective. Checks that `root` is a rank of the grid and that the root's array has the
// global shape; every rank learns the root's verdict and throws std::invalid_argument
// together, instead of leaving the others blocked in a collective the root never joins.
// Returns whether this rank is the root.
bool agree_on_root_array(const ProcessGrid& grid, int root, const Shape4& global, const Shape4& root_shape,
                         const char* op);

// Every rank's owned box, in rank order: how tiles lie in the root's message buffer.
PackLayout tiles_in_rank_order(const Distribution& dist);

}  // namespace detail

// Copy every rank's owned tile of `from` into `global` on `root`.
template <class T, class MemorySpace>
void gather(const DistArray<T, MemorySpace>& from, const HostArray<T>& global, int root = 0) {
  const ProcessGrid& grid = from.grid();
  const bool is_root = detail::agree_on_root_array(grid, root, from.distribution().global_shape(),
                                                   detail::shape_of(global), "gather");
  const PackLayout mine = PackLayout::end_to_end({from.owned_box()});
  StagedBuffer<T, MemorySpace> send(mine.total);
  pack(from.window(), from.window_box().lo, mine, send.here());
  send.to_host();

  const PackLayout tiles = is_root ? detail::tiles_in_rank_order(from.distribution()) : PackLayout{};
  const MpiCounts counts = mpi_counts(tiles);
  const detail::HostBuffer<T> received = detail::host_buffer<T>(tiles.total);
  MPI_Gatherv(send.host_data(), mpi_count(mine.total), mpi_datatype<T>(), received.data(), counts.counts.data(),
              counts.displs.data(), mpi_datatype<T>(), root, grid.comm());
  if (is_root) unpack(received, tiles, global, Index4{});
}

// The same, into a newly allocated array: the global shape on `root`, empty elsewhere.
template <class T, class MemorySpace>
HostArray<T> gather(const DistArray<T, MemorySpace>& from, int root = 0) {
  const Shape4 s = from.distribution().global_shape();
  HostArray<T> global;
  if (from.grid().rank() == root)
    global = HostArray<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::gathered"), s[0], s[1], s[2], s[3]);
  gather(from, global, root);
  return global;
}

// Copy each rank's owned tile out of `global` on `root` into `to`.
template <class T, class MemorySpace>
void scatter(const HostArray<T>& global, DistArray<T, MemorySpace>& to, int root = 0) {
  const ProcessGrid& grid = to.grid();
  const bool is_root = detail::agree_on_root_array(grid, root, to.distribution().global_shape(),
                                                   detail::shape_of(global), "scatter");
  const PackLayout tiles = is_root ? detail::tiles_in_rank_order(to.distribution()) : PackLayout{};
  const MpiCounts counts = mpi_counts(tiles);
  const detail::HostBuffer<T> sent = detail::host_buffer<T>(tiles.total);
  if (is_root) pack(global, Index4{}, tiles, sent);

  const PackLayout mine = PackLayout::end_to_end({to.owned_box()});
  StagedBuffer<T, MemorySpace> received(mine.total);
  MPI_Scatterv(sent.data(), counts.counts.data(), counts.displs.data(), mpi_datatype<T>(),
               received.host_data(), mpi_count(mine.total), mpi_datatype<T>(), root, grid.comm());
  received.from_host();
  unpack(received.here(), mine, to.window(), to.window_box().lo);
}

}  // namespace tessera
