#pragma once
// The case list bench_layers and torch_layers.py share (bench/layers/cases.txt): one case a
// line, "<input NxCxHxW> <spec>", '#' to the end of a line a comment. Kept as data so that
// adding a layer to the comparison is one line, and so that the two can never time
// different things.

#include <string>
#include <vector>

#include "distarray/box.hpp"

namespace tessera::bench {

struct LayerCase {
  int line = 0;      // in the file, for messages
  Shape4 input{};    // global NCHW
  std::string spec;  // a sequential spec, as written
};

// "8x32x128x128" -> {8, 32, 128, 128}; throws std::invalid_argument naming the problem.
Shape4 parse_shape(const std::string& text);
std::string format_shape(const Shape4& shape);

// Throws std::invalid_argument naming the file and line for an unreadable file or a line
// that is not "<shape> <spec>".
std::vector<LayerCase> read_cases(const std::string& path);

}  // namespace tessera::bench
