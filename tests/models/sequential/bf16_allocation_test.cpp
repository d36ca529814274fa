// A bf16 training step allocates nothing after the first, as an fp32 one does
// (sequential_grids_test.cpp, TrainingStepAllocatesNothingAfterTheFirst): no Kokkos
// allocation in any space and no host heap allocation of Tessera's own, on every grid, for
// a net of the layers that gained a bf16 path with staging buffers of their own — local
// (widened weights, dx staged in fp32), lcn, deconv (bf16 scratch), upsample (fp32 copies
// of dy and dx), gap (fp32 sums) — with cross-entropy and SGD with momentum.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/loss/classification.hpp"
#include "models/optimizer_factory.hpp"
#include "models/sequential.hpp"
#include "models/training_step.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/support/allocation_counter.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::models {
namespace {

using tessera::bf16;

HostArray<bf16> rounded(const HostArray<float>& a) {
  HostArray<bf16> r("rounded", a.extent(0), a.extent(1), a.extent(2), a.extent(3));
  for (std::size_t i = 0; i < a.size(); ++i) r.data()[i] = bf16(a.data()[i]);
  return r;
}

double train_step(Sequential<bf16>& model, TrainingStepOf<bf16>& step, const layers::OwnedLabels& labels) {
  const layers::Tensor<bf16>& out = model.forward(model.input());
  const double loss = layers::classification_stats(out, labels, model.output_gradient()).loss;
  step.backward();
  step.reduce();
  step.update();
  return loss;
}

TEST(Bf16OnGrids, TrainingStepAllocatesNothingAfterTheFirst) {
  const std::string spec =
      "conv(out=4,k=3,pad=1),relu,avgpool(k=2),local(out=3,k=3,pad=1),lcn(k=3),deconv(out=2,k=4,stride=2,pad=1),"
      "upsample(scale=2),relu,gap,linear(out=3)";
  const Shape4 shape{4, 2, 12, 12};
  const std::vector<std::int64_t> labels{2, 0, 1, 2};
  for (const GridDims& dims : tessera::testing::all_grids(tessera::testing::world_size())) {
    SCOPED_TRACE("grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    Sequential<bf16> model(spec, shape, grid, /*seed=*/7);
    scatter(rounded(layers::testing::random_array(shape, 71)), model.input());
    OptimizerSettings chosen;
    chosen.kind = "sgd";
    chosen.lr = 0.01;
    chosen.momentum = 0.9;
    const auto optimizer = make_optimizer<bf16>(chosen, model.parameters(), grid);
    TrainingStepOf<bf16> step(model, grid, *optimizer, /*overlap_allreduce=*/true);
    const Box own = model.output().owned_box();
    Kokkos::View<std::int64_t***, Kokkos::LayoutRight, layers::LossMemorySpace> owned("labels", own.extent(N), 1, 1);
    auto host = Kokkos::create_mirror_view(owned);
    for (std::int64_t n = 0; n < own.extent(N); ++n) host(n, 0, 0) = labels[own.lo[N] + n];
    Kokkos::deep_copy(owned, host);
    const layers::OwnedLabels by_label(owned);

    tessera::testing::KokkosAllocations warm_up;
    const double first = train_step(model, step, by_label);  // everything is allocated here
    EXPECT_GT(warm_up.stop().count, 0) << "the counter saw nothing (the profiling hook is not live)";
    tessera::testing::KokkosAllocations kokkos;
    const double second = train_step(model, step, by_label);
    const tessera::testing::KokkosAllocations::Counts counted = kokkos.stop();
    EXPECT_EQ(counted.count, 0) << "Kokkos allocations in a bf16 step after the first, e.g. " << counted.labels;
    EXPECT_TRUE(std::isfinite(first) && std::isfinite(second));
    EXPECT_NE(first, second) << "the optimizer moved nothing";

    tessera::testing::HeapAllocations heap(tessera::testing::kBuildLibraryAllocations);
    train_step(model, step, by_label);
    const tessera::testing::HeapAllocations::Counts heap_count = heap.stop();
    EXPECT_EQ(heap_count.ours, 0) << "host heap allocations outside the build's libraries in a bf16 step after the first "
                                     "(TESSERA_HEAP_TRACE=1 prints their stacks)";
  }
}

}  // namespace
}  // namespace tessera::models
