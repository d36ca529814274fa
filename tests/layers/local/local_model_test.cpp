// Whole models with `local` (a Le et al. 2012 stage: local -> l2pool -> lcn, then a strided
// local) built by Sequential on every process grid the rank count allows (pn <= 2): the
// loss, output, input gradient and every reduced parameter gradient — tiled slices
// assembled — equal the one-rank result within 1e-5 relative. Then a checkpoint of such a
// model saved on one grid loads exactly on another.
#include <gtest/gtest.h>

#include <mpi.h>

#include <string>
#include <vector>

#include "distarray/gather_scatter.hpp"
#include "layers/grad_reduce.hpp"
#include "layers/loss/mse.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_content.hpp"
#include "models/sequential.hpp"
#include "tests/layers/support/broadcast.hpp"
#include "tests/layers/support/compare.hpp"
#include "tests/layers/support/whole_parameter.hpp"
#include "tests/models/checkpoint_test_support.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers::testing {
namespace {

const std::string kSpec = "local(out=4,k=5,pad=2),l2pool(k=3,stride=1,pad=1),lcn(k=5),local(out=3,k=3,stride=2)";
const Shape4 kInput{2, 3, 13, 11};
const Shape4 kOutput{2, 3, 6, 5};  // the strided local: (13 - 3) / 2 + 1, (11 - 3) / 2 + 1

std::vector<GridDims> model_grids() {
  std::vector<GridDims> grids;
  for (const GridDims& g : tessera::testing::all_grids(tessera::testing::world_size()))
    if (g[0] <= kInput[N]) grids.push_back(g);
  return grids;
}

std::vector<double> gathered(const Tensor<float>& t) {
  const HostArray<float> a = gather(t);
  return {a.data(), a.data() + a.size()};
}

struct ModelStep {
  double loss = 0;
  std::vector<double> output, dx;                    // whole, rank 0 only
  std::vector<std::vector<double>> params, dparams;  // whole, every rank
};

ModelStep run_model(const ProcessGrid& grid, const HostArray<float>& x, const HostArray<float>& target) {
  models::Sequential<float> model(kSpec, kInput, grid, /*seed=*/5);
  scatter(x, model.input());
  const Tensor<float>& y = model.forward(model.input());
  EXPECT_EQ(y.distribution().global_shape(), kOutput);
  Tensor<float> t(model.output_grid(), y.distribution().global_shape(), {}, "target");
  scatter(target, t);
  ModelStep step;
  step.loss = mse_loss(y, t.owned(), model.output_gradient());
  model.zero_grad();
  const Tensor<float>& dx = model.backward(model.output_gradient());
  reduce_gradients(model.parameters(), grid);
  step.output = gathered(y);
  step.dx = gathered(dx);
  for (Parameter<float>* p : model.parameters()) {
    step.params.push_back(whole_value(*p, grid));
    step.dparams.push_back(whole_grad(*p, grid));
  }
  return step;
}

TEST(LocalModel, EveryGridMatchesOneRank) {
  const bool root = tessera::testing::world_rank() == 0;
  const HostArray<float> x = random_array(kInput, 31), target = random_array(kOutput, 37);
  ModelStep one;
  if (root) {
    const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
    one = run_model(self, x, target);
  }
  MPI_Bcast(&one.loss, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int count = static_cast<int>(one.params.size());
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  one.params.resize(static_cast<std::size_t>(count));
  one.dparams.resize(static_cast<std::size_t>(count));
  for (auto& v : one.params) broadcast(v);
  for (auto& v : one.dparams) broadcast(v);
  ASSERT_EQ(count, 4);  // two local layers, weight and bias each

  for (const GridDims& dims : model_grids()) {
    SCOPED_TRACE(kSpec + " on grid " + format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const ModelStep got = run_model(grid, x, target);
    EXPECT_NEAR(got.loss, one.loss, kTolerance * std::abs(one.loss));
    if (root) {
      EXPECT_LE(relative_error(got.output, one.output), kTolerance);
      EXPECT_LE(relative_error(got.dx, one.dx), kTolerance);
    }
    ASSERT_EQ(got.params.size(), one.params.size());
    for (std::size_t i = 0; i < one.params.size(); ++i) {
      EXPECT_EQ(got.params[i], one.params[i]) << "parameter " << i;  // the slices assemble to the same tensor
      EXPECT_LE(relative_error(got.dparams[i], one.dparams[i]), kTolerance) << "parameter " << i;
    }
  }
}

// Saved on each grid, loaded on the next: a model built from another seed holds afterwards
// exactly the saved model's weights (assembled from its slices), and the file holds them in
// the global layout (Hout, Wout, K, C, kh, kw) whatever grid wrote it.
TEST(LocalModel, CheckpointSavedOnOneGridLoadsOnAnother) {
  tessera::testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const auto grids = model_grids();
  for (std::size_t i = 0; i < grids.size(); ++i) {
    const std::string path = dir.file("local" + std::to_string(i) + ".h5");
    std::vector<std::vector<double>> saved;
    {
      const ProcessGrid grid(MPI_COMM_WORLD, grids[i]);
      models::Sequential<float> model(kSpec, kInput, grid, /*seed=*/5);
      for (Parameter<float>* p : model.parameters()) saved.push_back(whole_value(*p, grid));
      models::save_checkpoint(path, grid, models::checkpoint_content(model.params()));
    }
    const GridDims other = grids[(i + 1) % grids.size()];
    SCOPED_TRACE("saved on " + format_grid(grids[i]) + ", loaded on " + format_grid(other));
    const ProcessGrid grid(MPI_COMM_WORLD, other);
    models::Sequential<float> model(kSpec, kInput, grid, /*seed=*/77);
    models::load_checkpoint(path, grid, models::checkpoint_content(model.params()), models::LoadScope::weights_only);
    const auto params = model.parameters();
    ASSERT_EQ(params.size(), saved.size());
    for (std::size_t k = 0; k < params.size(); ++k) EXPECT_EQ(whole_value(*params[k], grid), saved[k]) << "parameter " << k;

    Hdf5File file(path, Hdf5File::Mode::read, MPI_COMM_WORLD);
    EXPECT_EQ(file.shape("/params/0/weight"), (Dims{13, 11, 4, 3, 5, 5}));
    EXPECT_EQ(file.shape("/params/0/bias"), (Dims{13, 11, 4}));
    EXPECT_EQ(file.shape("/params/3/weight"), (Dims{6, 5, 3, 4, 3, 3}));
    std::vector<float> weight(13 * 11 * 4 * 3 * 5 * 5);
    file.read_block<float>("/params/0/weight", {0, 0, 0, 0, 0, 0}, {13, 11, 4, 3, 5, 5}, weight.data());
    EXPECT_EQ(std::vector<double>(weight.begin(), weight.end()), saved[0]);
  }
}

}  // namespace
}  // namespace tessera::layers::testing
