#include "models/presets.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <utility>

#include "distarray/process_grid.hpp"
#include "layers/spec_options.hpp"

namespace tessera::models {
namespace {

using layers::SpecOptions;

struct Preset {
  const char* name;
  // Takes the options it understands from `options`; preset_spec rejects the rest.
  std::function<std::string(const Shape4& input, SpecOptions& options)> spec;
};

// "name(options)" -> (name, options); "name" -> (name, "").
std::pair<std::string_view, std::string_view> split_call(std::string_view text) {
  const auto open = text.find('(');
  if (open == std::string_view::npos || text.empty() || text.back() != ')') return {text, {}};
  return {text.substr(0, open), text.substr(open + 1, text.size() - open - 2)};
}

// The le2012 family: `defaults` changed by maps=, stride=, stages= and field= from the text
// (le2012_spec rejects values below 1, naming the option).
std::string le2012_from(Le2012Options defaults, SpecOptions& options) {
  if (auto maps = options.take_int("maps")) defaults.maps = *maps;
  if (auto stride = options.take_int("stride")) defaults.stride = *stride;
  if (auto stages = options.take_int("stages")) defaults.stages = *stages;
  if (auto field = options.take_int("field")) defaults.field = *field;
  return le2012_spec(defaults);
}

// Batch statistics over every rank (stats=all) keep the model's result independent of
// the process grid, as PyTorch's BatchNorm2d over the global batch.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> all{
      {"cots-11b",
       [](const Shape4&, SpecOptions& options) {
         // Coates et al. 2013 (COTS HPC) scale: 25 untied maps at stride 1, 10.9e9
         // parameters on 200x200x3 (docs/models.md).
         return le2012_from({.maps = 25, .stride = 1}, options);
       }},
      {"denoise-dilated",
       [](const Shape4& input, SpecOptions&) {
         // Dilations 1-2-4-8-1 (context aggregation, Yu & Koltun 2016): a 33x33 receptive
         // field for 39k parameters at full resolution, for megapixel images. The widest
         // window reaches 8 pixels past a tile: the halo, not the model, pays for context.
         return "conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=2,dilation=2),relu,"
                "conv(out=32,k=3,pad=4,dilation=4),relu,conv(out=32,k=3,pad=8,dilation=8),relu,"
                "conv(out=32,k=3,pad=1),relu,conv(out=" + std::to_string(input[C]) + ",k=3,pad=1)";
       }},
      {"denoise-fcn",
       [](const Shape4& input, SpecOptions&) {
         // "Same" padding throughout: any H x W, output shaped as the input (MSE vs clean).
         return "conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=1),relu,"
                "conv(out=" + std::to_string(input[C]) + ",k=3,pad=1)";
       }},
      {"fashion-cnn",
       [](const Shape4&, SpecOptions&) {
         return std::string(
             "conv(out=32,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),"
             "conv(out=64,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),flatten,linear(out=10)");
       }},
      {"resnet",
       [](const Shape4&, SpecOptions& options) {
         ResNetOptions o;
         if (auto depth = options.take_int("depth")) o.depth = *depth;
         if (auto width = options.take_int("width")) o.width = *width;
         if (auto classes = options.take_int("classes")) o.classes = *classes;
         if (auto late = options.take_string("late")) o.late = format_grid(parse_grid(*late));
         if (auto from = options.take_int("from")) o.from = *from;
         return resnet_spec(o);
       }},
      {"unet",
       [](const Shape4& input, SpecOptions& options) {
         UNetOptions o;
         if (auto depth = options.take_int("depth")) o.depth = *depth;
         if (auto width = options.take_int("width")) o.width = *width;
         if (auto out = options.take_int("out")) o.out = *out;
         else o.out = input[C];
         return unet_spec(o, input);
       }},
      {"le2012",
       [](const Shape4&, SpecOptions& options) {
         // Le et al. 2012's stage three times; stride 2 keeps it at 98e6 parameters on
         // 200x200x3 (their stride-1 network is le2012(stride=1): 1.29e9).
         return le2012_from({}, options);
       }},
      {"le2012-1b",
       [](const Shape4&, SpecOptions& options) {
         // The "1 billion parameter" scale: 7 maps at stride 1, 1.018e9 on 200x200x3.
         return le2012_from({.maps = 7, .stride = 1}, options);
       }},
  };
  return all;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (name == p.name) return &p;
  return nullptr;
}

void check_positive(std::int64_t value, const char* what) {
  if (value < 1) throw std::invalid_argument("le2012: " + std::string(what) + " must be >= 1, got " + std::to_string(value));
}

void validate(const Le2012Options& o) {
  check_positive(o.maps, "maps");
  check_positive(o.stride, "stride");
  check_positive(o.field, "field");
  check_positive(o.pool, "pool");
  check_positive(o.stages, "stages");
  if (o.lcn < 1 || o.lcn % 2 == 0) throw std::invalid_argument("le2012: lcn window must be odd, got " + std::to_string(o.lcn));
}

void require(bool ok, const char* preset, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(preset) + ": " + what);
}

std::string str(std::int64_t v) { return std::to_string(v); }

// conv3x3 (no bias) - batch norm - relu, PyTorch's conv/bn pairs (bias=False before bn);
// statistics over every rank, as fashion-cnn, so the result is the same on every grid.
constexpr const char* kBatchNorm = "batchnorm(stats=all)";

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_preset(std::string_view text) { return find_preset(split_call(text).first) != nullptr; }

std::string preset_spec(std::string_view text, const Shape4& input) {
  const auto [name, option_text] = split_call(text);
  if (const Preset* p = find_preset(name)) {
    SpecOptions options(std::string(name), option_text);
    std::string spec = p->spec(input, options);
    options.finish();
    return spec;
  }
  std::string known;
  for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model preset \"" + std::string(name) + "\" (presets: " + known + ")");
}

std::string resolve_model(std::string_view text, const Shape4& input) {
  return is_preset(text) ? preset_spec(text, input) : std::string(text);
}

std::string le2012_spec(const Le2012Options& o) {
  validate(o);
  const std::string stage = "local(out=" + std::to_string(o.maps) + ",k=" + std::to_string(o.field) +
                            ",stride=" + std::to_string(o.stride) + "),l2pool(k=" + std::to_string(o.pool) +
                            ",stride=1,pad=" + std::to_string(o.pool / 2) + "),lcn(k=" + std::to_string(o.lcn) + ")";
  std::string spec;
  for (std::int64_t s = 0; s < o.stages; ++s) spec += (s == 0 ? "" : ",") + stage;
  return spec;
}

std::int64_t le2012_parameter_count(const Le2012Options& o, const Shape4& input) {
  validate(o);
  std::int64_t c = input[C], h = input[H], w = input[W], total = 0;
  for (std::int64_t s = 0; s < o.stages; ++s) {
    if (h < o.field || w < o.field)
      throw std::invalid_argument("le2012: stage " + std::to_string(s + 1) + " input " + std::to_string(h) + "x" +
                                  std::to_string(w) + " is smaller than the " + std::to_string(o.field) + "x" +
                                  std::to_string(o.field) + " field");
    h = (h - o.field) / o.stride + 1;
    w = (w - o.field) / o.stride + 1;
    total += h * w * o.maps * (c * o.field * o.field + 1);
    // An odd pool with pad = pool/2 at stride 1 and the LCN keep h x w.
    h = h + 2 * (o.pool / 2) - o.pool + 1;
    w = w + 2 * (o.pool / 2) - o.pool + 1;
    c = o.maps;
  }
  return total;
}

std::string resnet_spec(const ResNetOptions& o) {
  require(o.depth == 18 || o.depth == 34, "resnet", "depth must be 18 or 34, got " + str(o.depth));
  require(o.width >= 1, "resnet", "width must be >= 1, got " + str(o.width));
  require(o.classes >= 1, "resnet", "classes must be >= 1, got " + str(o.classes));
  require(o.from >= 1 && o.from <= 4, "resnet", "from must be a stage 1 to 4, got " + str(o.from));
  const std::string bn = kBatchNorm;
  const std::string conv3 = "conv(out=$c,k=3,pad=1,bias=false)";
  // basic: two 3x3 convs, the block's input added back. down: the same at stride 2, the
  // input projected by a 1x1 stride-2 conv + batch norm (torchvision's "downsample"). Nodes
  // with parameters carry torchvision's names, so a node path is its state_dict prefix
  // ("layer2.0.downsample.0"; docs/checkpoints.md). A stage after the first is a block of
  // its own: its down block is "layerS.0", its basic blocks "layerS.1", ...
  std::string spec = "block basic(c) { conv1: " + conv3 + ", bn1: " + bn + ", relu, conv2: " + conv3 + ", bn2: " + bn +
                     ", add[prev, in], relu } "
                     "block project(c) { conv(out=$c,k=1,stride=2,bias=false), " + bn + " } "
                     "block down(c) { conv1: conv(out=$c,k=3,stride=2,pad=1,bias=false), bn1: " + bn + ", relu, conv2: " +
                     conv3 + ", bn2: " + bn + ", downsample: project(c=$c)[in], add[bn2, prev], relu } ";
  const std::int64_t blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
  const std::int64_t* blocks = o.depth == 18 ? blocks18 : blocks34;
  for (int stage = 1; stage < 4; ++stage) {
    const std::string c = str(o.width << stage), basic = str(blocks[stage] - 1);
    spec += "block stage" + str(stage + 1) + "() { down(c=" + c + "), basic(c=" + c + ")" +
            (blocks[stage] > 2 ? "*" + basic : "") + " } ";
  }
  // With `late`, a regrid (no parameters, so no name) goes before stage `from`.
  const auto regrid_before = [&](int stage) {
    if (!o.late.empty() && stage == o.from) spec += ", regrid(grid=" + o.late + ")";
  };
  spec += "conv1: conv(out=" + str(o.width) + ",k=7,stride=2,pad=3,bias=false), bn1: " + bn +
          ", relu, maxpool(k=3,stride=2,pad=1)";
  regrid_before(1);
  spec += ", layer1: basic(c=" + str(o.width) + ")*" + str(blocks[0]);
  for (int stage = 1; stage < 4; ++stage) {
    regrid_before(stage + 1);
    spec += ", layer" + str(stage + 1) + ": stage" + str(stage + 1);
  }
  return spec + ", gap, fc: linear(out=" + str(o.classes) + ")";
}

std::string unet_spec(const UNetOptions& o, const Shape4& input) {
  require(o.depth >= 1 && o.depth <= 16, "unet", "depth must be from 1 to 16, got " + str(o.depth));
  require(o.width >= 1, "unet", "width must be >= 1, got " + str(o.width));
  require(o.out >= 1, "unet", "out must be >= 1, got " + str(o.out));
  const std::int64_t factor = std::int64_t{1} << o.depth;
  require(input[H] % factor == 0 && input[W] % factor == 0, "unet",
          "input " + str(input[H]) + "x" + str(input[W]) + " is not divisible by 2^depth = " + str(factor) +
              " (depth=" + str(o.depth) + "): every level halves it with maxpool(k=2)");
  const std::string bn = kBatchNorm;
  const std::string conv3 = "conv(out=$c,k=3,pad=1,bias=false), " + bn + ", relu";
  std::string spec = "block double(c) { " + conv3 + ", " + conv3 + " } "
                     "block up(c, skip) { deconv(out=$c,k=2,stride=2), concat[$skip, prev], double(c=$c) } ";
  for (std::int64_t level = 0; level < o.depth; ++level)
    spec += "e", spec += str(level) + ": double(c=" + str(o.width << level) + "), maxpool(k=2), ";
  spec += "double(c=" + str(o.width << o.depth) + ")";
  for (std::int64_t level = o.depth - 1; level >= 0; --level)
    spec += ", up(c=" + str(o.width << level) + ", skip=e" + str(level) + ")";
  return spec + ", conv(out=" + str(o.out) + ",k=1)";
}

}  // namespace tessera::models
