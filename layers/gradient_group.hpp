#pragma once
// The one rule of which ranks sum a parameter's gradient after backward — used by the fused
// reduction (grad_reduce.hpp) and the buckets overlapped with backward (grad_buckets.hpp),
// nowhere else.
//
//   all      replicated parameters: their partial sums come from every tile of every
//            sample, so every rank of the grid holds a share
//   samples  tiled parameters (each rank holds the slice of its own output positions; the
//            sample group holds the same slice for other samples), and head replicas on a
//            spatially split grid (Parameter::head_replica: each spatial replica already
//            holds the whole gradient of its samples; over all ranks it would count ph*pw
//            times). With ph*pw == 1 the sample group is the grid.

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
SumGroup gradient_group(const Parameter<T>& p, const ProcessGrid& grid) {
  const bool spatially_split = grid.dims()[1] * grid.dims()[2] > 1;
  const bool over_grid = p.sharing == Sharing::replicated && !(p.head_replica && spatially_split);
  return over_grid ? SumGroup::all : SumGroup::samples;
}

}  // namespace tessera::layers
