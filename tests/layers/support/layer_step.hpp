#pragma once
// Running one forward + backward step of a layer (pooling, activations, upsampling, conv)
// on a process grid from global arrays: scatter x and dy in, gather y and dx out on the
// grid's rank 0 (parameter gradients are the caller's); and the probe loss of
// finite-difference checks. Shared by the conv, pooling and pointwise tests.

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

// L = sum(layer(x) * r) on `grid`, summed in double, for finite-difference checks of
// backward (in double where the layer allows it).
template <class T>
double probe_loss(const ProcessGrid& grid, Layer<T>& layer, const Shape4& shape, const HostArray<T>& x,
                  const HostArray<T>& r) {
  Tensor<T> xt = make_input(grid, shape, layer), yt = make_output(grid, shape, layer);
  scatter(x, xt);
  layer.forward(xt, yt);
  const HostArray<T> y = gather(yt);
  double loss = 0;
  for (std::size_t i = 0; i < y.size(); ++i) loss += static_cast<double>(y.data()[i]) * r.data()[i];
  return loss;
}

inline HostArray<double> to_double(const HostArray<float>& a) {
  HostArray<double> d("d", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) d.data()[i] = a.data()[i];
  return d;
}

}  // namespace tessera::layers::testing
