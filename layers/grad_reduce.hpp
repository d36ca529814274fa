#pragma once
// reduce_gradients: after backward, sum every parameter's gradient over the ranks that
// share it — the group gradient_group() (gradient_group.hpp, the one rule) names: every
// rank of the grid for replicated parameters, the sample group for tiled ones and head
// replicas. The trainer calls it once per step.
//
// Tensor fusion (Horovod, PyTorch DDP buckets): all gradients of one group are packed into
// one flat bucket and reduced by ONE allreduce through the collectives seam
// (collectives.hpp) — one latency per group per step instead of one per tensor. Every rank
// passes the same parameters in the same order. GradientBuckets (grad_buckets.hpp) does
// the same reduction overlapped with backward, as the trainer does by default; this form
// follows backward.

#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"
#include "layers/fused_bucket.hpp"
#include "layers/gradient_group.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

// The reduction with its buckets kept between calls: the trainer holds one for the
// model's life, so a step allocates nothing (fused_bucket.hpp, collectives.hpp).
template <class T>
class GradientReduction {
 public:
  explicit GradientReduction(const ProcessGrid& grid) : groups_(grid) {}

  void reduce(const std::vector<Parameter<T>*>& params) {
    for (auto& list : params_) list.clear();
    for (Parameter<T>* p : params) {
      const std::size_t g = groups_.index_of(*p);
      if (g >= params_.size()) params_.resize(groups_.size()), buckets_.resize(groups_.size());
      params_[g].push_back(p);
    }
    for (std::size_t g = 0; g < params_.size(); ++g)
      if (groups_.reduces(g) && !params_[g].empty())
        buckets_[g].allreduce(params_[g], groups_.collectives(g), groups_.group(g));
  }

 private:
  GradientGroups groups_;
  std::vector<std::vector<Parameter<T>*>> params_;  // [group]: this call's parameters
  std::vector<FusedBucket<T>> buckets_;             // [group]
};

// The same once (buckets allocated for this call alone): for one-off sums (tests). A
// training loop keeps a GradientReduction, or a TrainingStep (models/training_step.hpp),
// so that its steps allocate nothing — a benchmark calling this per step timed a 4.7 MB
// allocation inside its allreduce.
template <class T>
void reduce_gradients(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  GradientReduction<T>(grid).reduce(params);
}

}  // namespace tessera::layers
