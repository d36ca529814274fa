// The kernels cuDNN's bf16 convolutions leave to Tessera (layers/cudnn/bf16_conv_kernels.hpp),
// run on the host: on a strided box inside a larger buffer (as a window's sub-box reaches the
// backend) the bias is added to every cell of the box and to nothing outside it, each
// channel's bias gradient is the double sum of its cells added to the fp32 gradient (with
// more than one block of cells per channel), and a bf16 weight gradient is added into fp32.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "layers/cudnn/bf16_conv_kernels.hpp"

namespace tessera::layers {
namespace {

using Host = Kokkos::DefaultHostExecutionSpace;

// A (2, 3, 53, 47) buffer; the box is (2, 3, 50, 45) at (h, w) = (2, 1): 4,500 cells a
// channel, two blocks of kSumBlockCells.
struct StridedBox {
  Shape4 buffer{2, 3, 53, 47};
  Shape4 box{2, 3, 50, 45};
  std::int64_t h0 = 2, w0 = 1;
  std::vector<bf16> cells;

  StridedBox() : cells(static_cast<std::size_t>(buffer[N] * buffer[C] * buffer[H] * buffer[W])) {
    for (std::size_t i = 0; i < cells.size(); ++i) cells[i] = bf16(std::sin(0.37f * static_cast<float>(i)) * 3.0f);
  }
  Index4 strides() const { return packed_strides(buffer); }
  std::size_t at(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    const Index4 s = strides();
    return static_cast<std::size_t>(n * s[N] + c * s[C] + h * s[H] + w * s[W]);
  }
  bool inside(std::int64_t h, std::int64_t w) const {
    return h >= h0 && h < h0 + box[H] && w >= w0 && w < w0 + box[W];
  }
  template <class E>
  Tensor4Ref<E> ref(E* data) const {
    return {data + at(0, 0, h0, w0), box, strides()};
  }
};

TEST(CudnnBf16Kernels, BiasIsAddedToEveryCellOfTheBoxAndNothingElse) {
  StridedBox t;
  const std::vector<bf16> before = t.cells;
  const std::vector<bf16> bias = {bf16(0.5f), bf16(-1.25f), bf16(3.0f)};
  cudnn_bf16::add_bias<Host>(t.ref(t.cells.data()), bias.data());
  Host().fence();
  for (std::int64_t n = 0; n < t.buffer[N]; ++n)
    for (std::int64_t c = 0; c < t.buffer[C]; ++c)
      for (std::int64_t h = 0; h < t.buffer[H]; ++h)
        for (std::int64_t w = 0; w < t.buffer[W]; ++w) {
          const std::size_t i = t.at(n, c, h, w);
          const float b = bias[static_cast<std::size_t>(c)];
          const float want = t.inside(h, w) ? static_cast<float>(bf16(static_cast<float>(before[i]) + b))
                                            : static_cast<float>(before[i]);
          ASSERT_EQ(static_cast<float>(t.cells[i]), want) << n << "," << c << "," << h << "," << w;
        }
}

TEST(CudnnBf16Kernels, BiasGradientAddsEachChannelsSumInDouble) {
  StridedBox t;
  std::vector<float> dbias = {1.0f, -2.0f, 0.25f};
  const std::vector<float> start = dbias;
  BlockPartials<Host> partial;
  cudnn_bf16::add_bias_gradient<Host>(t.ref<const bf16>(t.cells.data()), dbias.data(), partial);
  Host().fence();
  EXPECT_EQ(partial.extent(1), 2u) << "4,500 cells a channel are two blocks";
  for (std::int64_t c = 0; c < t.box[C]; ++c) {
    double sum = 0;
    for (std::int64_t n = 0; n < t.box[N]; ++n)
      for (std::int64_t h = t.h0; h < t.h0 + t.box[H]; ++h)
        for (std::int64_t w = t.w0; w < t.w0 + t.box[W]; ++w) sum += static_cast<float>(t.cells[t.at(n, c, h, w)]);
    const auto k = static_cast<std::size_t>(c);
    EXPECT_EQ(dbias[k], start[k] + static_cast<float>(sum)) << "channel " << c;
  }
}

TEST(CudnnBf16Kernels, Bf16WeightGradientIsAddedIntoFp32) {
  const std::vector<bf16> from = {bf16(1.5f), bf16(-0.0078125f), bf16(1e-3f), bf16(-7.0f)};
  std::vector<float> to = {0.25f, 1.0f, -2.0f, 3.0f};
  const std::vector<float> start = to;
  cudnn_bf16::add_widened<Host>(from.data(), to.data(), 3);
  Host().fence();
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(to[i], start[i] + static_cast<float>(from[i])) << i;
  EXPECT_EQ(to[3], start[3]) << "past count: untouched";
}

}  // namespace
}  // namespace tessera::layers
