// Graph models (models/graph.hpp) on one rank against a naive double-precision interpreter
// of the graph (forward) whose gradients are central finite differences in double: the
// engine's backward of the graph checked against finite differences.
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/models/graph/graph_test_support.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models::testing {
namespace {

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
// concat, with parameters `p` (in model.params() order) — enough for the graphs of graph_test_support.hpp.
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

}  // namespace
}  // namespace tessera::models::testing
