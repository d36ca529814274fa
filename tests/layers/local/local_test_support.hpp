#pragma once
// Shared by the locally connected tests: the configurations every test runs (each with
// both engines), and one forward + backward step of a fresh layer on a grid with its tiled
// weights and reduced gradients assembled into whole global tensors on every rank.

#include <ostream>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/locally_connected.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/layer_step.hpp"
#include "tests/layers/support/whole_parameter.hpp"

namespace tessera::layers::testing {

struct LocalCase {
  std::string name;
  std::string spec;            // the options as a spec string: parsing is exercised too
  Shape4 input{2, 3, 13, 11};  // odd sizes: uneven tiles, strides that do not divide them
  LocalOptions options(LocalEngine engine) const {
    LocalOptions o = LocalOptions::parse(spec);
    o.engine = engine;
    return o;
  }
};
inline void PrintTo(const LocalCase& c, std::ostream* os) { *os << c.name << " (local(" << c.spec << "))"; }

inline std::vector<LocalCase> local_cases() {
  return {
      {"k3", "out=4,k=3"},
      {"k3_pad1", "out=4,k=3,pad=1"},
      {"k5_stride2_pad2", "out=3,k=5,stride=2,pad=2"},
      {"k4_stride3", "out=2,k=4,stride=3"},  // stride 3 does not divide the tiles
      {"kh3_kw2_asymmetric", "out=2,kh=3,kw=2,sh=2,sw=1,pad_top=1,pad_bottom=0,pad_left=0,pad_right=1"},
      {"k1_no_bias", "out=4,k=1,bias=false"},
      {"k5_pad2_one_channel", "out=2,k=5,pad=2", {2, 1, 9, 10}},  // thin tiles: no interior
  };
}

inline const std::vector<LocalEngine>& both_engines() {
  static const std::vector<LocalEngine> engines{LocalEngine::gemm, LocalEngine::team};
  return engines;
}

inline std::string engine_text(LocalEngine e) { return "engine " + std::string(local_engine_name(e)); }

// What one step produced: y and dx whole on the grid's rank 0 (empty elsewhere); weights
// and reduced gradients whole on every rank, in the global layout.
struct LocalStep {
  HostArray<float> y, dx;
  std::vector<double> weight, bias, dweight, dbias;
};

constexpr std::uint64_t kLocalSeed = 2024;

inline LocalStep run_local_step(const ProcessGrid& grid, const LocalOptions& options, const Shape4& input,
                                const HostArray<float>& x, const HostArray<float>& dy) {
  LocallyConnected2d<float> layer(options, input, kLocalSeed);  // seeded alike on every grid
  layer.place(owned_output(grid, input, layer));
  for (Parameter<float>* p : layer.params()) p->zero_grad();
  const LayerStep<float> run = run_layer_step(grid, layer, input, x, dy);
  reduce_gradients(layer.params(), grid);
  LocalStep step{run.y, run.dx, {}, {}, {}, {}};
  const auto params = layer.params();
  step.weight = whole_value(*params[0], grid);
  step.dweight = whole_grad(*params[0], grid);
  if (params.size() > 1) {
    step.bias = whole_value(*params[1], grid);
    step.dbias = whole_grad(*params[1], grid);
  }
  return step;
}

}  // namespace tessera::layers::testing
