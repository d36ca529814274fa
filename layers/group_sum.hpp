#pragma once
// group_sum: the one reduction layers need outside the gradient reduction — a small array
// summed element-wise, in place, over a group of ranks of a grid, through the collectives
// seam (layers/collectives.hpp). Kept out of the layers (which never call MPI themselves:
// the Layer contract). Used by Linear (partial products over the spatial group),
// GlobalAvgPool and LCN (tile sums over the spatial group) and BatchNorm (channel sums
// over its statistics group).
//
//   local    this rank alone: no communication
//   spatial  the grid's spatial group (ranks holding tiles of the same samples)
//   samples  the grid's sample group (ranks holding the same tile of other samples)
//   all      every rank of the grid
//
// A host array is reduced where it is; a device array by NCCL where the seam can (CUDA
// builds, a GPU per rank), else through the seam's persistent host staging. Collective
// over the group; a group of one rank is a no-op.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"

namespace tessera::layers {

// values += the same array on every other rank of `group` of `grid` (same length on all).
// A layer that sums every step holds one GroupSum<T>: its seam (bound to the grid of the
// latest call) keeps any host staging between calls, so nothing is allocated after the
// first (layers/scratch.hpp's rule). `what` names the caller in the error for an array
// longer than one MPI count.
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
    if (!collectives_ || &collectives_->grid() != &grid) collectives_.emplace(grid);
    collectives_->allreduce_sum(values.data(), values.size(), group, memory_of<typename View::memory_space>());
  }

 private:
  std::optional<Collectives> collectives_;
};

// The same once (any staging allocated for this call alone).
template <class View>
void group_sum(const View& values, const ProcessGrid& grid, SumGroup group, const char* what = "group_sum") {
  GroupSum<typename View::non_const_value_type>().sum(values, grid, group, what);
}

}  // namespace tessera::layers
