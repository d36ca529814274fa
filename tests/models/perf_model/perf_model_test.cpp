// The performance model on one process: the grids it chooses can run the model (product =
// P, no empty tile, no parameters after a spatially split head), more bandwidth or compute
// never predicts a slower step, measured timings scale with the tile, and the choices
// follow the obvious cases (data parallel for small images and large batches, spatial for
// one large image, row cuts before column cuts, whose halos pack as runs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/perf_model.hpp"
#include "models/prediction_table.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::models {
namespace {

const char* const kFcn = "conv(out=8,k=3,pad=1),relu,conv(out=8,k=3,pad=2,dilation=2),relu,conv(out=1,k=3,pad=1)";
const char* const kClassifier =
    "conv(out=4,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),conv(out=6,k=3,pad=1),relu,flatten,linear(out=4)";

Machine two_node_machine() {
  Machine m = Machine::h100_node();
  m.ranks_per_node = 4;
  m.devices_per_node = 4;
  return m;
}

// Every activation of `perf` cut by `grid` leaves every rank some cells.
void expect_no_empty_tile(const PerfModel& perf, const GridDims& grid, const std::string& where) {
  bool head = false;
  for (std::size_t i = 0; i <= perf.size(); ++i) {
    if (i > 0 && perf.shape(i)[H] == 1 && perf.shape(i)[W] == 1) head = true;  // linear / gap outputs
    const GridDims dims = head ? GridDims{grid[0], 1, 1} : grid;
    const Distribution d(perf.shape(i), dims);
    for (int r = 0; r < d.ranks(); ++r) EXPECT_FALSE(d.owned_box(r).empty()) << where << ", activation " << i;
  }
}

TEST(PerfModel, FactorizationsAreEveryGridOfTheRankCount) {
  const std::vector<GridDims> grids = factorizations(12);
  EXPECT_EQ(grids.size(), 18u);  // ordered triples with product 12
  for (const GridDims& g : grids) EXPECT_EQ(g[0] * g[1] * g[2], 12);
  EXPECT_EQ(factorizations(1), (std::vector<GridDims>{{1, 1, 1}}));
  // Against every (pn, ph) pair, in order, for the counts a test can afford.
  for (int ranks = 1; ranks <= 360; ++ranks) {
    std::vector<GridDims> all;
    for (int pn = 1; pn <= ranks; ++pn)
      for (int ph = 1; pn * ph <= ranks; ++ph)
        if (ranks % (pn * ph) == 0) all.push_back({pn, ph, ranks / (pn * ph)});
    EXPECT_EQ(factorizations(ranks), all) << ranks << " ranks";
  }
  // A billion ranks at once, not after minutes: 2^9 * 5^9 splits into three ordered factors
  // in 55 ways for each prime, 3,025 grids.
  const std::vector<GridDims> billion = factorizations(1000000000);
  EXPECT_EQ(billion.size(), 3025u);
  EXPECT_EQ(billion.front(), (GridDims{1, 1, 1000000000}));
  EXPECT_EQ(billion.back(), (GridDims{1000000000, 1, 1}));
}

TEST(PerfModel, ChosenGridIsValid) {
  struct Case {
    const char* model;
    Shape4 input;
  };
  const Case cases[] = {{kFcn, {1, 1, 64, 48}},  {kFcn, {4, 1, 32, 32}},     {kFcn, {3, 1, 9, 7}},
                        {kClassifier, {12, 1, 12, 12}}, {"denoise-dilated", {2, 1, 96, 96}}};
  for (const Case& c : cases) {
    PerfModel perf(c.model, c.input, two_node_machine());
    for (int ranks : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
      const std::string where = std::string(c.model) + " on " + std::to_string(ranks) + " ranks";
      const std::vector<StepPrediction> ranking = perf.ranking(ranks);
      ASSERT_FALSE(ranking.empty()) << where;
      const GridDims g = ranking.front().grid;
      EXPECT_EQ(g[0] * g[1] * g[2], ranks) << where;
      EXPECT_FALSE(perf.why_invalid(g)) << where;
      expect_no_empty_tile(perf, g, where + ", grid " + format_grid(g));
      for (std::size_t i = 1; i < ranking.size(); ++i) EXPECT_LE(ranking[i - 1].total_s(), ranking[i].total_s()) << where;
      EXPECT_EQ(perf.best(ranks).grid, g) << where;
    }
  }
}

TEST(PerfModel, InvalidGridsAreNamedAndNeverRanked) {
  PerfModel thin(kFcn, {1, 1, 6, 6}, Machine::cpu_core());
  EXPECT_NE(thin.why_invalid({1, 8, 1}).value_or("").find("cannot be distributed on grid 1x8x1"), std::string::npos);
  EXPECT_NE(thin.why_invalid({2, 1, 1}).value_or("").find("the model's input"), std::string::npos);  // batch 1
  for (const StepPrediction& p : thin.ranking(8)) EXPECT_FALSE(thin.why_invalid(p.grid)) << format_grid(p.grid);
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { thin.predict({1, 8, 1}); }).find("grid 1x8x1"),
            std::string::npos);
  // A weighted layer after the head would count its gradient once per spatial replica.
  PerfModel after_head("conv(out=2,k=3,pad=1),gap,conv(out=2,k=1)", {4, 1, 8, 8}, Machine::cpu_core());
  EXPECT_NE(after_head.why_invalid({1, 2, 1}).value_or("").find("after the head"), std::string::npos);
  EXPECT_FALSE(after_head.why_invalid({2, 1, 1}));
  EXPECT_EQ(after_head.best(2).grid, (GridDims{2, 1, 1}));
  PerfModel one_image(kFcn, {1, 1, 2, 2}, Machine::cpu_core());
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { one_image.best(9); }).find("no process grid of 9 ranks"),
            std::string::npos);
}

TEST(PerfModel, MoreBandwidthOrComputeIsNeverSlower) {
  PerfModel perf("denoise-dilated", {2, 1, 256, 192}, two_node_machine());
  for (int ranks : {2, 4, 8}) {
    for (const GridDims& g : factorizations(ranks)) {
      if (perf.why_invalid(g)) continue;
      const double base = perf.predict(g).total_s();
      struct Faster {
        const char* field;
        double value;
      };
      const Machine m = two_node_machine();
      for (const Faster& f : {Faster{"intra_bandwidth", m.intra_node.bandwidth}, Faster{"inter_bandwidth", m.inter_node.bandwidth},
                              Faster{"pack_bandwidth", m.pack_bandwidth}, Faster{"flop_rate", m.flop_rate},
                              Faster{"memory_bandwidth", m.memory_bandwidth},
                              Faster{"staging_bandwidth", m.staging_bandwidth}}) {
        Machine faster = m;
        set_machine_field(faster, f.field, 4 * f.value);
        PerfModel quick("denoise-dilated", {2, 1, 256, 192}, faster);
        EXPECT_LE(quick.predict(g).total_s(), base) << f.field << " x4 on " << format_grid(g);
      }
      Machine slower_links = two_node_machine();
      slower_links.intra_node.latency_s *= 10, slower_links.inter_node.latency_s *= 10;
      PerfModel laggy("denoise-dilated", {2, 1, 256, 192}, slower_links);
      EXPECT_GE(laggy.predict(g).total_s(), base) << "latency x10 on " << format_grid(g);
    }
  }
}

// An exchange posts every message at once: its latency counts once per link, however many
// neighbours a rank has. Nothing hidden (overlap 0), bytes and packing free: each of kFcn's
// three convolutions exchanges forward and backward, 6 latencies, on a row of 3 ranks (2
// neighbours) as in the middle of a 3x3 grid (8).
TEST(PerfModel, AnExchangesLatencyCountsOncePerLink) {
  Machine m = Machine::cpu_core();
  m.ranks_per_node = 9;
  m.devices_per_node = 9;
  m.overlap = 0;
  m.intra_node.latency_s = 1e-3;
  m.intra_node.bandwidth = 1e30, m.pack_bandwidth = 1e30, m.pack_run_s = 0;
  PerfModel perf(kFcn, {1, 1, 96, 96}, m);
  EXPECT_NEAR(perf.predict({1, 3, 1}).halo_s, 6e-3, 1e-9);
  EXPECT_NEAR(perf.predict({1, 3, 3}).halo_s, 6e-3, 1e-9);
}

TEST(PerfModel, ObviousChoices) {
  // Small images, a batch to share: data parallel has no halo at all.
  PerfModel classifier(kClassifier, {64, 1, 28, 28}, Machine::cpu_core());
  EXPECT_EQ(classifier.best(4).grid, (GridDims{4, 1, 1}));
  // One large image: only space can be split; rows pack as long runs, columns one cell each.
  Machine m = Machine::cpu_core();
  m.ranks_per_node = 2;
  m.devices_per_node = 2;
  PerfModel image(kFcn, {1, 1, 512, 512}, m);
  EXPECT_EQ(image.best(2).grid, (GridDims{1, 2, 1}));
  const StepPrediction rows = image.predict({1, 2, 1}), columns = image.predict({1, 1, 2});
  EXPECT_EQ(rows.halo_bytes, columns.halo_bytes);  // a square image: the same cells move
  EXPECT_LT(rows.compute_s, columns.compute_s);    // ... but packing columns costs more
  // Twice the ranks on the same devices: a quarter of the image each at half the speed
  // costs about what half of it at full speed does.
  m.ranks_per_node = 4;
  PerfModel crowded(kFcn, {1, 1, 512, 512}, m);
  EXPECT_GT(crowded.predict({1, 4, 1}).compute_s, 0.9 * image.predict({1, 2, 1}).compute_s);
}

TEST(PerfModel, MeasuredTimingsScaleWithTheTile) {
  Machine m = Machine::cpu_core();
  m.ranks_per_node = 4;
  m.devices_per_node = 4;
  m.kernel_overhead_s = 0;
  m.pack_bandwidth = 1e30, m.pack_run_s = 0, m.memory_bandwidth = 1e30;  // only the layers' timings count
  m.intra_node = m.inter_node = Link{0, 1e30};
  PerfModel perf(kFcn, {1, 1, 400, 400}, m);
  std::vector<LayerTiming> timings;
  double whole = 0;
  for (std::size_t i = 0; i < perf.size(); ++i) {
    timings.push_back({0.01 * static_cast<double>(i + 1), 0.02 * static_cast<double>(i + 1)});
    whole += 0.03 * static_cast<double>(i + 1);
  }
  // Probe: a quarter of the image, on one device.
  perf.use_timings(timings, {1, 1, 200, 200});
  EXPECT_NEAR(perf.predict({1, 1, 1}).compute_s, 4 * whole, 1e-9);
  EXPECT_NEAR(perf.predict({1, 2, 2}).compute_s, whole, 1e-9);
  EXPECT_NEAR(perf.predict({1, 4, 1}).compute_s, whole, 1e-9);
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { perf.use_timings({}, {1, 1, 200, 200}); })
                .find("0 layer timings for 5 layers"),
            std::string::npos);
}

TEST(PerfModel, AllreduceCostsOnlyWithSeveralRanks) {
  const Link link{1e-6, 1e9};
  EXPECT_EQ(allreduce_seconds(1e6, 1, link), 0);
  EXPECT_NEAR(allreduce_seconds(1e6, 2, link), 2e-6 + 1e-3, 1e-12);
  EXPECT_LT(allreduce_seconds(1e6, 4, link), allreduce_seconds(2e6, 4, link));
  // The host's own per-byte work adds to the wire's: at 0.5 GB/s, 1 MB on 2 ranks moves 1 MB
  // each way, 2 ms more.
  const Link with_host_work{1e-6, 1e9, 5e8};
  EXPECT_NEAR(allreduce_seconds(1e6, 2, with_host_work), 2e-6 + 1e-3 + 2e-3, 1e-12);
  EXPECT_NEAR(allreduce_seconds(1e6, 4, with_host_work) - allreduce_seconds(1e6, 4, link), 1.5e6 / 5e8, 1e-12);
  PerfModel perf(kFcn, {4, 1, 32, 32}, Machine::cpu_core());
  EXPECT_EQ(perf.predict({1, 1, 1}).allreduce_s, 0);
  EXPECT_EQ(perf.predict({4, 1, 1}).allreduce_bytes, perf.parameter_count() * 4);
  EXPECT_GT(perf.predict({4, 1, 1}).allreduce_s, 0);
}

TEST(PerfModel, MachineFieldsAreCheckedByName) {
  Machine m = Machine::cpu_core();
  set_machine_field(m, "intra_bandwidth", 3e9);
  EXPECT_EQ(m.intra_node.bandwidth, 3e9);
  set_machine_field(m, "ranks_per_node", 8);
  EXPECT_EQ(m.ranks_per_node, 8);
  set_machine_field(m, "inter_reduce_bandwidth", 5e8);
  EXPECT_EQ(m.inter_node.reduce_bandwidth, 5e8);
  set_machine_field(m, "inter_reduce_bandwidth", 0);  // none: the link's own time only
  EXPECT_EQ(m.inter_node.reduce_bandwidth, 0);
  set_machine_field(m, "devices_per_rank", std::string("0.5 "));  // as a machine file's line
  EXPECT_EQ(m.devices_per_rank, 0.5);
  for (const std::string text : {"", "fast", "1e9x", "0.5 0.6"})
    EXPECT_EQ(testing::error_message<std::invalid_argument>([&] { set_machine_field(m, "devices_per_rank", text); }),
              "machine field devices_per_rank: '" + text + "' is not a number")
        << "'" << text << "'";
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { set_machine_field(m, "bandwidth", 1); })
                .find("unknown machine field 'bandwidth' (fields: flop_rate, "),
            std::string::npos);
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { set_machine_field(m, "flop_rate", 0); })
                .find("must be positive"),
            std::string::npos);
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { set_machine_field(m, "overlap", 1.5); })
                .find("[0, 1]"),
            std::string::npos);
  EXPECT_NE(testing::error_message<std::invalid_argument>([&] { set_machine_field(m, "ranks_per_node", 2.5); })
                .find("whole number"),
            std::string::npos);
}


// Graphs: the residual ResNet preset is predicted on every grid (a graph spec no longer
// falls back); a regrid's grid must have the model's rank count and leave no rank empty;
// a stage split shows as two layouts whose times add up, its all-to-all costs time and
// bytes only when the layouts differ, and the late stage costs the same whatever the
// early stage's grid (it runs on the same layout).
TEST(PerfModel, GraphsAndStageSplits) {
  const Shape4 input{8, 3, 256, 256};
  PerfModel resnet("resnet(depth=18,width=8,classes=10)", input, Machine::h100_node());
  EXPECT_EQ(resnet.ranking(4).size(), factorizations(4).size());
  EXPECT_EQ(resnet.inputs(0), std::vector<std::size_t>{0});

  PerfModel split("resnet(depth=18,width=8,classes=10,late=4x1x1,from=3)", input, Machine::h100_node());
  EXPECT_EQ(split.size(), resnet.size() + 1);
  EXPECT_EQ(split.why_invalid({1, 2, 4}).value_or(""),
            "layer 34 (regrid(grid=4x1x1)): grid 4x1x1 has 4 ranks but the model runs on 8");
  PerfModel too_few("resnet(depth=18,width=8,classes=10,late=4x1x1,from=3)", {2, 3, 256, 256}, Machine::h100_node());
  EXPECT_NE(too_few.why_invalid({1, 2, 2}).value_or("").find("the output of layer 34 (regrid(grid=4x1x1)) cannot be "
                                                            "distributed on grid 4x1x1"),
            std::string::npos)
      << too_few.why_invalid({1, 2, 2}).value_or("");

  const StepPrediction same = split.predict({4, 1, 1}), spatial = split.predict({1, 2, 2});
  EXPECT_EQ(same.regrid_bytes, 0);
  EXPECT_EQ(same.regrid_s, 0);
  EXPECT_GT(spatial.regrid_bytes, 0);
  EXPECT_GT(spatial.regrid_s, 0);
  const auto layouts = layout_times(spatial);
  ASSERT_EQ(layouts.size(), 2u);
  EXPECT_EQ(layouts[0].first, (GridDims{1, 2, 2}));
  EXPECT_EQ(layouts[1].first, (GridDims{4, 1, 1}));
  double layers_s = 0;
  for (const LayerPrediction& l : spatial.layers) layers_s += l.compute_s + l.halo_s + l.regrid_s;
  EXPECT_NEAR(layouts[0].second + layouts[1].second, layers_s, 1e-9 * layers_s);
  const auto late = [](const StepPrediction& p) {
    double s = 0;
    for (std::size_t i = 35; i < p.layers.size(); ++i) s += p.layers[i].compute_s + p.layers[i].halo_s;
    return s;
  };
  EXPECT_NEAR(late(spatial), late(split.predict({1, 1, 4})), 1e-9 * late(spatial));
  const std::string table = prediction_table(split, 4);
  EXPECT_NE(table.find("| 1x2x2 | "), std::string::npos) << table;
  EXPECT_NE(table.find("1x2x2 "), std::string::npos) << table;
  EXPECT_NE(table.find(", 4x1x1 "), std::string::npos) << table;
  EXPECT_EQ(testing::error_message<std::invalid_argument>(
                [&] { PerfModel("resnet(depth=18,late=4x1x1,from=5)", input, Machine::h100_node()); }),
            "resnet: from must be a stage 1 to 4, got 5");
}

}  // namespace
}  // namespace tessera::models
