#pragma once
// Named models: a preset is a spec string, possibly depending on the input (a denoiser
// ends with as many channels as it was given) and on options given as a layer's are:
// "le2012(maps=8,stride=2,stages=3,field=18)". Sequential accepts a preset name wherever
// it accepts a spec.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "distarray/box.hpp"

namespace tessera::models {

std::vector<std::string> preset_names();  // "denoise-fcn, fashion-cnn, ..." sorted
// Whether `text` is a preset name, with or without "(options)".
bool is_preset(std::string_view text);

// The spec of preset `text` ("name" or "name(key=value,...)") for inputs of global shape
// `input`. Throws std::invalid_argument listing the presets when the name is none, and
// naming the option when an option is unknown or its value is out of range.
std::string preset_spec(std::string_view text, const Shape4& input);

// `text` itself when it is a spec, the preset's spec when it names one.
std::string resolve_model(std::string_view text, const Shape4& input);

// The Le et al. (2012) network: `stages` times local(out=maps,k=field,stride) (untied
// filters), l2pool(k=pool,stride=1,pad=pool/2) (5x5 overlapping neighbourhoods, size kept)
// and lcn(k=lcn). The presets le2012, le2012-1b and cots-11b are instances with different
// defaults (docs/models.md has the arithmetic).
struct Le2012Options {
  std::int64_t maps = 8;
  std::int64_t stride = 2;
  std::int64_t field = 18;
  std::int64_t pool = 5;
  std::int64_t lcn = 5;
  std::int64_t stages = 3;
};

std::string le2012_spec(const Le2012Options& options);

// Exactly the parameters Sequential builds for le2012_spec(options) on `input`, from the
// formula: each local layer holds Hout*Wout*K*(C*R*R+1) numbers (untied weights and bias
// per output position), Hout = (H - R)/stride + 1; pooling and LCN keep the size and have
// none. Throws std::invalid_argument when a stage's input is smaller than the field.
std::int64_t le2012_parameter_count(const Le2012Options& options, const Shape4& input);

}  // namespace tessera::models
