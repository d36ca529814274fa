#pragma once
// Mean squared error over every element of the global output, as nn.MSELoss(
// reduction='mean'): loss = sum (y - target)^2 / numel, dy = 2 (y - target) / numel.
// The targets and the arithmetic are Compute<T>: a bf16 output is compared with fp32 targets
// in fp32 (as PyTorch autocast runs mse_loss in fp32) and dy is the fp32 gradient rounded once.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/loss/grid_sum.hpp"
#include "layers/loss/loss_inputs.hpp"

namespace tessera::layers {
namespace detail {

// s += (y - target)^2, and dy = 2 (y - target) * grad_scale when write_grad, in Compute<T>.
// A functor: on CUDA a KOKKOS_LAMBDA is copied to the heap per launch.
template <class T>
struct SquaredErrorCells {
  using F = Compute<T>;
  typename Tensor<T>::SubView y;
  OwnedTargets<F> target;
  typename Tensor<T>::SubView dy;
  bool write_grad;
  F grad_scale;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t n, const std::int64_t c, const std::int64_t h,
                                         const std::int64_t w, double& s) const {
    const F diff = static_cast<F>(y(n, c, h, w)) - target(n, c, h, w);
    s += static_cast<double>(diff) * static_cast<double>(diff);
    if (write_grad) dy(n, c, h, w) = T(F(2) * diff * grad_scale);
  }
};

template <class T>
double squared_error_sum(const typename Tensor<T>::SubView& y, const OwnedTargets<Compute<T>>& target,
                         const typename Tensor<T>::SubView& dy, bool write_grad, Compute<T> grad_scale) {
  double sum = 0;
  sum_each_cell("tessera::mse", extents_of(y), SquaredErrorCells<T>{y, target, dy, write_grad, grad_scale}, sum);
  return sum;
}

template <class T>
std::string targets_problem(const char* loss, const Tensor<T>& y, const OwnedTargets<Compute<T>>& target) {
  const Shape4 own = y.owned_box().shape();
  for (int d = 0; d < kDims; ++d)
    if (static_cast<std::int64_t>(target.extent(static_cast<unsigned>(d))) != own[d])
      return std::string(loss) + ": targets are " +
             describe_extents(target.extent(0), target.extent(1), target.extent(2), target.extent(3)) +
             " but the owned box is " + describe_extents(own[N], own[C], own[H], own[W]);
  return {};
}

template <class T>
double mse(const Tensor<T>& y, const OwnedTargets<Compute<T>>& target, const Tensor<T>* dy) {
  constexpr const char* what = "mse loss";
  const double elements = static_cast<double>(y.distribution().global_box().size());
  LocalPart<1> part;
  part.problem = targets_problem(what, y, target);
  if (part.problem.empty() && dy) part.problem = gradient_problem(what, y, *dy);
  if (part.problem.empty())
    part.sums[0] = squared_error_sum<T>(y.owned(), target, dy ? dy->owned() : typename Tensor<T>::SubView(),
                                        dy != nullptr, static_cast<Compute<T>>(1.0 / elements));
  return sum_over_grid(y.grid(), part, what)[0] / elements;
}

}  // namespace detail

// The loss, identical on every rank; writes dy's owned cells. Collective over y's grid.
// Throws std::invalid_argument on every rank when target or dy does not match y's owned box.
template <class T>
double mse_loss(const Tensor<T>& y, const std::type_identity_t<OwnedTargets<Compute<T>>>& target, const Tensor<T>& dy) {
  return detail::mse(y, target, &dy);
}

// The loss alone.
template <class T>
double mse_loss(const Tensor<T>& y, const std::type_identity_t<OwnedTargets<Compute<T>>>& target) {
  return detail::mse<T>(y, target, nullptr);
}

}  // namespace tessera::layers
