#pragma once
// The process grids a distributed layer test runs on, and the one-rank result made known
// everywhere. Shared by the pooling and pointwise distributed tests.

#include <mpi.h>

#include <algorithm>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {

// Every grid of the launched rank count that can distribute both the input and the output
// (a Distribution gives every rank at least one cell along each split dimension).
inline std::vector<GridDims> grids_that_fit(const Shape4& input, const Shape4& output) {
  std::vector<GridDims> grids;
  for (const GridDims& g : tessera::testing::all_grids(tessera::testing::world_size()))
    if (g[0] <= std::min(input[N], output[N]) && g[1] <= std::min(input[H], output[H]) &&
        g[2] <= std::min(input[W], output[W]))
      grids.push_back(g);
  return grids;
}

}  // namespace tessera::layers::testing
