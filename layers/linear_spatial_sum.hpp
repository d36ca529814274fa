#pragma once
// The communication of Linear on a spatially tiled input, kept out of the layer (which
// never calls MPI itself): the head grid its output lives on, and the sum of its partial
// products over the spatial group.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <limits>
#include <memory>
#include <stdexcept>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"

namespace tessera::layers {

// The grid a classifier head's (N, K, 1, 1) output lives on: the sample group of `grid`
// (ranks at the same spatial position) arranged as {pn, 1, 1}. Each of the ph*pw spatial
// positions gets its own head grid, and each holds every sample once, so a loss that
// reduces over its head grid's comm (cross_entropy_loss) counts every sample exactly once
// while the ph*pw replicas compute the same value. The samples a rank holds are the same
// as on `grid` (the same balanced split of N over pn). Collective over `grid`.
inline std::unique_ptr<ProcessGrid> make_head_grid(const ProcessGrid& grid) {
  return std::make_unique<ProcessGrid>(grid.sample_comm(), GridDims{grid.dims()[0], 1, 1});
}

// values += the same array on every other rank of grid's spatial group. Staged through
// the host as reduce_gradients does (MPI reduces host memory). Collective over that group.
template <class View>
void sum_over_spatial_group(const View& values, const ProcessGrid& grid) {
  if (grid.dims()[1] * grid.dims()[2] == 1) return;
  using T = typename View::non_const_value_type;
  if (values.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw std::length_error("linear: more partial outputs than one MPI count holds");
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), values);
  MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.size()), mpi_datatype<T>(), MPI_SUM,
                grid.spatial_comm());
  Kokkos::deep_copy(values, host);
}

}  // namespace tessera::layers
