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
    // The joins read the input twice.
    const bool join = name == "add" || name == "concat";
    const std::string spec = name + "(" + options_for(name) + ")" + (join ? "[input, input]" : "");
    SCOPED_TRACE(spec);
    EXPECT_EQ(error_of([&] { Sequential<float>(spec, {2, 3, 8, 8}, self, 1); }), "");
    Sequential<float> model(spec, {2, 3, 8, 8}, self, 1);
    EXPECT_EQ(model.layer(0).kind(), name);
  }
}

TEST(LayerRegistry, CoversTheBuiltInLayers) {
  for (const char* name : {"conv", "deconv", "batchnorm", "relu", "leakyrelu", "sigmoid", "tanh", "maxpool",
                           "avgpool", "l2pool", "flatten", "linear", "gap", "upsample", "local", "lcn", "add", "concat"})
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

// ---- Graph specs ------------------------------------------------------------------------

std::string inputs_of(const GraphSpec& g, const std::string& name) {
  for (const GraphNodeSpec& n : g.nodes)
    if (n.name == name) {
      std::string out;
      for (const std::string& i : n.inputs) out += (out.empty() ? "" : ",") + i;
      return out;
    }
  return "<no node " + name + ">";
}

TEST(GraphSpecParser, AChainSpecIsTheChainGraph) {
  const std::string spec = "conv(out=16,k=3,pad=1), relu,maxpool(k=2),flatten,linear(out=10)";
  const GraphSpec g = parse_model_spec(spec), chain = chain_graph(parse_spec(spec));
  ASSERT_EQ(g.nodes.size(), chain.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(g.nodes[i].name, chain.nodes[i].name);
    EXPECT_EQ(g.nodes[i].layer.text, chain.nodes[i].layer.text);
    EXPECT_EQ(g.nodes[i].inputs, chain.nodes[i].inputs);
  }
  EXPECT_EQ(g.nodes[0].name, "0");
  EXPECT_EQ(inputs_of(g, "0"), "input");
  EXPECT_EQ(inputs_of(g, "3"), "2");
}

TEST(GraphSpecParser, NamesInputsAndRepeats) {
  const GraphSpec g = parse_model_spec(
      "stem: conv(out=8,k=3,pad=1), relu*2, b: conv(out=8,k=1)[stem], add[prev, 2, stem], concat[later, input], "
      "later: relu[b]");
  EXPECT_EQ(inputs_of(g, "stem"), "input");
  EXPECT_EQ(inputs_of(g, "1"), "stem");
  EXPECT_EQ(inputs_of(g, "2"), "1");
  EXPECT_EQ(inputs_of(g, "b"), "stem");
  EXPECT_EQ(inputs_of(g, "4"), "b,2,stem");
  EXPECT_EQ(inputs_of(g, "5"), "later,input");  // a forward reference
  EXPECT_EQ(g.nodes.back().name, "later");
}

TEST(GraphSpecParser, BlocksExpandWithParametersAndPaths) {
  const GraphSpec g = parse_model_spec(
      "block res(c, k=3) { conv(out=$c,k=$k,pad=1), r: relu, conv(out=$c,k=$k,pad=1), add[prev, in] }\n"
      "block down(c) { maxpool(k=2), res(c=$c) }\n"
      "conv(out=4,k=3,pad=1), res(c=4)*2, s: res(c=4,k=1), down(c=4), concat[prev, prev]");
  // 0: conv; 1 and 2: res instances; s; 4: down holding a res.
  EXPECT_EQ(inputs_of(g, "1.0"), "0");
  EXPECT_EQ(g.nodes[1].layer.text, "conv(out=4,k=3,pad=1)");
  EXPECT_EQ(inputs_of(g, "1.r"), "1.0");  // a named node of a block: <instance>.<name>
  EXPECT_EQ(inputs_of(g, "1.2"), "1.r");
  EXPECT_EQ(inputs_of(g, "1.3"), "1.2,0");      // add[prev, in]
  EXPECT_EQ(inputs_of(g, "2.0"), "1.3");        // the second repeat reads the first's output
  EXPECT_EQ(inputs_of(g, "s.0"), "2.3");
  EXPECT_EQ(g.nodes[9].layer.text, "conv(out=4,k=1,pad=1)");
  EXPECT_EQ(inputs_of(g, "4.0"), "s.3");        // down's maxpool
  EXPECT_EQ(inputs_of(g, "4.1.3"), "4.1.2,4.0");  // its res's add reads down's maxpool
  EXPECT_EQ(inputs_of(g, "5"), "4.1.3,4.1.3");
}

// The examples of docs/models.md build, with the node names the document gives.
TEST(GraphSpecParser, TheDocumentedExamplesBuild) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string resnet =
      "block res(c) { conv(out=$c,k=3,pad=1), batchnorm, relu, conv(out=$c,k=3,pad=1), batchnorm, add[prev, in], relu }\n"
      "conv(out=16,k=3,pad=1), relu, res(c=16)*3, maxpool(k=2), conv(out=32,k=3,pad=1), relu, res(c=32)*3,\n"
      "gap, flatten, linear(out=10)";
  EXPECT_EQ(inputs_of(parse_model_spec(resnet), "2.5"), "2.4,1");
  Sequential<float> r(resnet, {2, 3, 16, 16}, self, 1);
  EXPECT_EQ(r.shape(r.size()), (Shape4{2, 10, 1, 1}));
  const std::string unet =
      "block up(c, skip) { deconv(out=$c,k=2,stride=2), concat[prev, $skip], conv(out=$c,k=3,pad=1), relu }\n"
      "e1: conv(out=16,k=3,pad=1), relu, maxpool(k=2), e2: conv(out=32,k=3,pad=1), relu, maxpool(k=2),\n"
      "conv(out=64,k=3,pad=1), relu, up(c=32, skip=e2), up(c=16, skip=e1), conv(out=1,k=1)";
  EXPECT_EQ(inputs_of(parse_model_spec(unet), "8.1"), "8.0,e2");
  Sequential<float> u(unet, {1, 1, 16, 16}, self, 1);
  EXPECT_EQ(u.shape(u.size()), (Shape4{1, 1, 16, 16}));
  Sequential<float> level("e1: conv(out=16,k=3,pad=1), relu, maxpool(k=2), conv(out=32,k=3,pad=1), relu,"
                          "deconv(out=16,k=2,stride=2), concat[prev, e1], conv(out=16,k=3,pad=1), relu, conv(out=1,k=1)",
                          {1, 1, 16, 16}, self, 1);
  EXPECT_EQ(level.shape(7), (Shape4{1, 32, 16, 16}));  // the concat
}

TEST(GraphSpecParser, ErrorsSayWhereAndWhat) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"conv(out=4)[a", "unbalanced '['"},
      {"relu, add[prev, nothere]", "node \"1\" (add): unknown input \"nothere\""},
      {"a: relu, a: relu", "node name \"a\" used twice"},
      {"input: relu", "node name \"input\" is reserved"},
      {"relu[in]", "`in` names a block's input"},
      {"relu[prev]*2", "drop its [inputs]"},
      {"relu*0", "repeat count"},
      {"block b(c) { conv(out=$d) } b(c=1)", "$d is not one of its parameters (c)"},
      {"block b(c) { relu } b(x=1)", "\"x=1\" is not `parameter=value` for one of its parameters (c)"},
      {"block b(c) { relu } b", "missing parameter c"},
      {"block b() { relu, b() } b()", "block \"b\" uses itself"},
  };
  for (const auto& [spec, expected] : cases) {
    const std::string message = error_of([&] { parse_model_spec(spec); });
    EXPECT_NE(message.find(expected), std::string::npos) << spec << " -> " << message;
  }
}

TEST(Graph, BadGraphsFailBeforeAnyWorkNamingTheNode) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const auto build = [&](const std::string& spec) {
    return error_of([&] { Sequential<float>(spec, {1, 2, 8, 8}, self, 1); });
  };
  std::string message = build("a: relu[c], b: relu[a], c: relu[b], add[c, input]");
  EXPECT_NE(message.find("is on a cycle: \"a\" -> \"b\" -> \"c\" -> \"a\""), std::string::npos) << message;
  message = build("a: conv(out=3,k=1), b: conv(out=4,k=1)[input], add[a, b]");
  EXPECT_NE(message.find("layer 2 (add): add: input 1 is 1x4x8x8 but input 0 is 1x3x8x8"), std::string::npos) << message;
  message = build("a: relu, b: tanh[input], sigmoid[input]");
  EXPECT_NE(message.find("node \"a\" (relu) is read by no node"), std::string::npos) << message;
  message = build("relu, conv(out=2,k=1)[prev, input]");
  EXPECT_NE(message.find("layer 1 (conv(out=2,k=1)): conv takes 1 input, not 2"), std::string::npos) << message;
  message = build("relu, add");
  EXPECT_NE(message.find("layer 1 (add): add takes 2 or more inputs, not 1"), std::string::npos) << message;
  message = build("c: concat[input, input], flatten, linear(out=2), s: add[prev, c]");
  EXPECT_NE(message.find("layer 3 \"s\" (add): add: input 1 is 1x4x8x8 but input 0 is 1x2x1x1"), std::string::npos)
      << message;
  GraphBuilder g;
  g.then("relu");
  g.add("x", "add", {"0", "missing"});
  message = error_of([&] { Graph<float>(g.spec(), {1, 2, 8, 8}, self, 1); });
  EXPECT_NE(message.find("node \"x\" (add): unknown input \"missing\""), std::string::npos) << message;
}

TEST(Graph, BuilderMakesTheSameModelAsTheSpec) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  GraphBuilder g;
  g.then("conv(out=4,k=3,pad=1)");
  const std::string skip = g.add("skip", "relu", {g.last()});
  g.then("conv(out=4,k=3,pad=1)");
  g.add("sum", "add", {skip, g.last()});
  Graph<float> built(g.spec(), {1, 2, 8, 8}, self, 1);
  Sequential<float> parsed("conv(out=4,k=3,pad=1), skip: relu, conv(out=4,k=3,pad=1), sum: add[skip, prev]",
                           {1, 2, 8, 8}, self, 1);
  EXPECT_EQ(built.describe(), parsed.describe());
  EXPECT_EQ(built.node_inputs(3), (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(built.node_name(3), "sum");
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
