#pragma once
// The process grids a test runs over: every way to write the launched rank count as
// pn x ph x pw, so each rank count (1, 2, 3, 4, 6, ...) gets its spatial, sample and mixed
// grids without a hand-kept list that could miss one. Shared by every MPI test.

#include <mpi.h>

#include <vector>

#include "distarray/process_grid.hpp"

namespace tessera::testing {

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Every {pn, ph, pw} with pn * ph * pw == ranks.
inline std::vector<GridDims> all_grids(int ranks) {
  std::vector<GridDims> grids;
  for (int pn = 1; pn <= ranks; ++pn)
    for (int ph = 1; pn * ph <= ranks; ++ph)
      if (ranks % (pn * ph) == 0) grids.push_back({pn, ph, ranks / (pn * ph)});
  return grids;
}

}  // namespace tessera::testing
