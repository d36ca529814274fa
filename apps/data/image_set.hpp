#pragma once
// A data file from image files (PNG, JPEG): every image cropped or resized to one frame,
// or cut into frames, as /images uint8 (N,3,H,W).
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "data/frames.hpp"

namespace tessera::data {

enum class Fit { crop, resize, tile };

struct ImageSetOptions {
  std::string out_file;
  FrameSize size;
  Fit fit = Fit::crop;
  std::optional<std::int64_t> label;  // if set, /labels holds it for every frame
  std::vector<std::string> inputs;
};

// Checks the destination first, then decodes every image, in order. With Fit::tile an
// image smaller than one frame is skipped with a note on `log`; no frames at all is an
// error. On any error the output file is neither created nor changed.
void convert_image_set(const ImageSetOptions& options, std::ostream& log);

}  // namespace tessera::data
