#include "models/layer_registry.hpp"

#include <stdexcept>
#include <utility>

#include "layers/activation.hpp"
#include "layers/batch_norm.hpp"
#include "layers/conv2d.hpp"
#include "layers/deconv2d.hpp"
#include "layers/flatten.hpp"
#include "layers/global_avg_pool.hpp"
#include "layers/lcn.hpp"
#include "layers/linear.hpp"
#include "layers/locally_connected.hpp"
#include "layers/merge.hpp"
#include "layers/pool2d.hpp"
#include "layers/regrid.hpp"
#include "layers/spec_options.hpp"
#include "layers/upsample.hpp"

namespace tessera::models {
namespace {

using layers::Layer;
using tessera::bf16;
using Made = std::unique_ptr<Layer<float>>;

// A recipe whose factory `make(tag, options, input, seed)` builds the layer in the element
// type of `tag` (float{} or bf16{}): the same code makes the fp32 and the bf16 layer.
template <class Make>
LayerRecipe both_precisions(Make make) {
  LayerRecipe recipe;
  recipe.make = [make](std::string_view o, const Shape4& in, std::uint64_t seed) -> Made {
    return make(float{}, o, in, seed);
  };
  recipe.make_bf16 = [make](std::string_view o, const Shape4& in, std::uint64_t seed) -> std::unique_ptr<Layer<bf16>> {
    return make(bf16{}, o, in, seed);
  };
  return recipe;
}

// A layer that takes no options still rejects any it is given.
void expect_no_options(const char* kind, std::string_view options) { layers::SpecOptions(kind, options).finish(); }

LayerRecipe activation(const char* kind) {
  return both_precisions([kind](auto tag, std::string_view o, const Shape4&, std::uint64_t) {
    return layers::make_activation<decltype(tag)>(kind, o);
  });
}

LayerRecipe pool(layers::PoolKind kind) {
  return both_precisions([kind](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
    return std::make_unique<layers::Pool2d<decltype(tag)>>(layers::Pool2dOptions::parse(kind, o));
  });
}

LayerRecipe batch_norm() {
  LayerRecipe recipe = both_precisions([](auto tag, std::string_view o, const Shape4& in, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
    return std::make_unique<layers::BatchNorm2d<decltype(tag)>>(layers::BatchNormOptions::parse(o), in[C]);
  });
  recipe.set_training = [](Layer<float>& layer, bool training) {
    static_cast<layers::BatchNorm2d<float>&>(layer).set_training(training);
  };
  recipe.set_training_bf16 = [](Layer<bf16>& layer, bool training) {
    static_cast<layers::BatchNorm2d<bf16>&>(layer).set_training(training);
  };
  return recipe;
}

// Layers whose (N, C', 1, 1) output lives on the head grid (layers/head_grid.hpp) and whose
// input is read without a halo.
LayerRecipe head(LayerRecipe recipe) {
  recipe.placement = OutputPlacement::head_grid;
  recipe.input_halo = InputHalo::none;
  return recipe;
}

void add_builtins(LayerRegistry& r) {
  r.add("conv", both_precisions([](auto tag, std::string_view o, const Shape4& in, std::uint64_t seed) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::Conv2d<decltype(tag)>>(layers::Conv2dOptions::parse(o), in[C], seed);
        }));
  r.add("deconv", both_precisions([](auto tag, std::string_view o, const Shape4& in, std::uint64_t seed) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::Deconv2d<decltype(tag)>>(layers::Deconv2dOptions::parse(o), in[C], seed);
        }));
  r.add("local", both_precisions([](auto tag, std::string_view o, const Shape4& in, std::uint64_t seed) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::LocallyConnected2d<decltype(tag)>>(layers::LocalOptions::parse(o), in, seed);
        }));
  r.add("batchnorm", batch_norm());
  for (const char* kind : {"relu", "leakyrelu", "sigmoid", "tanh"}) r.add(kind, activation(kind));
  for (const auto kind : {layers::PoolKind::max, layers::PoolKind::average, layers::PoolKind::l2})
    r.add(std::string(layers::pool_kind_name(kind)), pool(kind));
  r.add("lcn", both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::LocalContrastNorm<decltype(tag)>>(layers::LcnOptions::parse(o));
        }));
  r.add("flatten", both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          expect_no_options("flatten", o);
          return std::make_unique<layers::Flatten<decltype(tag)>>();
        }));
  r.add("linear", head(both_precisions([](auto tag, std::string_view o, const Shape4& in, std::uint64_t seed) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::Linear<decltype(tag)>>(layers::LinearOptions::parse(o),
                                                                std::array<std::int64_t, 3>{in[C], in[H], in[W]}, seed);
        })));
  r.add("gap", head(both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          using Gap = layers::GlobalAvgPool<decltype(tag)>;
          return std::make_unique<Gap>(Gap::parse(o));
        })));
  // The joins of graph models: several inputs, no halo.
  r.add("add", both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          expect_no_options("add", o);
          return std::make_unique<layers::Add<decltype(tag)>>();
        }));
  r.add("concat", both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          expect_no_options("concat", o);
          return std::make_unique<layers::Concat<decltype(tag)>>();
        }));
  // A layout per stage: the output on another grid of the same ranks (Layer::output_grid),
  // read from the owned cells (its window is not on the input's grid).
  LayerRecipe regrid = both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
    return std::make_unique<layers::Regrid<decltype(tag)>>(layers::parse_regrid_options(o));
  });
  regrid.input_halo = InputHalo::none;
  r.add("regrid", std::move(regrid));
  r.add("upsample", both_precisions([](auto tag, std::string_view o, const Shape4&, std::uint64_t) -> std::unique_ptr<Layer<decltype(tag)>> {
          return std::make_unique<layers::Upsample<decltype(tag)>>(layers::UpsampleOptions::parse(o));
        }));
}

}  // namespace

LayerRegistry LayerRegistry::builtin() {
  LayerRegistry r;
  add_builtins(r);
  return r;
}

LayerRegistry& LayerRegistry::global() {
  static LayerRegistry registry = builtin();
  return registry;
}

void LayerRegistry::add(std::string name, LayerRecipe recipe) {
  if (!recipe.make) throw std::invalid_argument("LayerRegistry::add(\"" + name + "\"): the recipe has no factory");
  recipes_.insert_or_assign(std::move(name), std::move(recipe));
}

bool LayerRegistry::contains(std::string_view name) const { return recipes_.find(name) != recipes_.end(); }

const LayerRecipe& LayerRegistry::find(std::string_view name) const {
  const auto it = recipes_.find(name);
  if (it == recipes_.end())
    throw std::invalid_argument("unknown layer \"" + std::string(name) + "\" (known layers: " + names_list() + ")");
  return it->second;
}

std::vector<std::string> LayerRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, recipe] : recipes_) out.push_back(name);
  return out;
}

std::string LayerRegistry::bf16_names_list() const {
  std::string out;
  for (const auto& [name, recipe] : recipes_)
    if (recipe.make_bf16) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string LayerRegistry::names_list() const {
  std::string out;
  for (const auto& [name, recipe] : recipes_) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace tessera::models
