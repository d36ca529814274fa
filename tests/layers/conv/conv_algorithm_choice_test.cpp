// The rule that picks a library convolution algorithm (layers/conv_algorithm_choice.hpp),
// on fabricated rankings: the CUDA build runs it on cuDNN's, which this build cannot.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "layers/conv_algorithm_choice.hpp"
#include "layers/conv_backend.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::layers {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

AlgorithmCandidate gemm(int id, std::size_t workspace = 0) { return {id, true, true, false, workspace}; }

std::vector<int> ids(const std::vector<AlgorithmCandidate>& order) {
  std::vector<int> out;
  for (const auto& c : order) out.push_back(c.id);
  return out;
}

TEST(ConvAlgorithmChoice, KeepsOnlyDeterministicExactSumSupportedAlgorithmsWithinTheCap) {
  const std::vector<AlgorithmCandidate> ranked = {
      {4, true, true, true, 0},         // FFT: rounding depends on the tile
      {6, true, true, true, 0},         // Winograd
      {0, true, false, false, 0},       // non-deterministic (atomics)
      gemm(7, 2 * kConvWorkspaceCap),   // over the cap
      {3, false, true, false, 0},       // not supported for these descriptors
      gemm(1, 8 * kMiB),
      gemm(2, kConvWorkspaceCap),       // exactly the cap: allowed
  };
  EXPECT_EQ(ids(acceptable_algorithms(ranked, kConvWorkspaceCap, std::nullopt)), (std::vector<int>{1, 2}));
  const auto order = acceptable_algorithms(ranked, kConvWorkspaceCap, std::nullopt);
  EXPECT_EQ(order[0].workspace, 8 * kMiB);  // the candidate travels whole: its workspace too
}

TEST(ConvAlgorithmChoice, TheGeometrysAlgorithmComesFirstWhereverItIsAcceptable) {
  // A border strip's ranking puts another algorithm first: the interior's still runs.
  const std::vector<AlgorithmCandidate> strip = {gemm(0), gemm(1), gemm(2)};
  EXPECT_EQ(ids(acceptable_algorithms(strip, kConvWorkspaceCap, 2)), (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(ids(acceptable_algorithms(strip, kConvWorkspaceCap, 0)), (std::vector<int>{0, 1, 2}));
}

TEST(ConvAlgorithmChoice, FallsBackInRankOrderWhereTheGeometrysAlgorithmIsNotAcceptable) {
  const std::vector<AlgorithmCandidate> ranked = {gemm(1), {2, false, true, false, 0}, gemm(0)};
  EXPECT_EQ(ids(acceptable_algorithms(ranked, kConvWorkspaceCap, 2)), (std::vector<int>{1, 0}));
  EXPECT_EQ(ids(acceptable_algorithms(ranked, kConvWorkspaceCap, 5)), (std::vector<int>{1, 0}));
}

TEST(ConvAlgorithmChoice, NoAcceptableCandidateSaysWhatEachLacked) {
  const std::vector<AlgorithmCandidate> ranked = {{4, true, true, true, 0}, {0, true, false, false, 0},
                                                  gemm(1, 300 * kMiB), {2, false, true, false, 0}};
  EXPECT_TRUE(acceptable_algorithms(ranked, kConvWorkspaceCap, std::nullopt).empty());
  EXPECT_EQ(no_acceptable_algorithm(ranked, kConvWorkspaceCap, "backward data"),
            "convolution backward data: no deterministic, exact-sum algorithm within the 256 MiB workspace cap "
            "runs this shape (candidates: 4 FFT/Winograd, 0 non-deterministic, 1 workspace 300 MiB, 2 unsupported)");
  EXPECT_TRUE(acceptable_algorithms({}, kConvWorkspaceCap, 1).empty());
  EXPECT_NE(no_acceptable_algorithm({}, kConvWorkspaceCap, "forward").find("candidates: none"), std::string::npos);
}

TEST(ConvAlgorithmChoice, TensorsSpanningTwoToThe31ElementsAreRejectedUpFront) {
  // 2^31 - 1 elements exactly: the largest a 32-bit index reaches.
  EXPECT_NO_THROW(check_tensor_span({1, 1, 1, (std::int64_t(1) << 31) - 1}, {1, 1, 1, 1}, "x"));
  EXPECT_EQ(testing::error_message<std::length_error>(
                [] { check_tensor_span({2, 16, 8192, 8192}, {16 * 8192 * 8192, 8192 * 8192, 8192, 1}, "the input"); }),
            "the input spans 2147483648 elements; the library indexes at most 2^31 - 1: use more ranks or a smaller "
            "batch");
  // A window inside a larger array: the strides, not the extents, make it too long.
  EXPECT_NE(testing::error_message<std::length_error>(
                [] { check_tensor_span({1, 2, 4, 4}, {0, std::int64_t(1) << 31, 8, 1}, "dy"); }),
            "");
  EXPECT_NO_THROW(check_tensor_span({0, 2, 4, 4}, {0, std::int64_t(1) << 40, 8, 1}, "empty"));
}

}  // namespace
// What a library convolution is handed: the input rows and columns the outputs read. A
// stride-2 window may carry a cell no output reads; it is cut, as is the floor of the
// valid-convolution rule; nothing is ever grown, and empty outputs leave the input alone.
TEST(ConvReadDims, CutsTheCellsNoOutputReadsAndNothingElse) {
  ConvGeometry g;
  g.kh = 5, g.kw = 3, g.sh = 2, g.sw = 1, g.dh = 1, g.dw = 2;
  // 2 output rows read (2-1)*2+5 = 7 rows; 4 output columns read (4-1)*1+(3-1)*2+1 = 8.
  EXPECT_EQ(conv_read_dims(g, {2, 3, 8, 8}, {2, 4, 2, 4}), (Shape4{2, 3, 7, 8}));
  EXPECT_EQ(conv_read_dims(g, {2, 3, 7, 9}, {2, 4, 2, 4}), (Shape4{2, 3, 7, 8}));
  for (std::int64_t in = 5; in < 40; ++in) {  // the valid rule's output count reads at most `in`
    const std::int64_t out = g.valid_h(in);
    const Shape4 read = conv_read_dims(g, {1, 1, in, 8}, {1, 1, out, 4});
    EXPECT_LE(read[H], in);
    EXPECT_GT(read[H], in - g.sh) << "cut more than the stride's remainder at " << in;
    EXPECT_EQ(g.valid_h(read[H]), out) << "the cut changed the output count at " << in;
  }
  EXPECT_EQ(conv_read_dims(g, {1, 1, 3, 3}, {1, 1, 0, 0}), (Shape4{1, 1, 3, 3}));
  EXPECT_EQ(packed_strides({2, 3, 4, 5}), (Index4{60, 20, 5, 1}));
}

}  // namespace tessera::layers
