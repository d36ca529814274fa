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

// ResNet-18/34 with basic blocks, as torchvision builds them: a 7x7 stride-2 stem conv
// (no bias), batch norm, relu, 3x3 stride-2 max pool; four stages of [2,2,2,2] (depth 18)
// or [3,4,6,3] (depth 34) basic blocks of width, 2*width, 4*width, 8*width channels, the
// first block of stages 2-4 at stride 2 with a 1x1 stride-2 conv + batch norm projection
// shortcut; then gap and linear(out=classes). Written as a graph spec with two blocks.
// Throws std::invalid_argument (naming "resnet" and the option) for a depth other than 18
// or 34, or a width or classes below 1.
struct ResNetOptions {
  std::int64_t depth = 18;
  std::int64_t width = 64;
  std::int64_t classes = 1000;
  // A layout per stage: stages `from`..4 (torchvision's layer1..layer4) run on grid `late`
  // (a regrid before stage `from`), e.g. late=4x1x1,from=3: the wide early stages split
  // over space as the run's --grid, the small late ones over samples. Empty: no regrid.
  std::string late;
  std::int64_t from = 3;
};

std::string resnet_spec(const ResNetOptions& options);

// The U-Net: `depth` encoder levels of [conv3x3 (no bias) - batchnorm - relu] x2 at widths
// width * 2^level, each followed by maxpool(k=2); the same double conv at width * 2^depth as
// the bottleneck; per level back up deconv(k=2,stride=2) to half the channels, concat of
// the encoder level's output (first) and the deconv's, the double conv; a final 1x1 conv
// (with bias) to `out` channels (0: as many as the input has). Throws
// std::invalid_argument naming "unet" for a depth, width or out below 1, and for an input
// whose height or width is not divisible by 2^depth (naming the size).
struct UNetOptions {
  std::int64_t depth = 4;
  std::int64_t width = 32;
  std::int64_t out = 0;
};

std::string unet_spec(const UNetOptions& options, const Shape4& input);

}  // namespace tessera::models
