#pragma once
// group_sum: the one reduction layers need outside reduce_gradients — a small array summed
// element-wise, in place, over a group of ranks of a grid. Kept out of the layers (which
// never call MPI themselves: the Layer contract). Used by Linear (partial products over the
// spatial group), GlobalAvgPool (tile sums over the spatial group) and BatchNorm (channel
// sums over its statistics group).
//
//   local    this rank alone: no communication
//   spatial  the grid's spatial group (ranks holding tiles of the same samples)
//   all      every rank of the grid
//
// MPI reduces host memory, so device arrays are staged through a host copy (a host array
// is reduced where it is). Collective over the group; a group of one rank is a no-op.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"

namespace tessera::layers {

enum class SumGroup { local, spatial, all };

// The number of ranks in `group` of `grid` (1 for local).
inline int group_size(const ProcessGrid& grid, SumGroup group) {
  switch (group) {
    case SumGroup::local: return 1;
    case SumGroup::spatial: return grid.dims()[1] * grid.dims()[2];
    case SumGroup::all: return grid.size();
  }
  return 1;
}

// values += the same array on every other rank of `group` of `grid` (same length on all),
// with the host staging of device arrays kept between calls: a layer that sums every step
// holds one GroupSum<T> so that the host copy is allocated once (layers/scratch.hpp's
// rule). A host array is reduced in place. `what` names the caller in the error for an
// array longer than one MPI count.
template <class T>
class GroupSum {
 public:
  template <class View>
  void sum(const View& values, const ProcessGrid& grid, SumGroup group, const char* what = "group_sum") {
    static_assert(Kokkos::is_view<View>::value, "group_sum: values must be a Kokkos::View");
    static_assert(std::is_same_v<typename View::non_const_value_type, T>, "group_sum: values of another type");
    if (group_size(grid, group) == 1 || values.size() == 0) return;
    if (values.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error(std::string(what) + ": more elements than one MPI count holds");
    if (!values.span_is_contiguous()) throw std::invalid_argument(std::string(what) + ": values are not contiguous");
    const MPI_Comm comm = group == SumGroup::spatial ? grid.spatial_comm() : grid.comm();
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>::accessible) {
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), mpi_datatype<T>(), MPI_SUM, comm);
    } else {
      if (staging_.extent(0) < values.size())
        staging_ = Kokkos::View<T*, Kokkos::HostSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::group_sum"),
                                                       values.size());
      const Kokkos::View<typename View::non_const_data_type, typename View::array_layout, Kokkos::HostSpace,
                         Kokkos::MemoryTraits<Kokkos::Unmanaged>>
          host(staging_.data(), values.layout());
      Kokkos::deep_copy(host, values);
      MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(host.size()), mpi_datatype<T>(), MPI_SUM, comm);
      Kokkos::deep_copy(values, host);
    }
  }

 private:
  Kokkos::View<T*, Kokkos::HostSpace> staging_;  // device arrays only; grown, never shrunk
};

// The same once, staging (device arrays) allocated for this call alone.
template <class View>
void group_sum(const View& values, const ProcessGrid& grid, SumGroup group, const char* what = "group_sum") {
  GroupSum<typename View::non_const_value_type>().sum(values, grid, group, what);
}

}  // namespace tessera::layers
