// Fitting images to frames: the centre crop, the bilinear resize (pixel centres aligned,
// as PyTorch's align_corners=False), tiling from the top-left, and the planar (CHW) layout
// the data file stores. Images whose pixels encode their coordinates show where each
// output pixel came from.
#include <gtest/gtest.h>

#include <stdexcept>

#include "data/frames.hpp"
#include "sample_files.hpp"

namespace tessera::data {
namespace {

TEST(Frames, CenterCropTakesTheMiddle) {
  const RgbImage image = samples::coordinates(10, 9);
  const RgbImage crop = center_crop(image, {4, 4});  // surplus 6 rows, 5 columns
  EXPECT_EQ(crop.height, 4);
  EXPECT_EQ(crop.width, 4);
  EXPECT_EQ(crop.at(0, 0, 0), 3) << "top row";
  EXPECT_EQ(crop.at(0, 0, 1), 2) << "left column: the odd pixel goes after the window";
  EXPECT_EQ(crop.at(3, 3, 0), 6);
  EXPECT_EQ(crop.at(3, 3, 1), 5);
}

TEST(Frames, CenterCropOfASmallerImageIsAnError) {
  EXPECT_THROW(center_crop(samples::coordinates(3, 9), {4, 4}), std::invalid_argument);
  EXPECT_EQ(center_crop(samples::coordinates(4, 4), {4, 4}).pixels, samples::coordinates(4, 4).pixels);
}

TEST(Frames, TilesAreNonOverlappingFromTheTopLeft) {
  const RgbImage image = samples::coordinates(10, 13);
  const std::vector<RgbImage> tiles = tile_frames(image, {4, 6});
  ASSERT_EQ(tiles.size(), 4u) << "2 rows x 2 columns fit; the remainders are dropped";
  const int origins[4][2] = {{0, 0}, {0, 6}, {4, 0}, {4, 6}};
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(tiles[t].at(0, 0, 0), origins[t][0]) << "tile " << t;
    EXPECT_EQ(tiles[t].at(0, 0, 1), origins[t][1]) << "tile " << t;
    EXPECT_EQ(tiles[t].at(3, 5, 0), origins[t][0] + 3);
    EXPECT_EQ(tiles[t].at(3, 5, 1), origins[t][1] + 5);
  }
  EXPECT_TRUE(tile_frames(image, {11, 2}).empty());
}

TEST(Frames, ResizeUsesAlignedPixelCentres) {
  RgbImage image(1, 2);
  for (int c = 0; c < 3; ++c) image.at(0, 0, c) = 0, image.at(0, 1, c) = 100;
  const RgbImage wide = resize_bilinear(image, {1, 4});
  // Source x of output i: (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 (clamped).
  const int expected[4] = {0, 25, 75, 100};
  for (int x = 0; x < 4; ++x) EXPECT_EQ(wide.at(0, x, 0), expected[x]) << "x " << x;
}

TEST(Frames, ResizeToTheSameSizeIsTheIdentity) {
  const RgbImage image = samples::coordinates(7, 5);
  EXPECT_EQ(resize_bilinear(image, {7, 5}).pixels, image.pixels);
}

TEST(Frames, ResizeKeepsAConstantImageConstant) {
  RgbImage image(9, 13);
  std::fill(image.pixels.begin(), image.pixels.end(), std::uint8_t{77});
  for (FrameSize size : {FrameSize{4, 4}, FrameSize{20, 3}}) {
    const RgbImage out = resize_bilinear(image, size);
    for (std::uint8_t v : out.pixels) ASSERT_EQ(v, 77);
  }
}

TEST(Frames, PlanarLayoutIsChannelThenRowThenColumn) {
  const RgbImage image = samples::coordinates(2, 3);
  std::vector<std::uint8_t> planar{42};  // appended after what is there
  append_planar(image, planar);
  ASSERT_EQ(planar.size(), 1u + 18u);
  EXPECT_EQ(planar[0], 42);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) EXPECT_EQ(planar[1 + (c * 2 + y) * 3 + x], image.at(y, x, c));
}

}  // namespace
}  // namespace tessera::data
