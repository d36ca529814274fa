#pragma once
// The one rule of which ranks sum a parameter's gradient after backward — used by the fused
// reduction (grad_reduce.hpp) and the buckets overlapped with backward (grad_buckets.hpp),
// nowhere else.
//
// The groups are those of the grid the parameter's layer runs on (Parameter::grid: a model
// with a regrid runs its stages on different layouts of the same ranks), else the grid the
// reduction is given:
//   all      replicated parameters: their partial sums come from every tile of every
//            sample, so every rank of the grid holds a share
//   samples  tiled parameters (each rank holds the slice of its own output positions; the
//            sample group holds the same slice for other samples), and head replicas on a
//            spatially split grid (Parameter::head_replica: each spatial replica already
//            holds the whole gradient of its samples; over all ranks it would count ph*pw
//            times). With ph*pw == 1 the sample group is the grid.

#include <mpi.h>

#include <memory>
#include <utility>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

// The grid whose groups sum p's gradient.
template <class T>
const ProcessGrid& gradient_grid(const Parameter<T>& p, const ProcessGrid& grid) {
  return p.grid ? *p.grid : grid;
}

// p's group on gradient_grid(p, grid).
template <class T>
SumGroup gradient_group(const Parameter<T>& p, const ProcessGrid& grid) {
  const GridDims& dims = gradient_grid(p, grid).dims();
  const bool spatially_split = dims[1] * dims[2] > 1;
  const bool over_grid = p.sharing == Sharing::replicated && !(p.head_replica && spatially_split);
  return over_grid ? SumGroup::all : SumGroup::samples;
}

// The distinct sets of ranks a model's gradients are summed over, each with the collectives
// of a grid that has it as a group. The model grid's "all" and "samples" come first; a
// parameter on another layout whose group is the same set of ranks as one already known
// (4x1x1's sample group is 1x2x2's "all") shares it, so its gradients go in the same fused
// bucket; only a set of ranks no earlier group has (2x2x1's sample group, on a 1x2x2 model)
// adds one. A parameter's group is found once (by its grid and group) and remembered.
class GradientGroups {
 public:
  explicit GradientGroups(const ProcessGrid& grid) : grid_(&grid) {
    add(grid, SumGroup::all);
    add(grid, SumGroup::samples);
  }
  GradientGroups(const GradientGroups&) = delete;
  GradientGroups& operator=(const GradientGroups&) = delete;

  // The index of p's group (gradient_group on gradient_grid).
  template <class T>
  std::size_t index_of(const Parameter<T>& p) {
    const ProcessGrid& g = gradient_grid(p, *grid_);
    const SumGroup group = gradient_group(p, *grid_);
    for (const Seen& s : seen_)
      if (s.grid == &g && s.group == group) return s.index;
    std::size_t index = 0;
    for (; index < groups_.size(); ++index)
      if (same_ranks(group_comm(g, group), groups_[index].comm)) break;
    if (index == groups_.size()) add(g, group);
    seen_.push_back({&g, group, index});
    return index;
  }

  std::size_t size() const { return groups_.size(); }
  SumGroup group(std::size_t i) const { return groups_[i].group; }
  // Whether group i has more than one rank (a group of one sums nothing).
  bool reduces(std::size_t i) const { return groups_[i].ranks > 1; }
  Collectives& collectives(std::size_t i) { return *groups_[i].collectives; }

 private:
  struct Group {
    SumGroup group;
    MPI_Comm comm;
    int ranks;
    std::unique_ptr<Collectives> collectives;
  };
  struct Seen {
    const ProcessGrid* grid;
    SumGroup group;
    std::size_t index;
  };

  static bool same_ranks(MPI_Comm a, MPI_Comm b) {
    int relation = MPI_UNEQUAL;
    MPI_Comm_compare(a, b, &relation);
    return relation == MPI_IDENT || relation == MPI_CONGRUENT;
  }
  void add(const ProcessGrid& g, SumGroup group) {
    groups_.push_back({group, group_comm(g, group), group_size(g, group), std::make_unique<Collectives>(g)});
  }

  const ProcessGrid* grid_;
  std::vector<Group> groups_;
  std::vector<Seen> seen_;
};

}  // namespace tessera::layers
