// Graph models (models/graph.hpp) on every process grid the rank count allows (pn <= 2):
// residual blocks, a U-Net level, a tensor read by a 3x3 and a 5x5 conv, add of three
// inputs and concat of one tensor twice, a graph with a classifier head — output, input
// gradient and every reduced parameter gradient equal the one-rank result within 1e-5
// relative. On one rank, the same graphs against a naive double-precision interpreter of
// the graph (forward) whose gradients are central finite differences in double: the
// engine's backward of the graph checked against finite differences. Then: the union of
// halos and the summed gradient of a tensor with two readers, and the gradient buckets'
// after-layer hook on a graph; training's backward without the input gradient (the same
// parameter gradients, the input's gradient left unwritten). Last, buffers shared by liveness: the plan itself, the
// planned bytes of a chain and of the presets, and forward-only models on every grid.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "tests/layers/support/compare.hpp"
#include "layers/grad_reduce.hpp"
#include "models/buffer_sharing.hpp"
#include "layers/regrid.hpp"
#include "models/sequential.hpp"
#include "tests/support/allocation_counter.hpp"
#include "tests/support/error_message.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models {
namespace {

constexpr double kTolerance = 1e-5;
using Vec = std::vector<double>;

using tessera::layers::testing::random_array;
using tessera::layers::testing::host_vector;
using tessera::layers::testing::relative_error;


Vec gathered(const layers::Tensor<float>& t) {
  const HostArray<float> a = gather(t);
  return {a.data(), a.data() + a.size()};
}

void broadcast(Vec& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

struct StepResult {
  Vec output, dx;             // whole arrays, rank 0 only
  std::vector<Vec> dparams;   // reduced, every rank
  std::vector<Vec> params;    // values, every rank
};

// One forward and backward of `spec` on `grid`, the loss sum(y * w): dy = w.
StepResult run_step(const ProcessGrid& grid, const std::string& spec, const Shape4& shape, const HostArray<float>& x) {
  Sequential<float> model(spec, shape, grid, /*seed=*/7);
  scatter(x, model.input());
  const layers::Tensor<float>& y = model.forward(model.input());
  scatter(random_array(y.distribution().global_shape(), 11), model.output_gradient());
  model.zero_grad();
  const layers::Tensor<float>& dx = model.backward(model.output_gradient());
  layers::reduce_gradients(model.parameters(), grid);
  StepResult r;
  r.output = gathered(y);
  r.dx = gathered(dx);
  for (layers::Parameter<float>* p : model.parameters()) {
    r.dparams.push_back(host_vector(p->grad));
    r.params.push_back(host_vector(p->value));
  }
  return r;
}

void expect_every_grid_matches_one_rank(const std::string& spec, const Shape4& shape) {
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(shape, 31);
  StepResult one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_step(self, spec, shape, x);
  }
  int count = static_cast<int>(one.dparams.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one.dparams.resize(static_cast<std::size_t>(count));
  for (auto& g : one.dparams) broadcast(g);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const StepResult got = run_step(grid, spec, shape, x);
    if (root) {
      EXPECT_LE(relative_error(got.output, one.output), kTolerance);
      EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
    }
    ASSERT_EQ(got.dparams.size(), one.dparams.size());
    for (std::size_t i = 0; i < got.dparams.size(); ++i)
      EXPECT_LE(relative_error(got.dparams[i], one.dparams[i]), kTolerance) << "parameter " << i;
  }
}

// The graphs every test below runs.
const std::string kResidual =
    "conv(out=4,k=3,pad=1), s: relu, conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), add[prev, s], relu";
const std::string kResidualBlocks =
    "block res(c, k=3) { conv(out=$c,k=$k,pad=1), relu, conv(out=$c,k=$k,pad=1), add[prev, in], relu }"
    " conv(out=4,k=3,pad=1), relu, res(c=4)*2";
const std::string kUnetLevel =
    "e: conv(out=4,k=3,pad=1), relu, maxpool(k=2), conv(out=6,k=3,pad=1), relu, deconv(out=4,k=2,stride=2),"
    " concat[prev, e], conv(out=2,k=3,pad=1)";
const std::string kTwoWindows = "a: conv(out=3,k=3,pad=1)[input], b: conv(out=3,k=5,pad=2)[input], add[a, b]";
const std::string kJoins = "c: conv(out=2,k=3,pad=1), r: relu, t: tanh[c], add[c, r, t], concat[prev, prev, input]";
const std::string kHead =
    "conv(out=4,k=3,pad=1), s: relu, conv(out=4,k=3,pad=1), add[prev, s], gap, flatten, linear(out=3)";

TEST(GraphGrids, ResidualBlock) { expect_every_grid_matches_one_rank(kResidual, {2, 3, 13, 11}); }
TEST(GraphGrids, RepeatedResidualBlocks) { expect_every_grid_matches_one_rank(kResidualBlocks, {2, 3, 9, 12}); }
TEST(GraphGrids, UnetLevel) { expect_every_grid_matches_one_rank(kUnetLevel, {2, 3, 14, 12}); }
TEST(GraphGrids, TensorReadByTwoWindows) { expect_every_grid_matches_one_rank(kTwoWindows, {2, 2, 13, 12}); }
TEST(GraphGrids, AddOfThreeAndConcatOfOneTensorTwice) { expect_every_grid_matches_one_rank(kJoins, {2, 2, 11, 10}); }
TEST(GraphGrids, ResidualBlockWithAHead) { expect_every_grid_matches_one_rank(kHead, {2, 3, 12, 12}); }
// The presets (models/presets.cpp), small: ResNet-18's structure at width 4 and a two-level
// U-Net. ResNet halves the size five times; 128 -> 4x4 in the last stage, so every grid of
// up to 4 ranks per axis still gives each rank a tile (32x32 would end at 1x1).
TEST(GraphGrids, ResNet18Preset) {
  expect_every_grid_matches_one_rank("resnet(depth=18,width=4,classes=3)", {2, 3, 128, 128});
}
TEST(GraphGrids, UNetPreset) { expect_every_grid_matches_one_rank("unet(depth=2,width=4,out=2)", {2, 1, 16, 16}); }

// ---- The double-precision reference ------------------------------------------------------

struct Array {
  Shape4 s{};
  Vec v;
  double& at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) { return v[((n * s[1] + c) * s[2] + h) * s[3] + w]; }
  double at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return v[((n * s[1] + c) * s[2] + h) * s[3] + w];
  }
};

Array zeros(const Shape4& s) { return {s, Vec(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[3]), 0.0)}; }

std::map<std::string, std::int64_t> options_of(const std::string& text) {
  std::map<std::string, std::int64_t> o;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    o[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
  }
  return o;
}

// Runs the model's graph in double: layer kinds conv, deconv, relu, tanh, maxpool, add,
// concat, with parameters `p` (in model.params() order) — enough for the graphs above.
struct Reference {
  struct Node {
    std::string kind;
    std::map<std::string, std::int64_t> options;
    std::vector<std::size_t> inputs;
    int first_param = -1;  // index into p: weight, then bias
  };
  std::vector<Node> nodes;

  explicit Reference(Sequential<float>& model) {
    int param = 0;
    for (std::size_t i = 0; i < model.size(); ++i) {
      Node n{model.layer(i).kind(), options_of(model.layer(i).options()), model.node_inputs(i), -1};
      if (!model.layer(i).params().empty()) n.first_param = param;
      param += static_cast<int>(model.layer(i).params().size());
      nodes.push_back(std::move(n));
    }
  }

  double option(const Node& n, const std::string& key, std::int64_t fallback) const {
    const auto it = n.options.find(key);
    return static_cast<double>(it == n.options.end() ? fallback : it->second);
  }

  Array run(const Array& x, const std::vector<Vec>& p) const {
    std::vector<Array> a{x};
    for (const Node& n : nodes) {
      const Array& in = a[n.inputs[0]];
      Array out;
      if (n.kind == "conv") {
        const auto k = static_cast<std::int64_t>(option(n, "k", 1)), pad = static_cast<std::int64_t>(option(n, "pad", 0));
        const auto co = static_cast<std::int64_t>(option(n, "out", 0));
        const Vec& w = p[n.first_param];
        const Vec& b = p[n.first_param + 1];
        out = zeros({in.s[0], co, in.s[2] + 2 * pad - k + 1, in.s[3] + 2 * pad - k + 1});
        for (std::int64_t s = 0; s < out.s[0]; ++s)
          for (std::int64_t o = 0; o < co; ++o)
            for (std::int64_t h = 0; h < out.s[2]; ++h)
              for (std::int64_t ww = 0; ww < out.s[3]; ++ww) {
                double sum = b[o];
                for (std::int64_t c = 0; c < in.s[1]; ++c)
                  for (std::int64_t i = 0; i < k; ++i)
                    for (std::int64_t j = 0; j < k; ++j) {
                      const std::int64_t hh = h + i - pad, wi = ww + j - pad;
                      if (hh < 0 || hh >= in.s[2] || wi < 0 || wi >= in.s[3]) continue;
                      sum += w[((o * in.s[1] + c) * k + i) * k + j] * in.at(s, c, hh, wi);
                    }
                out.at(s, o, h, ww) = sum;
              }
      } else if (n.kind == "deconv") {  // weight (C_in, C_out, k, k), no padding
        const auto k = static_cast<std::int64_t>(option(n, "k", 1)), st = static_cast<std::int64_t>(option(n, "stride", 1));
        const auto co = static_cast<std::int64_t>(option(n, "out", 0));
        const Vec& w = p[n.first_param];
        const Vec& b = p[n.first_param + 1];
        out = zeros({in.s[0], co, (in.s[2] - 1) * st + k, (in.s[3] - 1) * st + k});
        for (std::int64_t s = 0; s < out.s[0]; ++s)
          for (std::int64_t o = 0; o < co; ++o)
            for (std::int64_t h = 0; h < out.s[2]; ++h)
              for (std::int64_t ww = 0; ww < out.s[3]; ++ww) out.at(s, o, h, ww) = b[o];
        for (std::int64_t s = 0; s < in.s[0]; ++s)
          for (std::int64_t c = 0; c < in.s[1]; ++c)
            for (std::int64_t h = 0; h < in.s[2]; ++h)
              for (std::int64_t ww = 0; ww < in.s[3]; ++ww)
                for (std::int64_t o = 0; o < co; ++o)
                  for (std::int64_t i = 0; i < k; ++i)
                    for (std::int64_t j = 0; j < k; ++j)
                      out.at(s, o, h * st + i, ww * st + j) += w[((c * co + o) * k + i) * k + j] * in.at(s, c, h, ww);
      } else if (n.kind == "relu" || n.kind == "tanh") {
        out = in;
        for (double& v : out.v) v = n.kind == "relu" ? std::max(v, 0.0) : std::tanh(v);
      } else if (n.kind == "maxpool") {  // k=2, stride k
        const auto k = static_cast<std::int64_t>(option(n, "k", 2));
        out = zeros({in.s[0], in.s[1], in.s[2] / k, in.s[3] / k});
        for (std::int64_t s = 0; s < out.s[0]; ++s)
          for (std::int64_t c = 0; c < out.s[1]; ++c)
            for (std::int64_t h = 0; h < out.s[2]; ++h)
              for (std::int64_t ww = 0; ww < out.s[3]; ++ww) {
                double m = -INFINITY;
                for (std::int64_t i = 0; i < k; ++i)
                  for (std::int64_t j = 0; j < k; ++j) m = std::max(m, in.at(s, c, h * k + i, ww * k + j));
                out.at(s, c, h, ww) = m;
              }
      } else if (n.kind == "add") {
        out = in;
        for (std::size_t i = 1; i < n.inputs.size(); ++i)
          for (std::size_t e = 0; e < out.v.size(); ++e) out.v[e] += a[n.inputs[i]].v[e];
      } else if (n.kind == "concat") {
        Shape4 s = in.s;
        s[1] = 0;
        for (const std::size_t i : n.inputs) s[1] += a[i].s[1];
        out = zeros(s);
        std::int64_t offset = 0;
        for (const std::size_t i : n.inputs) {
          const Array& part = a[i];
          for (std::int64_t q = 0; q < s[0]; ++q)
            for (std::int64_t c = 0; c < part.s[1]; ++c)
              for (std::int64_t h = 0; h < s[2]; ++h)
                for (std::int64_t ww = 0; ww < s[3]; ++ww) out.at(q, offset + c, h, ww) = part.at(q, c, h, ww);
          offset += part.s[1];
        }
      } else {
        ADD_FAILURE() << "the reference has no " << n.kind;
      }
      a.push_back(std::move(out));
    }
    return a.back();
  }
};

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The model on one rank against the reference: forward, and backward against central
// differences of sum(y * dy) in double.
void expect_matches_reference(const std::string& spec, const Shape4& shape) {
  if (tessera::testing::world_rank() != 0) return;
  SCOPED_TRACE(spec);
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const HostArray<float> xf = random_array(shape, 31);
  const StepResult got = run_step(self, spec, shape, xf);
  Sequential<float> model(spec, shape, self, 7);
  const Reference ref(model);
  Array x{shape, Vec(xf.data(), xf.data() + xf.size())};
  const Array y = ref.run(x, got.params);
  EXPECT_LE(relative_error(got.output, y.v), kTolerance);
  const HostArray<float> dyf = random_array(y.s, 11);
  const Vec dy(dyf.data(), dyf.data() + dyf.size());
  const double h = 1e-6;
  const auto loss = [&](const Array& xx, const std::vector<Vec>& pp) { return dot(ref.run(xx, pp).v, dy); };
  Vec dx(x.v.size());
  for (std::size_t i = 0; i < x.v.size(); ++i) {
    Array plus = x, minus = x;
    plus.v[i] += h, minus.v[i] -= h;
    dx[i] = (loss(plus, got.params) - loss(minus, got.params)) / (2 * h);
  }
  EXPECT_LE(relative_error(got.dx, dx), 1e-4) << "input gradient";
  for (std::size_t q = 0; q < got.params.size(); ++q) {
    Vec dp(got.params[q].size());
    for (std::size_t i = 0; i < dp.size(); ++i) {
      std::vector<Vec> plus = got.params, minus = got.params;
      plus[q][i] += h, minus[q][i] -= h;
      dp[i] = (loss(x, plus) - loss(x, minus)) / (2 * h);
    }
    EXPECT_LE(relative_error(got.dparams[q], dp), 1e-4) << "parameter " << q;
  }
}

TEST(GraphReference, ResidualBlock) { expect_matches_reference(kResidual, {1, 2, 6, 5}); }
TEST(GraphReference, UnetLevel) { expect_matches_reference(kUnetLevel, {1, 2, 6, 4}); }
TEST(GraphReference, TensorReadByTwoWindows) { expect_matches_reference(kTwoWindows, {1, 2, 6, 6}); }
TEST(GraphReference, AddOfThreeAndConcatOfOneTensorTwice) { expect_matches_reference(kJoins, {1, 2, 5, 4}); }

// The input read by a 3x3 and a 5x5 conv is allocated once with the 5x5's halo (2 cells on
// every side), and its gradient is the sum of both readers' (against each alone).
TEST(GraphHalos, TensorReadByTwoWindowsCarriesTheWiderHaloAndSumsGradients) {
  const Shape4 shape{1, 2, 12, 12};
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  Sequential<float> model(kTwoWindows, shape, grid, 7);
  // Padding cells are part of the window too: 2 on every side, split or not (the 3x3 alone: 1).
  EXPECT_EQ(model.halo(0), (HaloWidths{{0, 0, 2, 2}, {0, 0, 2, 2}}));
  EXPECT_EQ(model.halo(1), HaloWidths{});  // a: read by add only
  const HostArray<float> x = random_array(shape, 3), dy = random_array({1, 3, 12, 12}, 4);
  // The input gradient of `m` with the weights of `from`'s nodes `nodes` (in m's order).
  const auto input_gradient = [&](Sequential<float>& m, const std::vector<std::size_t>& nodes) {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (std::size_t q = 0; q < m.layer(i).params().size(); ++q)
        Kokkos::deep_copy(m.layer(i).params()[q]->value, model.layer(nodes[i]).params()[q]->value);
    scatter(x, m.input());
    m.forward(m.input());
    scatter(dy, m.output_gradient());
    return gathered(m.backward(m.output_gradient()));
  };
  const Vec both = input_gradient(model, {0, 1});
  Sequential<float> three("conv(out=3,k=3,pad=1)", shape, grid, 1), five("conv(out=3,k=5,pad=2)", shape, grid, 1);
  const Vec a = input_gradient(three, {0}), b = input_gradient(five, {1});
  if (tessera::testing::world_rank() == 0) {
    ASSERT_EQ(both.size(), a.size());
    Vec sum(a.size());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = a[i] + b[i];
    EXPECT_LE(relative_error(both, sum), kTolerance);
  }
}

// after_layer(i) comes once per node, in reverse node order, as the gradient buckets need.
TEST(GraphBackward, AfterLayerHookRunsOncePerNodeInReverseOrder) {
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  Sequential<float> model(kUnetLevel, {1, 2, 8, 8}, grid, 7);
  model.forward(model.input());
  model.output_gradient().fill(1.0f);
  std::vector<std::size_t> seen;
  model.backward(model.output_gradient(), [&](std::size_t i) { seen.push_back(i); });
  std::vector<std::size_t> want(model.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = want.size() - 1 - i;
  EXPECT_EQ(seen, want);
}

// Training's backward (Graph::backward_parameters) leaves out the input's gradient: on
// every grid it adds the same parameter gradients as backward, for an input read by each
// layer that skips its input gradient (conv, two convs at once, linear, local, deconv), by
// a layer that computes it anyway (batch norm), and by a concat of other tensors too (whose
// backward runs in full). Where the skipping layers are the input's only readers, the
// input's gradient array keeps the sentinel it held: no backward-data call wrote it.
void expect_parameters_only_matches_backward(const std::string& spec, const Shape4& shape, bool input_untouched) {
  constexpr float kSentinel = 1234.5f;
  const HostArray<float> x = random_array(shape, 31);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<float> full(spec, shape, grid, 7), only(spec, shape, grid, 7);
    for (Sequential<float>* m : {&full, &only}) {
      scatter(x, m->input());
      const layers::Tensor<float>& y = m->forward(m->input());
      scatter(random_array(y.distribution().global_shape(), 11), m->output_gradient());
      m->zero_grad();
    }
    full.backward(full.output_gradient());
    only.gradient(0).fill_window(kSentinel);
    only.backward_parameters(only.output_gradient());
    const std::vector<layers::Parameter<float>*> want = full.parameters(), got = only.parameters();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(relative_error(host_vector(got[i]->grad), host_vector(want[i]->grad)), 1e-6) << "parameter " << i;
    if (!input_untouched) continue;
    const Vec dx = gathered(only.gradient(0));
    EXPECT_TRUE(std::all_of(dx.begin(), dx.end(), [](double v) { return v == kSentinel; }) ||
                tessera::testing::world_rank() != 0)
        << "the input's gradient was written";
  }
}

TEST(GraphBackwardParameters, ConvOnTheInput) {
  expect_parameters_only_matches_backward("conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1)", {2, 3, 13, 11}, true);
}
TEST(GraphBackwardParameters, TwoConvsOnTheInput) { expect_parameters_only_matches_backward(kTwoWindows, {2, 2, 13, 12}, true); }
TEST(GraphBackwardParameters, LinearOnTheInput) { expect_parameters_only_matches_backward("linear(out=3)", {2, 2, 6, 5}, true); }
TEST(GraphBackwardParameters, LocalOnTheInput) {
  expect_parameters_only_matches_backward("local(out=3,k=3), relu, conv(out=2,k=1)", {2, 2, 9, 8}, true);
}
TEST(GraphBackwardParameters, DeconvOnTheInput) {
  expect_parameters_only_matches_backward("deconv(out=3,k=2,stride=2), relu, conv(out=2,k=3,pad=1)", {2, 2, 5, 6}, true);
}
TEST(GraphBackwardParameters, BatchNormOnTheInputComputesItAnyway) {
  expect_parameters_only_matches_backward("batchnorm, conv(out=3,k=3,pad=1)", {2, 2, 8, 8}, false);
}
TEST(GraphBackwardParameters, InputAlsoReadByAConcat) { expect_parameters_only_matches_backward(kJoins, {2, 2, 11, 10}, false); }

// ---- Buffers shared by liveness ---------------------------------------------------------

TEST(BufferSharing, DisjointLifetimesOfOneKindShareABuffer) {
  // Kind 0: [0,1], [2,3] and [4,4] follow each other; [1,2] overlaps [0,1] (a step that
  // reads one array and writes the other must not use one buffer). Kind 1 never shares.
  const std::vector<BufferRequest> requests{{0, 0, 1}, {0, 2, 3}, {0, 1, 2}, {1, 0, 9}, {0, 4, 4}};
  EXPECT_EQ(share_buffers(requests), (std::vector<std::size_t>{0, 0, 2, 1, 0}));
  EXPECT_TRUE(share_buffers({}).empty());
}

std::int64_t floats(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return n * c * h * w * static_cast<std::int64_t>(sizeof(float));
}

// A chain of equal shapes: 7 activations (those read by a conv with a 1-cell halo), and
// where every gradient used to have its own array, two gradient buffers in turn (the
// producer's backward reads one while it writes the other). Forward only: two activation
// buffers and no gradients. The plan is what the model allocates.
TEST(GraphMemory, ChainGradientsUseTwoBuffers) {
  const std::string chain = "conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu, conv(out=4,k=3,pad=1), relu";
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 4, 16, 16};
  const std::int64_t with_halo = floats(2, 4, 18, 18), without = floats(2, 4, 16, 16);
  const MemoryPlan training = Sequential<float>::memory_plan(chain, shape, self);
  EXPECT_EQ(training.total(MemoryUse::activations), 3 * with_halo + 4 * without + with_halo + without);
  const MemoryPlan forward = Sequential<float>::memory_plan(chain, shape, self, LayerRegistry::global(), Passes::forward_only);
  EXPECT_EQ(forward.total(MemoryUse::activations), with_halo + without);
  Sequential<float> model(chain, shape, self, 1);
  EXPECT_EQ(model.local_activation_bytes(), training.total(MemoryUse::activations));
  Sequential<float> inference(chain, shape, self, 1, LayerRegistry::global(), Passes::forward_only);
  EXPECT_EQ(inference.local_activation_bytes(), forward.total(MemoryUse::activations));
  EXPECT_THROW(inference.backward(inference.output()), std::logic_error);
  EXPECT_THROW(inference.gradient(0), std::out_of_range);
}

// The bytes an unshared plan would hold: every activation and its gradient, each alone.
std::int64_t unshared_bytes(Sequential<float>& model) {
  std::int64_t bytes = 0;
  for (std::size_t a = 0; a <= model.size(); ++a) bytes += 2 * model.activation(a).window_box().size() * 4;
  return bytes;
}

TEST(GraphMemory, PresetsPlanFewerBytesThanOneArrayPerTensor) {
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  for (const auto& [spec, shape] : std::vector<std::pair<std::string, Shape4>>{
           {"resnet(depth=18,width=4,classes=3)", {2, 3, 128, 128}}, {"unet(depth=2,width=4,out=2)", {2, 1, 16, 16}}}) {
    SCOPED_TRACE(spec);
    Sequential<float> model(spec, shape, grid, 1);
    const std::int64_t training = Sequential<float>::memory_plan(spec, shape, grid).total(MemoryUse::activations);
    const std::int64_t forward =
        Sequential<float>::memory_plan(spec, shape, grid, LayerRegistry::global(), Passes::forward_only)
            .total(MemoryUse::activations);
    EXPECT_EQ(model.local_activation_bytes(), training);
    // Activations are all kept in training, so the gradients' share is what drops (less
    // than half, as the input's gradient, with the stem's halo, is the largest and alone).
    EXPECT_LT(training, unshared_bytes(model) * 4 / 5);
    EXPECT_LT(forward, training / 2);
  }
}

// A forward-only model (activations sharing buffers) computes what the training model
// does, on every grid, in evaluation mode — and so what one rank computes.
void expect_forward_only_matches(const std::string& spec, const Shape4& shape) {
  const HostArray<float> x = random_array(shape, 5);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<float> training(spec, shape, grid, 3);
    Sequential<float> forward(spec, shape, grid, 3, LayerRegistry::global(), Passes::forward_only);
    training.set_training(false), forward.set_training(false);
    scatter(x, training.input());
    scatter(x, forward.input());
    const Vec want = gathered(training.forward(training.input())), got = gathered(forward.forward(forward.input()));
    if (tessera::testing::world_rank() == 0) {
      EXPECT_LE(relative_error(got, want), 1e-6);
    }
    // A second pass reuses the same buffers and gives the same result.
    scatter(x, forward.input());
    const Vec again = gathered(forward.forward(forward.input()));
    if (tessera::testing::world_rank() == 0) {
      EXPECT_EQ(again, got);
    }
  }
}

TEST(GraphForwardOnly, MatchesTheTrainingModelOnEveryGrid) {
  expect_forward_only_matches(kResidualBlocks, {2, 3, 9, 12});
  expect_forward_only_matches(kUnetLevel, {2, 3, 14, 12});
  expect_forward_only_matches(kJoins, {2, 2, 11, 10});
  expect_forward_only_matches(kHead, {2, 3, 12, 12});
  expect_forward_only_matches("unet(depth=2,width=4,out=2)", {2, 1, 16, 16});
}



// ---- A layout per stage (regrid, layers/regrid.hpp) ----------------------------------------

std::string replaced(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

// Stage one on the model's grid $A, stage two on $B (conv, batch norm over B's groups), back
// to $A for a residual add with a tensor of stage one (activations brought back to a layout
// share its grid), a strided conv, then $B again for the last conv and the head.
const std::string kStages =
    "conv(out=4,k=3,pad=1), s: relu, regrid(grid=$B), conv(out=4,k=3,pad=1), relu, batchnorm(stats=all),"
    " regrid(grid=$A), add[prev, s], conv(out=4,k=3,pad=1,stride=2), regrid(grid=$B), conv(out=3,k=3,pad=1),"
    " relu, gap, flatten, linear(out=3)";

// Every pair of distinct grids of the rank count (on one rank the one grid with itself):
// 1x2x2 -> 4x1x1, 1x3x1 -> 3x1x1 (uneven tiles: 13 rows over 3), 2x2x1 -> 1x1x4 (sample groups
// of the two layouts that no group of the other has) ... The one-rank reference runs the same
// graph with every regrid on 1x1x1 (the same nodes, so the same initial weights).
TEST(GraphRegrid, EveryPairOfLayoutsMatchesOneRank) {
  const Shape4 shape{4, 2, 13, 11};
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(shape, 31);
  const std::string one_spec = replaced(replaced(kStages, "$A", "1x1x1"), "$B", "1x1x1");
  StepResult one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_step(self, one_spec, shape, x);
  }
  int count = static_cast<int>(one.dparams.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one.dparams.resize(static_cast<std::size_t>(count));
  for (auto& g : one.dparams) broadcast(g);
  const std::vector<GridDims> grids = tessera::testing::all_grids(tessera::testing::world_size());
  for (const GridDims& a : grids)
    for (const GridDims& b : grids) {
      if (a == b && grids.size() > 1) continue;
      const std::string spec = replaced(replaced(kStages, "$A", format_grid(a)), "$B", format_grid(b));
      SCOPED_TRACE(format_grid(a) + " -> " + format_grid(b));
      const ProcessGrid grid(MPI_COMM_WORLD, a);
      const StepResult got = run_step(grid, spec, shape, x);
      if (root) {
        EXPECT_LE(relative_error(got.output, one.output), kTolerance);
        EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
      }
      ASSERT_EQ(got.dparams.size(), one.dparams.size());
      for (std::size_t i = 0; i < got.dparams.size(); ++i)
        EXPECT_LE(relative_error(got.dparams[i], one.dparams[i]), kTolerance) << "parameter " << i;
    }
}

// Forward then backward is the identity on the data (backward is the forward's transpose
// and both are permutations of cells), from every grid to every grid, halos or not; after
// the first call neither direction allocates.
TEST(GraphRegrid, ForwardThenBackwardIsTheIdentityAndAllocatesNothing) {
  const Shape4 shape{5, 3, 9, 7};
  const HostArray<float> x = random_array(shape, 5);
  const std::vector<GridDims> grids = tessera::testing::all_grids(tessera::testing::world_size());
  for (const GridDims& a : grids)
    for (const GridDims& b : grids) {
      SCOPED_TRACE(format_grid(a) + " -> " + format_grid(b));
      const ProcessGrid from(MPI_COMM_WORLD, a), to(MPI_COMM_WORLD, b);
      layers::Tensor<float> in(from, shape, HaloWidths{{0, 0, 1, 2}, {0, 0, 2, 1}}, "in"),
          out(to, shape, HaloWidths{}, "out"), back(from, shape, HaloWidths{}, "back");
      scatter(x, in);
      layers::Regrid<float> regrid(b);
      regrid.forward(in, out);
      regrid.backward(out, back);
      long kokkos = 0, heap = 0;
      {
        tessera::testing::KokkosAllocations k;
        tessera::testing::HeapAllocations h;
        for (int step = 0; step < 2; ++step) {
          regrid.forward(in, out);
          regrid.backward(out, back);
        }
        heap = h.stop().total;
        kokkos = k.stop().count;
      }
      EXPECT_EQ(kokkos, 0);
      EXPECT_EQ(heap, 0);
      const Vec moved = gathered(out), returned = gathered(back);
      if (tessera::testing::world_rank() == 0) {
        const Vec want(x.data(), x.data() + x.size());
        EXPECT_EQ(moved, want);
        EXPECT_EQ(returned, want);
      }
    }
}

// A grid of another rank count, a grid that leaves a rank without samples, a regrid after
// the head, a misspelt option: one line naming the node, when the model is built.
TEST(GraphRegrid, BadLayoutsAreClearErrorsNamingTheNode) {
  const int ranks = tessera::testing::world_size();
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, ranks});
  const auto error = [&](const std::string& spec, const Shape4& shape) {
    return tessera::testing::error_message<std::invalid_argument>([&] { Sequential<float> m(spec, shape, grid, 1); });
  };
  const std::string wrong = std::to_string(ranks + 1) + "x1x1";
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=" + wrong + "), relu", {2, 1, 8, 8}),
            "layer 1 (regrid(grid=" + wrong + ")): grid " + wrong + " has " + std::to_string(ranks + 1) +
                " ranks but the model runs on " + std::to_string(ranks));
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=1x2), relu", {2, 1, 8, 8}),
            "layer 1 (regrid(grid=1x2)): grid '1x2' is not of the form NxHxW (e.g. 1x2x2)");
  EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid, relu", {2, 1, 8, 8}),
            "layer 1 (regrid): regrid needs grid=NxHxW, the layout its output moves to (e.g. grid=4x1x1)");
  if (ranks > 1) {
    const std::string samples = std::to_string(ranks) + "x1x1";
    EXPECT_EQ(error("conv(out=2,k=3,pad=1), regrid(grid=" + samples + "), relu", {1, 1, 8, 8}),
              "the output of layer 1 (regrid(grid=" + samples + ")): 1x2x8x8 cannot be distributed on grid " + samples +
                  ": grid " + samples + " cuts samples (N) = 1 into " + std::to_string(ranks) +
                  " parts: some ranks would own nothing");
    EXPECT_EQ(error("conv(out=2,k=3,pad=1), gap, regrid(grid=" + samples + ")", {4, 1, 8, 8}),
              "layer 2 (regrid(grid=" + samples + ")): its input lies on a head grid of 1 ranks; a layout change "
              "needs an input spread over all " + std::to_string(ranks) + " ranks (regrid before the head)");
  }
}

}  // namespace
}  // namespace tessera::models
