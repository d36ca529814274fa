// One process, no file: the slots checkpoint_content builds for a model and its optimizer
// (state_dict names, aliasing the live views), and the slot checks save and load run first.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "layers/optim/adam.hpp"
#include "models/checkpoint_content.hpp"
#include "models/checkpoint_layout.hpp"
#include "models/checkpoint_slots.hpp"

namespace tessera::models {
namespace {

std::vector<std::string> datasets(const CheckpointContent& content) {
  std::vector<std::string> names;
  for (const TensorSlot& slot : content.tensors) names.push_back(slot.dataset);
  for (const CounterSlot& counter : content.counters) names.push_back(counter.dataset);
  return names;
}

TEST(CheckpointContent, NamesFollowTheStateDict) {
  layers::Parameter<float> weight("weight", {4, 3, 3, 3}, "conv0"), bias("bias", {4}, "conv0");
  layers::Adam<float> adam({&weight, &bias});
  CheckpointMeta meta;
  meta.step = 3;
  const CheckpointContent content = checkpoint_content({{"2", &weight}, {"2", &bias}}, &adam, meta);
  EXPECT_EQ(datasets(content),
            (std::vector<std::string>{"/params/2/weight", "/params/2/bias", "/optimizer/2/weight/exp_avg",
                                      "/optimizer/2/weight/exp_avg_sq", "/optimizer/2/bias/exp_avg",
                                      "/optimizer/2/bias/exp_avg_sq", "/optimizer/2/weight/step",
                                      "/optimizer/2/bias/step"}));
  EXPECT_EQ(content.meta.optimizer, "adam");
  EXPECT_EQ(content.meta.step, 3);
  // Slots alias the live tensors and counters, so a load writes straight into them.
  EXPECT_EQ(content.tensors[0].values.data(), weight.value.data());
  EXPECT_EQ(content.tensors[2].values.data(), adam.state()[0].buffers[0].view.data());
  EXPECT_EQ(content.counters[1].value, &adam.state()[1].step);
  EXPECT_EQ(content.tensors[0].shape, (Dims{4, 3, 3, 3}));
  for (const TensorSlot& slot : content.tensors) EXPECT_EQ(slot_problem(slot), "") << slot.dataset;
}

TEST(CheckpointContent, WithoutOptimizerOnlyParameters) {
  layers::Parameter<float> weight("weight", {10, 36}, "linear5");
  const CheckpointContent content = checkpoint_content({{"5", &weight}});
  EXPECT_EQ(datasets(content), std::vector<std::string>{"/params/5/weight"});
  EXPECT_EQ(content.meta.optimizer, "");
}

TEST(CheckpointContent, OptimizerParameterOutsideTheModelIsRefused) {
  layers::Parameter<float> weight("weight", {2, 2}, "linear0"), stray("bias", {2}, "linear0");
  layers::Adam<float> adam({&weight, &stray});
  EXPECT_THROW(checkpoint_content({{"0", &weight}}, &adam), std::invalid_argument);
  EXPECT_THROW(checkpoint_content({{"0", nullptr}}), std::invalid_argument);
}

TEST(CheckpointLayout, WeightsOnlyScopeIsTheParamsGroup) {
  EXPECT_EQ(layout::param("3", "bias"), "/params/3/bias");
  EXPECT_EQ(layout::optimizer_state("3", "bias", "momentum_buffer"), "/optimizer/3/bias/momentum_buffer");
  EXPECT_TRUE(layout::is_param("/params/0/weight"));
  EXPECT_FALSE(layout::is_param("/optimizer/0/weight/exp_avg"));
  EXPECT_FALSE(layout::is_param("/meta/step"));
}

TensorSlot slot(Dims shape, Dims offset, Dims extent, layers::Sharing sharing, std::size_t values) {
  return {"/params/0/weight", std::move(shape), std::move(offset), std::move(extent), sharing,
          layers::Parameter<float>::View("values", values)};
}

TEST(CheckpointSlots, InconsistentSlotsAreNamed) {
  using layers::Sharing;
  EXPECT_EQ(slot_problem(slot({4, 6}, {2, 0}, {2, 6}, Sharing::tiled, 12)), "");
  EXPECT_EQ(slot_problem(slot({4, 6}, {3, 0}, {2, 6}, Sharing::tiled, 12)),
            "slot '/params/0/weight': the block (2, 6) at (3, 0) lies outside the shape (4, 6)");
  EXPECT_EQ(slot_problem(slot({4, 6}, {0, 0}, {2, 6}, Sharing::replicated, 12)),
            "slot '/params/0/weight' is replicated but holds (2, 6) of (4, 6)");
  EXPECT_EQ(slot_problem(slot({4, 6}, {0, 0}, {4, 6}, Sharing::replicated, 23)),
            "slot '/params/0/weight' holds 23 values for a block of (4, 6)");
  EXPECT_EQ(slot_problem(slot({4, 6}, {0}, {4, 6}, Sharing::replicated, 24)),
            "slot '/params/0/weight' has shape (4, 6) but offset (0) and extent (4, 6)");
  EXPECT_EQ(slot_problem(slot({}, {}, {}, Sharing::replicated, 1)), "slot '/params/0/weight' has no dimensions");
}

}  // namespace
}  // namespace tessera::models
