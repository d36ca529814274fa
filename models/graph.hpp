#pragma once
// Graph: a model as a DAG of layers (docs/models.md, "Graph models"). Node i runs one
// layer on the outputs of earlier nodes; Sequential (models/sequential.hpp) is the chain
// case and every model — presets, chain specs, graph specs, GraphBuilder — runs here.
//
//   Graph<float> model(parse_model_spec(spec), {8, 3, 32, 32}, grid, /*seed=*/1);
//   const auto& y = model.forward(model.input());
//   model.zero_grad(); model.backward(model.output_gradient());
//
// Numbering. Nodes are kept in a topological order (ties: declaration order, so a chain,
// or a graph written in order, keeps its declaration order). Activation 0 is the model
// input, activation i+1 the output of node i; the model output is the last node's.
//
// Halos. An activation is allocated once, with the union (per side, the widest) of the
// halos its readers' windows need: a tensor read by a 3x3 and a 5x5 conv carries the 5x5's
// halo, and each reader's exchange fills only what its own window needs.
//
// Gradients. Backward runs the nodes in reverse order. A layer's backward overwrites its
// dx (owned cells, after accumulating its halo contributions into their owners), so an
// activation read by several nodes (or twice by one) gets its gradient as a sum: the first
// reader to run backward writes the activation's gradient array directly; every later one
// writes a scratch array (the same owned box, with at least the halo that reader needs)
// whose owned cells — complete once that reader's accumulate exchange is done — are then
// added into the gradient. The gradient of an activation is final once its producer's
// backward starts (every reader comes later in the order), so after_layer(i) still marks
// node i's parameter gradients final for the gradient buckets.
//
// Memory. Every array is allocated once, at construction, and a pass allocates nothing.
// The arrays — activations, gradients (with their activation's halo), scratch sums — lie in
// a block shared by liveness (models/buffer_sharing.hpp): each at an offset of its own,
// with its own shape and halo, planned once so that arrays alive at the same step never
// overlap, whatever their shapes and grids:
// - Passes::training: an activation lives from its producer's forward to the last step
//   that reads it — its last reader's forward, the backward of each reader that reads its
//   inputs again, its producer's backward where that reads its output
//   (Layer::backward_reads) — and arrays whose lifetimes do not overlap may share memory:
//   batch norm's output before a relu (which keeps its output), a deconvolution's before a
//   concat. activation(a) is valid until that last step; the input and the output have
//   blocks of their own. An activation's gradient lives from its first write (its last
//   reader's backward) to its producer's backward; gradients and gradient-sum scratch
//   arrays share by the same rule, and with activations: one block on one timeline, where
//   a gradient takes memory an activation left. gradient(a) is valid from its first
//   write until its producer's backward is done; gradient(0) after backward (not after
//   backward_parameters, which does not compute it).
// - Passes::training_with_activations_kept: every activation keeps its own block, for a
//   caller that reads activations after forward (models/tica.hpp); gradients share one
//   among themselves as above.
// - Passes::forward_only (evaluation, inference): no gradients, and activations share by
//   the same rule forward — activation a lives from its producer to its last reader, so
//   activation(a) is valid only until the nodes after its last reader overwrite it; the
//   output stays. backward() throws.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/layer.hpp"
#include "models/layer_registry.hpp"
#include "models/memory_plan.hpp"
#include "models/spec_parser.hpp"

namespace tessera::models {

// (node path, parameter): the state_dict key is "<path>.<name>", the checkpoint's
// "/params/<path>/<name>" (models/checkpoint_content.hpp's LayerParameters). The path is
// the node's name: its position "3" in a chain (= its layer index, so chains keep the
// nn.Sequential keys), the dotted path "layer1.0.conv1" of a node in a block instance.
template <class T>
using NamedParameters = std::vector<std::pair<std::string, layers::Parameter<T>*>>;

// The initialisation seed of node `index` of a model built from `seed` (a hash, so that
// neighbouring layers draw unrelated streams). Objects that own parameters beside the
// model (models/tica.hpp's decoders) draw theirs as layers size(), size()+1, ...
std::uint64_t layer_seed(std::uint64_t seed, std::size_t index);

// What a model is built for: which arrays it keeps (see "Memory" above).
enum class Passes { training, training_with_activations_kept, forward_only };

template <class T>
class Graph {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>,
                "Graph: the layer registry builds fp32 and bf16 layers");

 public:
  // input: global (N, C, H, W). Collective over `grid` (head grids are created). Throws
  // std::invalid_argument, before allocating anything, for a node defined twice, an
  // unknown input name, a cycle, a node nobody reads (only the last node, the output, may
  // be unread), the wrong number of inputs, shapes a layer cannot take (add's inputs of
  // different shapes), an unknown layer or bad options — naming the node. `grid` must
  // outlive the model.
  Graph(const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid, std::uint64_t seed,
        const LayerRegistry& registry = LayerRegistry::global(), Passes passes = Passes::training);
  virtual ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // What this rank would allocate for the same arguments, without allocating it: the
  // parameters, then the blocks of activations and gradients (in training the output's
  // last).
  static MemoryPlan memory_plan(const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid,
                                const LayerRegistry& registry = LayerRegistry::global(),
                                Passes passes = Passes::training);

  // The model's input array, allocated with (at least) the union of its readers' halos.
  layers::Tensor<T>& input() { return arrays_[activation_of_.front()]; }

  // Runs every node; returns the output. x: distributed as input() with at least its halo
  // — usually input() itself; it must stay alive until backward (layers keep it).
  const layers::Tensor<T>& forward(const layers::Tensor<T>& x);
  // Runs nodes 0..last only; returns activation last+1.
  const layers::Tensor<T>& forward_through(const layers::Tensor<T>& x, std::size_t last);
  // Adds every parameter's local gradient contribution; dy distributed as output().
  // Returns the gradient w.r.t. the input. after_layer(i) runs as soon as node i's
  // backward is done (its parameter gradients are then final).
  const layers::Tensor<T>& backward(const layers::Tensor<T>& dy);
  const layers::Tensor<T>& backward(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer);
  // The same parameter gradients without the gradient w.r.t. the input, which training
  // never reads: the layers on the input skip theirs (Layer::backward_parameters; a ResNet
  // stem's backward-data call and exchange) and gradient(0) is left unspecified.
  void backward_parameters(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer = {});

  // Activation i (0: the input, size(): the output) and its gradient array: memory that
  // may be shared with other arrays' (see "Memory" above for when each is valid). The
  // gradients throw std::out_of_range in a forward-only model.
  layers::Tensor<T>& activation(std::size_t i) { return arrays_[activation_of_.at(i)]; }
  const layers::Tensor<T>& activation(std::size_t i) const { return arrays_[activation_of_.at(i)]; }
  layers::Tensor<T>& gradient(std::size_t i) { return arrays_[gradient_of_.at(i)]; }
  const layers::Tensor<T>& output() const { return activation(size()); }
  layers::Tensor<T>& output_gradient() { return gradient(size()); }
  Passes passes() const { return passes_; }
  const ProcessGrid& output_grid() const { return *grids_.back(); }

  NamedParameters<T> params();  // node order, weight before bias
  std::vector<layers::Parameter<T>*> parameters();
  void zero_grad();
  void set_training(bool training);
  void set_halo_config(const layers::WindowedConfig& config);

  std::int64_t parameter_count();
  std::int64_t local_parameter_bytes();
  // The blocks that hold the activations and gradients, halos included.
  std::int64_t local_activation_bytes() const;
  // One line per node: index, spec form (and name and inputs where not a chain step),
  // output shape, parameter count; then the total.
  std::string describe();

  std::size_t size() const { return nodes_.size(); }
  layers::Layer<T>& layer(std::size_t i) { return *nodes_.at(i).layer; }
  const Shape4& shape(std::size_t activation) const { return shapes_.at(activation); }  // 0: input
  // Node i's name ("3", "skip", "res1.2") and the activations it reads, in order.
  const std::string& node_name(std::size_t i) const { return nodes_.at(i).name; }
  const std::vector<std::size_t>& node_inputs(std::size_t i) const { return nodes_.at(i).inputs; }
  // The halo activation i (and its gradient) is allocated with.
  const HaloWidths& halo(std::size_t activation) const { return halos_.at(activation); }

 protected:
  struct PlanOnly {};
  Graph(PlanOnly, const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid, const LayerRegistry& registry,
        Passes passes);
  std::string where(std::size_t i) const;  // "layer 3 (maxpool(k=2))", `layer 5 "skip" (relu)`

 private:
  struct Node {
    std::string name;
    SpecEntry entry;
    std::vector<std::size_t> inputs;  // activation indices
    const LayerRecipe* recipe = nullptr;
    std::unique_ptr<layers::Layer<T>> layer;
    // Filled by allocate(): what forward reads (slot of activation 0 patched per call),
    // where backward writes each input's gradient, and which scratch sums follow.
    std::vector<const layers::Tensor<T>*> xs, dxs;
    std::vector<std::pair<std::size_t, std::size_t>> sums;  // (scratch index, activation)
  };
  // One array of the plan: activation a, its gradient, or a scratch array a gradient sum of
  // a's reads — each with a's shape and halo, at an offset in a block laid out by liveness.
  enum class Role { activation, gradient, scratch };
  struct ArrayPlan {
    std::size_t activation;
    Role role;
    std::size_t block = 0;
    std::int64_t offset = 0;  // elements
  };
  struct BlockPlan {
    std::int64_t elements = 0;
    std::vector<std::size_t> arrays;  // the arrays it holds
  };

  Box window_of(std::size_t array) const {  // this rank's window of array_plan_[array]
    const std::size_t a = array_plan_[array].activation;
    return Distribution(shapes_[a], grids_[a]->dims()).owned_box(grids_[a]->rank()).grow(halos_[a].below, halos_[a].above);
  }
  void order(const GraphSpec& spec);  // checks the structure, fills nodes_ in topological order
  void build(const LayerRegistry& registry, std::uint64_t seed);
  void lay_out();       // partitions, halos_ (unions over readers), then plan_sharing()
  void plan_sharing();  // where each activation, gradient and scratch sum lies
  void allocate();
  void place();
  void run_backward(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer,
                    bool input_gradient);
  const ProcessGrid& layout_grid(const GridDims& dims, const ProcessGrid& from);

  Passes passes_;
  std::vector<Node> nodes_;
  std::vector<Shape4> shapes_;                            // [a]: activation a
  std::vector<const ProcessGrid*> grids_;                 // [a]: grid of activation a
  std::vector<std::unique_ptr<ProcessGrid>> head_grids_;  // owned by the model
  std::vector<std::unique_ptr<ProcessGrid>> layout_grids_;  // regrid targets, owned by the model
  std::vector<HaloWidths> halos_;                         // [a]: of activation a (and its gradient)
  std::vector<ArrayPlan> array_plan_;    // [array]
  std::vector<BlockPlan> block_plan_;    // [block]
  std::vector<std::size_t> activation_of_, gradient_of_;  // [a]: its array
  std::vector<std::vector<std::size_t>> scratch_use_;     // [node][slot]: the array of a sum, or kDirect
  std::vector<Kokkos::View<T*, typename layers::Tensor<T>::memory_space>> blocks_;
  std::vector<layers::Tensor<T>> arrays_;  // [array]: views into blocks_
};

extern template class Graph<float>;
extern template class Graph<bf16>;

}  // namespace tessera::models
