#pragma once
// spatial_sum: sums a per-rank (samples, channels) array over the grid's spatial group —
// the ranks that hold tiles of the same samples — so each of them ends with the totals.
// Global average pooling (layers/global_avg_pool.hpp) is a reduction over the whole image;
// this helper is where its MPI call lives, so the layer itself never calls MPI (the Layer
// contract). Collective over grid.spatial_comm(). MPI reduces host memory, so device
// arrays are staged through the host (N x C values: small).

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <limits>
#include <stdexcept>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"

namespace tessera::layers {

template <class T, class... Props>
void spatial_sum(const Kokkos::View<T**, Props...>& partial, const ProcessGrid& grid) {
  if (grid.dims()[1] * grid.dims()[2] == 1) return;  // one tile per sample: nothing to add
  if (partial.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("spatial_sum: more elements than one MPI count holds");
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), partial);
  MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.size()), mpi_datatype<T>(), MPI_SUM,
                grid.spatial_comm());
  Kokkos::deep_copy(partial, host);
}

}  // namespace tessera::layers
