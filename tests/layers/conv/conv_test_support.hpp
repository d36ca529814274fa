#pragma once
// Shared by the conv tests: the configurations every test runs, deterministic random
// inputs, running a Conv2d on a grid from global arrays (scatter in, gather out), and the
// relative comparison used throughout (tests/layers/support/compare.hpp).

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/conv2d.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/windowed.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/layer_step.hpp"

namespace tessera::layers::testing {

struct ConvCase {
  std::string name;
  std::string spec;              // the options as a spec string: parsing is exercised too
  Shape4 input{2, 3, 13, 11};    // odd sizes on purpose: uneven tiles, strides that do not divide
};
// GoogleTest names a failing parameter by this instead of its bytes.
inline void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name << " (" << c.spec << ")"; }

// The configurations of issue 4: padding, stride, dilation, asymmetric padding, 1x1,
// kh != kw; plus a 5x5 stride 1 (overlap falls back on thin tiles), a strided 1x1 (a
// window that skips owned rows: a "negative halo") and groups.
inline std::vector<ConvCase> conv_cases() {
  return {
      {"k3_pad1", "out=4,k=3,pad=1"},
      {"k5_pad2", "out=4,k=5,pad=2"},  // thin middle tiles on 1x3x1, 1x4x1: no interior
      {"k5_stride2_pad2", "out=4,k=5,stride=2,pad=2"},
      {"k3_dilation2_pad2", "out=4,k=3,dilation=2,pad=2"},
      {"k3_asymmetric_pad", "out=4,k=3,pad_top=0,pad_bottom=2,pad_left=1,pad_right=0"},
      {"k1", "out=4,k=1"},
      {"kh3_kw5_stride2x1", "out=4,kh=3,kw=5,sh=2,sw=1,pad_top=1,pad_bottom=1,pad_left=2,pad_right=2"},
      {"k1_stride2_no_bias", "out=4,k=1,stride=2,bias=false"},
      {"k3_groups2", "out=4,k=3,pad=1,groups=2", {2, 4, 13, 11}},
  };
}

inline int rank_in(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

template <class V>
std::vector<float> to_host_vector(const V& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<float>(host.data(), host.data() + host.size());
}

// What one forward + backward step produced. y and dx are whole global arrays on the root
// (empty elsewhere); the parameter values and reduced gradients are on every rank.
struct ConvStep {
  HostArray<float> y, dx;
  std::vector<float> weight, bias, dweight, dbias;
};

// Runs forward(x) and backward(dy) of a fresh convolution-like layer — ConvLayer(options,
// in_channels, seed) with params() {weight, optional bias}: conv, deconv — seeded alike on
// every grid, on `grid`; x and dy are global arrays that matter on rank 0 of the grid only.
template <class ConvLayer, class Options>
ConvStep run_weighted_step(const ProcessGrid& grid, const Options& options, const Shape4& input,
                           const HostArray<float>& x_global, const HostArray<float>& dy_global) {
  ConvLayer layer(options, input[C], /*seed=*/2024);
  for (Parameter<float>* p : layer.params()) p->zero_grad();
  const LayerStep<float> run = run_layer_step(grid, layer, input, x_global, dy_global);
  reduce_gradients(layer.params(), grid);
  ConvStep step;
  step.y = run.y;
  step.dx = run.dx;
  const auto params = layer.params();
  step.weight = to_host_vector(params[0]->value);
  step.dweight = to_host_vector(params[0]->grad);
  if (params.size() > 1) {
    step.bias = to_host_vector(params[1]->value);
    step.dbias = to_host_vector(params[1]->grad);
  }
  return step;
}

inline ConvStep run_conv_step(const ProcessGrid& grid, const Conv2dOptions& options, const Shape4& input,
                              const HostArray<float>& x_global, const HostArray<float>& dy_global) {
  return run_weighted_step<Conv2d<float>>(grid, options, input, x_global, dy_global);
}

}  // namespace tessera::layers::testing
