#pragma once
// Decodes PNG (libpng) and JPEG (libjpeg-turbo) files into 8-bit RGB. The format is told by
// the file's signature, not its name. Grey becomes three equal channels, alpha is dropped
// (colours as stored, not composited), 16-bit PNG samples are reduced to 8 bits.
// Any file that is missing, of another format, or corrupt (including a JPEG that the
// library could only decode with warnings, e.g. a truncated one) throws
// std::runtime_error naming the file.
#include <string>

#include "data/rgb_image.hpp"

namespace tessera::data {

RgbImage read_image(const std::string& path);

}  // namespace tessera::data
