// The performance model's halo traffic is the traffic of the real exchanges: for layers with
// symmetric, strided, dilated and wider-than-a-tile windows, on every grid of the launched
// rank count, each rank's predicted fill bytes equal what a halo::Exchange built as
// layers::Windowed builds it sends and receives, and the accumulate (backward) moves the
// same boxes the other way. For a graph (a tensor read by two windows, a residual add, a
// regrid to another layout and back): the step's halo bytes are those of exchanges built on
// the real model's activations, and its regrid bytes those of the real regrid's plan — in fp32
// and in bf16 (half the bytes; the gradient allreduce fp32 in both).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distarray/redistribution.hpp"
#include "halo/halo.hpp"
#include "layers/windowed.hpp"
#include "models/layer_registry.hpp"
#include "models/perf_model.hpp"
#include "models/sequential.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models {
namespace {

struct Case {
  const char* layer;
  const char* options;
  Shape4 input;
};

// Odd sizes; k=11 reaches past thin tiles, so some halos come from ranks two tiles away.
const Case kCases[] = {
    {"conv", "out=2,k=3,pad=1", {2, 3, 13, 11}},
    {"conv", "out=2,k=5,pad=2,stride=2", {2, 2, 15, 13}},
    {"conv", "out=2,k=3,pad=4,dilation=4", {1, 2, 17, 14}},
    {"conv", "out=1,k=11,pad=5", {1, 1, 16, 12}},
    {"maxpool", "k=3,stride=2", {2, 2, 13, 13}},
};

constexpr std::int64_t kBytes = sizeof(float);

// Whether `dims` leaves every rank some cells of `shape` (no model runs on a grid that does not).
bool fits(const Shape4& shape, const GridDims& dims) {
  try {
    Distribution(shape, dims);
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

TEST(PerfModelHalo, PredictedBytesEqualTheExchangesBytes) {
  const int ranks = testing::world_size();
  for (const Case& c : kCases) {
    auto layer = LayerRegistry::global().find(c.layer).make(c.options, c.input, 1);
    for (const GridDims& dims : testing::all_grids(ranks)) {
      ProcessGrid grid(MPI_COMM_WORLD, dims);
      const std::string where = std::string(c.layer) + "(" + c.options + ") on " + format_grid(dims) + ", rank " +
                                std::to_string(grid.rank());
      if (!fits(c.input, dims) || !fits(layer->output_shape(c.input), dims)) continue;
      const Distribution input(c.input, dims);
      const HaloTraffic predicted = fill_traffic(*layer, input, grid.rank());
      auto x = layers::make_input(grid, c.input, *layer);
      const halo::WindowRule rule = layers::window_rule(*layer, c.input);
      if (layers::windows_inside_owned(*layer, input)) {
        EXPECT_EQ(predicted.send_cells + predicted.receive_cells, 0) << where;
        continue;  // Windowed makes no exchange
      }
      auto fill = halo::make_exchange(x, rule, halo::Mode::fill);
      EXPECT_EQ(predicted.send_cells * kBytes, fill.send_bytes()) << where;
      EXPECT_EQ(predicted.receive_cells * kBytes, fill.receive_bytes()) << where;
      EXPECT_EQ(predicted.send_messages, static_cast<int>(fill.plan().sends().size())) << where;
      EXPECT_EQ(predicted.receive_messages, static_cast<int>(fill.plan().receives().size())) << where;
      auto accumulate = halo::make_exchange(x, rule, halo::Mode::accumulate);
      EXPECT_EQ(predicted.receive_cells * kBytes, accumulate.send_bytes()) << where;
      EXPECT_EQ(predicted.send_cells * kBytes, accumulate.receive_bytes()) << where;
    }
  }
}

// The step prediction's halo bytes are the fill and accumulate bytes of its rank, summed
// over the layers that exchange.
TEST(PerfModelHalo, StepHaloBytesAreTheLayersExchanges) {
  const int ranks = testing::world_size();
  const Shape4 input{2, 1, 21, 19};
  const char* spec = "conv(out=3,k=3,pad=1),relu,conv(out=3,k=3,pad=2,dilation=2),relu,conv(out=1,k=3,pad=1)";
  PerfModel perf(spec, input, Machine::cpu_core());
  for (const GridDims& dims : testing::all_grids(ranks)) {
    if (perf.why_invalid(dims)) continue;
    const StepPrediction p = perf.predict(dims);
    std::int64_t expected = 0;
    for (std::size_t i = 0; i < perf.size(); ++i) {
      const HaloTraffic t = fill_traffic(perf.layer(i), Distribution(perf.shape(i), dims), p.rank);
      expected += (t.send_cells + t.receive_cells) * kBytes;
    }
    EXPECT_EQ(p.halo_bytes, expected) << format_grid(dims);
    if (dims[1] * dims[2] == 1) EXPECT_EQ(p.halo_bytes, 0) << format_grid(dims);
    else EXPECT_GT(p.halo_bytes, 0) << format_grid(dims);
  }
}


// A graph with two readers of one tensor, an add, and a stage on another layout.
std::string graph_spec(const GridDims& other, const GridDims& model) {
  return "a: conv(out=3,k=3,pad=1)[input], b: conv(out=3,k=5,pad=2)[input], add[a, b], s: relu, regrid(grid=" +
         format_grid(other) + "), conv(out=3,k=3,pad=2,dilation=2), maxpool(k=3,stride=2,pad=1), regrid(grid=" +
         format_grid(model) + "), conv(out=2,k=3,pad=1)";
}

// In element type T (float, or bf16 with set_precision("bf16")): the halos and regrids
// move T, the gradient allreduce fp32 in both.
template <class T>
void expect_graph_step_bytes_of_the_real_model(const char* precision) {
  constexpr std::int64_t element = sizeof(T);
  const int ranks = testing::world_size();
  const Shape4 input{4, 2, 17, 15};
  for (const GridDims& dims : testing::all_grids(ranks))
    for (const GridDims& other : testing::all_grids(ranks)) {
      const std::string spec = graph_spec(other, dims);
      SCOPED_TRACE(format_grid(dims) + " then " + format_grid(other));
      PerfModel perf(spec, input, Machine::cpu_core());
      perf.set_precision(precision);
      ASSERT_EQ(perf.why_invalid(dims), std::nullopt);
      const ProcessGrid grid(MPI_COMM_WORLD, dims);
      Sequential<T> model(spec, input, grid, 1);
      ASSERT_EQ(model.size(), perf.size());
      std::int64_t halo = 0, regrid = 0;
      for (std::size_t i = 0; i < model.size(); ++i) {
        const std::size_t a = model.node_inputs(i)[0];
        ASSERT_EQ(perf.inputs(i), model.node_inputs(i));
        const layers::Tensor<T>& x = model.activation(a);
        ASSERT_EQ(perf.activation_grid(a, dims), x.grid().dims()) << "node " << i;
        if (model.layer(i).output_grid()) {
          const Distribution& from = x.distribution();
          const Distribution& to = model.activation(i + 1).distribution();
          const Redistribution<T> plan(x.grid(), from, model.activation(i + 1).grid(), to);
          const std::int64_t own = from.owned_box(grid.rank()).intersect(to.owned_box(grid.rank())).size();
          const HaloTraffic t = regrid_traffic(from, to, grid.rank());
          EXPECT_EQ(t.send_cells + own, plan.send_elements()) << "node " << i;
          EXPECT_EQ(t.receive_cells + own, plan.receive_elements()) << "node " << i;
          regrid += (t.send_cells + t.receive_cells) * element;
          continue;
        }
        if (model.node_inputs(i).size() != 1 || layers::windows_inside_owned(model.layer(i), x.distribution())) continue;
        auto fill = halo::make_exchange(x, layers::window_rule(model.layer(i), x.distribution().global_shape()),
                                        halo::Mode::fill);
        halo += fill.send_bytes() + fill.receive_bytes();
      }
      // The prediction is the slowest representative rank's; compare on that rank.
      const StepPrediction p = perf.predict(dims);
      std::int64_t want[2] = {grid.rank() == p.rank ? halo : 0, grid.rank() == p.rank ? regrid : 0};
      MPI_Allreduce(MPI_IN_PLACE, want, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(p.halo_bytes, want[0]);
      EXPECT_EQ(p.regrid_bytes, want[1]);
      if (ranks > 1) {
        EXPECT_EQ(p.allreduce_bytes, model.parameter_count() * static_cast<std::int64_t>(sizeof(float)));
      }
      if (ranks > 1 && other != dims) {
        EXPECT_GT(p.regrid_bytes, 0);
      }
    }
}

TEST(PerfModelHalo, GraphStepBytesAreTheRealModelsExchangesAndRegrids) {
  expect_graph_step_bytes_of_the_real_model<float>("fp32");
}

// bf16 (--precision bf16): half the halo and regrid bytes of fp32, the same allreduce bytes.
TEST(PerfModelHalo, Bf16GraphStepBytesAreTheRealBf16ModelsExchangesAndRegrids) {
  expect_graph_step_bytes_of_the_real_model<bf16>("bf16");
}

TEST(PerfModelHalo, PrecisionIsFp32OrBf16) {
  PerfModel perf("conv(out=2,k=3,pad=1)", {1, 1, 8, 8}, Machine::cpu_core());
  try {
    perf.set_precision("fp16");
    FAIL() << "fp16 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("precision must be fp32 or bf16, got 'fp16'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::models
