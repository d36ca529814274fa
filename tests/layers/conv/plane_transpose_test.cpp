// The bf16 NCHW <-> NHWC layout change the oneDNN convolution can do itself
// (layers/onednn/plane_transpose.hpp): the 16 x 16 register blocks move every value of every
// matrix shape as the value-by-value loop does (full blocks, ragged edges, padded rows); the
// plan is made only for the bf16 pair it handles; and on halo-padded and dense tiles it
// writes exactly what oneDNN's own reorder writes, both ways (so the backend's per-layout
// choice between the two never changes a result). The convolutions that use it are
// checked against fp32 and across grids by the bf16 layer tests.
#include <gtest/gtest.h>

#include <dnnl.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "layers/onednn/plane_transpose.hpp"

namespace tessera::layers {
namespace {

using dnnl::memory;
using Dt = memory::data_type;
using Tag = memory::format_tag;

TEST(Transpose16, BlocksMoveEveryValueAsTheValueByValueLoopDoesAndNothingElse) {
  std::mt19937 random(7);
  for (const std::int64_t rows : {1, 2, 15, 16, 17, 31, 32, 33, 64})
    for (const std::int64_t cols : {1, 3, 16, 19, 28, 32, 48, 65}) {
      const std::int64_t from_ld = cols + 5, to_ld = rows + 3;  // padded rows stay untouched
      std::vector<std::uint16_t> from(rows * from_ld), blocked(cols * to_ld, 0xABCD), expected(cols * to_ld, 0xABCD);
      for (auto& v : from) v = static_cast<std::uint16_t>(random());
      transpose16::scalar(from.data(), from_ld, expected.data(), to_ld, rows, cols);
      transpose16::matrix(from.data(), from_ld, blocked.data(), to_ld, rows, cols, true);
      ASSERT_EQ(blocked, expected) << rows << " x " << cols;
      for (std::int64_t i = 0; i < rows; ++i)  // the loop itself: value (i, j) lands at (j, i)
        for (std::int64_t j = 0; j < cols; ++j) ASSERT_EQ(expected[j * to_ld + i], from[i * from_ld + j]);
    }
}

memory::desc strided(const memory::dims& dims, Dt dt, const memory::dims& strides) { return memory::desc(dims, dt, strides); }

TEST(PlaneTranspose, PlansOnlyBetweenPlainBf16ChannelsFirstAndChannelsLast) {
  // A halo-padded tile: 70 x 6 inside 72 x 8 rows, as a DistArray hands it over: a plane
  // per (image, row).
  const memory::dims dims{2, 5, 6, 70};
  const memory::desc nhwc(dims, Dt::bf16, Tag::nhwc);
  const memory::desc tile = strided(dims, Dt::bf16, {5 * 8 * 72, 8 * 72, 72, 1});
  const auto there = *plane_transpose::plan(tile, nhwc);
  EXPECT_EQ(there.images * there.heights, 2 * 6);
  EXPECT_EQ(there.rows, 5);
  EXPECT_EQ(there.cols, 70);
  EXPECT_EQ(there.from_ld, 8 * 72);
  EXPECT_EQ(there.to_ld, 5);
  const auto back = *plane_transpose::plan(nhwc, tile);
  EXPECT_EQ(back.rows, 70);
  EXPECT_EQ(back.cols, 5);
  EXPECT_EQ(back.from_ld, 5);
  EXPECT_EQ(back.to_ld, 8 * 72);

  // No halo on either side: one plane per image, its rows one long row (a narrow tile too).
  const memory::dims narrow{2, 5, 6, 14};
  const memory::desc dense_nchw(narrow, Dt::bf16, Tag::nchw), dense_nhwc(narrow, Dt::bf16, Tag::nhwc);
  const auto merged = *plane_transpose::plan(dense_nchw, dense_nhwc);
  EXPECT_EQ(merged.images * merged.heights, 2);
  EXPECT_EQ(merged.cols, 6 * 14);
  EXPECT_EQ(plane_transpose::plan(dense_nhwc, dense_nchw)->rows, 6 * 14);

  // Left to oneDNN: a narrow row beside a halo, no transpose, f32, a blocked format, other
  // dims, a single channel.
  EXPECT_FALSE(plane_transpose::plan(strided(narrow, Dt::bf16, {5 * 8 * 16, 8 * 16, 16, 1}), dense_nhwc));
  EXPECT_FALSE(plane_transpose::plan(tile, tile));
  EXPECT_FALSE(plane_transpose::plan(memory::desc(dims, Dt::f32, Tag::nchw), memory::desc(dims, Dt::f32, Tag::nhwc)));
  EXPECT_FALSE(plane_transpose::plan(tile, memory::desc(dims, Dt::bf16, Tag::nChw16c)));
  EXPECT_FALSE(plane_transpose::plan(tile, memory::desc({2, 5, 6, 71}, Dt::bf16, Tag::nhwc)));
  const memory::dims one_channel{2, 1, 6, 70};
  EXPECT_FALSE(plane_transpose::plan(memory::desc(one_channel, Dt::bf16, Tag::nchw),
                                     memory::desc(one_channel, Dt::bf16, Tag::nhwc)));
}

// A bf16 tile (halo-padded, or dense) moved to NHWC and back by plane_transpose and by
// oneDNN's reorder: the same bits both ways, and a tile's halo is left as it was.
TEST(PlaneTranspose, WritesWhatOnednnsReorderWritesBothWays) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  struct Case {
    memory::dims dims;
    std::int64_t halo;
  };
  for (const Case& k : {Case{{3, 19, 5, 70}, 1}, Case{{2, 32, 4, 64}, 2}, Case{{1, 17, 3, 81}, 1},
                        Case{{2, 19, 5, 14}, 0}, Case{{2, 40, 9, 28}, 0}}) {
    const memory::dims& dims = k.dims;
    const std::int64_t c = dims[1], h = dims[2], w = dims[3], row = w + 2 * k.halo, plane = row * (h + 2 * k.halo);
    const memory::desc tile_desc = strided(dims, Dt::bf16, {c * plane, plane, row, 1});
    const memory::desc nhwc_desc(dims, Dt::bf16, Tag::nhwc);
    const auto there = plane_transpose::plan(tile_desc, nhwc_desc), back = plane_transpose::plan(nhwc_desc, tile_desc);
    ASSERT_TRUE(there && back) << "no plan for " << c << " x " << h << " x " << w;
    std::mt19937 random(11);
    std::vector<std::uint16_t> tile(dims[0] * c * plane);
    // Normal numbers only: on a CPU without AVX-512 (seen on an AVX2 EPYC) oneDNN 2.6's
    // reorder converts through fp32 with subnormals flushed to zero, while plane_transpose
    // moves bits; any sign, exponent 1-254 and mantissa still covers every byte pattern.
    for (auto& v : tile) {
      const auto bits = static_cast<std::uint32_t>(random());
      const std::uint32_t sign = bits >> 31, exponent = 1 + bits % 254, mantissa = (bits >> 8) & 0x7F;
      v = static_cast<std::uint16_t>(sign << 15 | exponent << 7 | mantissa);
    }
    memory tile_memory(tile_desc, engine, tile.data()), by_onednn(nhwc_desc, engine), by_planes(nhwc_desc, engine);
    dnnl::reorder(tile_memory, by_onednn).execute(stream, tile_memory, by_onednn);
    stream.wait();
    plane_transpose::run(*there, tile.data(), by_planes.get_data_handle());
    const auto* a = static_cast<const std::uint16_t*>(by_onednn.get_data_handle());
    const auto* b = static_cast<const std::uint16_t*>(by_planes.get_data_handle());
    const std::int64_t count = dims[0] * c * h * w;
    ASSERT_EQ(std::vector<std::uint16_t>(a, a + count), std::vector<std::uint16_t>(b, b + count));

    std::vector<std::uint16_t> back_onednn(tile.size(), 0x7FC1), back_planes(tile.size(), 0x7FC1);
    memory back_onednn_memory(tile_desc, engine, back_onednn.data());
    dnnl::reorder(by_onednn, back_onednn_memory).execute(stream, by_onednn, back_onednn_memory);
    stream.wait();
    plane_transpose::run(*back, b, back_planes.data());
    EXPECT_EQ(back_planes, back_onednn);
  }
}

}  // namespace
}  // namespace tessera::layers
