#include "models/presets.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace tessera::models {
namespace {

struct Preset {
  const char* name;
  std::function<std::string(const Shape4& input)> spec;
};

// Batch statistics over every rank (stats=all) keep the model's result independent of
// the process grid, as PyTorch's BatchNorm2d over the global batch.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> all{
      {"denoise-fcn",
       [](const Shape4& input) {
         // "Same" padding throughout: any H x W, output shaped as the input (MSE vs clean).
         return "conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=1),relu,"
                "conv(out=" + std::to_string(input[C]) + ",k=3,pad=1)";
       }},
      {"denoise-dilated",
       [](const Shape4& input) {
         // Dilations 1-2-4-8-1 (context aggregation, Yu & Koltun 2016): a 33x33 receptive
         // field for 39k parameters at full resolution, for megapixel images. The widest
         // window reaches 8 pixels past a tile: the halo, not the model, pays for context.
         return "conv(out=32,k=3,pad=1),relu,conv(out=32,k=3,pad=2,dilation=2),relu,"
                "conv(out=32,k=3,pad=4,dilation=4),relu,conv(out=32,k=3,pad=8,dilation=8),relu,"
                "conv(out=32,k=3,pad=1),relu,conv(out=" + std::to_string(input[C]) + ",k=3,pad=1)";
       }},
      {"fashion-cnn",
       [](const Shape4&) {
         return std::string(
             "conv(out=32,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),"
             "conv(out=64,k=3,pad=1),batchnorm(stats=all),relu,maxpool(k=2),flatten,linear(out=10)");
       }},
  };
  return all;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (name == p.name) return true;
  return false;
}

std::string preset_spec(std::string_view name, const Shape4& input) {
  for (const Preset& p : presets())
    if (name == p.name) return p.spec(input);
  std::string known;
  for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown model preset \"" + std::string(name) + "\" (presets: " + known + ")");
}

std::string resolve_model(std::string_view text, const Shape4& input) {
  return is_preset(text) ? preset_spec(text, input) : std::string(text);
}

}  // namespace tessera::models
