#pragma once
// Flatten (spec name "flatten"): marks where a network stops being spatial. On a spatially
// tiled tensor a flattened (N, C*H*W) array cannot be tiled the same way (its H = W = 1
// cannot be split over ph, pw > 1), so Flatten leaves the NCHW tensor and its tiling as
// they are — an identity on the owned cells — and the Linear after it reads each sample's
// C*H*W features in PyTorch's flatten order (c, h, w) straight from the tiles
// (layers/linear.hpp). Spec "flatten,linear(out=10)" therefore computes exactly
// nn.Sequential(nn.Flatten(), nn.Linear(C*H*W, 10)).
//
// The copy is one contiguous copy of the whole allocation when neither array has a halo
// (as in a Sequential: flatten and linear ask for none), a strided copy of the owned cells
// otherwise.

#include <Kokkos_Core.hpp>

#include <string>

#include "layers/layer.hpp"

namespace tessera::layers {

template <class T>
class Flatten final : public Layer<T> {
 public:
  std::string kind() const override { return "flatten"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
  std::string options() const override { return ""; }
  Shape4 output_shape(const Shape4& input) const override { return input; }
  Box input_window(const Box& output, const Shape4&) const override { return output; }
  void forward(const Tensor<T>& x, const Tensor<T>& y) override { copy_owned(x, y); }
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!without_halo(dx)) dx.fill_window(T(0));
    copy_owned(dy, dx);
  }

 private:
  static bool without_halo(const Tensor<T>& a) { return a.window_box() == a.owned_box(); }
  static void copy_owned(const Tensor<T>& from, const Tensor<T>& to) {
    if (without_halo(from) && without_halo(to)) {
      Kokkos::deep_copy(to.window(), from.window());
    } else {
      Kokkos::deep_copy(to.owned(), from.owned());
    }
  }
};

}  // namespace tessera::layers
