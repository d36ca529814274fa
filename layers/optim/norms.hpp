#pragma once
// L2 norms of parameters and gradients over the whole global tensor, reduced over exactly
// the ranks that hold different parts of it. A replicated parameter is whole on every rank
// (and identical after the gradient reduction), so its norm is local. A tiled parameter's
// slices lie on the ranks of one spatial group (ProcessGrid::spatial_comm()); ranks of the
// sample group hold copies of the same slice, so they are not summed again. Sums are in
// double whatever T is, so the result does not depend on how the tensor is cut beyond
// rounding of the partial sums.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"
#include "layers/gradient_group.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

struct SquaredNorms {
  double value = 0;  // sum of w^2
  double grad = 0;   // sum of g^2
  KOKKOS_INLINE_FUNCTION void operator+=(const SquaredNorms& o) { value += o.value, grad += o.grad; }
  // Kokkos 3 joins partial results through volatile references; C++20 deprecates
  // compound assignment to volatile, hence the spelled-out form.
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile SquaredNorms& o) volatile {
    value = value + o.value;
    grad = grad + o.grad;
  }
};

namespace detail {

// One reduction gives both sums. A functor on the held instance (a KOKKOS_LAMBDA would be
// copied to the heap per launch on CUDA, and a policy without an instance allocates).
template <class View, class Grad>
struct SquaredNormTerms {
  using value_type = SquaredNorms;
  View value;
  Grad grad;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, SquaredNorms& s) const {
    const double w = static_cast<double>(value(i)), g = static_cast<double>(grad(i));
    s.value += w * w;
    s.grad += g * g;
  }
};

template <class View, class Grad>
SquaredNorms local_squared_norms(const View& value, const Grad& grad) {
  using Exec = Kokkos::DefaultExecutionSpace;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  SquaredNorms sums;
  Kokkos::parallel_reduce(kernel_label("tessera::squared_norms"),
                          Policy(held_instance<Exec>(), 0, static_cast<std::int64_t>(value.extent(0))),
                          SquaredNormTerms<View, Grad>{value, grad}, sums);
  return sums;
}

}  // namespace detail

// ||w||^2 and ||g||^2 of each parameter's global tensor. Collective over the spatial
// group when any parameter is tiled (one allreduce for all of them per grid, layers/collectives.hpp): every rank must
// pass the same list, as every rank holds the same model.
template <class T>
std::vector<SquaredNorms> squared_norms(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  std::vector<SquaredNorms> norms;
  norms.reserve(params.size());
  for (const Parameter<T>* p : params) norms.push_back(detail::local_squared_norms(p->master_values(), p->grad));
  // Over the spatial group of the grid each parameter's layer runs on (Parameter::grid:
  // a model with stage layouts), one sum per grid, in the order the grids first appear.
  std::vector<const ProcessGrid*> grids;
  for (const Parameter<T>* p : params)
    if (p->sharing == Sharing::tiled && std::find(grids.begin(), grids.end(), &gradient_grid(*p, grid)) == grids.end())
      grids.push_back(&gradient_grid(*p, grid));
  std::vector<double> sums;
  for (const ProcessGrid* g : grids) {
    sums.clear();
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i]->sharing == Sharing::tiled && &gradient_grid(*params[i], grid) == g)
        sums.insert(sums.end(), {norms[i].value, norms[i].grad});
    Collectives(*g).allreduce_sum(sums.data(), sums.size(), SumGroup::spatial);
    std::size_t next = 0;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i]->sharing == Sharing::tiled && &gradient_grid(*params[i], grid) == g) {
        norms[i].value = sums[next++];
        norms[i].grad = sums[next++];
      }
  }
  return norms;
}

// The L2 norm of all gradients together, as torch.nn.utils.clip_grad_norm_ reports it:
// the same on every rank. Collective as squared_norms.
template <class T>
double global_grad_norm(const std::vector<Parameter<T>*>& params, const ProcessGrid& grid) {
  double sum = 0;
  for (const SquaredNorms& n : squared_norms(params, grid)) sum += n.grad;
  return std::sqrt(sum);
}

}  // namespace tessera::layers
