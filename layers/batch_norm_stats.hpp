#pragma once
// Which ranks a batch norm's statistics are taken over, and the one reduction that takes
// them. Kept out of the layer so that the layer itself never calls MPI (Layer contract).
//
//   local    this rank's tile only: no communication; results depend on the grid
//   spatial  the spatial group (ranks holding tiles of the same samples): the statistics of
//            this rank's samples, whatever the spatial split — the default
//   all      every rank of the grid: the global batch, as PyTorch's BatchNorm2d on it
//
// Per channel the layer sums x and x*x (forward) or dy and dy*xhat (backward) in double and
// the sums of all channels travel in ONE allreduce. Plain sums, not Welford: in double the
// cancellation in E[x^2] - E[x]^2 costs about log10(mean^2 / var) of ~16 digits, harmless
// for fp32 activations unless |mean| exceeds std by ~1e4; Welford would need a custom MPI
// operation (no MPI_SUM) for no gain at fp32 output precision.

#include <stdexcept>
#include <string>
#include <string_view>

#include <Kokkos_Core.hpp>

#include "distarray/process_grid.hpp"
#include "layers/group_sum.hpp"

namespace tessera::layers {

// The groups are group_sum's (layers/group_sum.hpp); batch norm offers local, spatial, all.
using StatsGroup = SumGroup;

inline StatsGroup parse_stats_group(std::string_view text) {
  if (text == "local") return StatsGroup::local;
  if (text == "spatial") return StatsGroup::spatial;
  if (text == "all") return StatsGroup::all;
  throw std::invalid_argument("batchnorm: stats=" + std::string(text) + " is not one of local, spatial, all");
}

inline const char* stats_group_name(StatsGroup group) {
  switch (group) {
    case StatsGroup::local: return "local";
    case StatsGroup::spatial: return "spatial";
    case StatsGroup::all: return "all";
    case StatsGroup::samples: return "samples";  // not a statistics group: parse_stats_group never gives it
  }
  return "?";
}

// Sums `sums` element-wise over the ranks of `group` in place (host memory, one call per
// rank of the group, all with the same length): group_sum on the host array, which needs
// no staging. Collective over that group.
template <class HostSums>
void sum_over_stats_group(const HostSums& sums, const ProcessGrid& grid, StatsGroup group) {
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename HostSums::memory_space>::accessible,
                "sum_over_stats_group: host sums");
  group_sum(sums, grid, group, "batchnorm");
}

}  // namespace tessera::layers
