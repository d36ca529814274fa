// The Le et al. (2012) presets: the option syntax ("le2012(maps=8,stride=2,stages=3,field=18)") and its
// errors, and le2012_parameter_count — the formula sum Hout*Wout*K*(C*R*R+1) — against
// Sequential::parameter_count() for le2012 and small variants, and against a hand
// computation for the billion-parameter instances, which are too big to build here.
#include <gtest/gtest.h>

#include <algorithm>

#include <string>

#include "models/presets.hpp"
#include "models/sequential.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::models {
namespace {

template <class F>
std::string error_of(F&& f) {
  return tessera::testing::error_message<std::invalid_argument>(f);
}

std::int64_t built_count(const std::string& model, const Shape4& input) {
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  Sequential<float> net(model, input, self, /*seed=*/1);
  return net.parameter_count();
}

TEST(Le2012Preset, IsThreeStagesOfLocalL2PoolLcn) {
  const std::string stage = "local(out=8,k=18,stride=2),l2pool(k=5,stride=1,pad=2),lcn(k=5)";
  EXPECT_EQ(preset_spec("le2012", {1, 3, 200, 200}), stage + "," + stage + "," + stage);
  EXPECT_EQ(preset_spec("le2012(maps=4,stride=3)", {1, 3, 200, 200}).substr(0, 26), "local(out=4,k=18,stride=3)");
  EXPECT_TRUE(is_preset("le2012(maps=8,stride=2)"));
  EXPECT_TRUE(is_preset("cots-11b"));
  EXPECT_FALSE(is_preset("local(out=8,k=18)"));
}

TEST(Le2012Preset, BadOptionsAreClearErrors) {
  EXPECT_NE(error_of([] { preset_spec("le2012(map=8)", {1, 3, 200, 200}); }).find("unknown option 'map'"),
            std::string::npos);
  EXPECT_NE(error_of([] { preset_spec("le2012(stride=0)", {1, 3, 200, 200}); }).find("stride must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { preset_spec("le2012(maps=x)", {1, 3, 200, 200}); }).find("not an integer"),
            std::string::npos);
  // Presets without options take none.
  EXPECT_NE(error_of([] { preset_spec("fashion-cnn(maps=2)", {1, 1, 28, 28}); }).find("unknown option 'maps'"),
            std::string::npos);
  EXPECT_NE(error_of([] { le2012_parameter_count({}, {1, 3, 40, 40}); }).find("stage 2 input 12x12"),
            std::string::npos);
  EXPECT_NE(error_of([] { preset_spec("le2012(stages=0)", {1, 3, 200, 200}); }).find("stages must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { preset_spec("cots-11b(field=-3)", {1, 3, 200, 200}); }).find("field must be >= 1, got -3"),
            std::string::npos);
  EXPECT_NE(error_of([] { preset_spec("le2012-1b(stages=two)", {1, 3, 200, 200}); }).find("stages"),
            std::string::npos);
}

TEST(Le2012Preset, StagesAndFieldOptions) {
  const std::string stage = "local(out=8,k=18,stride=2),l2pool(k=5,stride=1,pad=2),lcn(k=5)";
  EXPECT_EQ(preset_spec("le2012(stages=1)", {1, 3, 200, 200}), stage);
  EXPECT_EQ(preset_spec("le2012(stages=4,field=7)", {1, 3, 200, 200}), le2012_spec({.field = 7, .stages = 4}));
  EXPECT_EQ(preset_spec("le2012-1b(stages=2)", {1, 3, 200, 200}), le2012_spec({.maps = 7, .stride = 1, .stages = 2}));
  EXPECT_EQ(preset_spec("cots-11b(field=9)", {1, 3, 200, 200}), le2012_spec({.maps = 25, .stride = 1, .field = 9}));
}

TEST(Le2012Preset, FormulaMatchesTheBuiltModel) {
  // 200 -> 92 -> 38 -> 11 at stride 2: 92^2*8*(3*324+1) + 38^2*8*(8*324+1) + 11^2*8*2593.
  const std::int64_t le2012 = 92 * 92 * 8 * 973 + 38 * 38 * 8 * 2593 + 11 * 11 * 8 * 2593;
  EXPECT_EQ(le2012_parameter_count({}, {1, 3, 200, 200}), le2012);
  EXPECT_EQ(built_count("le2012", {1, 3, 200, 200}), le2012);
  EXPECT_EQ(built_count("le2012(maps=2)", {1, 3, 200, 200}), le2012_parameter_count({.maps = 2}, {1, 3, 200, 200}));
  // Stride 1 on a small grey image: 60 -> 43 -> 26 -> 9.
  const Shape4 small{2, 1, 60, 60};
  EXPECT_EQ(built_count("le2012(maps=1,stride=1)", small), le2012_parameter_count({.maps = 1, .stride = 1}, small));
  // stages=: one stage fits a 30x30 image that three do not (30 -> 7 -> too small).
  const Shape4 one_stage_input{1, 3, 30, 30};
  EXPECT_EQ(built_count("le2012(stages=1)", one_stage_input), 7 * 7 * 8 * 973);
  EXPECT_EQ(le2012_parameter_count({.stages = 1}, one_stage_input), 7 * 7 * 8 * 973);
  // field=: 7x7 fields at stride 2 on 48x48: 48 -> 21 -> 8 -> 1.
  const Shape4 field_input{1, 3, 48, 48};
  const std::int64_t field7 = 21 * 21 * 2 * (3 * 49 + 1) + 8 * 8 * 2 * (2 * 49 + 1) + 1 * 1 * 2 * (2 * 49 + 1);
  EXPECT_EQ(built_count("le2012(maps=2,field=7)", field_input), field7);
  EXPECT_EQ(le2012_parameter_count({.maps = 2, .field = 7}, field_input), field7);
  // Both, with the other presets' defaults: stride 1, 2 stages of 9x9 fields on 20x20 grey: 20 -> 12 -> 4.
  const Shape4 grey{1, 1, 20, 20};
  EXPECT_EQ(built_count("le2012-1b(stages=2,field=9)", grey),
            le2012_parameter_count({.maps = 7, .stride = 1, .field = 9, .stages = 2}, grey));
  EXPECT_EQ(built_count("le2012-1b(stages=2,field=9)", grey), 12 * 12 * 7 * (81 + 1) + 4 * 4 * 7 * (7 * 81 + 1));
  // Other fields, pools and stage counts through the spec function.
  const Le2012Options odd{.maps = 3, .stride = 2, .field = 5, .pool = 4, .lcn = 3, .stages = 2};
  const Shape4 rect{1, 2, 23, 31};
  EXPECT_EQ(built_count(le2012_spec(odd), rect), le2012_parameter_count(odd, rect));
}

TEST(Le2012Preset, BytesPerRankOnOneRank) {
  // One rank holds every parameter and its gradient, and every activation with its halo.
  const ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 small{2, 1, 60, 60};
  Sequential<float> net("le2012(maps=1,stride=1)", small, self, /*seed=*/1);
  EXPECT_EQ(net.local_parameter_bytes(), 2 * 4 * net.parameter_count());
  std::int64_t owned = 0;
  for (std::size_t i = 0; i <= net.size(); ++i) {
    const Shape4& s = net.shape(i);
    owned += s[0] * s[1] * s[2] * s[3];
  }
  // Every activation is read again in backward (local and l2pool read their inputs, lcn
  // its input and output), so all are alive when the loss writes the output's gradient
  // (halos come on top); the other gradients take memory that activations leave in
  // backward (models/graph.hpp, "Memory"). The model holds what its plan says.
  const Shape4& out = net.shape(net.size());
  EXPECT_GE(net.local_activation_bytes(), 4 * (owned + out[0] * out[1] * out[2] * out[3]));
  EXPECT_LT(net.local_activation_bytes(), 2 * 4 * owned);
  EXPECT_EQ(net.local_activation_bytes(),
            Sequential<float>::memory_plan("le2012(maps=1,stride=1)", small, self).total(MemoryUse::activations));
}

TEST(Le2012Preset, BillionParameterInstancesByHand) {
  // Stride 1 on 200x200x3: 183, 166, 149 outputs per side; 3*18*18+1 = 973, K*324+1.
  const auto stride1 = [](std::int64_t k) {
    return 183 * 183 * k * 973 + 166 * 166 * k * (k * 324 + 1) + 149 * 149 * k * (k * 324 + 1);
  };
  EXPECT_EQ(le2012_parameter_count({.maps = 7, .stride = 1}, {1, 3, 200, 200}), stride1(7));
  EXPECT_EQ(stride1(7), 1'018'384'010);
  EXPECT_EQ(le2012_parameter_count({.maps = 25, .stride = 1}, {1, 3, 200, 200}), stride1(25));
  EXPECT_EQ(stride1(25), 10'891'656'350);
  // The presets are these instances.
  EXPECT_EQ(preset_spec("le2012-1b", {1, 3, 200, 200}), le2012_spec({.maps = 7, .stride = 1}));
  EXPECT_EQ(preset_spec("cots-11b", {1, 3, 200, 200}), le2012_spec({.maps = 25, .stride = 1}));
}

}  // namespace
}  // namespace tessera::models
