// Whole models on every process grid the rank count allows (pn <= 2): the loss, the
// logits or output, the input gradient and every reduced parameter gradient equal the
// one-rank result (rank 0 alone on MPI_COMM_SELF) within 1e-5 relative — fashion-cnn with
// cross-entropy on its head grid, and all-conv nets (one with transposed convs) with MSE.
// Then: a training step after the first allocates nothing (TrainingStep, every grid).
#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "tests/layers/support/compare.hpp"
#include "layers/grad_buckets.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/loss/classification.hpp"
#include "layers/loss/cross_entropy.hpp"
#include "layers/loss/mse.hpp"
#include "models/optimizer_factory.hpp"
#include "models/sequential.hpp"
#include "models/training_step.hpp"
#include "tests/support/allocation_counter.hpp"
#include "tests/support/grid_cases.hpp"
#include "tessera_config.hpp"

namespace tessera::models {
namespace {

constexpr double kTolerance = 1e-5;

struct StepResult {
  double loss = 0;
  std::vector<double> output, dx;            // whole arrays, rank 0 only
  std::vector<std::vector<double>> dparams;  // reduced, every rank
};

using tessera::layers::testing::random_array;
using tessera::layers::testing::host_vector;


std::vector<double> gathered(const layers::Tensor<float>& t) {
  const HostArray<float> a = gather(t);
  return {a.data(), a.data() + a.size()};
}

// Class labels of the owned samples of `logits` (N, K, 1, 1).
Kokkos::View<std::int64_t***, Kokkos::LayoutRight, layers::LossMemorySpace> owned_labels(
    const layers::Tensor<float>& logits, const std::vector<std::int64_t>& labels) {
  const Box own = logits.owned_box();
  Kokkos::View<std::int64_t***, Kokkos::LayoutRight, layers::LossMemorySpace> owned("labels", own.extent(N), 1, 1);
  auto host = Kokkos::create_mirror_view(owned);
  for (std::int64_t n = 0; n < own.extent(N); ++n) host(n, 0, 0) = labels[own.lo[N] + n];
  Kokkos::deep_copy(owned, host);
  return owned;
}

// One forward and backward of `spec` on `grid`: cross-entropy against `labels` when given,
// else MSE against `target`.
StepResult run_step(const ProcessGrid& grid, const std::string& spec, const Shape4& shape, const HostArray<float>& x,
                    const std::vector<std::int64_t>& labels, const HostArray<float>& target) {
  Sequential<float> model(spec, shape, grid, /*seed=*/5);
  scatter(x, model.input());
  const layers::Tensor<float>& y = model.forward(model.input());
  layers::Tensor<float>& dy = model.output_gradient();
  StepResult r;
  if (!labels.empty()) {
    r.loss = layers::cross_entropy_loss(y, layers::OwnedLabels(owned_labels(y, labels)), dy);
  } else {
    layers::Tensor<float> t(model.output_grid(), y.distribution().global_shape(), {}, "target");
    scatter(target, t);
    r.loss = layers::mse_loss(y, t.owned(), dy);
  }
  model.zero_grad();
  const layers::Tensor<float>& dx = model.backward(dy);
  layers::reduce_gradients(model.parameters(), grid);
  r.output = gathered(y);
  r.dx = gathered(dx);
  for (layers::Parameter<float>* p : model.parameters()) r.dparams.push_back(host_vector(p->grad));
  return r;
}

void broadcast(std::vector<double>& v) {
  int n = static_cast<int>(v.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  v.resize(static_cast<std::size_t>(n));
  MPI_Bcast(v.data(), n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

// Max difference over max magnitude, the magnitude at least `floor`.
double relative_error(const std::vector<double>& got, const std::vector<double>& want, double floor = 0) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = floor;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale == 0 ? diff : diff / scale;
}

void expect_every_grid_matches_one_rank(const std::string& spec, const Shape4& shape,
                                        const std::vector<std::int64_t>& labels, const HostArray<float>& target) {
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(shape, 31);
  StepResult one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_step(self, spec, shape, x, labels, target);
  }
  MPI_Bcast(&one.loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int count = static_cast<int>(one.dparams.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one.dparams.resize(static_cast<std::size_t>(count));
  for (auto& g : one.dparams) broadcast(g);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(spec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const StepResult got = run_step(grid, spec, shape, x, labels, target);
    EXPECT_NEAR(got.loss, one.loss, kTolerance * std::abs(one.loss));
    if (root) {
      EXPECT_LE(relative_error(got.output, one.output), kTolerance);
      EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
    }
    // A conv bias right before batch norm has a true gradient of zero (the normalisation
    // removes any shift): its one-rank value is rounding noise, so gradients are compared
    // relative to at least the largest gradient of the model.
    double largest = 0;
    for (const auto& g : one.dparams)
      for (const double v : g) largest = std::max(largest, std::abs(v));
    EXPECT_EQ(got.dparams.size(), one.dparams.size());
    for (std::size_t i = 0; i < std::min(got.dparams.size(), one.dparams.size()); ++i)
      EXPECT_LE(relative_error(got.dparams[i], one.dparams[i], largest), kTolerance) << "parameter " << i;
  }
}

TEST(SequentialOnGrids, FashionCnnCrossEntropyMatchesOneRank) {
  expect_every_grid_matches_one_rank("fashion-cnn", {4, 1, 28, 28}, {3, 9, 0, 4}, {});
}

TEST(SequentialOnGrids, AllConvMseMatchesOneRank) {
  const std::string spec =
      "conv(out=4,k=3,pad=1),relu,conv(out=4,k=3,pad=1,stride=2),tanh,upsample(scale=2),conv(out=2,k=3,pad=1)";
  const Shape4 shape{2, 2, 12, 10};
  expect_every_grid_matches_one_rank(spec, shape, {}, random_array(shape, 41));
}

// A U-Net-like encoder/decoder: a strided conv halves the image, a transposed conv brings it
// back — k=4, stride 2, pad 1 and k=3, stride 2, pad 1, out_pad 1 double 6x5 to 12x10;
// k=3, stride 2, pad 1 gives 2H-1, restoring the odd 13x11 the conv made 7x6.
TEST(SequentialOnGrids, ConvDownDeconvUpMatchesOneRank) {
  const std::string down = "conv(out=4,k=3,pad=1,stride=2),relu,";
  const Shape4 even{2, 2, 12, 10}, odd{2, 2, 13, 11};
  expect_every_grid_matches_one_rank(down + "deconv(out=2,k=4,stride=2,pad=1)", even, {}, random_array(even, 59));
  expect_every_grid_matches_one_rank(down + "deconv(out=2,k=3,stride=2,pad=1,out_pad=1)", even, {},
                                     random_array(even, 61));
  expect_every_grid_matches_one_rank(down + "deconv(out=2,k=3,stride=2,pad=1)", odd, {}, random_array(odd, 67));
}

TEST(SequentialOnGrids, DenoiserMatchesOneRank) {
  const Shape4 shape{2, 1, 16, 16};
  expect_every_grid_matches_one_rank("denoise-fcn", shape, {}, random_array(shape, 43));
}

// Heads: global average pooling into a linear classifier, and two stacked linears (the
// second one's parameters are head replicas, counted once by reduce_gradients).
TEST(SequentialOnGrids, GapAndStackedLinearHeadsMatchOneRank) {
  const Shape4 shape{4, 2, 6, 6};
  const std::vector<std::int64_t> labels{1, 0, 2, 1};
  expect_every_grid_matches_one_rank("conv(out=4,k=3,pad=1),relu,gap,linear(out=3)", shape, labels,
                                     random_array(shape, 47));
  expect_every_grid_matches_one_rank("flatten,linear(out=8),relu,linear(out=3)", shape, labels,
                                     random_array(shape, 53));
}

// One NaN pixel reaches the loss on every grid, so the trainer's non-finite-loss guard
// stops the run: relu and max pooling propagate NaN as PyTorch does instead of mapping it to
// 0 (which made an all-NaN data file train to a finite loss).
TEST(SequentialOnGrids, NanInputGivesNonFiniteLoss) {
  const Shape4 shape{2, 1, 8, 8};
  HostArray<float> x = random_array(shape, 71);
  x(1, 0, 5, 2) = std::numeric_limits<float>::quiet_NaN();
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    if (dims[0] > 2) continue;
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const StepResult r = run_step(grid, "conv(out=4,k=3,pad=1),relu,maxpool(k=2),flatten,linear(out=3)", shape, x,
                                  {2, 0}, {});
    EXPECT_FALSE(std::isfinite(r.loss)) << r.loss;
  }
}

// Reducing gradients in buckets during backward (GradientBuckets, tiny buckets so that
// every layer starts its own) gives the sums one fused allreduce after backward gives:
// replicated conv parameters over the grid, head replicas over the sample group.
TEST(SequentialOnGrids, BucketsDuringBackwardEqualOneReductionAfter) {
  const Shape4 shape{4, 2, 8, 8};
  const std::vector<std::int64_t> labels{1, 0, 2, 1};
  const HostArray<float> x = random_array(shape, 59);
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<float> model("conv(out=4,k=3,pad=1),relu,gap,linear(out=6),relu,linear(out=3)", shape, grid, 5);
    // A forward pass before each backward: backward's gradients take the memory of the
    // activations it has read (models/graph.hpp, "Memory").
    const auto forward = [&] {
      scatter(x, model.input());
      const layers::Tensor<float>& logits = model.forward(model.input());
      layers::cross_entropy_loss(logits, owned_labels(logits, labels), model.output_gradient());
    };
    forward();
    model.zero_grad();
    model.backward(model.output_gradient());
    layers::reduce_gradients(model.parameters(), grid);
    std::vector<std::vector<double>> after;
    for (layers::Parameter<float>* p : model.parameters()) after.push_back(host_vector(p->grad));

    forward();
    model.zero_grad();
    layers::GradientBuckets<float> buckets(grid, /*bucket_bytes=*/16);
    model.backward(model.output_gradient(), [&](std::size_t i) {
      for (layers::Parameter<float>* p : model.layer(i).params()) buckets.ready(p);
    });
    EXPECT_GE(buckets.finish(), 0.0);
    const auto params = model.parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      EXPECT_LE(relative_error(host_vector(params[i]->grad), after[i], 1e-6), 1e-6) << params[i]->name;
  }
}

// Other parameters after the head would be counted once per replica: rejected on every
// rank alike where ph * pw > 1, accepted where the grid is not split spatially.
TEST(SequentialOnGrids, OtherParametersAfterTheHeadNeedAnUnsplitGrid) {
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const auto build = [&] { Sequential<float>("flatten,linear(out=8),batchnorm,linear(out=3)", {4, 2, 6, 6}, grid, 1); };
    if (dims[1] * dims[2] > 1) {
      EXPECT_THROW(build(), std::invalid_argument);
    } else {
      EXPECT_NO_THROW(build());
    }
  }
}

// le2012's parameters are all tiled with the output: the spatial ranks of one sample group
// share them out, each sample group holds a copy.
TEST(SequentialOnGrids, Le2012ParameterBytesAreSharedOutOverTiles) {
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<float> net("le2012(maps=1,stride=1)", {4, 1, 60, 60}, grid, 1);
    std::int64_t mine = net.local_parameter_bytes(), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all, dims[0] * 2 * 4 * net.parameter_count());
  }
}

// The memory plan, made without allocating, names exactly what the built model allocates
// on this rank: parameters (tiled slices included) and activations with their halos, on
// grids with head grids, halos of several widths and tiled weights.
TEST(SequentialOnGrids, MemoryPlanEqualsWhatTheModelAllocates) {
  const std::vector<std::pair<std::string, Shape4>> models{
      {"fashion-cnn", {6, 1, 28, 28}},
      {"conv(out=3,k=5,pad=2),relu,maxpool(k=3,stride=2),conv(out=4,k=3,pad=1,stride=2),gap,linear(out=5)",
       {4, 2, 23, 17}},
      {"le2012(maps=1,stride=1)", {4, 1, 60, 60}}};
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (const auto& [spec, shape] : models) {
      SCOPED_TRACE(format_grid(dims) + " " + spec);
      const MemoryPlan plan = Sequential<float>::memory_plan(spec, shape, grid);
      Sequential<float> net(spec, shape, grid, 1);
      EXPECT_EQ(plan.total(MemoryUse::parameters), net.local_parameter_bytes());
      EXPECT_EQ(plan.total(MemoryUse::activations), net.local_activation_bytes());
      EXPECT_EQ(plan.total(), net.local_parameter_bytes() + net.local_activation_bytes());
    }
  }
}

// Planning a model far larger than the machine allocates nothing (it would be killed
// otherwise), and check_memory refuses it on every rank with the figures and the tensors
// that take the room.
TEST(SequentialOnGrids, OversizedModelIsRefusedBeforeAllocating) {
  const ProcessGrid grid(MPI_COMM_WORLD, {1, 1, tessera::testing::world_size()});
  const MemoryPlan plan = Sequential<float>::memory_plan("conv(out=400000000,k=3,pad=1),flatten,linear(out=10)",
                                                         {2, 1, 12, 12}, grid);
  const MemoryItem& conv_weight = plan.items().front();
  EXPECT_EQ(conv_weight.what, "layer 0 (conv(out=400000000,k=3,pad=1)) weight and its gradient");
  EXPECT_EQ(conv_weight.shape, "400000000x1x3x3");
  EXPECT_EQ(conv_weight.bytes, std::int64_t{400000000} * 9 * 4 * 2);
  const std::optional<MemoryBudget> budget = memory_budget(MPI_COMM_WORLD, std::nullopt);
  ASSERT_TRUE(budget.has_value()) << "no MemAvailable on this machine";
  try {
    check_memory(plan, budget, MPI_COMM_WORLD);
    FAIL() << "a plan of " << plan.total() << " bytes passed a budget of " << budget->bytes;
  } catch (const MemoryExceeded& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 needs "), std::string::npos) << what;
    // The share: of the node's memory on a CPU build, of the GPU's free memory on a CUDA build.
    EXPECT_TRUE(what.find("ranks on this node") != std::string::npos || what.find("ranks on it") != std::string::npos)
        << what;
    EXPECT_NE(what.find("largest: layer 2 (linear(out=10)) weight and its gradient 10x57600000000 (4.19 TiB)"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line";
  }
  // A limit given by the user wins over the detected one, both ways.
  EXPECT_NO_THROW(check_memory(plan, memory_budget(MPI_COMM_WORLD, plan.total()), MPI_COMM_WORLD));
  EXPECT_THROW(check_memory(plan, memory_budget(MPI_COMM_WORLD, plan.total() - 1), MPI_COMM_WORLD), MemoryExceeded);
}

// Only the last rank is over its budget: every rank throws, with that rank's figures.
TEST(SequentialOnGrids, RanksAgreeOnAMemoryRefusal) {
  const int last = tessera::testing::world_size() - 1;
  MemoryPlan plan;
  plan.add("the input", "1x1x1x1", tessera::testing::world_rank() == last ? 2048 : 512);
  const std::optional<MemoryBudget> budget = MemoryBudget{1024, "a test budget"};
  try {
    check_memory(plan, budget, MPI_COMM_WORLD);
    FAIL() << "no rank refused";
  } catch (const MemoryExceeded& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(last) + " needs 2.00 KiB but may use 1.00 KiB"),
              std::string::npos)
        << e.what();
  }
}

// One training step as the trainer takes it (models/trainer.cpp, minus reading the batch):
// forward, the loss into the output gradient, backward with the gradient reduction, the
// optimizer. Returns the loss.
double train_step(Sequential<float>& model, TrainingStep& step, const layers::OwnedLabels* labels,
                  const layers::Tensor<float>* targets) {
  const layers::Tensor<float>& out = model.forward(model.input());
  const double loss = labels ? layers::classification_stats(out, *labels, model.output_gradient()).loss
                             : layers::mse_loss(out, targets->owned(), model.output_gradient());
  step.backward();
  step.reduce();
  step.update();
  return loss;
}

// After a warm-up step, a training step makes no Kokkos allocation in any memory space
// (device or host: scratch, statistics, buckets and the collectives' staging, halo buffers all
// persist) — on every grid, for fashion-cnn (conv, batchnorm, relu, maxpool, linear) and a
// net with avgpool, local, deconv and gap; cross-entropy with SGD (momentum) and the
// reduction bucketed during backward, MSE with Adam and the reduction fused after it.
//
// Host heap allocations (operator new, counted by tests/support/allocation_counter.hpp):
// none of Tessera's own. The only ones left are made inside oneDNN's
// dnnl_primitive_execute, which builds a map of the arguments it is handed on every call;
// no caller can avoid that map, so they are counted apart (by the library's frames on the
// stack) and printed. CUDA builds count cuDNN's and cuBLAS's own apart likewise (the
// legacy cuDNN API allocates inside every call: the first GPU run counted ~1400 a step);
// what remains there was traced on that run to Kokkos 3.4's default CUDA instance and to
// nvcc's wrappers of host-device lambdas (docs/performance.md, "The first GPU run").
constexpr const char* kAllocatingLibrary = tessera::testing::kBuildLibraryAllocations;

TEST(SequentialOnGrids, TrainingStepAllocatesNothingAfterTheFirst) {
  struct Net {
    std::string spec;
    Shape4 shape;
  };
  const std::vector<Net> nets{
      {"fashion-cnn", {4, 1, 28, 28}},
      {"conv(out=4,k=3,pad=1),relu,avgpool(k=2),local(out=3,k=3,pad=1),deconv(out=2,k=4,stride=2,pad=1),relu,gap,"
       "linear(out=3)",
       {4, 2, 12, 12}}};
  struct Setting {
    bool cross_entropy;
    const char* optimizer;
    bool overlap_allreduce;
  };
  const std::vector<Setting> settings{{true, "sgd", true}, {false, "adam", false}};
  const std::vector<std::int64_t> labels{2, 0, 1, 2};
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (const Net& net : nets)
      for (const Setting& setting : settings) {
        SCOPED_TRACE(net.spec + " on grid " + format_grid(dims) + (setting.cross_entropy ? ", cross-entropy, " : ", mse, ") +
                     setting.optimizer + (setting.overlap_allreduce ? ", buckets during backward" : ", reduction after"));
        Sequential<float> model(net.spec, net.shape, grid, /*seed=*/7);
        scatter(random_array(net.shape, 71), model.input());
        OptimizerSettings chosen;
        chosen.kind = setting.optimizer;
        chosen.lr = 0.01;
        chosen.momentum = chosen.kind == "sgd" ? 0.9 : 0.0;
        const auto optimizer = make_optimizer(chosen, model.parameters(), grid);
        TrainingStep step(model, grid, *optimizer, setting.overlap_allreduce);
        const layers::Tensor<float>& out = model.output();
        const layers::OwnedLabels owned = owned_labels(out, labels);
        layers::Tensor<float> targets(model.output_grid(), out.distribution().global_shape(), {}, "targets");
        scatter(random_array(out.distribution().global_shape(), 73), targets);
        const layers::OwnedLabels* by_label = setting.cross_entropy ? &owned : nullptr;

        tessera::testing::KokkosAllocations warm_up;
        const double first = train_step(model, step, by_label, &targets);  // everything is allocated here
        EXPECT_GT(warm_up.stop().count, 0) << "the counter saw nothing (the profiling hook is not live)";
        tessera::testing::KokkosAllocations kokkos;
        const double second = train_step(model, step, by_label, &targets);
        const tessera::testing::KokkosAllocations::Counts counted = kokkos.stop();
        EXPECT_EQ(counted.count, 0) << "Kokkos allocations in a step after the first, e.g. " << counted.labels;
        EXPECT_TRUE(std::isfinite(first) && std::isfinite(second));
        EXPECT_NE(first, second) << "the optimizer moved nothing";

        tessera::testing::HeapAllocations heap(kAllocatingLibrary);
        train_step(model, step, by_label, &targets);
        const tessera::testing::HeapAllocations::Counts heap_count = heap.stop();
        EXPECT_EQ(heap_count.ours, 0) << "host heap allocations outside oneDNN in a step after the first "
                                         "(TESSERA_HEAP_TRACE=1 prints their stacks)";
        if (tessera::testing::world_rank() == 0)
          std::printf("[   INFO   ] %s on %s, %s: %ld host heap allocations in one step, all inside oneDNN's execute\n",
                      net.spec.substr(0, 11).c_str(), format_grid(dims).c_str(),
                      setting.cross_entropy ? "cross-entropy" : "mse", heap_count.total - heap_count.ours);
      }
  }
}

}  // namespace
}  // namespace tessera::models
