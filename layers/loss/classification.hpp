#pragma once
// The one pass over owned (n, h, w) cells behind cross_entropy_loss and accuracy: softmax
// over the class dimension, which is never split across ranks (channels are not split in
// Tessera), so it is local per cell; only the means over the global batch need the grid.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/cell_loop.hpp"
#include "layers/layer.hpp"
#include "layers/loss/device_math.hpp"
#include "layers/loss/grid_sum.hpp"
#include "layers/loss/loss_inputs.hpp"
#include "layers/nan_aware.hpp"

namespace tessera::layers {

// A cell with this label counts for nothing: not in the loss, its gradient, the accuracy,
// nor the number of cells the means divide by — PyTorch's default ignore_index. Used to pad
// the last evaluation batch.
inline constexpr std::int64_t kIgnoreLabel = -100;

// Means over every (n, h, w) cell of the global batch whose label is not kIgnoreLabel; the
// same on every rank.
struct ClassificationStats {
  double loss = 0;      // softmax cross-entropy, as nn.CrossEntropyLoss(reduction='mean')
  double accuracy = 0;  // fraction of cells whose arg-max class is the label
  double cells = 0;     // the cells counted
};

namespace detail {

// One rank's sums over its owned cells; a struct so that one reduction carries all three.
struct ClassSums {
  double loss = 0;
  double correct = 0;
  double bad_labels = 0;  // labels outside [0, K): reported, never indexed with
  double ignored = 0;     // cells labelled kIgnoreLabel
  KOKKOS_INLINE_FUNCTION void operator+=(const ClassSums& o) {
    loss += o.loss, correct += o.correct, bad_labels += o.bad_labels, ignored += o.ignored;
  }
  // Kokkos 3 joins partial results through volatile references; C++20 deprecates
  // compound assignment to volatile, hence the spelled-out form.
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile ClassSums& o) volatile {
    loss = loss + o.loss;
    correct = correct + o.correct;
    bad_labels = bad_labels + o.bad_labels;
    ignored = ignored + o.ignored;
  }
};

// dx(n, k, h, w) = (softmax_k - [k == label]) * grad_scale when write_grad. The softmax,
// its sums and the loss are computed in Compute<T> (fp32 for bf16 logits); only dx is
// rounded to T, once. A functor on the held instance: on CUDA a KOKKOS_LAMBDA is copied to
// the heap per launch, and a policy without an instance allocates.
template <class T>
struct ClassifyCells {
  using F = Compute<T>;
  using value_type = ClassSums;
  typename Tensor<T>::SubView x;
  OwnedLabels labels;
  typename Tensor<T>::SubView dx;
  bool write_grad;
  F grad_scale;
  std::int64_t classes;
  PixelIndex at;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, ClassSums& s) const {
    const std::int64_t n = at.n(i), h = at.h(i), w = at.w(i);
    const std::int64_t label = labels(n, h, w);
    // Subtracting the maximum keeps exp() from overflowing: log-sum-exp is exact for any shift.
    F top = x(n, 0, h, w);
    std::int64_t best = 0;  // first maximum, as torch.argmax; a NaN is the maximum
    for (std::int64_t k = 1; k < classes; ++k)
      if (!nan_aware::is_nan(top) && nan_aware::beats(F(x(n, k, h, w)), top)) top = x(n, k, h, w), best = k;
    F total = 0;
    for (std::int64_t k = 0; k < classes; ++k) total += device_math::exp(F(x(n, k, h, w)) - top);
    if (label < 0 || label >= classes) {
      if (label == kIgnoreLabel)
        s.ignored += 1;
      else
        s.bad_labels += 1;
      if (write_grad)
        for (std::int64_t k = 0; k < classes; ++k) dx(n, k, h, w) = T(0);
      return;
    }
    s.loss += static_cast<double>(device_math::log(total) + top - F(x(n, label, h, w)));
    s.correct += best == label ? 1.0 : 0.0;
    if (write_grad)
      for (std::int64_t k = 0; k < classes; ++k) {
        const F p = device_math::exp(F(x(n, k, h, w)) - top) / total;
        dx(n, k, h, w) = T((p - (k == label ? F(1) : F(0))) * grad_scale);
      }
  }
};

template <class T>
ClassSums classify_owned_cells(const typename Tensor<T>::SubView& x, const OwnedLabels& labels,
                               const typename Tensor<T>::SubView& dx, bool write_grad, Compute<T> grad_scale) {
  using Exec = Kokkos::DefaultExecutionSpace;
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  const auto classes = static_cast<std::int64_t>(x.extent(1));
  const PixelIndex at{static_cast<std::int64_t>(x.extent(2)), static_cast<std::int64_t>(x.extent(3))};
  const auto cells = static_cast<std::int64_t>(x.extent(0)) * at.height * at.width;
  static_assert(launches_by_value<ClassifyCells<T>, Policy>, "classification: kernel arguments over the by-value limit");
  ClassSums sums;
  Kokkos::parallel_reduce(kernel_label("tessera::softmax_cross_entropy"), Policy(held_instance<Exec>(), 0, cells),
                          ClassifyCells<T>{x, labels, dx, write_grad, grad_scale, classes, at}, sums);
  return sums;
}

// x(n, c, h, w) *= factor, rounded to T once.
template <class T>
struct ScaleCells {
  typename Tensor<T>::SubView x;
  Compute<T> factor;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    x(n, c, h, w) = T(Compute<T>(x(n, c, h, w)) * factor);
  }
};

template <class T>
void scale_owned_cells(const typename Tensor<T>::SubView& x, Compute<T> factor) {
  for_each_cell("tessera::rescale_gradient", x, ScaleCells<T>{x, factor});
}

template <class T>
ClassificationStats classify(const Tensor<T>& logits, const OwnedLabels& labels, const Tensor<T>* dlogits) {
  constexpr const char* what = "softmax cross-entropy";
  const Shape4 global = logits.distribution().global_shape();
  const double cells = static_cast<double>(global[N] * global[H] * global[W]);
  LocalPart<3> part;
  part.problem = labels_problem(what, logits, labels);
  if (part.problem.empty() && dlogits) part.problem = gradient_problem(what, logits, *dlogits);
  if (part.problem.empty()) {
    const ClassSums s = classify_owned_cells<T>(logits.owned(), labels,
                                                dlogits ? dlogits->owned() : typename Tensor<T>::SubView(),
                                                dlogits != nullptr, static_cast<Compute<T>>(1.0 / cells));
    part.sums = {s.loss, s.correct, s.ignored};
    if (s.bad_labels > 0)
      part.problem = std::string(what) + ": " + std::to_string(static_cast<std::int64_t>(s.bad_labels)) +
                     " label(s) outside [0, " + std::to_string(global[C]) + ") on rank " +
                     std::to_string(logits.grid().rank());
  }
  const auto total = sum_over_grid(logits.grid(), part, what);
  const double counted = cells - total[2];
  if (counted <= 0) return {0, 0, 0};
  // The gradient was scaled for every cell counting; ignored cells are rare (a padded last
  // batch), so rescaling afterwards is cheaper than a second reduction before.
  if (dlogits && counted < cells) scale_owned_cells<T>(dlogits->owned(), static_cast<Compute<T>>(cells / counted));
  return {total[0] / counted, total[1] / counted, counted};
}

}  // namespace detail

// Loss and accuracy of logits (N, K, H, W) against a class label per (n, h, w) cell, in one
// pass; writes dlogits' owned cells with the gradient of the mean loss. Collective over the
// logits' grid. Throws std::invalid_argument on every rank for a label outside [0, K) or
// labels / dlogits that do not match the logits' owned cells.
template <class T>
ClassificationStats classification_stats(const Tensor<T>& logits, const OwnedLabels& labels,
                                         const Tensor<T>& dlogits) {
  return detail::classify(logits, labels, &dlogits);
}

// The same without a gradient: for evaluation.
template <class T>
ClassificationStats classification_stats(const Tensor<T>& logits, const OwnedLabels& labels) {
  return detail::classify<T>(logits, labels, nullptr);
}

}  // namespace tessera::layers
