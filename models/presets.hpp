#pragma once
// Named models: a preset is a spec string, possibly depending on the input (a denoiser
// ends with as many channels as it was given). Sequential accepts a preset name wherever
// it accepts a spec.

#include <string>
#include <string_view>
#include <vector>

#include "distarray/box.hpp"

namespace tessera::models {

std::vector<std::string> preset_names();  // "denoise-fcn, fashion-cnn, ..." sorted
bool is_preset(std::string_view name);

// The spec of preset `name` for inputs of global shape `input`. Throws
// std::invalid_argument listing the presets when `name` is none.
std::string preset_spec(std::string_view name, const Shape4& input);

// `text` itself when it is a spec, the preset's spec when it names one.
std::string resolve_model(std::string_view text, const Shape4& input);

}  // namespace tessera::models
