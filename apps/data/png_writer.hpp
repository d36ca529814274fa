#pragma once
// Writes an 8-bit RGB image as a PNG (libpng), atomically: the file appears complete or
// not at all.
#include <string>

#include "data/rgb_image.hpp"

namespace tessera::data {

// Throws std::runtime_error naming the path when it cannot be written.
void write_png(const RgbImage& image, const std::string& path);

}  // namespace tessera::data
