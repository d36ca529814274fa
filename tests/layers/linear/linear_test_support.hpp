#pragma once
// Shared by the linear tests: a naive double reference of Linear on flattened samples, and
// one forward + backward step of a Linear on a grid from global arrays (input tiled on the
// grid, output on its head grid).

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/linear.hpp"
#include "layers/loss/cross_entropy.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {

inline std::vector<double> flat(const HostArray<float>& a) { return {a.data(), a.data() + a.size()}; }

struct LinearResult {
  std::vector<double> y, dx, weight, bias, dweight, dbias;  // y, dx: whole arrays, rank 0 only
  double loss = 0;                                          // cross-entropy runs only
};

// y(n, k) = sum_f W(k, f) x(n, f) + b(k) and its gradients, in double; x (N, F), dy (N, K).
inline LinearResult reference(const std::vector<double>& x, const std::vector<double>& dy,
                              const std::vector<double>& weight, const std::vector<double>& bias, std::int64_t samples,
                              std::int64_t out) {
  const std::int64_t features = static_cast<std::int64_t>(x.size()) / samples;
  LinearResult r;
  r.y.assign(static_cast<std::size_t>(samples * out), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dweight.assign(weight.size(), 0.0);
  r.dbias.assign(static_cast<std::size_t>(out), 0.0);
  for (std::int64_t n = 0; n < samples; ++n)
    for (std::int64_t k = 0; k < out; ++k) {
      double sum = bias.empty() ? 0.0 : bias[k];
      const double g = dy[n * out + k];
      for (std::int64_t f = 0; f < features; ++f) {
        sum += weight[k * features + f] * x[n * features + f];
        r.dx[n * features + f] += g * weight[k * features + f];
        r.dweight[k * features + f] += g * x[n * features + f];
      }
      r.y[n * out + k] = sum;
      r.dbias[k] += g;
    }
  return r;
}

// The cross-entropy of head-grid logits against the global `labels` (one per sample);
// writes dlogits. Collective over the logits' grid.
inline double cross_entropy(const Tensor<float>& logits, const std::vector<std::int64_t>& labels,
                            const Tensor<float>& dlogits) {
  const Box own = logits.owned_box();
  Kokkos::View<std::int64_t***, Kokkos::LayoutRight, LossMemorySpace> owned("labels", own.extent(N), 1, 1);
  auto host = Kokkos::create_mirror_view(owned);
  for (std::int64_t n = 0; n < own.extent(N); ++n) host(n, 0, 0) = labels[own.lo[N] + n];
  Kokkos::deep_copy(owned, host);
  return cross_entropy_loss(logits, OwnedLabels(owned), dlogits);
}

// Every grid of the launched rank count with at most `samples` sample blocks.
inline std::vector<GridDims> grids_for(std::int64_t samples) {
  std::vector<GridDims> out;
  for (const GridDims& g : tessera::testing::all_grids(tessera::testing::world_size()))
    if (g[0] <= samples) out.push_back(g);
  return out;
}

// Halo widths of the arrays a step allocates: none (as a Sequential allocates them), or
// some on every array, so that no tile is dense in memory and Linear takes its copying path.
struct StepHalos {
  HaloWidths tiled, head;  // x and dx; y and dy
};
inline StepHalos with_halos() {
  return {HaloWidths{{0, 0, 1, 2}, {0, 0, 2, 1}}, HaloWidths{{0, 0, 0, 1}, {0, 0, 0, 1}}};
}

// Forward, then backward of `dy_global` (N, K, 1, 1) — or, when `labels` is non-empty, of
// the cross-entropy of the logits against them — on `grid`. Gradients reduced on all ranks.
inline LinearResult run_linear_step(const ProcessGrid& grid, const LinearOptions& options, const Shape4& input,
                                    const HostArray<float>& x_global, const HostArray<float>& dy_global,
                                    const std::vector<std::int64_t>& labels = {}, const StepHalos& halos = {}) {
  Linear<float> layer(options, {input[C], input[H], input[W]}, /*seed=*/77);
  const auto head = make_head_grid(grid);
  const Shape4 out_shape = layer.output_shape(input);
  Tensor<float> x(grid, input, halos.tiled, "x"), dx(grid, input, halos.tiled, "dx");
  Tensor<float> y(*head, out_shape, halos.head, "y"), dy(*head, out_shape, halos.head, "dy");
  scatter(x_global, x);
  layer.forward(x, y);
  LinearResult r;
  if (labels.empty()) {
    scatter(dy_global, dy);
  } else {
    r.loss = cross_entropy(y, labels, dy);
  }
  for (Parameter<float>* p : layer.params()) p->zero_grad();
  layer.backward(dy, dx);
  reduce_gradients(layer.params(), grid);
  r.y = flat(gather(y));
  r.dx = flat(gather(dx));
  const auto params = layer.params();
  r.weight = host_vector(params[0]->value), r.dweight = host_vector(params[0]->grad);
  if (params.size() > 1) r.bias = host_vector(params[1]->value), r.dbias = host_vector(params[1]->grad);
  return r;
}

}  // namespace tessera::layers::testing
