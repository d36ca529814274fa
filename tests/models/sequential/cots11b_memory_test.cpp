// cots-11b (docs/models.md, "The Le et al. (2012) family"): what a rank allocates for it in
// fp32 and in bf16, from Sequential::memory_plan, which builds the model without
// allocating its 10.9e9 parameters. The expected bytes are worked out here from the layer
// shapes alone: three stages of local(out=25,k=18) -> l2pool(k=5,stride=1,pad=2) -> lcn(k=5)
// on 3x200x200, sides 200 -> 183 -> 166 -> 149 (H - 18 + 1).
//
// Per parameter: fp32 holds value and gradient (4 + 4 bytes); bf16 a bf16 value and an fp32
// master and gradient (2 + 4 + 4). The local weights are tiled with the output (each rank
// its output tile's rows x columns of filters), so on P ranks each holds its tile's share.
// On one rank, per sample, training lays the activations and gradients out by liveness
// (models/graph.hpp, "Memory"). Every activation is read again in backward (local and
// l2pool read their inputs, lcn its input and output), so none is freed before the loss,
// and the most are alive one step later, at lcn 2's backward: every activation — the
// input (3 x 200^2) and the output (149^2 x 25), which have blocks of their own, and per
// stage the local output with l2pool's 2-cell padding halo, (S+4)^2 x 25, the l2pool
// output and the lcn output, S^2 x 25 each (lcn's window is clipped to the image: no
// halo) — and two gradients of 149^2 x 25 (the output's and lcn 2's dx). The plan reaches
// that bound up to each array's start at a multiple of 16 elements: elements, in the
// model's element type (2 bytes in bf16, 4 in fp32).
// The test prints the figures docs/models.md quotes:
//   ctest --test-dir build -R models_cots11b_memory -V | grep cots-11b
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <cstdio>

#include "distarray/node_memory.hpp"
#include "models/sequential.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models {
namespace {

constexpr std::int64_t kMaps = 25, kField = 18, kInputChannels = 3, kSide = 200;
constexpr std::array<std::int64_t, 3> kSides{183, 166, 149};  // each stage's output side
const Shape4 kOneSample{1, kInputChannels, kSide, kSide};

// Filters and biases of stage s at one output position: K x (C x R x R + 1).
std::int64_t per_position(std::size_t s) {
  const std::int64_t channels = s == 0 ? kInputChannels : kMaps;
  return kMaps * (channels * kField * kField + 1);
}

// The balanced block b of `parts` over `extent` cells (the first extent % parts blocks one longer).
std::int64_t block(std::int64_t extent, std::int64_t parts, std::int64_t b) {
  return extent / parts + (b < extent % parts ? 1 : 0);
}

// This rank's parameter elements on a 1 x ph x pw grid at coordinates (h, w).
std::int64_t parameters_of_tile(std::int64_t ph, std::int64_t pw, std::int64_t h, std::int64_t w) {
  std::int64_t total = 0;
  for (std::size_t s = 0; s < kSides.size(); ++s)
    total += block(kSides[s], ph, h) * block(kSides[s], pw, w) * per_position(s);
  return total;
}

// The most activation and gradient elements of one sample alive on one rank at one step
// (module comment), and the padding at most 15 elements per array (20: ten activations and
// their gradients) may add to it.
std::int64_t one_rank_activation_elements() {
  const std::int64_t output = kMaps * kSides.back() * kSides.back();
  std::int64_t cells = kInputChannels * kSide * kSide + 2 * output;  // the input; two gradients
  for (const std::int64_t s : kSides) cells += kMaps * ((s + 4) * (s + 4) + 2 * s * s);
  return cells;
}
constexpr std::int64_t kMostPadding = 20 * 15;

void print(const char* precision, const char* where, const MemoryPlan& plan) {
  std::string split;
  for (const auto& [name, bytes] : plan.by_precision())
    split += (split.empty() ? "" : ", ") + format_bytes(bytes) + " " + name;
  std::printf("[   INFO   ] cots-11b 3x200x200, batch 1, %s, %s: planned %lld bytes = %s (%s); parameters %lld, "
              "activations %lld\n",
              precision, where, static_cast<long long>(plan.total()), format_bytes(plan.total()).c_str(), split.c_str(),
              static_cast<long long>(plan.total(MemoryUse::parameters)),
              static_cast<long long>(plan.total(MemoryUse::activations)));
}

TEST(Cots11bMemory, OneRankHoldsTheWholeModel) {
  if (tessera::testing::world_rank() != 0) GTEST_SKIP() << "one rank's plan: rank 0 alone";
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const MemoryPlan fp32 = Sequential<float>::memory_plan("cots-11b", kOneSample, self);
  const MemoryPlan bf16 = Sequential<tessera::bf16>::memory_plan("cots-11b", kOneSample, self);
  const std::int64_t parameters = parameters_of_tile(1, 1, 0, 0);
  ASSERT_EQ(parameters, 10'891'656'350);  // docs/models.md's count, and le2012_test's
  EXPECT_EQ(fp32.parameter_elements(), parameters);
  EXPECT_EQ(bf16.parameter_elements(), parameters);
  EXPECT_EQ(fp32.total(MemoryUse::parameters), 8 * parameters);
  EXPECT_EQ(bf16.total(MemoryUse::parameters), 10 * parameters);
  const std::int64_t cells = one_rank_activation_elements();
  EXPECT_GE(fp32.total(MemoryUse::activations), 4 * cells);
  EXPECT_LE(fp32.total(MemoryUse::activations), 4 * (cells + kMostPadding));
  EXPECT_EQ(bf16.total(MemoryUse::activations) * 2, fp32.total(MemoryUse::activations));
  EXPECT_EQ(fp32.total(), 8 * parameters + fp32.total(MemoryUse::activations));
  EXPECT_EQ(bf16.total(), 10 * parameters + bf16.total(MemoryUse::activations));
  print("fp32", "1 rank", fp32);
  print("bf16", "1 rank", bf16);
}

// On 4 ranks (grid 1x2x2) each holds its tile's filters: rank (h, w) the rows and columns of
// block h and w of every stage's output; together every parameter once. Activations: the
// tiles plus their halos, in bf16 exactly half the fp32 bytes.
TEST(Cots11bMemory, FourRanksHoldTheirTiles) {
  if (tessera::testing::world_size() != 4) GTEST_SKIP() << "the 1x2x2 grid needs 4 ranks";
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 2, 2});
  const MemoryPlan fp32 = Sequential<float>::memory_plan("cots-11b", kOneSample, grid);
  const MemoryPlan bf16 = Sequential<tessera::bf16>::memory_plan("cots-11b", kOneSample, grid);
  const GridCoord at = grid.coord_of(grid.rank());
  const std::int64_t mine = parameters_of_tile(2, 2, at[1], at[2]);
  EXPECT_EQ(fp32.parameter_elements(), mine);
  EXPECT_EQ(bf16.parameter_elements(), mine);
  EXPECT_EQ(fp32.total(MemoryUse::parameters), 8 * mine);
  EXPECT_EQ(bf16.total(MemoryUse::parameters), 10 * mine);
  std::int64_t all = bf16.parameter_elements();
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(all, parameters_of_tile(1, 1, 0, 0));
  EXPECT_EQ(2 * bf16.total(MemoryUse::activations), fp32.total(MemoryUse::activations));
  // At least the owned quarter of the one-rank plan, at most all of it.
  const std::int64_t cells = bf16.total(MemoryUse::activations) / 2;
  EXPECT_GT(4 * cells, one_rank_activation_elements());
  EXPECT_LT(cells, one_rank_activation_elements());
  if (grid.rank() == 0) {  // rank 0 holds the longest blocks: the largest share
    print("fp32", "rank 0 of 4 (grid 1x2x2)", fp32);
    print("bf16", "rank 0 of 4 (grid 1x2x2)", bf16);
  }
}

}  // namespace
}  // namespace tessera::models
