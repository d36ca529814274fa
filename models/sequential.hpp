#pragma once
// Sequential: a model built from a spec string or preset name (models/presets.hpp), with
// every buffer allocated once for one input shape and process
// grid. It is models/graph.hpp's Graph built from text: a chain spec
// ("conv(out=16,k=3,pad=1),relu,...") is the chain case, node i reading node i-1, and a
// graph spec (named nodes, [inputs], blocks; docs/models.md) gives any DAG — there is one
// code path for both.
//
//   Sequential<float> model("fashion-cnn", {64, 1, 28, 28}, grid, /*seed=*/1);
//   read_batch_into(model.input());                        // owned cells; halo is the model's
//   const auto& logits = model.forward(model.input());     // on model.output_grid()
//   double loss = cross_entropy_loss(logits, labels, model.output_gradient());
//   TrainingStep step(model, grid, *optimizer, /*overlap_allreduce=*/true);  // once: keeps the buckets
//   step.backward(); step.reduce(); step.update();          // every step (models/training_step.hpp)
//
// Each activation is allocated with the halo its readers' windows need, its gradient
// likewise (a layer accumulates halo contributions into their owners). A layer placed on
// the head grid (linear, gap) puts its output, and everything after it, on
// make_head_grid(grid): one replica per spatial position. A linear after the head marks
// its parameters as head replicas, which reduce_gradients counts once; any other layer
// with parameters after the head on a grid with ph*pw > 1 is rejected, since every replica
// would add the same gradient and it would be counted ph*pw times. Once the activations
// exist, every layer is told the output box this rank owns (Layer::place): a layer with
// tiled parameters (local) holds only the slice of its own output positions.

#include <cstdint>
#include <string_view>

#include "models/graph.hpp"

namespace tessera::models {

// The graph of a preset name or a spec (chain or graph) for inputs of `input`. Throws
// std::invalid_argument for a spec that does not parse, and for a bare word that is
// neither a preset nor a layer.
GraphSpec model_graph(std::string_view model, const Shape4& input, const LayerRegistry& registry = LayerRegistry::global());

template <class T>
class Sequential : public Graph<T> {
 public:
  // `model`: a preset name or a spec. input: global (N, C, H, W). Collective over `grid`
  // (head grids are created). Throws std::invalid_argument naming the layer index (and
  // node name, in a graph) and spec entry for an unknown layer, bad options, a shape a
  // layer cannot take, a parameter after the head on a spatially split grid, or a bad
  // graph (Graph's constructor). `grid` must outlive the model.
  // `passes`: Passes::forward_only for evaluation or inference alone (Graph, "Memory").
  Sequential(std::string_view model, const Shape4& input, const ProcessGrid& grid, std::uint64_t seed,
             const LayerRegistry& registry = LayerRegistry::global(), Passes passes = Passes::training)
      : Graph<T>(model_graph(model, input, registry), input, grid, seed, registry, passes) {}

  // What this rank would allocate for the same arguments — every parameter's value and
  // gradient (its slice of tiled ones) and every activation and gradient buffer with its
  // halo (shared buffers once) — without allocating any of it. Collective over `grid`; throws as the
  // constructor does for a model that cannot be built.
  static MemoryPlan memory_plan(std::string_view model, const Shape4& input, const ProcessGrid& grid,
                                const LayerRegistry& registry = LayerRegistry::global(),
                                Passes passes = Passes::training) {
    return Graph<T>::memory_plan(model_graph(model, input, registry), input, grid, registry, passes);
  }
};

}  // namespace tessera::models
