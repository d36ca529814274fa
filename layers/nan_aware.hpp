#pragma once
// NaN-aware comparisons for kernels, so a NaN reaching a layer propagates as it does in
// PyTorch instead of losing every comparison and vanishing (relu(NaN) = 0, a max that
// skips it). A NaN anywhere must reach the loss, where the trainer's guard stops the run.
//
// x != x is the portable NaN test on every backend (std::isnan is no device function under
// nvcc); the build never enables fast-math, which would fold it to false.

#include <Kokkos_Core.hpp>

namespace tessera::layers::nan_aware {

template <class T>
KOKKOS_INLINE_FUNCTION bool is_nan(T x) {
  return x != x;
}

// Whether `candidate` replaces `best` in a running maximum: larger, or NaN (PyTorch's
// max_pool2d rule `val > maxval || isnan(val)`, so the last NaN seen wins).
template <class T>
KOKKOS_INLINE_FUNCTION bool beats(T candidate, T best) {
  return candidate > best || is_nan(candidate);
}

// max(x, floor) that keeps a NaN x (torch.clamp_min): NaN compares false, so it stays.
template <class T>
KOKKOS_INLINE_FUNCTION T clamp_min(T x, T floor) {
  return x < floor ? floor : x;
}

}  // namespace tessera::layers::nan_aware
