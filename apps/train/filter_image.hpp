#pragma once
// The learned filters of a model's first layer as a picture, each filter a tile scaled on
// its own so that 0 is mid-grey and its largest |weight| is black or white. Greyscale for
// one input channel, RGB for three (other counts show channel 0).
//
// A convolution's bank (O, C, KH, KW) is a near-square grid of its O filters. A locally
// connected layer's (Hout, Wout, K, C, KH, KW) holds a bank per output position (untied);
// the picture samples the positions at 1/4, 1/2 and 3/4 of each axis (index n*q/4, so up
// to 3x3 = 9 positions, fewer when Hout or Wout < 3 would repeat one): one row per
// position, top-left first and row by row, and one column per map k = 0..K-1.

#include <string>

#include "data/rgb_image.hpp"

namespace tessera::train {

// Reads the weight of the first layer that has parameters (/params/<i>/weight, lowest i)
// from checkpoint `path` (one process) and renders it with `zoom`
// pixels per weight (more for small kernels: each tile is at least 48 pixels). Of a
// locally connected weight it reads only the sampled positions (a stage-one le2012 weight
// is ~260 MB). Throws std::runtime_error when the file cannot be read, holds no weight, or
// that weight is neither 4-D (conv) nor 6-D (local).
data::RgbImage render_first_layer_filters(const std::string& checkpoint, int zoom = 8);

}  // namespace tessera::train
