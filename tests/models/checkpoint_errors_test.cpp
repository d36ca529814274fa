// What goes wrong around a checkpoint is one clear error, the same on every rank, and
// never costs the previous checkpoint: unwritable places, saves that fail half way,
// truncated or foreign files, missing datasets, wrong shapes, types and formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "distarray/hdf5_file.hpp"
#include "layers/optim/adam.hpp"
#include "layers/optim/sgd.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_content.hpp"
#include "models/checkpoint_layout.hpp"
#include "tests/models/checkpoint_test_support.hpp"

namespace tessera::models {
namespace {

using testing::error_of;
using testing::is_error_with;
using testing::world_rank;
using testing::world_size;

CheckpointContent small_content() {
  CheckpointContent content;
  content.tensors = {testing::replicated_slot("/params/0/weight", {8, 3, 3, 3}),
                     testing::replicated_slot("/params/0/bias", {8})};
  testing::fill_expected(content);
  return content;
}

// A checkpoint at `path`, saved by the default grid.
class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    save_checkpoint(path, grid, small_content());
  }

  testing::ScratchDir dir;
  std::string path = dir.file("ckpt.h5");
  ProcessGrid grid{MPI_COMM_WORLD, default_grid(world_size())};
};

TEST_F(CheckpointErrors, UnwritableLocationFailsUpFrontAndKeepsTheOldFile) {
  const std::string before = testing::file_bytes(path);
  const std::string under_a_file = "/dev/null/ckpt.h5", missing_dir = dir.file("missing/ckpt.h5");
  EXPECT_TRUE(is_error_with(error_of([&] { check_writable(under_a_file, grid.comm()); }),
                            {"cannot write checkpoint '/dev/null/ckpt.h5'", "Not a directory"}));
  EXPECT_TRUE(is_error_with(error_of([&] { check_writable(missing_dir, grid.comm()); }),
                            {"cannot write checkpoint '" + missing_dir + "'", "No such file or directory"}));
  EXPECT_TRUE(is_error_with(error_of([&] { check_writable(dir.file(""), grid.comm()); }), {"is a directory"}));
  EXPECT_TRUE(is_error_with(error_of([&] { save_checkpoint(under_a_file, grid, small_content()); }),
                            {"cannot write checkpoint '/dev/null/ckpt.h5'"}));
  EXPECT_TRUE(is_error_with(error_of([&] { save_checkpoint(missing_dir, grid, small_content()); }),
                            {"No such file or directory"}));
  EXPECT_NO_THROW(check_writable(dir.file("next.h5"), grid.comm()));
  EXPECT_EQ(testing::file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});
}

// The second save fails while writing (two slots claim one dataset with different
// shapes): the first checkpoint stays byte for byte, and no temporary is left.
TEST_F(CheckpointErrors, FailedSaveLeavesTheEarlierFileAndNoTemporary) {
  const std::string before = testing::file_bytes(path);
  CheckpointContent clash = small_content();
  clash.tensors.push_back(testing::replicated_slot("/params/0/bias", {9}));
  EXPECT_TRUE(is_error_with(error_of([&] { save_checkpoint(path, grid, clash); }),
                            {"cannot save checkpoint '" + path + "'", "/params/0/bias", "(8)", "(9)"}));
  EXPECT_EQ(testing::file_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});

  const CheckpointContent loaded = small_content();
  for (const TensorSlot& slot : loaded.tensors) testing::fill_constant(slot, 0.0f);
  load_checkpoint(path, grid, loaded);
  EXPECT_EQ(testing::unexpected_slots(loaded), std::vector<std::string>{});
}

// Tiles that do not cover the tensor would leave unwritten holes in the file.
TEST_F(CheckpointErrors, TilesThatLeaveHolesAreRefused) {
  CheckpointContent holes;
  holes.tensors = {testing::tiled_slot("/params/1/weight", grid, {4, 4, 2})};
  holes.tensors[0].shape = {5, 4, 2};
  EXPECT_TRUE(is_error_with(error_of([&] { save_checkpoint(path, grid, holes); }),
                            {"cannot save checkpoint", "'/params/1/weight'", "32 of its 40 elements"}));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ckpt.h5"});
}

TEST_F(CheckpointErrors, SlotWithTooFewValuesIsRefused) {
  CheckpointContent wrong = small_content();
  wrong.tensors[1].values = layers::Parameter<float>::View("short", 3);
  EXPECT_TRUE(is_error_with(error_of([&] { save_checkpoint(path, grid, wrong); }),
                            {"slot '/params/0/bias' holds 3 values for a block of (8)"}));
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, wrong); }),
                            {"cannot load checkpoint", "slot '/params/0/bias'"}));
}

TEST_F(CheckpointErrors, MissingOrForeignFileIsNamed) {
  const std::string missing = dir.file("none.h5"), text = dir.file("notes.h5");
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(missing, grid, small_content()); }),
                            {"checkpoint '" + missing + "' does not exist"}));
  if (world_rank() == 0) std::ofstream(text) << "not HDF5 at all\n";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(text, grid, small_content()); }),
                            {"corrupt or truncated checkpoint '" + text + "'"}));
}

TEST_F(CheckpointErrors, TruncatedFileIsACleanError) {
  if (world_rank() == 0) std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, small_content()); }),
                            {"corrupt or truncated checkpoint '" + path + "'"}));
}

TEST_F(CheckpointErrors, MissingDatasetIsNamed) {
  CheckpointContent more = small_content();
  more.tensors.push_back(testing::replicated_slot("/params/5/weight", {2, 2}));
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, more); }),
                            {"checkpoint '" + path + "' has no dataset '/params/5/weight'"}));
}

TEST_F(CheckpointErrors, WrongShapeNamesBothShapes) {
  CheckpointContent other;
  other.tensors = {testing::replicated_slot("/params/0/weight", {4, 3, 3, 3})};
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, other); }),
                            {"'/params/0/weight'", "shape (8, 3, 3, 3)", "expected (4, 3, 3, 3)"}));
}

// A file whose meta says `format`, holding /params/0/bias as float64.
void write_foreign_file(const std::string& file_path, const std::string& format) {
  Hdf5File file(file_path, Hdf5File::Mode::create, MPI_COMM_WORLD);
  const bool root = world_rank() == 0;
  const std::int64_t zero = 0;
  const std::vector<double> bias(8, 1.0);
  file.write_string(layout::format, format);
  for (const char* name : {layout::step, layout::seed}) file.write_block<std::int64_t>(name, {1}, {0}, {root ? 1 : 0}, &zero);
  for (const char* name : {layout::model_spec, layout::rng_state, layout::optimizer, layout::optimizer_options})
    file.write_string(name, "");
  file.write_block<double>("/params/0/bias", {8}, {0}, {root ? 8 : 0}, bias.data());
  file.close();
}

// As a file written from PyTorch may be: the format and the parameters, nothing else.
TEST_F(CheckpointErrors, OnlyWeightsOnlyLoadsAcceptAFileWithoutMeta) {
  const std::string minimal = dir.file("from_pytorch.h5");
  CheckpointContent bias;
  bias.tensors = {testing::replicated_slot("/params/0/bias", {8})};
  {
    Hdf5File file(minimal, Hdf5File::Mode::create, MPI_COMM_WORLD);
    file.write_string(layout::format, kCheckpointFormat);
    testing::fill_expected(bias);
    const auto values = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bias.tensors[0].values);
    file.write_block<float>("/params/0/bias", {8}, {0}, {world_rank() == 0 ? 8 : 0}, values.data());
    file.close();
  }
  testing::fill_constant(bias.tensors[0], 0.0f);
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(minimal, grid, bias); }),
                            {"checkpoint '" + minimal + "' has no dataset '/meta/step'"}));
  const CheckpointMeta meta = load_checkpoint(minimal, grid, bias, LoadScope::weights_only);
  EXPECT_EQ(testing::unexpected_slots(bias), std::vector<std::string>{});
  EXPECT_EQ(meta.step, 0);
}

TEST_F(CheckpointErrors, WrongFormatTypeOrOptimizerIsRefused) {
  const std::string old_format = dir.file("old.h5"), doubles = dir.file("doubles.h5");
  write_foreign_file(old_format, "tessera-checkpoint-0");
  write_foreign_file(doubles, kCheckpointFormat);
  CheckpointContent bias;
  bias.tensors = {testing::replicated_slot("/params/0/bias", {8})};
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(old_format, grid, bias); }),
                            {"has format 'tessera-checkpoint-0'", kCheckpointFormat}));
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(doubles, grid, bias); }),
                            {"'/params/0/bias' is not float32"}));

  const std::string plain = dir.file("plain.h5");
  {
    Hdf5File file(plain, Hdf5File::Mode::create, MPI_COMM_WORLD);
    file.write_string("/images_note", "a data file, not a checkpoint");
  }
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(plain, grid, bias); }),
                            {"'" + plain + "' is not a Tessera checkpoint"}));

  // Saved with SGD's state, resumed with Adam.
  layers::Parameter<float> weight("weight", {8, 3, 3, 3}, "conv0"), b("bias", {8}, "conv0");
  layers::Sgd<float> sgd({&weight, &b});
  save_checkpoint(path, grid, checkpoint_content({{"0", &weight}, {"0", &b}}, &sgd));
  layers::Adam<float> adam({&weight, &b});
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, checkpoint_content({{"0", &weight}, {"0", &b}}, &adam)); }),
                            {"holds 'sgd' state", "'adam'"}));
}

// Values no run writes: a negative step count (the file's or an optimizer's) and a negative
// variance or second moment, which would become NaN at the first update. Each is one line
// naming the dataset (and the element).
TEST_F(CheckpointErrors, NegativeCountsAndSecondMomentsAreRefused) {
  layers::Parameter<float> weight("weight", {8, 3, 3, 3}, "conv0"), b("bias", {8}, "conv0");
  layers::Adam<float> adam({&weight, &b});
  const auto content = [&] { return checkpoint_content({{"0", &weight}, {"0", &b}}, &adam); };
  const auto set_first = [](const auto& view, float value) {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
    host(0) = value;
    Kokkos::deep_copy(view, host);
  };

  ASSERT_EQ(adam.state()[1].buffers[1].name, "exp_avg_sq");
  set_first(adam.state()[1].buffers[1].view, -0.5f);
  save_checkpoint(path, grid, content());
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, content()); }),
                            {"/optimizer/0/bias/exp_avg_sq[0] is -0.5", "cannot be negative"}));
  set_first(adam.state()[1].buffers[1].view, 0.5f);
  set_first(adam.state()[1].buffers[0].view, -0.5f);  // a first moment may be negative
  save_checkpoint(path, grid, content());
  EXPECT_NO_THROW(load_checkpoint(path, grid, content()));

  adam.state()[0].step = -3;
  save_checkpoint(path, grid, content());
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, content()); }),
                            {"/optimizer/0/weight/step is -3", "cannot be negative"}));
  adam.state()[0].step = 2;
  CheckpointContent at_negative_step = content();
  at_negative_step.meta.step = -5;
  save_checkpoint(path, grid, at_negative_step);
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, content()); }),
                            {"checkpoint '" + path + "': /meta/step is -5"}));

  // A slot flagged as a variance (batch norm's running_var, models/model_buffers.cpp).
  CheckpointContent variance;
  variance.tensors = {testing::replicated_slot("/params/1/running_var", {4})};
  variance.tensors[0].non_negative = true;
  testing::fill_constant(variance.tensors[0], 1.0f);
  set_first(variance.tensors[0].values, -2.0f);
  save_checkpoint(path, grid, variance);
  EXPECT_TRUE(is_error_with(error_of([&] { load_checkpoint(path, grid, variance, LoadScope::weights_only); }),
                            {"/params/1/running_var[0] is -2"}));
}

}  // namespace
}  // namespace tessera::models
