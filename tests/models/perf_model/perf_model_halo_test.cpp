// The performance model's halo traffic is the traffic of the real exchanges: for layers with
// symmetric, strided, dilated and wider-than-a-tile windows, on every grid of the launched
// rank count, each rank's predicted fill bytes equal what a halo::Exchange built as
// layers::Windowed builds it sends and receives, and the accumulate (backward) moves the
// same boxes the other way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "halo/halo.hpp"
#include "layers/windowed.hpp"
#include "models/layer_registry.hpp"
#include "models/perf_model.hpp"
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

}  // namespace
}  // namespace tessera::models
