#pragma once
// LayerRegistry: spec name -> how to build that layer for a given input, plus the few facts
// Sequential needs about where its output lives and how its input is allocated. The
// built-in layers are registered in layer_registry.cpp; a custom layer is one add() call
// (docs/models.md).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "distarray/bf16.hpp"
#include "distarray/box.hpp"
#include "layers/layer.hpp"

namespace tessera::models {

// Where a layer's output is distributed.
enum class OutputPlacement {
  input_grid,  // on its input's grid (every spatial layer)
  head_grid,   // on layers::make_head_grid(input grid): a classifier head (linear)
};

// How a layer's input is allocated.
enum class InputHalo {
  window,  // the halo its input_window needs (layers::make_input)
  none,    // owned cells only: the layer reads only its tile although its window is larger
           // (linear: each rank multiplies its tile by the matching weight columns)
};

struct LayerRecipe {
  // Builds the layer, in element type T, from its option text for inputs of global shape
  // `input`; throws std::invalid_argument for bad options or an input it cannot take.
  template <class T>
  using FactoryOf = std::function<std::unique_ptr<layers::Layer<T>>(std::string_view options, const Shape4& input,
                                                                    std::uint64_t seed)>;
  // Switches a layer between training and evaluation behaviour (batch norm's statistics).
  template <class T>
  using SetTrainingOf = std::function<void(layers::Layer<T>&, bool training)>;
  using Factory = FactoryOf<float>;
  using SetTraining = SetTrainingOf<float>;

  Factory make;
  // The bf16 layer (--precision bf16, docs/training.md). Empty: the layer has no bf16
  // implementation, and a bf16 model using it is refused, naming the layer.
  FactoryOf<bf16> make_bf16;
  OutputPlacement placement = OutputPlacement::input_grid;
  InputHalo input_halo = InputHalo::window;
  SetTraining set_training;  // empty: the layer behaves the same in training and evaluation
  SetTrainingOf<bf16> set_training_bf16;

  // make / make_bf16 and set_training / set_training_bf16 by element type.
  template <class T>
  const FactoryOf<T>& factory() const {
    if constexpr (std::is_same_v<T, bf16>) return make_bf16;
    else return make;
  }
  template <class T>
  const SetTrainingOf<T>& training_switch() const {
    if constexpr (std::is_same_v<T, bf16>) return set_training_bf16;
    else return set_training;
  }
};

class LayerRegistry {
 public:
  // The registry holding every built-in layer; Sequential uses it unless given another.
  // add() to it before building models (not thread-safe, as registration happens at startup).
  static LayerRegistry& global();
  // Only the built-in layers (a fresh copy, for callers that want no global state).
  static LayerRegistry builtin();

  // Registers (or replaces) the recipe for `name`.
  void add(std::string name, LayerRecipe recipe);
  bool contains(std::string_view name) const;
  // Throws std::invalid_argument naming `name` and listing every known layer.
  const LayerRecipe& find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  std::string names_list() const;          // "avgpool, batchnorm, ..." for messages
  std::string bf16_names_list() const;     // the layers with a bf16 implementation

 private:
  std::map<std::string, LayerRecipe, std::less<>> recipes_;
};

}  // namespace tessera::models
