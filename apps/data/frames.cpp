#include "data/frames.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tessera::data {
namespace {

RgbImage window(const RgbImage& image, std::int64_t top, std::int64_t left, FrameSize frame) {
  RgbImage out(frame.height, frame.width);
  for (std::int64_t y = 0; y < frame.height; ++y)
    std::copy_n(&image.pixels[static_cast<std::size_t>(((top + y) * image.width + left) * 3)], frame.width * 3,
                &out.pixels[static_cast<std::size_t>(y * frame.width * 3)]);
  return out;
}

// Source coordinate of output pixel `i` with centres aligned, clamped to the image, as
// the lower neighbour and the weight of the upper one.
struct Tap {
  std::int64_t lo, hi;
  double weight;
};

Tap tap(std::int64_t i, std::int64_t in_size, std::int64_t out_size) {
  const double scale = double(in_size) / double(out_size);
  const double src = std::clamp((double(i) + 0.5) * scale - 0.5, 0.0, double(in_size - 1));
  const auto lo = static_cast<std::int64_t>(src);
  return {lo, std::min(lo + 1, in_size - 1), src - double(lo)};
}

}  // namespace

RgbImage center_crop(const RgbImage& image, FrameSize frame) {
  if (image.height < frame.height || image.width < frame.width)
    throw std::invalid_argument("is " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                                ", smaller than the " + std::to_string(frame.height) + "x" +
                                std::to_string(frame.width) + " crop (use --resize)");
  return window(image, (image.height - frame.height) / 2, (image.width - frame.width) / 2, frame);
}

RgbImage resize_bilinear(const RgbImage& image, FrameSize frame) {
  RgbImage out(frame.height, frame.width);
  for (std::int64_t y = 0; y < frame.height; ++y) {
    const Tap ty = tap(y, image.height, frame.height);
    for (std::int64_t x = 0; x < frame.width; ++x) {
      const Tap tx = tap(x, image.width, frame.width);
      for (int c = 0; c < 3; ++c) {
        const double top = image.at(ty.lo, tx.lo, c) * (1 - tx.weight) + image.at(ty.lo, tx.hi, c) * tx.weight;
        const double bottom = image.at(ty.hi, tx.lo, c) * (1 - tx.weight) + image.at(ty.hi, tx.hi, c) * tx.weight;
        out.at(y, x, c) = static_cast<std::uint8_t>(std::lround(std::clamp(top * (1 - ty.weight) + bottom * ty.weight, 0.0, 255.0)));
      }
    }
  }
  return out;
}

std::vector<RgbImage> tile_frames(const RgbImage& image, FrameSize frame) {
  std::vector<RgbImage> frames;
  for (std::int64_t top = 0; top + frame.height <= image.height; top += frame.height)
    for (std::int64_t left = 0; left + frame.width <= image.width; left += frame.width)
      frames.push_back(window(image, top, left, frame));
  return frames;
}

void append_planar(const RgbImage& image, std::vector<std::uint8_t>& out) {
  const std::size_t plane = static_cast<std::size_t>(image.height * image.width);
  const std::size_t start = out.size();
  out.resize(start + 3 * plane);
  for (std::size_t i = 0; i < plane; ++i)
    for (std::size_t c = 0; c < 3; ++c) out[start + c * plane + i] = image.pixels[3 * i + c];
}

}  // namespace tessera::data
