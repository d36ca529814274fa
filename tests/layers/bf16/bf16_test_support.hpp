#pragma once
// Shared by the bf16 layer tests: the layers under test, built alike in fp32 and bf16 from
// one name; one forward + backward step of either on a grid from fp32 global arrays; and the
// tolerance with its argument.
//
// Tolerance. bf16 keeps 8 significant bits: rounding a value moves it by at most 2^-9
// (0.2%) of itself. A bf16 layer reads inputs and weights that were rounded once, sums
// products in fp32 (its error, ~1e-7 per term, is negligible here), and rounds its result
// once more; a gradient adds the rounding of dy. For unit-scale data (uniform in [-1, 1],
// PyTorch-initialised weights) each result is thus within about 3-4 roundings, ~0.8%, of
// the fp32 result, measured as relative_error does against the largest magnitude of the
// array. 1e-2 leaves a small margin and still fails a layer that keeps anything in a
// narrower type (fp16 overflow, fp8: 2^-4), drops a term or misplaces a cell (errors of
// order 1). Both precisions see the same x and dy, rounded to bf16 first, so layers that
// only move or compare values (relu, max pooling without overlap, flatten) must agree
// exactly.
// The same bound holds for the layers added after the main job's. deconv rounds a biased
// output once more (the transposed convolution into bf16 scratch, then the bias): ~5
// roundings, 1%, in the worst case of a cell whose bias and sum agree in sign and size —
// in practice the rounding errors are independent and the measured error is far below.
// local sums in fp32 as conv does; its dx is staged in fp32 and rounded once. lcn
// computes its statistics and divisor in double from bf16 x, so y and dx carry only the
// roundings of x, dy and the result. Measured (layers_bf16_vs_fp32 prints them): 2e-3 to
// 4e-3 for every layer here, deconv with its bias 3.6e-3 on y. The parameter gradients
// agree exactly on a CPU without bf16 kernels: they read only x and dy, which both
// precisions are given rounded alike, and are summed in fp32 by the same primitives.
// regrid copies every cell to its owner on the other grid and back (no sum, no rounding):
// exact in both tests.

#include <Kokkos_Core.hpp>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "distarray/bf16.hpp"
#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/head_grid.hpp"
#include "models/layer_registry.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/layer_step.hpp"
#include "tests/layers/support/whole_parameter.hpp"

namespace tessera::layers::testing {

inline constexpr double kBf16Tolerance = 1e-2;

struct Bf16Case {
  std::string name;
  Shape4 input;
  bool exact = false;  // the layer only moves or compares values: bf16 equals fp32 exactly
};

// The main job's layers (fashion-cnn: conv, batchnorm, relu, maxpool, flatten, linear)
// and a few variants that exercise strides, uneven windows and per-sample statistics.
inline std::vector<Bf16Case> bf16_cases() {
  return {
      {"conv_k3_pad1", {2, 3, 13, 11}},
      {"conv_k5_stride2_no_bias", {2, 3, 13, 11}},
      {"conv_k3_groups2", {2, 4, 13, 11}},
      // 1x1: the oneDNN backend's matmul route on bf16 hardware (layers/onednn/pointwise_conv.hpp)
      {"conv_k1", {2, 3, 13, 11}},
      {"batchnorm", {2, 3, 13, 11}},
      {"batchnorm_stats_all", {2, 3, 13, 11}},
      {"relu", {2, 3, 13, 11}, true},
      {"leakyrelu", {2, 3, 13, 11}},
      {"sigmoid", {2, 3, 13, 11}},
      {"tanh", {2, 3, 13, 11}},
      {"maxpool_k2", {2, 3, 12, 10}, true},
      // Overlapping windows: a cell's gradient sums several dy, rounded once (not exact).
      {"maxpool_k3_stride2_pad1", {2, 3, 13, 11}},
      {"avgpool_k2", {2, 3, 12, 10}},
      {"l2pool_k3_stride2", {2, 3, 13, 11}},
      {"flatten", {2, 3, 6, 5}, true},
      {"linear", {2, 3, 6, 5}},
      // Beyond the main job: the layers of the Le et al. (2012) presets and of decoders.
      {"deconv_k4_stride2_pad1", {2, 3, 7, 6}},
      {"deconv_k3_dilation2_no_bias", {2, 3, 7, 6}},
      {"deconv_k1_no_bias", {2, 3, 7, 6}},
      {"local_k3_pad1", {2, 3, 13, 11}},
      {"local_k3_stride2_team", {2, 3, 13, 11}},
      {"lcn_k5", {2, 3, 13, 11}},
      // Element-wise: gap's sums are fp32 (and over the grid); upsample's backward sums
      // each block's dy in fp32 and rounds once, so neither is exact.
      {"gap", {2, 3, 13, 11}},
      {"upsample_scale2", {2, 3, 7, 6}},
      {"upsample_scale3", {2, 3, 5, 4}},
      // Moves values to another layout of the same ranks (regrid_target) and gradients back.
      {"regrid_transpose", {2, 3, 13, 11}, true},
      {"regrid_to_rows", {2, 3, 13, 11}, true},
  };
}

// The grid a regrid case moves an activation on `from` to: the row and column splits
// swapped, or every rank a band of rows (samples no longer split). On one rank both are
// 1x1x1; on most grids of 2-4 ranks every cell changes owner or stays by chance.
inline GridDims regrid_target(const std::string& name, const GridDims& from) {
  if (name == "regrid_transpose") return {from[0], from[2], from[1]};
  if (name == "regrid_to_rows") return {1, from[0] * from[1] * from[2], 1};
  throw std::invalid_argument("no regrid test case named " + name);
}

inline bool is_regrid_case(const std::string& name) { return name.rfind("regrid_", 0) == 0; }

// The layer and options of case `name`, as a model spec writes them; `grid`: the dims of
// the input's grid (a regrid case's target follows from it).
inline std::pair<std::string, std::string> case_spec(const std::string& name, const GridDims& grid) {
  if (is_regrid_case(name)) return {"regrid", "grid=" + format_grid(regrid_target(name, grid))};
  static const std::map<std::string, std::pair<std::string, std::string>, std::less<>> specs{
      {"conv_k3_pad1", {"conv", "out=4,k=3,pad=1"}},
      {"conv_k5_stride2_no_bias", {"conv", "out=4,k=5,stride=2,pad=2,bias=false"}},
      {"conv_k3_groups2", {"conv", "out=4,k=3,pad=1,groups=2"}},
      {"conv_k1", {"conv", "out=4,k=1"}},
      {"deconv_k1_no_bias", {"deconv", "out=4,k=1,bias=false"}},
      {"deconv_k4_stride2_pad1", {"deconv", "out=4,k=4,stride=2,pad=1"}},
      {"deconv_k3_dilation2_no_bias", {"deconv", "out=4,k=3,dilation=2,pad=1,bias=false"}},
      {"local_k3_pad1", {"local", "out=4,k=3,pad=1"}},
      {"local_k3_stride2_team", {"local", "out=4,k=3,stride=2,engine=team"}},
      {"lcn_k5", {"lcn", "k=5"}},
      {"gap", {"gap", ""}},
      {"upsample_scale2", {"upsample", "scale=2"}},
      {"upsample_scale3", {"upsample", "scale=3"}},
      {"batchnorm", {"batchnorm", ""}},
      {"batchnorm_stats_all", {"batchnorm", "stats=all"}},
      {"relu", {"relu", ""}},
      {"sigmoid", {"sigmoid", ""}},
      {"tanh", {"tanh", ""}},
      {"leakyrelu", {"leakyrelu", "slope=0.1"}},
      {"maxpool_k2", {"maxpool", "k=2"}},
      {"maxpool_k3_stride2_pad1", {"maxpool", "k=3,stride=2,pad=1"}},
      {"avgpool_k2", {"avgpool", "k=2"}},
      {"l2pool_k3_stride2", {"l2pool", "k=3,stride=2"}},
      {"flatten", {"flatten", ""}},
      {"linear", {"linear", "out=5"}},
  };
  const auto it = specs.find(name);
  if (it == specs.end()) throw std::invalid_argument("no bf16 test case named " + name);
  return it->second;
}

// Built as a model builds it (models/layer_registry.hpp), so this program instantiates no
// layer itself: the library's fp32 and bf16 layers are the ones under test.
template <class T>
std::unique_ptr<Layer<T>> make_case_layer(const std::string& name, const Shape4& in, const GridDims& grid = {1, 1, 1}) {
  constexpr std::uint64_t seed = 11;
  const auto [layer, options] = case_spec(name, grid);
  return models::LayerRegistry::global().find(layer).factory<T>()(options, in, seed);
}

// `a` with every element rounded to bf16 and widened back: the values both precisions see.
inline HostArray<float> bf16_rounded(const HostArray<float>& a) {
  HostArray<float> r("rounded", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) r.data()[i] = float(bf16(a.data()[i]));
  return r;
}

template <class T>
HostArray<T> as_type(const HostArray<float>& a) {
  HostArray<T> r("as_type", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) r.data()[i] = T(a.data()[i]);
  return r;
}

template <class V>
std::vector<float> widened(const V& view) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  std::vector<float> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) out[i] = float(host.data()[i]);
  return out;
}

// One step's results, widened to fp32: y and dx on the grid's rank 0 (empty elsewhere), the
// reduced parameter gradients, whole, on every rank.
struct Bf16Step {
  std::vector<float> y, dx;
  std::vector<std::vector<float>> grads;
};

// forward(x), backward(dy) of a fresh layer `name` in precision T on `grid`; x and dy are
// global fp32 arrays (converted to T), whose values matter on the grid's rank 0. A layer
// whose output lives on the head grid (linear, gap) gets its y and dy there.
template <class T>
Bf16Step run_case(const ProcessGrid& grid, const Bf16Case& c, const HostArray<float>& x_global,
                  const HostArray<float>& dy_global) {
  std::unique_ptr<Layer<T>> layer = make_case_layer<T>(c.name, c.input, grid.dims());
  const Shape4 out_shape = layer->output_shape(c.input);
  std::shared_ptr<const ProcessGrid> head;
  if (c.name == "linear" || c.name == "gap") head = make_head_grid(grid);
  std::optional<ProcessGrid> moved;  // a regrid's output grid: other dims, the same ranks
  if (const std::optional<GridDims> to = layer->output_grid()) moved.emplace(grid.comm(), *to);
  const ProcessGrid& out_grid = head ? *head : moved ? *moved : grid;
  // Linear and gap read their tile only (the registry's InputHalo::none): x without a halo.
  auto input = [&](const char* label) {
    return head ? Tensor<T>(grid, c.input, HaloWidths{}, label) : make_input(grid, c.input, *layer, label);
  };
  Tensor<T> x = input("x"), dx = input("dx");
  Tensor<T> y(out_grid, out_shape, HaloWidths{}, "y"), dy(out_grid, out_shape, HaloWidths{}, "dy");
  layer->place(y.owned_box());  // a locally connected layer's tiled weights exist from here
  for (Parameter<T>* p : layer->params()) p->zero_grad();
  scatter(as_type<T>(x_global), x);
  scatter(as_type<T>(dy_global), dy);
  layer->forward(x, y);
  layer->backward(dy, dx);
  reduce_gradients(layer->params(), grid);
  const HostArray<T> y_all = gather(y), dx_all = gather(dx);
  Bf16Step step{widened(y_all), widened(dx_all), {}};
  // Tiled gradients (local) assembled whole, so that any grid compares with one rank.
  for (Parameter<T>* p : layer->params()) {
    const std::vector<double> whole = whole_grad(*p, grid);
    step.grads.emplace_back(whole.begin(), whole.end());
  }
  return step;
}

}  // namespace tessera::layers::testing
