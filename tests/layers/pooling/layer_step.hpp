#pragma once
// Running one forward + backward step of a parameterless layer (pooling, activations,
// upsampling) on a process grid from global arrays: scatter x and dy in, gather y and dx
// out on the grid's rank 0. Shared by the pooling and pointwise tests.

#include <functional>
#include <memory>

#include "distarray/gather_scatter.hpp"
#include "layers/layer.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers::testing {

template <class T>
struct LayerStep {
  HostArray<T> y, dx;  // whole global arrays on the grid's rank 0, empty elsewhere
};

template <class T>
LayerStep<T> run_layer_step(const ProcessGrid& grid, Layer<T>& layer, const Shape4& input, const HostArray<T>& x_global,
                            const HostArray<T>& dy_global) {
  Tensor<T> x = make_input(grid, input, layer, "x");
  Tensor<T> y = make_output(grid, input, layer, "y");
  Tensor<T> dy = make_output(grid, input, layer, "dy");
  Tensor<T> dx = make_input(grid, input, layer, "dx");
  scatter(x_global, x);
  scatter(dy_global, dy);
  layer.forward(x, y);
  layer.backward(dy, dx);
  return {gather(y), gather(dx)};
}

}  // namespace tessera::layers::testing
