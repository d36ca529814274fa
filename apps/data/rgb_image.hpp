#pragma once
// An 8-bit RGB image as decoders produce it: rows top to bottom, pixels interleaved (HWC).
#include <cstdint>
#include <vector>

namespace tessera::data {

struct RgbImage {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::vector<std::uint8_t> pixels;  // height * width * 3

  RgbImage() = default;
  RgbImage(std::int64_t h, std::int64_t w) : height(h), width(w), pixels(static_cast<std::size_t>(h * w * 3)) {}
  std::uint8_t& at(std::int64_t y, std::int64_t x, int c) { return pixels[static_cast<std::size_t>((y * width + x) * 3 + c)]; }
  std::uint8_t at(std::int64_t y, std::int64_t x, int c) const {
    return pixels[static_cast<std::size_t>((y * width + x) * 3 + c)];
  }
};

}  // namespace tessera::data
