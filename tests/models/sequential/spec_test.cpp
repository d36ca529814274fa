// The spec grammar, the layer registry, presets and model construction in one process:
// every registered layer builds from its spec, malformed text and unknown names fail with
// messages that say where and what, and fashion-cnn has the shapes and parameter count of
// its formula with parameters in state_dict order.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "layers/flatten.hpp"
#include "models/layer_registry.hpp"
#include "models/presets.hpp"
#include "models/sequential.hpp"
#include "models/spec_parser.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::models {
namespace {

// The message of the std::invalid_argument `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  return tessera::testing::error_message<std::invalid_argument>(f);
}

TEST(SpecParser, SplitsEntriesAndKeepsOptionsWhole) {
  const auto entries = parse_spec(" conv( out=16,k=3,pad=1 ) , relu,maxpool(k=2) ,flatten, linear(out=10)");
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries[0].name, "conv");
  EXPECT_EQ(entries[0].options, "out=16,k=3,pad=1");
  EXPECT_EQ(entries[0].text, "conv(out=16,k=3,pad=1)");
  EXPECT_EQ(entries[1].name, "relu");
  EXPECT_EQ(entries[1].options, "");
  EXPECT_EQ(entries[1].text, "relu");
  EXPECT_EQ(entries[2].text, "maxpool(k=2)");
  EXPECT_EQ(entries[4].options, "out=10");
}

TEST(SpecParser, EmptyParenthesesMeanNoOptions) {
  const auto entries = parse_spec("relu()");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].options, "");
}

TEST(SpecParser, MalformedTextNamesThePosition) {
  const std::map<std::string, std::string> cases{
      {"conv(out=1", "unbalanced '(' at position 4"},
      {"relu)", "unbalanced ')' at position 4"},
      {"relu,,tanh", "empty layer entry at position 5"},
      {"relu,", "empty layer entry at position 5"},
      {",relu", "empty layer entry at position 0"},
      {"conv((k=3))", "nested '(' at position 5"},
      {"conv(k=3)x", "position 9"},
      {"conv(k=3)(k=2)", "position"},
      {"re lu", "unexpected ' ' in layer name"},
      {"(k=3)", "missing layer name"},
  };
  for (const auto& [spec, expected] : cases) {
    SCOPED_TRACE(spec);
    EXPECT_NE(error_of([&] { parse_spec(spec); }).find(expected), std::string::npos)
        << error_of([&] { parse_spec(spec); });
  }
  EXPECT_NE(error_of([] { parse_spec("  "); }).find("empty"), std::string::npos);
}

// Options each layer needs to be built (the rest take none).
std::string options_for(const std::string& name) {
  static const std::map<std::string, std::string> required{
      {"conv", "out=2,k=3,pad=1"}, {"deconv", "out=2,k=4,stride=2,pad=1"},
      {"maxpool", "k=2"},          {"avgpool", "k=2"},
      {"l2pool", "k=2"},           {"linear", "out=3"},
      {"local", "out=2,k=3"},      {"lcn", "k=3"}};
  const auto it = required.find(name);
  return it == required.end() ? "" : it->second;
}

TEST(LayerRegistry, EveryRegisteredLayerBuildsFromItsSpec) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  for (const std::string& name : LayerRegistry::global().names()) {
    const std::string spec = name + "(" + options_for(name) + ")";
    SCOPED_TRACE(spec);
    EXPECT_EQ(error_of([&] { Sequential<float>(spec, {2, 3, 8, 8}, self, 1); }), "");
    Sequential<float> model(spec, {2, 3, 8, 8}, self, 1);
    EXPECT_EQ(model.layer(0).kind(), name);
  }
}

TEST(LayerRegistry, CoversTheBuiltInLayers) {
  for (const char* name : {"conv", "deconv", "batchnorm", "relu", "leakyrelu", "sigmoid", "tanh", "maxpool",
                           "avgpool", "l2pool", "flatten", "linear", "gap", "upsample", "local", "lcn"})
    EXPECT_TRUE(LayerRegistry::global().contains(name)) << name;
}

TEST(LayerRegistry, UnknownNameListsTheKnownOnes) {
  const std::string message = error_of([] { LayerRegistry::global().find("convolution"); });
  EXPECT_NE(message.find("\"convolution\""), std::string::npos) << message;
  EXPECT_NE(message.find("conv, deconv, flatten"), std::string::npos) << message;
}

TEST(LayerRegistry, CustomLayerIsOneAdd) {
  LayerRegistry registry = LayerRegistry::builtin();
  LayerRecipe recipe;
  recipe.make = [](std::string_view, const Shape4&, std::uint64_t) -> std::unique_ptr<layers::Layer<float>> {
    return std::make_unique<layers::Flatten<float>>();
  };
  registry.add("identity", recipe);
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("conv(out=2,k=1),identity", {1, 1, 4, 4}, self, 1, registry);
  EXPECT_EQ(model.size(), 2u);
  EXPECT_FALSE(LayerRegistry::global().contains("identity"));
}

TEST(Sequential, ErrorsNameTheLayerIndexAndEntry) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto build = [&](const std::string& spec) {
    return error_of([&] { Sequential<float>(spec, {1, 1, 8, 8}, self, 1); });
  };
  std::string message = build("conv(out=4,k=3),relu,maxpool(k=2),maxpool(k=8)");
  EXPECT_NE(message.find("layer 3 (maxpool(k=8)): "), std::string::npos) << message;
  message = build("relu,conv(out=4,kernel=3)");
  EXPECT_NE(message.find("layer 1 (conv(out=4,kernel=3)): "), std::string::npos) << message;
  EXPECT_NE(message.find("kernel"), std::string::npos) << message;
  message = build("relu,frobnicate");
  EXPECT_NE(message.find("layer 1 (frobnicate): unknown layer"), std::string::npos) << message;
  message = build("flatten(x=1)");
  EXPECT_NE(message.find("layer 0 (flatten(x=1))"), std::string::npos) << message;
}

TEST(Presets, UnknownNameListsThePresets) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string message = error_of([&] { Sequential<float>("fashion-cnm", {1, 1, 28, 28}, self, 1); });
  EXPECT_NE(message.find("denoise-dilated, denoise-fcn, fashion-cnn"), std::string::npos) << message;
  EXPECT_NE(error_of([] { preset_spec("nope", {1, 1, 1, 1}); }).find("fashion-cnn"), std::string::npos);
}

TEST(Presets, FashionCnnShapesAndParameterCount) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("fashion-cnn", {4, 1, 28, 28}, self, 1);
  ASSERT_EQ(model.size(), 10u);
  EXPECT_EQ(model.shape(4), (Shape4{4, 32, 14, 14}));
  EXPECT_EQ(model.shape(8), (Shape4{4, 64, 7, 7}));
  EXPECT_EQ(model.shape(10), (Shape4{4, 10, 1, 1}));
  const std::int64_t conv1 = 32 * 1 * 3 * 3 + 32, bn1 = 2 * 32, conv2 = 64 * 32 * 3 * 3 + 64, bn2 = 2 * 64,
                     head = 10 * 64 * 7 * 7 + 10;
  EXPECT_EQ(model.parameter_count(), conv1 + bn1 + conv2 + bn2 + head);
  EXPECT_NE(model.describe().find("total parameters: " + std::to_string(model.parameter_count())),
            std::string::npos);
}

TEST(Presets, DenoiserKeepsTheInputShape) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("denoise-fcn", {1, 3, 37, 21}, self, 1);
  EXPECT_EQ(model.shape(model.size()), (Shape4{1, 3, 37, 21}));
}

TEST(Sequential, ParamsFollowTheStateDictConvention) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("fashion-cnn", {2, 1, 28, 28}, self, 1);
  std::vector<std::string> keys;
  for (const auto& [index, p] : model.params()) keys.push_back(std::to_string(index) + "." + p->name);
  const std::vector<std::string> expected{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight",
                                          "4.bias",   "5.weight", "5.bias", "9.weight", "9.bias"};
  EXPECT_EQ(keys, expected);
}

}  // namespace
}  // namespace tessera::models
