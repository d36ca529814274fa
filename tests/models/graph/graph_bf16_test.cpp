// A bf16 model's memory, as planned and as allocated: activations and their gradients take
// half the bytes of the fp32 model's; each parameter 2 bytes of bf16 value and 8 of fp32
// master and gradient; MemoryPlan::by_precision splits the total accordingly. And a layer
// without a bf16 implementation (a custom one: every built-in layer has one) is refused
// when the model is built, naming it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <string>

#include "layers/flatten.hpp"
#include "models/layer_registry.hpp"
#include "models/sequential.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::models {
namespace {

const std::string kChain = "conv(out=4,k=3,pad=1),batchnorm,relu,maxpool(k=2),flatten,linear(out=3)";

TEST(GraphBf16, ActivationsHalveParametersKeepFp32MastersAndGradients) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 shape{2, 3, 8, 8};
  const MemoryPlan fp32 = Sequential<float>::memory_plan(kChain, shape, self);
  const MemoryPlan bf16 = Sequential<tessera::bf16>::memory_plan(kChain, shape, self);
  // conv 4*3*3*3 + 4, batchnorm 4 + 4, linear 3*64 + 3
  const std::int64_t parameters = 112 + 8 + 195;
  EXPECT_EQ(fp32.parameter_elements(), parameters);
  EXPECT_EQ(bf16.parameter_elements(), parameters);
  EXPECT_EQ(2 * bf16.total(MemoryUse::activations), fp32.total(MemoryUse::activations));
  EXPECT_EQ(fp32.total(MemoryUse::parameters), 8 * parameters);
  EXPECT_EQ(bf16.total(MemoryUse::parameters), 10 * parameters);

  std::map<std::string, std::int64_t> split;
  for (const auto& [precision, bytes] : bf16.by_precision()) split[precision] = bytes;
  EXPECT_EQ(split.size(), 2u);
  EXPECT_EQ(split["bf16"], bf16.total(MemoryUse::activations) + 2 * parameters);
  EXPECT_EQ(split["fp32"], 8 * parameters);
  ASSERT_EQ(fp32.by_precision().size(), 1u);
  EXPECT_EQ(fp32.by_precision()[0].first, "fp32");

  // What the models allocate is what was planned.
  Sequential<tessera::bf16> model(kChain, shape, self, 1);
  EXPECT_EQ(model.local_activation_bytes(), bf16.total(MemoryUse::activations));
  EXPECT_EQ(model.local_parameter_bytes(), bf16.total(MemoryUse::parameters));
}

// Every built-in layer runs in bf16 (regrid the last to gain a path); a custom layer
// registered in fp32 only (a recipe without make_bf16, docs/custom-layer.md) is what a bf16
// model refuses.
TEST(GraphBf16, LayerWithoutBf16IsRefusedByName) {
  LayerRegistry registry = LayerRegistry::builtin();
  LayerRecipe fp32_only;
  fp32_only.make = [](std::string_view, const Shape4&, std::uint64_t) -> std::unique_ptr<layers::Layer<float>> {
    return std::make_unique<layers::Flatten<float>>();
  };
  registry.add("fp32only", fp32_only);
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string message = tessera::testing::error_message<std::invalid_argument>([&] {
    Sequential<tessera::bf16>("conv(out=2,k=3),fp32only,linear(out=2)", {2, 1, 8, 8}, self, 1, registry);
  });
  EXPECT_NE(message.find("layer 1 (fp32only"), std::string::npos) << message;
  EXPECT_NE(message.find("fp32only has no bf16 implementation yet (layers in bf16: "), std::string::npos) << message;
  // The list names what runs in bf16: every built-in layer, regrid among them.
  for (const std::string& layer : LayerRegistry::builtin().names())
    EXPECT_NE(message.find(layer), std::string::npos) << layer << " missing from: " << message;
}

}  // namespace
}  // namespace tessera::models
