#pragma once
// Random inputs for the loss tests, their distribution over a grid, and naive
// double-precision references of the losses written out from their definitions.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "distarray/gather_scatter.hpp"
#include "layers/loss/loss_inputs.hpp"

namespace tessera::testing {

// The shapes every loss test uses: per-pixel logits with odd sizes, and a classifier's
// (N, K, 1, 1) logits.
constexpr Shape4 kPixelShape{5, 7, 9, 11};
constexpr Shape4 kClassifierShape{13, 10, 1, 1};

// Host labels for the whole global batch, (N, H, W).
using HostLabels = Kokkos::View<std::int64_t***, Kokkos::LayoutRight, Kokkos::HostSpace>;
// Device labels or targets in the loss's memory space, LayoutRight as a data loader makes them.
using DeviceLabels = Kokkos::View<std::int64_t***, Kokkos::LayoutRight, layers::LossMemorySpace>;
template <class T>
using DeviceTargets = Kokkos::View<T****, Kokkos::LayoutRight, layers::LossMemorySpace>;

template <class T>
Shape4 shape_of_host(const HostArray<T>& a) {
  return {static_cast<std::int64_t>(a.extent(0)), static_cast<std::int64_t>(a.extent(1)),
          static_cast<std::int64_t>(a.extent(2)), static_cast<std::int64_t>(a.extent(3))};
}

inline std::string describe_shape(const Shape4& s) {
  return std::to_string(s[N]) + "x" + std::to_string(s[C]) + "x" + std::to_string(s[H]) + "x" + std::to_string(s[W]);
}

template <class T>
HostArray<T> random_global(const Shape4& shape, std::uint32_t seed, double scale = 2.0) {
  HostArray<T> a("random_global", shape[N], shape[C], shape[H], shape[W]);
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, scale);
  for (std::size_t i = 0; i < a.span(); ++i) a.data()[i] = static_cast<T>(normal(gen));
  return a;
}

inline HostLabels random_labels(const Shape4& logits_shape, std::uint32_t seed) {
  HostLabels labels("labels", logits_shape[N], logits_shape[H], logits_shape[W]);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, logits_shape[C] - 1);
  for (std::size_t i = 0; i < labels.span(); ++i) labels.data()[i] = pick(gen);
  return labels;
}

// The labels of the owned (n, h, w) cells of `box`, on the device.
inline DeviceLabels owned_labels(const HostLabels& global, const Box& box) {
  DeviceLabels out("owned_labels", box.extent(N), box.extent(H), box.extent(W));
  auto host = Kokkos::create_mirror_view(out);
  for (std::int64_t n = 0; n < box.extent(N); ++n)
    for (std::int64_t h = 0; h < box.extent(H); ++h)
      for (std::int64_t w = 0; w < box.extent(W); ++w) host(n, h, w) = global(box.lo[N] + n, box.lo[H] + h, box.lo[W] + w);
  Kokkos::deep_copy(out, host);
  return out;
}

// The cells of `box` of a global host array, on the device.
template <class T>
DeviceTargets<T> owned_part(const HostArray<T>& global, const Box& box) {
  DeviceTargets<T> out("owned_targets", box.extent(N), box.extent(C), box.extent(H), box.extent(W));
  auto host = Kokkos::create_mirror_view(out);
  for (std::int64_t n = 0; n < box.extent(N); ++n)
    for (std::int64_t c = 0; c < box.extent(C); ++c)
      for (std::int64_t h = 0; h < box.extent(H); ++h)
        for (std::int64_t w = 0; w < box.extent(W); ++w)
          host(n, c, h, w) = global(box.lo[N] + n, box.lo[C] + c, box.lo[H] + h, box.lo[W] + w);
  Kokkos::deep_copy(out, host);
  return out;
}

using HostGrad = HostArray<double>;

struct ReferenceLoss {
  double loss = 0;
  double accuracy = 0;
  HostGrad grad;
};

// nn.CrossEntropyLoss(reduction='mean', ignore_index=-100) over every (n, h, w) cell, from
// the definition -log(exp(x_label) / sum_k exp(x_k)), in double. Ignored cells have zero
// gradient and the means divide by the cells that count.
template <class T>
ReferenceLoss reference_cross_entropy(const HostArray<T>& x, const HostLabels& labels) {
  const auto n_ = x.extent(0), k_ = x.extent(1), h_ = x.extent(2), w_ = x.extent(3);
  double cells = 0;
  for (std::size_t i = 0; i < labels.span(); ++i) cells += labels.data()[i] == -100 ? 0 : 1;
  ReferenceLoss r{0, 0, HostGrad("reference_grad", n_, k_, h_, w_)};
  for (std::size_t n = 0; n < n_; ++n)
    for (std::size_t h = 0; h < h_; ++h)
      for (std::size_t w = 0; w < w_; ++w) {
        if (labels(n, h, w) == -100) continue;  // HostGrad starts zeroed
        double total = 0;
        std::size_t best = 0;
        for (std::size_t k = 0; k < k_; ++k) {
          total += std::exp(static_cast<double>(x(n, k, h, w)));
          if (x(n, k, h, w) > x(n, best, h, w)) best = k;
        }
        const auto label = static_cast<std::size_t>(labels(n, h, w));
        r.loss -= std::log(std::exp(static_cast<double>(x(n, label, h, w))) / total) / cells;
        r.accuracy += (best == label ? 1.0 : 0.0) / cells;
        for (std::size_t k = 0; k < k_; ++k)
          r.grad(n, k, h, w) = (std::exp(static_cast<double>(x(n, k, h, w))) / total - (k == label ? 1.0 : 0.0)) / cells;
      }
  return r;
}

// nn.MSELoss(reduction='mean'), in double.
template <class T>
ReferenceLoss reference_mse(const HostArray<T>& y, const HostArray<T>& target) {
  const double elements = static_cast<double>(y.size());
  ReferenceLoss r{0, 0, HostGrad("reference_grad", y.extent(0), y.extent(1), y.extent(2), y.extent(3))};
  for (std::size_t i = 0; i < y.span(); ++i) {
    const double diff = static_cast<double>(y.data()[i]) - static_cast<double>(target.data()[i]);
    r.loss += diff * diff / elements;
    r.grad.data()[i] = 2 * diff / elements;
  }
  return r;
}

// Largest |a - b| over two arrays of the same shape, in double.
template <class A, class B>
double max_abs_difference(const A& a, const B& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.span(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i])));
  return worst;
}

}  // namespace tessera::testing
