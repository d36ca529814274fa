#pragma once
// Turning decoded images of any size into frames of one size, HxW.
#include <cstdint>
#include <vector>

#include "data/rgb_image.hpp"

namespace tessera::data {

struct FrameSize {
  std::int64_t height = 0;
  std::int64_t width = 0;
};

// The central HxW window (an odd surplus puts the extra pixel after the window).
// Throws std::invalid_argument when the image is smaller than the frame either way.
RgbImage center_crop(const RgbImage& image, FrameSize frame);

// Bilinear resampling with pixel centres aligned (PyTorch's interpolate(mode="bilinear",
// align_corners=False) without antialiasing), rounded to the nearest integer. The aspect
// ratio is not kept: crop first if it matters.
RgbImage resize_bilinear(const RgbImage& image, FrameSize frame);

// As many non-overlapping HxW frames as fit, from the top-left corner, row by row; the
// right and bottom remainders are dropped. Empty when the image is smaller than a frame.
std::vector<RgbImage> tile_frames(const RgbImage& image, FrameSize frame);

// Appends the image planar (CHW), the layout of Tessera's /images rows.
void append_planar(const RgbImage& image, std::vector<std::uint8_t>& out);

}  // namespace tessera::data
