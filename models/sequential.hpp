#pragma once
// Sequential: a chain of layers built from a spec string or preset name (models/presets.hpp),
// with every activation and activation gradient allocated once for one input shape and
// process grid.
//
//   Sequential<float> model("fashion-cnn", {64, 1, 28, 28}, grid, /*seed=*/1);
//   read_batch_into(model.input());                        // owned cells; halo is the model's
//   const auto& logits = model.forward(model.input());     // on model.output_grid()
//   double loss = cross_entropy_loss(logits, labels, model.output_gradient());
//   model.zero_grad(); model.backward(model.output_gradient());
//   reduce_gradients(model.parameters(), grid);            // then the optimizer step
//
// Each layer's input is allocated with the halo that layer's window needs (make_input), its
// gradient likewise (the layer accumulates halo contributions into their owners). A layer
// placed on the head grid (linear, gap) puts its output, and everything after it, on
// make_head_grid(grid): one replica per spatial position. A linear after the head marks
// its parameters as head replicas, which reduce_gradients counts once; any other layer
// with parameters after the head on a grid with ph*pw > 1 is rejected, since every replica
// would add the same gradient and it would be counted ph*pw times. Once the activations
// exist, every layer is told the output box this rank owns (Layer::place): a layer with
// tiled parameters (local) holds only the slice of its own output positions.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/layer.hpp"
#include "models/layer_registry.hpp"
#include "models/memory_plan.hpp"
#include "models/spec_parser.hpp"

namespace tessera::models {

// (layer index in the sequence, parameter): the state_dict key is "<index>.<name>", the
// checkpoint's "/params/<index>/<name>" (models/checkpoint_content.hpp's LayerParameters).
template <class T>
using IndexedParameters = std::vector<std::pair<int, layers::Parameter<T>*>>;

// The initialisation seed of layer `index` of a model built from `seed` (a hash, so that
// neighbouring layers draw unrelated streams). Objects that own parameters beside the
// model (models/tica.hpp's decoders) draw theirs as layers size(), size()+1, ...
std::uint64_t layer_seed(std::uint64_t seed, std::size_t index);

template <class T>
class Sequential {
  static_assert(std::is_same_v<T, float>, "Sequential: the layer registry builds fp32 layers");

 public:
  // `model`: a preset name or a spec. input: global (N, C, H, W). Collective over `grid`
  // (head grids are created). Throws std::invalid_argument naming the layer index and spec
  // entry for an unknown layer, bad options, a shape a layer cannot take, or a parameter
  // after the head on a spatially split grid. `grid` must outlive the model.
  Sequential(std::string_view model, const Shape4& input, const ProcessGrid& grid, std::uint64_t seed,
             const LayerRegistry& registry = LayerRegistry::global());
  ~Sequential();
  Sequential(const Sequential&) = delete;

  // What this rank would allocate for the same arguments — every parameter's value and
  // gradient (its slice of tiled ones) and every activation and activation gradient with
  // its halo — without allocating any of it. Collective over `grid`; throws as the
  // constructor does for a model that cannot be built.
  static MemoryPlan memory_plan(std::string_view model, const Shape4& input, const ProcessGrid& grid,
                                const LayerRegistry& registry = LayerRegistry::global());
  Sequential& operator=(const Sequential&) = delete;

  // The model's input array, allocated with the first layer's halo: a data loader writes
  // its owned cells and passes it to forward().
  layers::Tensor<T>& input() { return activations_.front(); }

  // Runs every layer; returns the output (logits). x: distributed as input() with at least
  // its halo — usually input() itself; it must stay alive until backward (layers keep it).
  const layers::Tensor<T>& forward(const layers::Tensor<T>& x);
  // Adds every parameter's local gradient contribution (call reduce_gradients after);
  // dy: distributed as output(), e.g. output_gradient(). Returns the gradient w.r.t. x.
  const layers::Tensor<T>& backward(const layers::Tensor<T>& dy);
  // The same, calling after_layer(i) as soon as layer i's backward is done (its parameter
  // gradients are then final): the hook that overlaps the gradient reduction with the
  // layers still to run (layers::GradientBuckets).
  const layers::Tensor<T>& backward(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer);

  // Runs layers 0..last only; returns activation last+1 (e.g. a stage's features while the
  // layers above it are not trained: greedy layer-wise training, models/tica.hpp).
  const layers::Tensor<T>& forward_through(const layers::Tensor<T>& x, std::size_t last);

  // Activation i (0: the input, size(): the output) as the latest forward left it, and
  // the array layer i-1's backward reads its gradient from (layer i's backward writes
  // gradient i): an objective with terms inside the network (models/tica.hpp) adds to
  // them and runs the layers' backward itself.
  const layers::Tensor<T>& activation(std::size_t i) const { return activations_.at(i); }
  layers::Tensor<T>& gradient(std::size_t i) { return gradients_.at(i); }

  const layers::Tensor<T>& output() const { return activations_.back(); }
  // An array distributed as output() for the loss to write the gradient into.
  layers::Tensor<T>& output_gradient() { return gradients_.back(); }
  const ProcessGrid& output_grid() const { return *grids_.back(); }

  // Every parameter in layer order, weight before bias, with its layer index.
  IndexedParameters<T> params();
  std::vector<layers::Parameter<T>*> parameters();  // the same without indices
  void zero_grad();
  // Training (batch statistics) or evaluation (running statistics) for every layer that
  // distinguishes them.
  void set_training(bool training);
  // Overlap and halo transport for every layer (before the first forward).
  void set_halo_config(const layers::WindowedConfig& config);

  // Learnable numbers, each parameter's global shape counted once.
  std::int64_t parameter_count();
  // Bytes this rank allocates for its parameters' values and gradients (its slices of
  // tiled ones, whole replicated ones); an optimizer's state comes on top (SGD with
  // momentum: one more copy of the values).
  std::int64_t local_parameter_bytes();
  // Bytes this rank allocates for every activation and activation gradient, halos
  // included (a layer's own scratch, e.g. local's patch buffer, not counted).
  std::int64_t local_activation_bytes() const;
  // One line per layer: index, spec form, output shape, parameter count; then the total.
  std::string describe();

  std::size_t size() const { return layers_.size(); }
  layers::Layer<T>& layer(std::size_t i) { return *layers_.at(i); }
  const std::vector<SpecEntry>& spec() const { return entries_; }
  const Shape4& shape(std::size_t activation) const { return shapes_.at(activation); }  // 0: input

 private:
  struct PlanOnly {};
  Sequential(PlanOnly, std::string_view model, const Shape4& input, const ProcessGrid& grid,
             const LayerRegistry& registry);
  void build(const LayerRegistry& registry, std::uint64_t seed);
  void lay_out();   // checks every activation's partition and finds its halo (halos_)
  void allocate();  // every activation and its gradient, with halos_
  void place();
  std::string where(std::size_t i) const;  // "layer 3 (maxpool(k=2))"

  std::vector<SpecEntry> entries_;
  std::vector<const LayerRecipe*> recipes_;
  std::vector<std::unique_ptr<layers::Layer<T>>> layers_;
  std::vector<Shape4> shapes_;                                 // [i]: input of layer i; back(): output
  std::vector<const ProcessGrid*> grids_;                      // [i]: grid of activation i
  std::vector<std::unique_ptr<ProcessGrid>> head_grids_;       // owned by the model
  std::vector<HaloWidths> halos_;                              // [i]: of activation i
  std::vector<layers::Tensor<T>> activations_, gradients_;     // gradients_[i]: d(loss)/d(activation i)
};

extern template class Sequential<float>;

}  // namespace tessera::models
