#include "models/graph.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>

#include "layers/head_grid.hpp"
#include "layers/merge_kernels.hpp"
#include "models/graph_internal.hpp"

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

using graph_internal::kDirect;
using graph_internal::union_of;

std::string shape_text(const Shape4& s) {
  std::ostringstream out;
  out << s[N] << "x" << s[C] << "x" << s[H] << "x" << s[W];
  return out.str();
}

std::string grid_text(const ProcessGrid& g) {
  const GridDims& d = g.dims();
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

bool spatially_split(const ProcessGrid& grid) { return grid.dims()[1] * grid.dims()[2] > 1; }

std::string node_text(const GraphNodeSpec& n) { return "node \"" + n.name + "\" (" + n.layer.text + ")"; }

// The halo input `slot` of `layer` needs on `grid`: per side, the farthest any rank's window
// reaches past its owned box (layers::input_halo for any input of any layer).
template <class T>
HaloWidths reader_halo(const layers::Layer<T>& layer, std::size_t slot, const std::vector<Shape4>& inputs,
                       const Shape4& output, const GridDims& grid) {
  const Distribution in(inputs[slot], grid), out(output, grid);
  HaloWidths widths;
  for (int r = 0; r < in.ranks(); ++r) {
    const Box owned = in.owned_box(r);
    const Box window = layer.input_window_multi(out.owned_box(r), slot, inputs);
    if (window.empty()) continue;
    for (int d = 0; d < kDims; ++d) {
      widths.below[d] = std::max(widths.below[d], owned.lo[d] - window.lo[d]);
      widths.above[d] = std::max(widths.above[d], window.hi[d] - owned.hi[d]);
    }
  }
  return widths;
}

}  // namespace

template <class T>
Graph<T>::Graph(const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid, std::uint64_t seed,
                const LayerRegistry& registry, Passes passes)
    : passes_(passes), shapes_{input}, grids_{&grid} {
  order(spec);
  build(registry, seed);
  lay_out();
  allocate();
  place();
}

// The layers are built as usual but under ParameterPlanning, so their parameters record
// their shapes and allocate nothing; no activation is allocated.
template <class T>
Graph<T>::Graph(PlanOnly, const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid,
                const LayerRegistry& registry, Passes passes)
    : passes_(passes), shapes_{input}, grids_{&grid} {
  const layers::ParameterPlanning planning;
  order(spec);
  build(registry, 0);
  lay_out();
  place();
}

template <class T>
Graph<T>::~Graph() = default;

template <class T>
MemoryPlan Graph<T>::memory_plan(const GraphSpec& spec, const Shape4& input, const ProcessGrid& grid,
                                 const LayerRegistry& registry, Passes passes) {
  Graph planned(PlanOnly{}, spec, input, grid, registry, passes);
  MemoryPlan plan;
  for (std::size_t i = 0; i < planned.size(); ++i)
    for (const layers::Parameter<T>* p : planned.layer(i).params()) {
      std::string extent;
      for (const std::int64_t d : p->extent) {
        if (!extent.empty()) extent += 'x';
        extent += std::to_string(d);
      }
      const auto elements = static_cast<std::int64_t>(p->local_elements());
      plan.count_parameters(elements);
      // The value in T; gradient (and, for bf16, the master) in Compute<T>: bytes by precision.
      if constexpr (layers::Parameter<T>::kSeparateMaster) {
        plan.add(planned.where(i) + " " + p->name, extent, elements * std::int64_t(sizeof(T)), MemoryUse::parameters,
                 precision_name<T>());
        plan.add(planned.where(i) + " " + p->name + " fp32 master and gradient", extent,
                 2 * elements * std::int64_t(sizeof(Compute<T>)), MemoryUse::parameters, precision_name<Compute<T>>());
      } else {
        plan.add(planned.where(i) + " " + p->name + " and its gradient", extent, 2 * elements * std::int64_t(sizeof(T)),
                 MemoryUse::parameters, precision_name<T>());
      }
    }
  // A block of one array is named by it, the shared one by its count and largest array.
  // Activation blocks last, in the order of their last activation: the output's, its own in
  // training, last of all (the trainer sizes its targets by it).
  const auto add = [&](const BlockPlan& b) {
    std::size_t r = b.arrays.front();
    for (const std::size_t q : b.arrays)
      if (planned.window_of(q).size() > planned.window_of(r).size()) r = q;
    const ArrayPlan& p = planned.array_plan_[r];
    const std::size_t a = p.activation;
    std::string what = std::string(p.role == Role::activation ? "" : "the gradient of ") +
                       (a == 0 ? "the input" : "the output of " + planned.where(a - 1)) +
                       (planned.halos_[a] == HaloWidths{} ? "" : " (with halo)");
    if (b.arrays.size() > 1)
      what = std::to_string(b.arrays.size()) + " arrays sharing memory by liveness, the largest " + what;
    plan.add(what, shape_text(planned.window_of(r).shape()), b.elements * static_cast<std::int64_t>(sizeof(T)),
             MemoryUse::activations, precision_name<T>());
  };
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (last activation + 1 or 0, block)
  for (std::size_t b = 0; b < planned.block_plan_.size(); ++b) {
    std::size_t key = 0;
    for (const std::size_t r : planned.block_plan_[b].arrays)
      if (planned.array_plan_[r].role == Role::activation) key = std::max(key, planned.array_plan_[r].activation + 1);
    order.emplace_back(key, b);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [key, b] : order) add(planned.block_plan_[b]);
  return plan;
}

template <class T>
std::string Graph<T>::where(std::size_t i) const {
  const Node& n = nodes_[i];
  const std::string name = n.name == std::to_string(i) ? "" : " \"" + n.name + "\"";
  return "layer " + std::to_string(i) + name + " (" + n.entry.text + ")";
}

// Checks names and inputs, and orders the nodes topologically (Kahn's algorithm, the
// earliest declared ready node first). Every rank sees the same spec: all throw together.
template <class T>
void Graph<T>::order(const GraphSpec& spec) {
  const std::size_t count = spec.nodes.size();
  if (count == 0) throw std::invalid_argument("the model graph has no nodes");
  std::map<std::string, std::size_t, std::less<>> index;
  for (std::size_t i = 0; i < count; ++i) {
    const GraphNodeSpec& n = spec.nodes[i];
    if (n.name == GraphSpec::input_name)
      throw std::invalid_argument(node_text(n) + ": \"input\" names the model's input, not a node");
    if (!index.emplace(n.name, i).second) throw std::invalid_argument(node_text(n) + ": a node of this name is defined before");
    if (n.inputs.empty()) throw std::invalid_argument(node_text(n) + ": reads no input");
  }
  // inputs[i]: declaration indices read by node i (count: the model input).
  std::vector<std::vector<std::size_t>> inputs(count);
  std::vector<std::size_t> readers(count + 1, 0);
  for (std::size_t i = 0; i < count; ++i)
    for (const std::string& name : spec.nodes[i].inputs) {
      std::size_t from = count;
      if (name != GraphSpec::input_name) {
        const auto it = index.find(name);
        if (it == index.end()) {
          std::string known;
          for (const GraphNodeSpec& n : spec.nodes) known += (known.empty() ? "" : ", ") + n.name;
          throw std::invalid_argument(node_text(spec.nodes[i]) + ": unknown input \"" + name + "\" (nodes: input, " +
                                      known + ")");
        }
        from = it->second;
      }
      inputs[i].push_back(from);
      ++readers[from];
    }
  if (readers[count] == 0) throw std::invalid_argument("the model's input is read by no node");
  for (std::size_t i = 0; i + 1 < count; ++i)
    if (readers[i] == 0)
      throw std::invalid_argument(node_text(spec.nodes[i]) + " is read by no node: only the model's output (the last node, \"" +
                                  spec.nodes.back().name + "\") may be unread");
  std::vector<std::size_t> position(count, kDirect);  // topological position, kDirect: not yet placed
  std::vector<std::size_t> sorted;
  for (bool progress = true; progress && sorted.size() < count;) {
    progress = false;
    for (std::size_t i = 0; i < count; ++i) {
      if (position[i] != kDirect) continue;
      const bool ready = std::all_of(inputs[i].begin(), inputs[i].end(),
                                     [&](std::size_t from) { return from == count || position[from] != kDirect; });
      if (!ready) continue;
      position[i] = sorted.size();
      sorted.push_back(i);
      progress = true;
      break;  // restart: the earliest declared ready node goes next
    }
  }
  if (sorted.size() < count) {
    // Every unplaced node reads an unplaced node: walk back through them until one repeats.
    std::size_t at = 0;
    while (position[at] != kDirect) ++at;
    std::vector<std::size_t> path;
    std::vector<bool> seen(count, false);
    while (!seen[at]) {
      seen[at] = true;
      path.push_back(at);
      for (const std::size_t from : inputs[at])
        if (from != count && position[from] == kDirect) {
          at = from;
          break;
        }
    }
    // path[k] reads path[k+1]: the data flows from the end of the path back to `at`.
    std::string cycle = "\"" + spec.nodes[at].name + "\"";
    for (std::size_t k = path.size(); k-- > 0 && path[k] != at;) cycle += " -> \"" + spec.nodes[path[k]].name + "\"";
    throw std::invalid_argument(node_text(spec.nodes[at]) + " is on a cycle: " + cycle + " -> \"" + spec.nodes[at].name +
                                "\" (a node's inputs must be computed before it)");
  }
  if (sorted.back() != count - 1)  // unreachable given the checks above; kept as the invariant
    throw std::logic_error("Graph: the output node is not last in topological order");
  for (const std::size_t i : sorted) {
    Node node;
    node.name = spec.nodes[i].name;
    node.entry = spec.nodes[i].layer;
    for (const std::size_t from : inputs[i]) node.inputs.push_back(from == count ? 0 : position[from] + 1);
    nodes_.push_back(std::move(node));
  }
}

// Instantiates the layers in order, inferring each output shape and grid; every rank makes
// the same decisions (shapes and grid dims are global), so all throw together.
template <class T>
void Graph<T>::build(const LayerRegistry& registry, std::uint64_t seed) {
  std::vector<Shape4> in_shapes;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    try {
      const ProcessGrid& grid = *grids_[node.inputs[0]];
      in_shapes.clear();
      for (const std::size_t a : node.inputs) {
        if (grids_[a] != &grid)
          throw std::invalid_argument("its inputs lie on different process grids (one after a head layer, one before)");
        in_shapes.push_back(shapes_[a]);
      }
      const LayerRecipe& recipe = registry.find(node.entry.name);
      const LayerRecipe::FactoryOf<T>& make = recipe.template factory<T>();
      if (!make)
        throw std::invalid_argument(node.entry.name + " has no " + precision_name<T>() +
                                    " implementation yet (layers in " + precision_name<T>() + ": " +
                                    registry.bf16_names_list() + ")");
      auto layer = make(node.entry.options, in_shapes[0], layer_seed(seed, i));
      const layers::InputArity arity = layer->arity();
      if (in_shapes.size() < arity.min || in_shapes.size() > arity.max) {
        const std::string range = arity.min == arity.max ? std::to_string(arity.min)
                                  : arity.max == layers::InputArity::unbounded
                                      ? std::to_string(arity.min) + " or more"
                                      : std::to_string(arity.min) + " to " + std::to_string(arity.max);
        throw std::invalid_argument(node.entry.name + " takes " + range + (arity.max == 1 ? " input" : " inputs") +
                                    ", not " + std::to_string(in_shapes.size()));
      }
      shapes_.push_back(layer->output_shape_multi(in_shapes));
      if (const std::optional<GridDims> layout = layer->output_grid()) {
        grids_.push_back(&layout_grid(*layout, grid));
      } else if (recipe.placement == OutputPlacement::head_grid && spatially_split(grid)) {
        head_grids_.push_back(layers::make_head_grid(grid));
        grids_.push_back(head_grids_.back().get());
      } else {
        grids_.push_back(&grid);
      }
      node.recipe = &recipe;
      node.layer = std::move(layer);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where(i) + ": " + e.what());
    }
  }
}

// The grid of dims `dims` over the model's ranks, for a layer that moves its output there
// (Layer::output_grid: regrid). One grid per layout, the model's own included, so that
// activations brought back to a layout share its grid (and can meet in add or concat).
template <class T>
const ProcessGrid& Graph<T>::layout_grid(const GridDims& dims, const ProcessGrid& from) {
  const ProcessGrid& model = *grids_[0];
  if (from.size() != model.size())
    throw std::invalid_argument("its input lies on a head grid of " + std::to_string(from.size()) +
                                " ranks; a layout change needs an input spread over all " + std::to_string(model.size()) +
                                " ranks (regrid before the head)");
  const int product = dims[0] * dims[1] * dims[2];
  if (product != model.size())
    throw std::invalid_argument("grid " + format_grid(dims) + " has " + std::to_string(product) +
                                " ranks but the model runs on " + std::to_string(model.size()));
  if (model.dims() == dims) return model;
  for (const auto& g : layout_grids_)
    if (g->dims() == dims) return *g;
  layout_grids_.push_back(std::make_unique<ProcessGrid>(model.comm(), dims));
  return *layout_grids_.back();
}

template <class T>
void Graph<T>::lay_out() {
  const std::size_t count = nodes_.size();
  // Every activation's partition first, so that a shape the grid cannot cut is reported
  // as that activation's, not as the halo of a layer reading it.
  for (std::size_t a = 0; a <= count; ++a) {
    try {
      Distribution(shapes_[a], grids_[a]->dims());
    } catch (const std::invalid_argument& e) {
      const std::string what = a == 0 ? "the model's input" : "the output of " + where(a - 1);
      throw std::invalid_argument(what + ": " + shape_text(shapes_[a]) + " cannot be distributed on grid " +
                                  grid_text(*grids_[a]) + ": " + e.what());
    }
  }
  halos_.assign(count + 1, HaloWidths{});
  std::vector<Shape4> in_shapes;
  for (std::size_t i = 0; i < count; ++i) {
    const Node& node = nodes_[i];
    if (node.recipe->input_halo != InputHalo::window) continue;
    in_shapes.clear();
    for (const std::size_t a : node.inputs) in_shapes.push_back(shapes_[a]);
    for (std::size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const std::size_t a = node.inputs[slot];
      try {
        halos_[a] = union_of(halos_[a], reader_halo(*node.layer, slot, in_shapes, shapes_[i + 1], grids_[a]->dims()));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("the input of " + where(i) + ": " + shape_text(shapes_[a]) +
                                    " cannot be distributed on grid " + grid_text(*grids_[a]) + ": " + e.what());
      }
    }
  }
  plan_sharing();
}

// Tells every layer the output box this rank owns (Layer::place: tiled parameters allocate
// their slice), then checks where parameters ended up. Head layers (linear) mark their
// parameters as head replicas so reduce_gradients counts them once; any other layer's
// parameters on the head grid would be counted once per replica.
template <class T>
void Graph<T>::place() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    try {
      const ProcessGrid& out = *grids_[i + 1];
      nodes_[i].layer->place(Distribution(shapes_[i + 1], out.dims()).owned_box(out.rank()));
      const ProcessGrid* in = grids_[nodes_[i].inputs[0]];
      // Gradients are summed over the groups of the grid the layer runs on (its input's).
      for (layers::Parameter<T>* p : nodes_[i].layer->params()) p->grid = in;
      // Head grids exist only for spatially split grids: a parameter there is replicated.
      const bool head_replica = std::any_of(head_grids_.begin(), head_grids_.end(), [&](const auto& g) { return g.get() == in; });
      if (head_replica && !nodes_[i].layer->params().empty() &&
          nodes_[i].recipe->placement != OutputPlacement::head_grid)
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
const layers::Tensor<T>& Graph<T>::forward(const layers::Tensor<T>& x) {
  return forward_through(x, nodes_.size() - 1);
}

template <class T>
const layers::Tensor<T>& Graph<T>::forward_through(const layers::Tensor<T>& x, std::size_t last) {
  if (!(x.distribution() == input().distribution()))
    throw std::invalid_argument("model forward: x is " + x.distribution().describe() + " but the model takes " +
                                input().distribution().describe());
  if (last >= nodes_.size())
    throw std::out_of_range("model forward_through: layer " + std::to_string(last) + " of " +
                            std::to_string(nodes_.size()));
  for (std::size_t i = 0; i <= last; ++i) {
    Node& node = nodes_[i];
    for (std::size_t slot = 0; slot < node.inputs.size(); ++slot)
      node.xs[slot] = node.inputs[slot] == 0 ? &x : &activation(node.inputs[slot]);
    node.layer->forward_multi(node.xs, activation(i + 1));
  }
  return activation(last + 1);
}

template <class T>
const layers::Tensor<T>& Graph<T>::backward(const layers::Tensor<T>& dy) {
  return backward(dy, {});
}

template <class T>
const layers::Tensor<T>& Graph<T>::backward(const layers::Tensor<T>& dy,
                                            const std::function<void(std::size_t)>& after_layer) {
  run_backward(dy, after_layer, /*input_gradient=*/true);
  return gradient(0);
}

template <class T>
void Graph<T>::backward_parameters(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer) {
  run_backward(dy, after_layer, /*input_gradient=*/false);
}

// Without the input gradient, a one-input node on the model's input runs
// Layer::backward_parameters and no sum into the input's gradient is made; a node that
// also reads other activations needs its backward as usual.
template <class T>
void Graph<T>::run_backward(const layers::Tensor<T>& dy, const std::function<void(std::size_t)>& after_layer,
                            bool input_gradient) {
  if (passes_ == Passes::forward_only)
    throw std::logic_error("model backward: this model was built for forward passes only (Passes::forward_only)");
  const std::size_t last = nodes_.size() - 1;
  for (std::size_t i = last + 1; i-- > 0;) {
    Node& node = nodes_[i];
    const layers::Tensor<T>& node_dy = i == last ? dy : gradient(i + 1);
    if (!input_gradient && node.inputs.size() == 1 && node.inputs[0] == 0)
      node.layer->backward_parameters(node_dy, *node.dxs[0]);
    else
      node.layer->backward_multi(node_dy, node.dxs);
    for (const auto& [s, a] : node.sums)
      if (input_gradient || a != 0)
        layers::merge::rows<layers::merge::RowOp::add>("tessera::gradient_sum", gradient(a).owned(),
                                                       arrays_[s].owned());
    if (after_layer) after_layer(i);
  }
}

template <class T>
NamedParameters<T> Graph<T>::params() {
  NamedParameters<T> out;
  for (const Node& node : nodes_)
    for (layers::Parameter<T>* p : node.layer->params()) out.emplace_back(node.name, p);
  return out;
}

template <class T>
std::vector<layers::Parameter<T>*> Graph<T>::parameters() {
  std::vector<layers::Parameter<T>*> out;
  for (const auto& [path, p] : params()) out.push_back(p);
  return out;
}

template <class T>
void Graph<T>::zero_grad() {
  for (Node& node : nodes_)
    for (layers::Parameter<T>* p : node.layer->params()) p->zero_grad();
}

template <class T>
void Graph<T>::set_halo_config(const layers::WindowedConfig& config) {
  for (Node& node : nodes_) node.layer->set_halo_config(config);
}

template <class T>
void Graph<T>::set_training(bool training) {
  for (Node& node : nodes_)
    if (const auto& set = node.recipe->template training_switch<T>()) set(*node.layer, training);
}

template <class T>
std::int64_t Graph<T>::parameter_count() {
  std::int64_t total = 0;
  for (layers::Parameter<T>* p : parameters()) total += element_count(p->shape);
  return total;
}

template <class T>
std::int64_t Graph<T>::local_parameter_bytes() {
  std::int64_t bytes = 0;
  for (layers::Parameter<T>* p : parameters()) {
    bytes += static_cast<std::int64_t>(p->value.size() * sizeof(T) + p->grad.size() * sizeof(Compute<T>));
    if constexpr (layers::Parameter<T>::kSeparateMaster)
      bytes += static_cast<std::int64_t>(p->master.size() * sizeof(Compute<T>));
  }
  return bytes;
}

template <class T>
std::int64_t Graph<T>::local_activation_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& block : blocks_) bytes += static_cast<std::int64_t>(block.size() * sizeof(T));
  return bytes;
}

template <class T>
std::string Graph<T>::describe() {
  std::ostringstream out;
  out << std::left << std::setw(4) << "#" << std::setw(44) << "layer" << std::setw(20) << "output" << "params\n";
  out << std::setw(4) << "" << std::setw(44) << "input" << shape_text(shapes_[0]) << "\n";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    std::int64_t count = 0;
    for (layers::Parameter<T>* p : node.layer->params()) count += element_count(p->shape);
    const std::string options = node.layer->options();
    std::string text = node.layer->kind() + (options.empty() ? "" : "(" + options + ")");
    const bool chain_step = node.name == std::to_string(i) && node.inputs.size() == 1 && node.inputs[0] == i;
    if (!chain_step) {
      std::string from;
      for (const std::size_t a : node.inputs)
        from += (from.empty() ? "" : ", ") + (a == 0 ? std::string(GraphSpec::input_name) : nodes_[a - 1].name);
      text = node.name + ": " + text + " <- " + from;
    }
    out << std::setw(4) << i << std::setw(44) << text << std::setw(20) << shape_text(shapes_[i + 1]) << count << "\n";
  }
  out << "total parameters: " << parameter_count() << "\n";
  return out.str();
}

template class Graph<float>;
template class Graph<bf16>;

}  // namespace tessera::models
