// A checkpoint saved on one process grid loads exactly on another: replicated and tiled
// tensors, optimizer state and metadata; the file follows PyTorch's state_dict naming in
// global layout; a weights-only load touches nothing but /params.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distarray/hdf5_file.hpp"
#include "layers/optim/adam.hpp"
#include "layers/optim/sgd.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_content.hpp"
#include "models/checkpoint_slots.hpp"
#include "models/model_buffers.hpp"
#include "models/sequential.hpp"
#include "tests/models/checkpoint_test_support.hpp"

namespace tessera::models {
namespace {

using testing::all_grids;
using testing::world_size;

// Both kinds of tensor: whole on every rank, and cut like the spatial tiles.
CheckpointContent mixed_content(const ProcessGrid& grid) {
  CheckpointContent content;
  content.tensors = {testing::replicated_slot("/params/0/weight", {4, 3, 3, 3}),
                     testing::replicated_slot("/params/0/bias", {4}),
                     testing::tiled_slot("/params/3/weight", grid, {5, 7, 6}),
                     testing::tiled_slot("/optimizer/3/weight/momentum_buffer", grid, {5, 7, 6})};
  return content;
}

// Only one copy of each element may reach the file: give every other copy different
// values, so the test fails if a replica's slice is written instead.
void spoil_copies_that_are_not_written(const CheckpointContent& content, const ProcessGrid& grid) {
  for (const TensorSlot& slot : content.tensors) {
    const bool written = slot.sharing == layers::Sharing::replicated ? grid.rank() == 0 : grid.coord()[0] == 0;
    if (!written) testing::fill_constant(slot, -1.0f);
  }
}

// Parameters laid out as a model would hold them: a replicated conv weight and bias, and a
// tiled locally connected weight.
struct ModelParameters {
  layers::Parameter<float> conv_weight{"weight", {4, 3, 3, 3}, "conv0"};
  layers::Parameter<float> conv_bias{"bias", {4}, "conv0"};
  layers::Parameter<float> local_weight;

  explicit ModelParameters(const ProcessGrid& grid) {
    const TensorSlot tile = testing::tiled_slot("local3.weight", grid, {5, 7, 6});
    local_weight.name = "weight";
    local_weight.shape = tile.shape;
    local_weight.offset = tile.offset;
    local_weight.extent = tile.extent;
    local_weight.sharing = layers::Sharing::tiled;
    local_weight.value = tile.values;
    local_weight.grad = layers::Parameter<float>::View("local3.weight.grad", tile.values.extent(0));
  }
  LayerParameters list() { return {{"0", &conv_weight}, {"0", &conv_bias}, {"3", &local_weight}}; }
  std::vector<layers::Parameter<float>*> pointers() { return {&conv_weight, &conv_bias, &local_weight}; }
};

CheckpointMeta example_meta() {
  CheckpointMeta meta;
  meta.step = 42;
  meta.model_spec = "conv(out=4,k=3),relu,local(out=6,k=3)";
  meta.seed = 1234;
  meta.rng_state = "5489 1 2 3";
  meta.optimizer_options = "lr=0.001,betas=(0.9,0.999)";
  return meta;
}

TEST(Checkpoint, SavedOnOneGridLoadsExactlyOnEvery) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const auto grids = all_grids(world_size());
  for (std::size_t i = 0; i < grids.size(); ++i) {
    const std::string path = dir.file("grid" + std::to_string(i) + ".h5");
    {
      ProcessGrid saver(MPI_COMM_WORLD, grids[i]);
      const CheckpointContent saved = mixed_content(saver);
      testing::fill_expected(saved);
      spoil_copies_that_are_not_written(saved, saver);
      save_checkpoint(path, saver, saved);
    }
    ProcessGrid loader(MPI_COMM_WORLD, grids[(i + 1) % grids.size()]);
    const CheckpointContent loaded = mixed_content(loader);
    for (const TensorSlot& slot : loaded.tensors) testing::fill_constant(slot, 0.0f);
    load_checkpoint(path, loader, loaded);
    EXPECT_EQ(testing::unexpected_slots(loaded), std::vector<std::string>{})
        << "saved on " << format_grid(grids[i]) << ", loaded on " << format_grid(loader.dims());
  }
}

TEST(Checkpoint, OptimizerStateAndMetaRoundTrip) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("adam.h5");
  const auto grids = all_grids(world_size());
  {
    ProcessGrid grid(MPI_COMM_WORLD, grids.front());
    ModelParameters params(grid);
    layers::Adam<float> adam(params.pointers());
    for (std::size_t k = 0; k < adam.state().size(); ++k) adam.state()[k].step = 7 + static_cast<std::int64_t>(k);
    const CheckpointContent content = checkpoint_content(params.list(), &adam, example_meta());
    testing::fill_expected(content);
    save_checkpoint(path, grid, content);
  }
  ProcessGrid grid(MPI_COMM_WORLD, grids.back());
  ModelParameters params(grid);
  layers::Adam<float> adam(params.pointers());
  const CheckpointContent content = checkpoint_content(params.list(), &adam);
  const CheckpointMeta meta = load_checkpoint(path, grid, content);

  EXPECT_EQ(content.tensors.size(), 9u);  // 3 parameters + 2 Adam buffers each
  EXPECT_EQ(testing::unexpected_slots(content), std::vector<std::string>{});
  for (std::size_t k = 0; k < adam.state().size(); ++k) EXPECT_EQ(adam.state()[k].step, 7 + static_cast<std::int64_t>(k));
  const CheckpointMeta expected = example_meta();
  EXPECT_EQ(meta.step, expected.step);
  EXPECT_EQ(meta.model_spec, expected.model_spec);
  EXPECT_EQ(meta.seed, expected.seed);
  EXPECT_EQ(meta.rng_state, expected.rng_state);
  EXPECT_EQ(meta.optimizer, "adam");
  EXPECT_EQ(meta.optimizer_options, expected.optimizer_options);
}

// Names and shapes as torch.nn.Sequential's state_dict has them ("0.weight" -> /params/0/weight),
// and values in global row-major (OIHW) order whatever the grid.
TEST(Checkpoint, FileFollowsTheStateDictLayout) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("sgd.h5");
  ProcessGrid grid(MPI_COMM_WORLD, all_grids(world_size()).back());
  layers::Parameter<float> conv_weight("weight", {4, 3, 3, 3}, "conv0"), conv_bias("bias", {4}, "conv0");
  layers::Parameter<float> linear_weight("weight", {10, 36}, "linear2"), linear_bias("bias", {10}, "linear2");
  layers::SgdOptions options;
  options.momentum = 0.9;
  layers::Sgd<float> sgd({&conv_weight, &conv_bias, &linear_weight, &linear_bias}, options);
  const CheckpointContent content = checkpoint_content(
      {{"0", &conv_weight}, {"0", &conv_bias}, {"2", &linear_weight}, {"2", &linear_bias}}, &sgd, example_meta());
  testing::fill_expected(content);
  save_checkpoint(path, grid, content);

  Hdf5File file(path, Hdf5File::Mode::read, MPI_COMM_WORLD);
  const std::vector<std::pair<std::string, Dims>> float_datasets = {
      {"/params/0/weight", {4, 3, 3, 3}},
      {"/params/0/bias", {4}},
      {"/params/2/weight", {10, 36}},
      {"/params/2/bias", {10}},
      {"/optimizer/0/weight/momentum_buffer", {4, 3, 3, 3}},
      {"/optimizer/2/bias/momentum_buffer", {10}}};
  for (const auto& [name, shape] : float_datasets) {
    EXPECT_TRUE(file.has(name)) << name;
    if (!file.has(name)) continue;
    EXPECT_EQ(file.shape(name), shape) << name;
    EXPECT_EQ(file.element_kind(name), ElementKind::float32) << name;
  }
  for (const char* name : {"/optimizer/0/weight/step", "/meta/step", "/meta/seed"}) {
    EXPECT_TRUE(file.has(name)) << name;
    if (file.has(name)) {
      EXPECT_EQ(file.element_kind(name), ElementKind::int64) << name;
    }
  }
  EXPECT_EQ(file.read_string("/meta/format"), kCheckpointFormat);
  EXPECT_EQ(file.read_string("/meta/optimizer"), "sgd");
  EXPECT_EQ(file.read_string("/meta/model_spec"), example_meta().model_spec);

  std::vector<float> weight(4 * 3 * 3 * 3);
  file.read_block<float>("/params/0/weight", {0, 0, 0, 0}, {4, 3, 3, 3}, weight.data());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < weight.size(); ++i)
    wrong += weight[i] != testing::expected_value(0, static_cast<std::int64_t>(i));
  EXPECT_EQ(wrong, 0u);
}

// --init-from: parameters only; the optimizer's state and counters stay as they were, and
// a file without optimizer state will do.
TEST(Checkpoint, WeightsOnlyLoadLeavesOptimizerAlone) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const auto grids = all_grids(world_size());
  const std::string with_state = dir.file("with_state.h5"), weights = dir.file("weights.h5");
  {
    ProcessGrid grid(MPI_COMM_WORLD, grids.front());
    ModelParameters params(grid);
    layers::Adam<float> adam(params.pointers());
    for (auto& state : adam.state()) state.step = 5;
    const CheckpointContent content = checkpoint_content(params.list(), &adam, example_meta());
    testing::fill_expected(content);
    save_checkpoint(with_state, grid, content);
    save_checkpoint(weights, grid, checkpoint_content(params.list()));
  }
  ProcessGrid grid(MPI_COMM_WORLD, grids.back());
  for (const std::string& path : {with_state, weights}) {
    ModelParameters params(grid);
    layers::Adam<float> adam(params.pointers());
    const CheckpointContent content = checkpoint_content(params.list(), &adam);
    load_checkpoint(path, grid, content, LoadScope::weights_only);
    for (std::size_t i = 0; i < content.tensors.size(); ++i) {
      const TensorSlot& slot = content.tensors[i];
      if (slot.dataset.starts_with("/params/"))
        EXPECT_EQ(testing::count_unexpected(slot, static_cast<int>(i)), 0) << path << " " << slot.dataset;
      else
        EXPECT_EQ(testing::count_not_equal(slot, 0.0f), 0) << path << " " << slot.dataset;
    }
    for (const auto& state : adam.state()) EXPECT_EQ(state.step, 0) << path;
  }
}

// A chain's checkpoint names are the layer indices of the first format: a file written with
// those names by hand, as earlier builds wrote them, loads into the chain model unchanged.
TEST(Checkpoint, ChainCheckpointOfTheIndexNamingStillLoads) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("index-names.h5");
  const std::vector<std::pair<std::string, Dims>> datasets = {
      {"/params/0/weight", {4, 3, 3, 3}}, {"/params/0/bias", {4}}, {"/params/1/weight", {4}},
      {"/params/1/bias", {4}},           {"/params/1/running_mean", {4}}, {"/params/1/running_var", {4}},
      {"/params/3/weight", {2, 4, 3, 3}}, {"/params/3/bias", {2}}};
  const auto value = [](std::size_t dataset, std::int64_t i) { return 0.25f + 0.01f * static_cast<float>(dataset * 100 + i); };
  {
    Hdf5File file(path, Hdf5File::Mode::create, MPI_COMM_WORLD);
    const bool root = tessera::testing::world_rank() == 0;
    file.write_string("/meta/format", kCheckpointFormat);
    for (std::size_t d = 0; d < datasets.size(); ++d) {
      const Dims& shape = datasets[d].second;
      std::vector<float> values(static_cast<std::size_t>(element_count(shape)));
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = value(d, static_cast<std::int64_t>(i));
      file.write_block<float>(datasets[d].first, shape, Dims(shape.size(), 0), root ? shape : Dims(shape.size(), 0),
                              values.data());
    }
    file.close();
  }
  ProcessGrid grid(MPI_COMM_WORLD, GridDims{1, world_size(), 1});  // rows: a batch of 2 splits only so far
  Sequential<float> model("conv(out=4,k=3,pad=1),batchnorm(stats=all),relu,conv(out=2,k=3,pad=1)", {2, 3, 8, 8}, grid, 1);
  ModelBuffers buffers(model);
  CheckpointContent content = checkpoint_content(model.params());
  buffers.add_to(content);
  load_checkpoint(path, grid, content, LoadScope::weights_only);
  buffers.restore();
  ASSERT_EQ(content.tensors.size(), datasets.size());
  // Parameters come before buffers in the content; match the slots by name, not order.
  for (const TensorSlot& slot : content.tensors) {
    std::size_t d = 0;
    while (d < datasets.size() && datasets[d].first != slot.dataset) ++d;
    ASSERT_LT(d, datasets.size()) << "the model asks for " << slot.dataset << ", which the index naming lacks";
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot.values);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < host.extent(0); ++i) wrong += host(i) != value(d, static_cast<std::int64_t>(i));
    EXPECT_EQ(wrong, 0u) << slot.dataset;
  }
  auto& norm = dynamic_cast<layers::BatchNorm2d<float>&>(model.layer(1));
  EXPECT_FLOAT_EQ(static_cast<float>(norm.running_var()[3]), value(5, 3));
}

}  // namespace
}  // namespace tessera::models
