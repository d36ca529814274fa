// The spec grammar, the layer registry, presets and model construction in one process:
// every registered layer builds from its spec, malformed text and unknown names fail with
// messages that say where and what, and fashion-cnn has the shapes and parameter count of
// its formula with parameters in state_dict order; resnet and unet have the parameter
// counts of their closed-form formulas (torchvision's for ResNet-18/34) and clear errors.
#include <gtest/gtest.h>

#include <algorithm>
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
      {"local", "out=2,k=3"},      {"lcn", "k=3"},
      {"regrid", "grid=1x1x1"}};
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
                           "avgpool", "l2pool", "flatten", "linear", "gap", "upsample", "local", "lcn", "add", "concat",
                           "regrid"})
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

// `levels` blocks, each using the one below twice: 2^levels layers from a short spec.
std::string doubling_blocks(int levels) {
  std::string spec = "block b0(c) { relu } ";
  for (int i = 1; i < levels; ++i)
    spec += "block b" + std::to_string(i) + "(c) { b" + std::to_string(i - 1) + "(c=$c)*2 } ";
  return spec + "b" + std::to_string(levels - 1) + "(c=4)";
}

// An exponential expansion fails at once with one line, instead of running for hours: by
// depth (40 levels, the nesting cap is 32) or by layer count (17 levels: 2^17 > 100000).
TEST(GraphSpecParser, ExpansionIsCappedInDepthAndSize) {
  const std::string deep = error_of([&] { parse_model_spec(doubling_blocks(40)); });
  EXPECT_NE(deep.find("model spec nests blocks more than 32 deep (block \"b7\" inside \"b8\")"), std::string::npos)
      << deep;
  const std::string wide = error_of([&] { parse_model_spec(doubling_blocks(18)); });
  EXPECT_NE(wide.find("model spec expands to more than 100000 layers"), std::string::npos) << wide;
  EXPECT_EQ(wide.find('\n'), std::string::npos);
  EXPECT_EQ(parse_model_spec(doubling_blocks(10)).nodes.size(), 512u);  // 2^9 leaves: well within both caps
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

// ResNet with basic blocks: convs without bias, batch norm with weight and bias (2c; the
// running statistics are buffers, as in PyTorch), input channels C, c = width * 2^stage:
//   stem   49*C*w + 2w                                   (7x7 conv, bn)
//   basic  2*(9c^2 + 2c) = 18c^2 + 4c                     (two 3x3 convs c -> c, two bn)
//   down   9(c/2)c + 9c^2 + (c/2)c + 3*2c = 14c^2 + 6c    (3x3 c/2 -> c, 3x3, 1x1 projection, three bn)
//   head   8w*K + K                                       (linear after gap)
// with stages of [2,2,2,2] (18) or [3,4,6,3] (34) blocks, the first of stages 2-4 a down.
std::int64_t resnet_count(std::int64_t depth, std::int64_t w, std::int64_t classes, std::int64_t in_channels) {
  using Blocks = std::vector<std::int64_t>;
  const Blocks blocks = depth == 18 ? Blocks{2, 2, 2, 2} : Blocks{3, 4, 6, 3};
  std::int64_t total = 49 * in_channels * w + 2 * w + 8 * w * classes + classes;
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t c = w << stage;
    const std::int64_t downs = stage > 0 ? 1 : 0;
    total += downs * (14 * c * c + 6 * c) + (blocks[stage] - downs) * (18 * c * c + 4 * c);
  }
  return total;
}

// U-Net, c_l = width * 2^l, input channels C: a double conv (two 3x3 convs without bias,
// each with bn) from a to b channels holds 9ab + 9b^2 + 4b;
//   encoder + bottleneck  double(C, c_0) + sum_{l=1..depth} double(c_{l-1}, c_l)
//   decoder level l       4*c_{l+1}*c_l + c_l (2x2 deconv with bias) + double(2c_l, c_l)
//   final                 c_0*out + out (1x1 conv with bias)
std::int64_t unet_count(std::int64_t depth, std::int64_t w, std::int64_t in_channels, std::int64_t out) {
  const auto two_convs = [](std::int64_t a, std::int64_t b) { return 9 * a * b + 9 * b * b + 4 * b; };
  std::int64_t total = two_convs(in_channels, w) + w * out + out;
  for (std::int64_t l = 1; l <= depth; ++l) total += two_convs(w << (l - 1), w << l);
  for (std::int64_t l = 0; l < depth; ++l) {
    const std::int64_t c = w << l;
    total += 4 * (2 * c) * c + c + two_convs(2 * c, c);
  }
  return total;
}

std::int64_t built_count(const std::string& model, const Shape4& input) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  return Sequential<float>(model, input, self, 1).parameter_count();
}

TEST(Presets, ResNetParameterCountsAreTheFormulaAndTorchvisions) {
  // torchvision's resnet18() and resnet34() (1000 classes) hold 11,689,512 and 21,797,672.
  EXPECT_EQ(resnet_count(18, 64, 1000, 3), 11'689'512);
  EXPECT_EQ(resnet_count(34, 64, 1000, 3), 21'797'672);
  // The counts do not depend on the image size (gap before the head): 32x32 suffices.
  EXPECT_EQ(built_count("resnet", {1, 3, 32, 32}), 11'689'512);
  EXPECT_EQ(built_count("resnet(depth=34)", {1, 3, 32, 32}), 21'797'672);
  EXPECT_EQ(built_count("resnet(depth=18,width=4,classes=3)", {2, 3, 32, 32}), resnet_count(18, 4, 3, 3));
  EXPECT_EQ(built_count("resnet(depth=34,width=2,classes=5)", {1, 1, 32, 32}), resnet_count(34, 2, 5, 1));
}

TEST(Presets, ResNetShapesAndNodes) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("resnet(width=4,classes=3)", {2, 3, 64, 64}, self, 1);
  // stem 4 + 8 blocks (basic 7 nodes, down 9) + gap, linear.
  ASSERT_EQ(model.size(), 4u + 2 * 7 + 3 * (9 + 7) + 2);
  EXPECT_EQ(model.shape(4), (Shape4{2, 4, 16, 16}));  // after the stem's max pool
  EXPECT_EQ(model.shape(model.size()), (Shape4{2, 3, 1, 1}));
  EXPECT_EQ(model.shape(model.size() - 2), (Shape4{2, 32, 2, 2}));  // stage 4 at 1/32
}

TEST(Presets, UNetParameterCountsAreTheFormula) {
  EXPECT_EQ(built_count("unet", {1, 1, 16, 16}), unet_count(4, 32, 1, 1));
  EXPECT_EQ(built_count("unet(out=2)", {1, 3, 32, 48}), unet_count(4, 32, 3, 2));
  EXPECT_EQ(built_count("unet(depth=2,width=4)", {2, 1, 16, 16}), unet_count(2, 4, 1, 1));
  // Depth 4, width 64, RGB in, 2 classes out: the common PyTorch U-Net layout (bias-free
  // convs before batch norm, ConvTranspose2d with bias, 1x1 output conv). The number is the
  // formula's, not checked against a PyTorch run (docs/models.md); the width-32 builds
  // above check the formula against the model.
  EXPECT_EQ(unet_count(4, 64, 3, 2), 31'037'698);
  EXPECT_EQ(unet_count(4, 32, 1, 1), 7'762'465);
}

TEST(Presets, UNetKeepsTheSizeAndSetsTheChannels) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("unet(depth=3,width=2,out=5)", {1, 2, 24, 16}, self, 1);
  EXPECT_EQ(model.shape(model.size()), (Shape4{1, 5, 24, 16}));
  Sequential<float> same("unet(depth=1,width=2)", {1, 3, 6, 8}, self, 1);
  EXPECT_EQ(same.shape(same.size()), (Shape4{1, 3, 6, 8}));
}

TEST(Presets, ResNetAndUNetOptionErrors) {
  const Shape4 image{1, 3, 32, 32};
  const auto error = [&](const char* text) { return error_of([&] { preset_spec(text, image); }); };
  EXPECT_NE(error("resnet(depth=50)").find("resnet: depth must be 18 or 34, got 50"), std::string::npos);
  EXPECT_NE(error("resnet(width=0)").find("resnet: width must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(error("resnet(classes=-1)").find("resnet: classes must be >= 1, got -1"), std::string::npos);
  EXPECT_NE(error("resnet(layers=18)").find("unknown option 'layers'"), std::string::npos);
  EXPECT_NE(error("unet(depth=0)").find("unet: depth must be from 1 to 16, got 0"), std::string::npos);
  EXPECT_NE(error("unet(width=0)").find("unet: width must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(error("unet(out=0)").find("unet: out must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(error("unet(depth=6)").find("unet: input 32x32 is not divisible by 2^depth = 64 (depth=6)"),
            std::string::npos);
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const std::string built = error_of([&] { Sequential<float>("unet", {1, 1, 40, 24}, self, 1); });
  EXPECT_NE(built.find("unet: input 40x24 is not divisible by 2^depth = 16"), std::string::npos) << built;
}

TEST(Sequential, ParamsFollowTheStateDictConvention) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("fashion-cnn", {2, 1, 28, 28}, self, 1);
  std::vector<std::string> keys;
  for (const auto& [path, p] : model.params()) keys.push_back(path + "." + p->name);
  const std::vector<std::string> expected{"0.weight", "0.bias", "1.weight", "1.bias", "4.weight",
                                          "4.bias",   "5.weight", "5.bias", "9.weight", "9.bias"};
  EXPECT_EQ(keys, expected);
}

// A graph's parameters are named by node path, as the state_dict of the same nn.Module:
// resnet's nodes carry torchvision's names, so its keys are torchvision's resnet18's.
TEST(Sequential, GraphParamsAreNamedByNodePath) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> model("resnet(width=4,classes=3)", {2, 3, 64, 64}, self, 1);
  std::vector<std::string> keys;
  for (const auto& [path, p] : model.params()) keys.push_back(path + "." + p->name);
  ASSERT_EQ(keys.size(), 62u);  // torchvision's resnet18: 62 parameters (buffers aside)
  const std::vector<std::string> first{"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight",
                                       "layer1.0.bn1.weight", "layer1.0.bn1.bias", "layer1.0.conv2.weight"};
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 7), first);
  for (const char* key : {"layer1.1.bn2.bias", "layer2.0.conv1.weight", "layer2.0.downsample.0.weight",
                          "layer2.0.downsample.1.weight", "layer2.0.downsample.1.bias", "layer2.1.conv2.weight",
                          "layer4.1.bn2.weight", "fc.weight", "fc.bias"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  EXPECT_EQ(keys.back(), "fc.bias");
  // Block instances without names are positions, nested with '.': a two-level block.
  Sequential<float> nested("block pair(c) { conv(out=$c,k=3,pad=1), relu } block quad(c) { pair(c=$c), p: pair(c=$c) }"
                           " conv(out=2,k=1), quad(c=2)*2", {1, 1, 8, 8}, self, 1);
  keys.clear();
  for (const auto& [path, p] : nested.params()) keys.push_back(path + "." + p->name);
  EXPECT_EQ(keys, (std::vector<std::string>{"0.weight", "0.bias", "1.0.0.weight", "1.0.0.bias", "1.p.0.weight",
                                            "1.p.0.bias", "2.0.0.weight", "2.0.0.bias", "2.p.0.weight", "2.p.0.bias"}));
}

}  // namespace
}  // namespace tessera::models
