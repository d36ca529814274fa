#include "models/sequential.hpp"

#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "layers/head_grid.hpp"
#include "layers/windowed.hpp"
#include "models/presets.hpp"

namespace tessera::models {

// Independent initialisation streams per layer: the layers draw splitmix64 sequences
// (state += golden ratio), so seeds a golden-ratio step apart would repeat each other's
// numbers shifted by one; a hashed seed avoids that.
std::uint64_t layer_seed(std::uint64_t seed, std::size_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

std::string shape_text(const Shape4& s) {
  std::ostringstream out;
  out << s[N] << "x" << s[C] << "x" << s[H] << "x" << s[W];
  return out.str();
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

bool spatially_split(const ProcessGrid& grid) { return grid.dims()[1] * grid.dims()[2] > 1; }

// A bare word that is neither a preset nor a layer was most likely meant as a preset.
void check_bare_word(std::string_view model, const std::vector<SpecEntry>& entries, const LayerRegistry& registry) {
  if (entries.size() != 1 || !entries[0].options.empty() || model.find('(') != std::string_view::npos ||
      registry.contains(entries[0].name))
    return;
  std::string presets;
  for (const std::string& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  throw std::invalid_argument("model \"" + std::string(model) + "\" is neither a preset (" + presets +
                              ") nor a layer spec (known layers: " + registry.names_list() + ")");
}

}  // namespace

template <class T>
Sequential<T>::Sequential(std::string_view model, const Shape4& input, const ProcessGrid& grid, std::uint64_t seed,
                          const LayerRegistry& registry)
    : entries_(parse_spec(resolve_model(model, input))), shapes_{input}, grids_{&grid} {
  check_bare_word(model, entries_, registry);
  build(registry, seed);
  lay_out();
  allocate();
  place();
}

// The layers are built as usual but under ParameterPlanning, so their parameters record
// their shapes and allocate nothing; no activation is allocated.
template <class T>
Sequential<T>::Sequential(PlanOnly, std::string_view model, const Shape4& input, const ProcessGrid& grid,
                          const LayerRegistry& registry)
    : entries_(parse_spec(resolve_model(model, input))), shapes_{input}, grids_{&grid} {
  check_bare_word(model, entries_, registry);
  const layers::ParameterPlanning planning;
  build(registry, 0);
  lay_out();
  place();
}

template <class T>
MemoryPlan Sequential<T>::memory_plan(std::string_view model, const Shape4& input, const ProcessGrid& grid,
                                      const LayerRegistry& registry) {
  Sequential planned(PlanOnly{}, model, input, grid, registry);
  MemoryPlan plan;
  for (const auto& [index, p] : planned.params()) {
    std::string extent;
    for (const std::int64_t d : p->extent) {
      if (!extent.empty()) extent += 'x';
      extent += std::to_string(d);
    }
    plan.add(planned.where(static_cast<std::size_t>(index)) + " " + p->name + " and its gradient", extent,
             2 * static_cast<std::int64_t>(p->local_elements() * sizeof(T)), MemoryUse::parameters);
  }
  for (std::size_t i = 0; i < planned.shapes_.size(); ++i) {
    const ProcessGrid& g = *planned.grids_[i];
    const Box window = Distribution(planned.shapes_[i], g.dims()).owned_box(g.rank()).grow(planned.halos_[i].below,
                                                                                            planned.halos_[i].above);
    const std::string what = i == 0 ? "the input" : "the output of " + planned.where(i - 1);
    const bool halo = !(planned.halos_[i] == HaloWidths{});
    plan.add(what + " and its gradient" + (halo ? " (with halo)" : ""), shape_text(window.shape()),
             2 * window.size() * static_cast<std::int64_t>(sizeof(T)), MemoryUse::activations);
  }
  return plan;
}

template <class T>
Sequential<T>::~Sequential() = default;

template <class T>
std::string Sequential<T>::where(std::size_t i) const {
  return "layer " + std::to_string(i) + " (" + entries_[i].text + ")";
}

// Instantiates the layers in order, inferring each input shape and grid; every rank makes
// the same decisions (shapes and grid dims are global), so all throw together.
template <class T>
void Sequential<T>::build(const LayerRegistry& registry, std::uint64_t seed) {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const ProcessGrid& grid = *grids_[i];
    try {
      const LayerRecipe& recipe = registry.find(entries_[i].name);
      auto layer = recipe.make(entries_[i].options, shapes_[i], layer_seed(seed, i));
      shapes_.push_back(layer->output_shape(shapes_[i]));
      if (recipe.placement == OutputPlacement::head_grid && spatially_split(grid)) {
        head_grids_.push_back(layers::make_head_grid(grid));
        grids_.push_back(head_grids_.back().get());
      } else {
        grids_.push_back(&grid);
      }
      recipes_.push_back(&recipe);
      layers_.push_back(std::move(layer));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where(i) + ": " + e.what());
    }
  }
}

template <class T>
void Sequential<T>::lay_out() {
  const std::size_t count = layers_.size();
  auto grid_text = [&](std::size_t i) {
    const GridDims& d = grids_[i]->dims();
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
  };
  // Every activation's partition first, so that a shape the grid cannot cut is reported
  // as that activation's, not as the halo of the layer before it.
  for (std::size_t i = 0; i <= count; ++i) {
    try {
      Distribution(shapes_[i], grids_[i]->dims());
    } catch (const std::invalid_argument& e) {
      const std::string what = i == 0 ? "the model's input" : "the output of " + where(i - 1);
      throw std::invalid_argument(what + ": " + shape_text(shapes_[i]) + " cannot be distributed on grid " +
                                  grid_text(i) + ": " + e.what());
    }
  }
  for (std::size_t i = 0; i <= count; ++i) {
    try {
      HaloWidths halo;
      if (i < count && recipes_[i]->input_halo == InputHalo::window)
        halo = layers::input_halo(*layers_[i], shapes_[i], grids_[i]->dims());
      halos_.push_back(halo);
    } catch (const std::invalid_argument& e) {
      const std::string what = i < count ? "the input of " + where(i) : "the output of " + where(count - 1);
      throw std::invalid_argument(what + ": " + shape_text(shapes_[i]) + " cannot be distributed on grid " +
                                  grid_text(i) + ": " + e.what());
    }
  }
}

template <class T>
void Sequential<T>::allocate() {
  for (std::size_t i = 0; i < shapes_.size(); ++i) {
    const std::string name = i == 0 ? "input" : "activation" + std::to_string(i);
    activations_.emplace_back(*grids_[i], shapes_[i], halos_[i], name);
    gradients_.emplace_back(*grids_[i], shapes_[i], halos_[i], "d_" + name);
  }
}

// Tells every layer the output box this rank owns (Layer::place: tiled parameters allocate
// their slice), then checks where parameters ended up. Head layers (linear) mark their
// parameters as head replicas so reduce_gradients counts them once; any other layer's
// parameters on the head grid would be counted once per replica.
template <class T>
void Sequential<T>::place() {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    try {
      const ProcessGrid& out = *grids_[i + 1];
      layers_[i]->place(Distribution(shapes_[i + 1], out.dims()).owned_box(out.rank()));
      const bool head_replica = grids_[i] != grids_[0] && spatially_split(*grids_[0]);
      if (head_replica && !layers_[i]->params().empty() && recipes_[i]->placement != OutputPlacement::head_grid)
        throw std::invalid_argument(
            "its parameters would sit on the head grid, replicated over the " +
            std::to_string(grids_[0]->dims()[1] * grids_[0]->dims()[2]) +
            " spatial positions, and their gradients would be counted once per replica; after the head only "
            "linear may have parameters on grids with ph * pw > 1");
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where(i) + ": " + e.what());
    }
  }
}

template <class T>
const layers::Tensor<T>& Sequential<T>::forward(const layers::Tensor<T>& x) {
  return forward_through(x, layers_.size() - 1);
}

template <class T>
const layers::Tensor<T>& Sequential<T>::forward_through(const layers::Tensor<T>& x, std::size_t last) {
  if (!(x.distribution() == activations_[0].distribution()))
    throw std::invalid_argument("Sequential::forward: x is " + x.distribution().describe() + " but the model takes " +
                                activations_[0].distribution().describe());
  if (last >= layers_.size())
    throw std::out_of_range("Sequential::forward_through: layer " + std::to_string(last) + " of " +
                            std::to_string(layers_.size()));
  layers_[0]->forward(x, activations_[1]);
  for (std::size_t i = 1; i <= last; ++i) layers_[i]->forward(activations_[i], activations_[i + 1]);
  return activations_[last + 1];
}

template <class T>
const layers::Tensor<T>& Sequential<T>::backward(const layers::Tensor<T>& dy) {
  return backward(dy, {});
}

template <class T>
const layers::Tensor<T>& Sequential<T>::backward(const layers::Tensor<T>& dy,
                                                 const std::function<void(std::size_t)>& after_layer) {
  const std::size_t last = layers_.size() - 1;
  for (std::size_t i = last + 1; i-- > 0;) {
    layers_[i]->backward(i == last ? dy : gradients_[i + 1], gradients_[i]);
    if (after_layer) after_layer(i);
  }
  return gradients_[0];
}

template <class T>
IndexedParameters<T> Sequential<T>::params() {
  IndexedParameters<T> out;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    for (layers::Parameter<T>* p : layers_[i]->params()) out.emplace_back(static_cast<int>(i), p);
  return out;
}

template <class T>
std::vector<layers::Parameter<T>*> Sequential<T>::parameters() {
  std::vector<layers::Parameter<T>*> out;
  for (const auto& [index, p] : params()) out.push_back(p);
  return out;
}

template <class T>
void Sequential<T>::zero_grad() {
  for (layers::Parameter<T>* p : parameters()) p->zero_grad();
}

template <class T>
void Sequential<T>::set_halo_config(const layers::WindowedConfig& config) {
  for (auto& layer : layers_) layer->set_halo_config(config);
}

template <class T>
void Sequential<T>::set_training(bool training) {
  for (std::size_t i = 0; i < layers_.size(); ++i)
    if (recipes_[i]->set_training) recipes_[i]->set_training(*layers_[i], training);
}

template <class T>
std::int64_t Sequential<T>::parameter_count() {
  std::int64_t total = 0;
  for (layers::Parameter<T>* p : parameters()) total += element_count(p->shape);
  return total;
}

template <class T>
std::int64_t Sequential<T>::local_parameter_bytes() {
  std::int64_t bytes = 0;
  for (layers::Parameter<T>* p : parameters())
    bytes += static_cast<std::int64_t>((p->value.size() + p->grad.size()) * sizeof(T));
  return bytes;
}

template <class T>
std::int64_t Sequential<T>::local_activation_bytes() const {
  std::int64_t bytes = 0;
  for (const auto* arrays : {&activations_, &gradients_})
    for (const layers::Tensor<T>& a : *arrays) bytes += a.window_box().size() * static_cast<std::int64_t>(sizeof(T));
  return bytes;
}

template <class T>
std::string Sequential<T>::describe() {
  std::ostringstream out;
  out << std::left << std::setw(4) << "#" << std::setw(44) << "layer" << std::setw(20) << "output" << "params\n";
  out << std::setw(4) << "" << std::setw(44) << "input" << shape_text(shapes_[0]) << "\n";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::int64_t count = 0;
    for (layers::Parameter<T>* p : layers_[i]->params()) count += element_count(p->shape);
    const std::string options = layers_[i]->options();
    out << std::setw(4) << i << std::setw(44) << layers_[i]->kind() + (options.empty() ? "" : "(" + options + ")")
        << std::setw(20) << shape_text(shapes_[i + 1]) << count << "\n";
  }
  out << "total parameters: " << parameter_count() << "\n";
  return out.str();
}

template class Sequential<float>;

}  // namespace tessera::models
