#pragma once
// What a loss compares a network's output with, for the cells this rank owns, and the
// input checks every loss shares.
//
// Labels and targets are plain Kokkos views of the owned part only, indexed from the owned
// box's corner like Tensor::owned(): each rank reads just its tile from the data file, so
// there is never a global label array. Both aliases are LayoutStride, so a LayoutRight view
// of the owned shape and a Tensor's owned() subview are accepted alike.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <sstream>
#include <string>

#include "distarray/box.hpp"
#include "layers/layer.hpp"

namespace tessera::layers {

using LossMemorySpace = Kokkos::DefaultExecutionSpace::memory_space;

// Class index of each owned (n, h, w) cell of a logits tensor: labels(n, h, w) relative to
// the owned box's corner. Classification logits of shape (N, K, 1, 1) take (n_owned, 1, 1).
// int64 as the data file's /labels and PyTorch's class targets.
using OwnedLabels = Kokkos::View<const std::int64_t***, Kokkos::LayoutStride, LossMemorySpace>;

// Regression target of each owned cell of an output, shaped as the output's owned box.
template <class T>
using OwnedTargets = Kokkos::View<const T****, Kokkos::LayoutStride, LossMemorySpace>;

namespace detail {

// Flat index over the owned (n, h, w) cells -> the three indices, w fastest.
struct PixelIndex {
  std::int64_t height = 1, width = 1;
  KOKKOS_INLINE_FUNCTION std::int64_t n(std::int64_t i) const { return i / (height * width); }
  KOKKOS_INLINE_FUNCTION std::int64_t h(std::int64_t i) const { return (i / width) % height; }
  KOKKOS_INLINE_FUNCTION std::int64_t w(std::int64_t i) const { return i % width; }
};

// "3x4x5" for error messages.
template <class... Extents>
std::string describe_extents(Extents... extents) {
  std::ostringstream out;
  const char* separator = "";
  ((out << separator << static_cast<std::int64_t>(extents), separator = "x"), ...);
  return out.str();
}

// Empty when the labels fit the owned (n, h, w) cells of `output`; else what is wrong.
template <class T>
std::string labels_problem(const char* loss, const Tensor<T>& output, const OwnedLabels& labels) {
  const Shape4 own = output.owned_box().shape();
  if (static_cast<std::int64_t>(labels.extent(0)) == own[N] && static_cast<std::int64_t>(labels.extent(1)) == own[H] &&
      static_cast<std::int64_t>(labels.extent(2)) == own[W])
    return {};
  return std::string(loss) + ": labels are " +
         describe_extents(labels.extent(0), labels.extent(1), labels.extent(2)) +
         " but the owned (n, h, w) cells are " + describe_extents(own[N], own[H], own[W]);
}

// Empty when a gradient tensor is distributed exactly as the output it belongs to.
template <class T>
std::string gradient_problem(const char* loss, const Tensor<T>& output, const Tensor<T>& grad) {
  if (grad.distribution() == output.distribution()) return {};
  return std::string(loss) + ": the gradient tensor (" + grad.distribution().describe() +
         ") is not distributed as the output (" + output.distribution().describe() + ")";
}

}  // namespace detail
}  // namespace tessera::layers
