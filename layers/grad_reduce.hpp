#pragma once
// reduce_gradients: after backward, sum every parameter's gradient over the ranks that
// share it — replicated parameters over all ranks of the grid (each holds partial sums
// from its tiles of its samples), tiled parameters over the sample group (ranks holding
// the same tile of other samples), as are head replicas (Parameter::head_replica: the
// parameters of a layer on a head-grid input, whose gradient every spatial replica already
// holds whole). The trainer calls it once per step.
//
// Tensor fusion (Horovod, PyTorch DDP buckets): all replicated gradients are packed into
// one flat bucket and reduced by ONE allreduce, likewise the tiled ones — one latency per
// step instead of one per tensor. Every rank passes the same parameters in the same order.
// GradientBuckets (grad_buckets.hpp) does the same reduction overlapped with backward, as
// the trainer does by default; this form follows backward. MPI reduces host memory, so
// device gradients are staged through the host.

#include <mpi.h>

#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/fused_bucket.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

// The reduction with its buckets kept between calls: the trainer holds one for the
// model's life, so a step allocates nothing (fused_bucket.hpp).
template <class T>
class GradientReduction {
 public:
  explicit GradientReduction(const ProcessGrid& grid) : grid_(&grid) {}

  void reduce(const std::vector<Parameter<T>*>& params) {
    replicated_.clear(), per_sample_group_.clear();
    for (Parameter<T>* p : params) (reduces_over_grid(*p, *grid_) ? replicated_ : per_sample_group_).push_back(p);
    if (grid_->size() > 1) whole_.allreduce(replicated_, grid_->comm());
    if (grid_->dims()[0] > 1) samples_.allreduce(per_sample_group_, grid_->sample_comm());
  }

 private:
  const ProcessGrid* grid_;
  std::vector<Parameter<T>*> replicated_, per_sample_group_;
  FusedBucket<T> whole_, samples_;
};

// The same once (buckets allocated for this call alone).
template <class T>
void reduce_gradients(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  GradientReduction<T>(grid).reduce(params);
}

}  // namespace tessera::layers
