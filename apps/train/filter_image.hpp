#pragma once
// The learned filters of a model's first layer as a picture: one tile per output channel,
// each scaled on its own so that 0 is mid-grey and its largest |weight| is black or white.
// Greyscale for one input channel, RGB for three (other counts show channel 0).

#include <string>

#include "data/rgb_image.hpp"

namespace tessera::train {

// Reads /params/0/weight (O, C, KH, KW) from checkpoint `path` (one process) and renders it
// with `zoom` pixels per weight (more for small kernels: each tile is at least 48 pixels). Throws std::runtime_error when the file cannot be read or
// layer 0 holds no 4-D weight.
data::RgbImage render_first_layer_filters(const std::string& checkpoint, int zoom = 8);

}  // namespace tessera::train
