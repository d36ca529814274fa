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

#include <array>
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
  explicit GradientReduction(const ProcessGrid& grid) : grid_(&grid), collectives_(grid) {}

  void reduce(const std::vector<Parameter<T>*>& params) {
    for (Group& g : groups_) g.params.clear();
    for (Parameter<T>* p : params) group_of(gradient_group(*p, *grid_)).params.push_back(p);
    for (Group& g : groups_)
      if (group_size(*grid_, g.group) > 1) g.bucket.allreduce(g.params, collectives_, g.group);
  }

 private:
  struct Group {
    SumGroup group;
    std::vector<Parameter<T>*> params;
    FusedBucket<T> bucket;
  };
  Group& group_of(SumGroup group) { return group == SumGroup::all ? groups_[0] : groups_[1]; }

  const ProcessGrid* grid_;
  std::array<Group, 2> groups_{Group{SumGroup::all, {}, {}}, Group{SumGroup::samples, {}, {}}};
  Collectives collectives_;
};

// The same once (buckets allocated for this call alone).
template <class T>
void reduce_gradients(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  GradientReduction<T>(grid).reduce(params);
}

}  // namespace tessera::layers
