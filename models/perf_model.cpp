#include "models/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "layers/batch_norm_options.hpp"
#include "layers/windowed.hpp"
#include "models/presets.hpp"
#include "models/sequential.hpp"
#include "models/spec_parser.hpp"

namespace tessera::models {

namespace {

// Parameter gradients are fp32 in every precision (layers/fused_bucket.hpp), and so are the
// head layers' partial products; activations take PerfModel::activation_bytes_.
constexpr double kGradientBytes = sizeof(float);

std::int64_t cells(const Shape4& s) { return s[N] * s[C] * s[H] * s[W]; }

bool spatially_split(const GridDims& g) { return g[1] * g[2] > 1; }

// A box's contiguous runs in an NCHW allocation wider than the box: one per (n, c, h).
std::int64_t runs(const Box& b) { return b.extent(N) * b.extent(C) * b.extent(H); }

std::string grid_text(const GridDims& g) { return format_grid(g); }

}  // namespace

// Over the divisors, found up to the square root: a billion ranks take microseconds, where a
// loop over every (pn, ph) pair took minutes.
std::vector<GridDims> factorizations(int ranks) {
  std::vector<int> divisors;
  for (int d = 1; static_cast<std::int64_t>(d) * d <= ranks; ++d)
    if (ranks % d == 0) {
      divisors.push_back(d);
      if (d != ranks / d) divisors.push_back(ranks / d);
    }
  std::sort(divisors.begin(), divisors.end());
  std::vector<GridDims> grids;
  for (const int pn : divisors)
    for (const int ph : divisors)
      if ((ranks / pn) % ph == 0) grids.push_back({pn, ph, ranks / pn / ph});
  return grids;
}

// ---------------------------------------------------------------------------------------
// Halo traffic: the boxes of halo::Plan, one rank at a time.

namespace {

struct Piece {
  int peer;
  Box box;
};

// owned(q) ∩ window(rank) for every other q (what `rank` receives in a fill), and
// owned(rank) ∩ window(q) (what it sends). `widths`: the farthest any window reaches past
// its owned box, which bounds the ranks whose windows can reach `rank`'s cells.
void fill_pieces(const layers::Layer<float>& layer, const Distribution& input, int rank, const HaloWidths& widths,
                 std::vector<Piece>& receives, std::vector<Piece>& sends) {
  const halo::WindowRule rule = layers::window_rule(layer, input.global_shape());
  const Box owned = input.owned_box(rank);
  const Box window = rule(input, rank);
  if (!window.empty())
    for (int q : input.owners(window))
      if (q != rank) receives.push_back({q, input.owned_box(q).intersect(window)});
  // q's window lies within owned(q) grown by `widths`, so it meets owned(rank) only if
  // owned(q) meets owned(rank) grown the other way round.
  for (int q : input.owners(owned.grow(widths.above, widths.below))) {
    if (q == rank) continue;
    const Box piece = owned.intersect(rule(input, q));
    if (!piece.empty()) sends.push_back({q, piece});
  }
}

bool has_exchange(const HaloWidths& w) {
  for (int d = 0; d < kDims; ++d)
    if (w.below[d] > 0 || w.above[d] > 0) return true;
  return false;
}

}  // namespace

HaloTraffic fill_traffic(const layers::Layer<float>& layer, const Distribution& input, int rank) {
  HaloTraffic t;
  if (layers::windows_inside_owned(layer, input)) return t;
  const HaloWidths widths = layers::input_halo(layer, input.global_shape(), input.grid());
  std::vector<Piece> receives, sends;
  fill_pieces(layer, input, rank, widths, receives, sends);
  for (const Piece& p : receives) t.receive_cells += p.box.size(), ++t.receive_messages;
  for (const Piece& p : sends) t.send_cells += p.box.size(), ++t.send_messages;
  return t;
}

// ---------------------------------------------------------------------------------------
// What the model knows about each layer, found once.

struct PerfModel::Facts {
  SpecEntry entry;
  std::vector<std::size_t> inputs;  // activation indices
  const LayerRecipe* recipe = nullptr;
  std::unique_ptr<layers::Layer<float>> layer;
  bool input_on_head = false;   // its input lives on a head grid (when its layout is split)
  bool regrid = false;          // moves its input to another layout
  double forward_flops = 0;     // the whole global batch
  int param_tensors = 0;
  bool has_weights = false;
  std::int64_t replicated = 0;  // elements reduced over every rank
  std::int64_t tiled = 0;       // elements (global) of tiled parameters, reduced over the sample group
  // Small collectives inside forward/backward: batch norm's channel sums (doubles), the
  // head's partial sums over the spatial group.
  std::optional<layers::SumGroup> stats_group;
  bool head_partial_sum = false;
};

namespace {

// The nodes of `graph` in the order Graph runs them (Kahn's algorithm, the earliest
// declared ready node first), each with its inputs as activation indices (0: the input,
// k+1: the output of the k-th node in this order). Throws for an unknown input or a cycle.
std::vector<std::pair<const GraphNodeSpec*, std::vector<std::size_t>>> in_run_order(const GraphSpec& graph) {
  const std::size_t count = graph.nodes.size();
  std::vector<std::size_t> position(count, count);  // count: not placed yet
  std::vector<std::pair<const GraphNodeSpec*, std::vector<std::size_t>>> order;
  const auto find = [&](const std::string& name) -> std::size_t {
    for (std::size_t k = 0; k < count; ++k)
      if (graph.nodes[k].name == name) return k;
    throw std::invalid_argument("unknown input \"" + name + "\"");
  };
  while (order.size() < count) {
    bool placed = false;
    for (std::size_t k = 0; k < count && !placed; ++k) {
      if (position[k] != count) continue;
      std::vector<std::size_t> inputs;
      bool ready = true;
      for (const std::string& name : graph.nodes[k].inputs) {
        if (name == GraphSpec::input_name) {
          inputs.push_back(0);
          continue;
        }
        const std::size_t from = find(name);
        if (position[from] == count) ready = false;
        else inputs.push_back(position[from] + 1);
      }
      if (!ready) continue;
      position[k] = order.size();
      order.emplace_back(&graph.nodes[k], std::move(inputs));
      placed = true;
    }
    if (!placed) throw std::invalid_argument("the model graph has a cycle");
  }
  return order;
}

}  // namespace

PerfModel::PerfModel(std::string_view model, const Shape4& input, Machine machine, const LayerRegistry& registry)
    : shapes_{input}, placements_{Placement{}}, machine_(std::move(machine)) {
  const GraphSpec graph = model_graph(model, input, registry);
  const auto nodes = in_run_order(graph);
  std::vector<Shape4> in_shapes;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const GraphNodeSpec& node = *nodes[i].first;
    try {
      Facts f;
      f.entry = node.layer;
      f.inputs = nodes[i].second;
      in_shapes.clear();
      for (const std::size_t a : f.inputs) in_shapes.push_back(shapes_[a]);
      f.recipe = &registry.find(node.layer.name);
      f.layer = f.recipe->make(node.layer.options, in_shapes.at(0), i + 1);
      const Placement in = placements_[f.inputs[0]];
      f.input_on_head = in.head;
      const Shape4 out = f.layer->output_shape_multi(in_shapes);
      for (layers::Parameter<float>* p : f.layer->params()) {
        ++f.param_tensors;
        const auto elements = static_cast<std::int64_t>(layers::Parameter<float>::element_count(p->shape));
        (p->sharing == layers::Sharing::tiled ? f.tiled : f.replicated) += elements;
        if (p->shape.size() < 2) continue;  // a bias or a per-channel scale: no multiply-adds
        f.has_weights = true;
        // A shared weight (O, ...) does elements/O multiply-adds per output cell; an untied
        // one, each of its elements once per sample.
        f.forward_flops += p->sharing == layers::Sharing::tiled
                               ? 2.0 * static_cast<double>(out[N]) * static_cast<double>(elements)
                               : 2.0 * static_cast<double>(cells(out)) * static_cast<double>(elements) /
                                     static_cast<double>(out[C]);
      }
      if (f.layer->kind() == "batchnorm") {
        const layers::BatchNormOptions o = layers::BatchNormOptions::parse(f.layer->options());
        if (o.stats != layers::SumGroup::local) f.stats_group = o.stats;
      }
      const bool head_layer = f.recipe->placement == OutputPlacement::head_grid;
      f.head_partial_sum = head_layer && !in.head;
      Placement placed = in;
      if (const std::optional<GridDims> layout = f.layer->output_grid()) {
        f.regrid = true;
        placed = {layout, false};
      } else if (head_layer) {
        placed.head = true;
      }
      shapes_.push_back(out);
      placements_.push_back(placed);
      facts_.push_back(std::move(f));
    } catch (const std::invalid_argument& e) {
      const std::string name = node.name == std::to_string(i) ? "" : " \"" + node.name + "\"";
      throw std::invalid_argument("layer " + std::to_string(i) + name + " (" + node.layer.text + "): " + e.what());
    }
  }
}

PerfModel::~PerfModel() = default;

std::size_t PerfModel::size() const { return facts_.size(); }
const Shape4& PerfModel::shape(std::size_t activation) const { return shapes_.at(activation); }
const layers::Layer<float>& PerfModel::layer(std::size_t i) const { return *facts_.at(i).layer; }
const std::vector<std::size_t>& PerfModel::inputs(std::size_t i) const { return facts_.at(i).inputs; }

GridDims PerfModel::activation_grid(std::size_t a, const GridDims& grid) const {
  const Placement& p = placements_.at(a);
  const GridDims dims = p.layout.value_or(grid);
  return p.head && spatially_split(dims) ? GridDims{dims[0], 1, 1} : dims;
}

int PerfModel::rank_on(std::size_t a, const GridDims& grid, int rank) const {
  const Placement& p = placements_[a];
  const GridDims dims = p.layout.value_or(grid);
  return p.head && spatially_split(dims) ? rank / (dims[1] * dims[2]) : rank;
}

std::int64_t PerfModel::parameter_count() const {
  std::int64_t n = 0;
  for (const Facts& f : facts_) n += f.replicated + f.tiled;
  return n;
}

void PerfModel::set_precision(std::string_view precision) {
  if (precision == "fp32") activation_bytes_ = 4;
  else if (precision == "bf16") activation_bytes_ = 2;
  else
    throw std::invalid_argument("performance model: precision must be fp32 or bf16, got '" + std::string(precision) + "'");
}

void PerfModel::use_timings(std::vector<LayerTiming> timings, const Shape4& probe, double probe_share) {
  if (timings.size() != facts_.size())
    throw std::invalid_argument("perf model: " + std::to_string(timings.size()) + " layer timings for " +
                                std::to_string(facts_.size()) + " layers");
  if (!(probe_share > 0)) throw std::invalid_argument("perf model: the probe's device share must be positive");
  // The probe's shapes must go through the layers as the model's do.
  std::vector<Shape4> shapes{probe}, in;
  for (const Facts& f : facts_) {
    in.clear();
    for (const std::size_t a : f.inputs) in.push_back(shapes[a]);
    shapes.push_back(f.layer->output_shape_multi(in));
  }
  timings_ = std::move(timings);
  probe_shapes_ = std::move(shapes);
  probe_share_ = probe_share;
}

// ---------------------------------------------------------------------------------------
// Validity: the checks Sequential makes before allocating anything.

std::optional<std::string> PerfModel::why_invalid(const GridDims& grid) const {
  const int ranks = grid[0] * grid[1] * grid[2];
  const auto where = [&](std::size_t i) { return "layer " + std::to_string(i) + " (" + facts_[i].entry.text + ")"; };
  for (std::size_t i = 0; i < facts_.size(); ++i) {
    const Facts& f = facts_[i];
    const GridDims in = activation_grid(f.inputs[0], grid);
    if (f.regrid) {
      const GridDims to = *placements_[i + 1].layout;
      if (to[0] * to[1] * to[2] != ranks)
        return where(i) + ": grid " + grid_text(to) + " has " + std::to_string(to[0] * to[1] * to[2]) +
               " ranks but the model runs on " + std::to_string(ranks);
      if (in[0] * in[1] * in[2] != ranks) return where(i) + ": its input lies on a head grid";
    }
    const Placement& p = placements_[f.inputs[0]];
    if (f.input_on_head && spatially_split(p.layout.value_or(grid)) && f.param_tensors > 0 &&
        f.recipe->placement != OutputPlacement::head_grid)
      return where(i) + " has parameters after the head, which a grid with ph * pw > 1 would count once per replica";
  }
  for (std::size_t a = 0; a <= facts_.size(); ++a) {
    const GridDims dims = activation_grid(a, grid);
    try {
      Distribution(shapes_[a], dims);
    } catch (const std::invalid_argument& e) {
      const std::string what = a == 0 ? "the model's input" : "the output of " + where(a - 1);
      return what + " cannot be distributed on grid " + grid_text(dims) + ": " + e.what();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// One rank's step.

PerfModel::Work PerfModel::layer_work(std::size_t i, const Box& out_tile, const Box& in_tile, double share) const {
  const Facts& f = facts_[i];
  const bool head_output = f.recipe->placement == OutputPlacement::head_grid;
  const Shape4& in = shapes_[f.inputs[0]];
  const Shape4& out = shapes_[i + 1];
  // Work follows the output cells, except in a head layer, where each rank takes its
  // tile's share of the input (its partial product).
  auto fraction_of = [&](double in_cells, double out_cells) {
    return head_output ? in_cells / static_cast<double>(cells(in)) : out_cells / static_cast<double>(cells(out));
  };
  const double fraction = fraction_of(static_cast<double>(in_tile.size()), static_cast<double>(out_tile.size()));
  if (!timings_.empty()) {
    const Shape4& probe_in = probe_shapes_[f.inputs[0]];
    const Shape4& probe_out = probe_shapes_[i + 1];
    const double scale = fraction / fraction_of(static_cast<double>(cells(probe_in)), static_cast<double>(cells(probe_out))) *
                         probe_share_ / share;
    return {timings_[i].forward_s * scale, timings_[i].backward_s * scale};
  }
  const Machine& m = machine_;
  const double flops = f.forward_flops * fraction;
  const double bytes = (static_cast<double>(in_tile.size()) * static_cast<double>(f.inputs.size()) +
                        static_cast<double>(out_tile.size())) *
                       activation_bytes_;
  // Backward: data and weight gradients (twice the multiply-adds), reading x and dy and
  // writing dx (twice the bytes); one call for dx and one per parameter.
  const double forward = m.kernel_overhead_s + std::max(flops / m.flop_rate, bytes / m.memory_bandwidth);
  const double backward = (1 + f.param_tensors) * m.kernel_overhead_s +
                          std::max(2 * flops / m.flop_rate, 2 * bytes / m.memory_bandwidth);
  return {forward / share, backward / share};
}

namespace {

// Per-layer facts of one grid that every representative rank shares.
struct LayerOnGrid {
  std::optional<Distribution> exchange;  // the input's distribution when the layer exchanges a halo
  HaloWidths widths;
};

// Bytes and messages one exchange moves over one kind of link. Every receive and send of an
// exchange is posted at once (halo/transport_mpi.cpp), so their latencies overlap: one
// latency, then the bytes one after another at the link's bandwidth, each direction at once.
// (Counting a latency per message, as this did, overestimated the exposed halo 4-6x on a
// 100 us link: docs/performance.md, "Links with a latency".)
struct LinkLoad {
  double send = 0, receive = 0;
  int messages = 0;
  double seconds(const Link& link) const {
    return messages == 0 ? 0 : link.latency_s + std::max(send, receive) / link.bandwidth;
  }
};

// The ranks that may be slowest on `grid`: per axis the first (largest tile, fewest
// neighbours), the second, the middle, the last two — corners, edges and the interior.
std::vector<int> representative_ranks(const GridDims& grid) {
  auto picks = [](int parts) {
    std::vector<int> p;
    for (int x : {0, 1, parts / 2, parts - 2, parts - 1})
      if (x >= 0 && x < parts && std::find(p.begin(), p.end(), x) == p.end()) p.push_back(x);
    return p;
  };
  std::vector<int> ranks;
  for (int h : picks(grid[1]))
    for (int w : picks(grid[2])) ranks.push_back(h * grid[2] + w);
  return ranks;
}

// A set of ranks a sum runs over: `size` ranks, `stride` apart (ranks are numbered
// row-major over (n, h, w) in every layout).
struct RankGroup {
  int size = 1, stride = 1;
  friend bool operator==(const RankGroup&, const RankGroup&) = default;
};

// owned_from(rank) ∩ owned_to(q) (sends) and owned_to(rank) ∩ owned_from(q) (receives), q != rank.
void regrid_pieces(const Distribution& from, const Distribution& to, int rank, std::vector<Piece>& receives,
                   std::vector<Piece>& sends) {
  const Box mine_from = from.owned_box(rank), mine_to = to.owned_box(rank);
  for (int q : to.owners(mine_from))
    if (q != rank) sends.push_back({q, mine_from.intersect(to.owned_box(q))});
  for (int q : from.owners(mine_to))
    if (q != rank) receives.push_back({q, mine_to.intersect(from.owned_box(q))});
}

}  // namespace

HaloTraffic regrid_traffic(const Distribution& from, const Distribution& to, int rank) {
  std::vector<Piece> receives, sends;
  regrid_pieces(from, to, rank, receives, sends);
  HaloTraffic t;
  for (const Piece& p : receives) t.receive_cells += p.box.size(), ++t.receive_messages;
  for (const Piece& p : sends) t.send_cells += p.box.size(), ++t.send_messages;
  return t;
}

StepPrediction PerfModel::predict(const GridDims& grid) const {
  if (const auto why = why_invalid(grid)) throw std::invalid_argument("grid " + grid_text(grid) + ": " + *why);
  const Machine& m = machine_;
  const int ranks = grid[0] * grid[1] * grid[2];
  const int rpn = std::max(1, m.ranks_per_node);
  const double share = m.rank_share(std::min(ranks, rpn));
  const auto link_of = [&](const RankGroup& g) -> const Link& {
    return g.stride * (g.size - 1) + 1 > rpn ? m.inter_node : m.intra_node;
  };
  // The ranks of `group` of the grid activation a lives on (a head grid's "all" is its
  // layout's sample group).
  const auto group_of = [&](std::size_t a, layers::SumGroup group) {
    const GridDims layout = placements_[a].layout.value_or(grid);
    const int spatial = layout[1] * layout[2];
    const bool head = placements_[a].head && spatial > 1;
    switch (group) {
      case layers::SumGroup::local: return RankGroup{};
      case layers::SumGroup::spatial: return head ? RankGroup{} : RankGroup{spatial, 1};
      case layers::SumGroup::samples: return RankGroup{layout[0], spatial};
      case layers::SumGroup::all: return head ? RankGroup{layout[0], spatial} : RankGroup{ranks, 1};
    }
    return RankGroup{};
  };

  std::vector<LayerOnGrid> on_grid(facts_.size());
  for (std::size_t i = 0; i < facts_.size(); ++i) {
    const Facts& f = facts_[i];
    if (f.recipe->input_halo != InputHalo::window || f.inputs.size() != 1) continue;
    const Distribution input(shapes_[f.inputs[0]], activation_grid(f.inputs[0], grid));
    if (layers::windows_inside_owned(*f.layer, input)) continue;
    on_grid[i].widths = layers::input_halo(*f.layer, input.global_shape(), input.grid());
    if (has_exchange(on_grid[i].widths)) on_grid[i].exchange = input;
  }

  // The gradient allreduce (layers/grad_reduce.hpp): one fused bucket per set of ranks,
  // the same on every rank (gradient_group.hpp's rule on the grid each layer runs on).
  std::vector<std::pair<RankGroup, double>> buckets;  // (group, elements per rank)
  const auto add_to = [&](RankGroup g, double elements) {
    if (g.size >= ranks) g = {ranks, 1};
    if (g.size <= 1 || elements <= 0) return;
    for (auto& [group, total] : buckets)
      if (group == g) return void(total += elements);
    buckets.emplace_back(g, elements);
  };
  std::int64_t reduced_elements = 0;
  int tensors = 0;
  for (const Facts& f : facts_) {
    const GridDims in = activation_grid(f.inputs[0], grid);
    add_to(group_of(f.inputs[0], layers::SumGroup::all), static_cast<double>(f.replicated));
    add_to(group_of(f.inputs[0], layers::SumGroup::samples), static_cast<double>(f.tiled) / (in[1] * in[2]));
    reduced_elements += f.replicated + f.tiled / (in[1] * in[2]);
    tensors += f.param_tensors;
  }
  double allreduce = 0, allreduce_bytes = 0;
  for (const auto& [group, elements] : buckets) {
    const double bytes = elements * kGradientBytes;
    allreduce += allreduce_seconds(bytes, group.size, link_of(group));
    // Packing the fused bucket and unpacking it, and the trip through host memory.
    allreduce += 4 * m.kernel_overhead_s + 2 * bytes / m.memory_bandwidth;
    if (m.staging_bandwidth > 0) allreduce += 2 * bytes / m.staging_bandwidth;
    allreduce_bytes += bytes;
  }

  // Representative ranks of every layout the model runs on.
  std::vector<int> candidates = representative_ranks(grid);
  for (const Placement& p : placements_)
    if (p.layout)
      for (int r : representative_ranks(*p.layout))
        if (std::find(candidates.begin(), candidates.end(), r) == candidates.end()) candidates.push_back(r);

  std::optional<StepPrediction> slowest;
  for (int rank : candidates) {
    StepPrediction p;
    p.grid = grid;
    p.rank = rank;
    p.allreduce_s = allreduce;
    p.allreduce_bytes = static_cast<std::int64_t>(allreduce_bytes);
    const int node = rank / rpn;
    for (std::size_t i = 0; i < facts_.size(); ++i) {
      const Facts& f = facts_[i];
      const LayerOnGrid& g = on_grid[i];
      const std::size_t in_a = f.inputs[0];
      const Distribution in_dist(shapes_[in_a], activation_grid(in_a, grid));
      const Distribution out_dist(shapes_[i + 1], activation_grid(i + 1, grid));
      const int in_rank = rank_on(in_a, grid, rank);
      const Box in_owned = in_dist.owned_box(in_rank);
      const Box out_tile = out_dist.owned_box(rank_on(i + 1, grid, rank));
      const bool windowed = f.recipe->input_halo == InputHalo::window && f.inputs.size() == 1;
      const Box in_tile = windowed ? f.layer->input_window(out_tile, in_dist.global_shape()) : in_owned;
      const Work work = layer_work(i, out_tile, in_tile, share);
      LayerPrediction lp;
      lp.text = f.entry.text;
      lp.grid = in_dist.grid();
      lp.on_head = in_dist.grid() != placements_[in_a].layout.value_or(grid);
      lp.compute_s = work.forward_s + work.backward_s;
      // The layer's own collectives run inside forward and backward: compute, as measured.
      if (f.stats_group) {
        const RankGroup members = group_of(in_a, *f.stats_group);
        const double bytes = 2.0 * static_cast<double>(shapes_[in_a][C]) * sizeof(double);
        lp.compute_s += 2 * allreduce_seconds(bytes, members.size, link_of(members));
      }
      if (f.head_partial_sum) {
        const RankGroup spatial = group_of(in_a, layers::SumGroup::spatial);
        lp.compute_s += allreduce_seconds(static_cast<double>(out_tile.size()) * kGradientBytes, spatial.size,
                                          link_of(spatial));
      }
      // Pieces a rank moves, with the time of the transfer and of packing them.
      const auto moved = [&](const std::vector<Piece>& receives, const std::vector<Piece>& sends, double& pack_s,
                             std::int64_t& bytes_out) {
        LinkLoad near, far;
        double total = 0, run_count = 0;
        for (const auto* list : {&receives, &sends})
          for (const Piece& pc : *list) {
            const double bytes = static_cast<double>(pc.box.size()) * activation_bytes_;
            LinkLoad& load = pc.peer / rpn == node ? near : far;
            (list == &receives ? load.receive : load.send) += bytes, ++load.messages;
            total += bytes, run_count += static_cast<double>(runs(pc.box));
          }
        // Each direction: a rank sends what it sends in one and what it receives in the other.
        bytes_out = static_cast<std::int64_t>(near.send + far.send + near.receive + far.receive);
        pack_s = 2 * (total / m.pack_bandwidth + run_count * m.pack_run_s) / share;
        return near.seconds(m.intra_node) + far.seconds(m.inter_node);
      };
      if (f.regrid) {
        std::vector<Piece> receives, sends;
        regrid_pieces(in_dist, out_dist, in_rank, receives, sends);
        double pack_s = 0;
        const double transfer = moved(receives, sends, pack_s, lp.regrid_bytes);
        lp.compute_s += pack_s;
        lp.regrid_s = 2 * transfer;  // forward, and backward the other way; nothing to hide it behind
      }
      if (g.exchange) {
        // Overlapped forward: the interior outputs while the halo travels, then one call
        // per border strip.
        double interior_fraction = 0;
        if (overlap_on_) {
          const Box interior = layers::interior_outputs(
              *f.layer, out_tile, layers::available_before_halo(in_owned, in_dist.global_shape()), in_dist.global_shape());
          if (!interior.empty()) {
            lp.compute_s += static_cast<double>(halo::subtract(out_tile, interior).size()) * m.kernel_overhead_s / share;
            interior_fraction = static_cast<double>(interior.size()) / static_cast<double>(out_tile.size());
          }
        }
        std::vector<Piece> receives, sends;
        fill_pieces(*f.layer, *g.exchange, in_rank, g.widths, receives, sends);
        double pack_s = 0;
        const double transfer = moved(receives, sends, pack_s, lp.halo_bytes);
        lp.compute_s += pack_s;
        // Forward hides the transfer behind the interior outputs, backward behind the
        // weight gradient (about half of a weighted layer's backward).
        const double hidden_forward = overlap_on_ ? m.overlap * interior_fraction * work.forward_s : 0;
        const double hidden_backward = overlap_on_ && f.has_weights ? m.overlap * work.backward_s / 2 : 0;
        lp.halo_s = std::max(0.0, transfer - hidden_forward) + std::max(0.0, transfer - hidden_backward);
      }
      p.compute_s += lp.compute_s;
      p.halo_s += lp.halo_s;
      p.halo_bytes += lp.halo_bytes;
      p.regrid_s += lp.regrid_s;
      p.regrid_bytes += lp.regrid_bytes;
      p.layers.push_back(std::move(lp));
    }
    // The loss reads the output and the target and writes the gradient, then sums over
    // every rank; the optimizer streams over the parameters a few times.
    const std::size_t last = facts_.size();
    const Box out_tile = Distribution(shapes_[last], activation_grid(last, grid)).owned_box(rank_on(last, grid, rank));
    p.compute_s += (m.kernel_overhead_s + 3 * static_cast<double>(out_tile.size()) * activation_bytes_ / m.memory_bandwidth) / share +
                   allreduce_seconds(16, ranks, link_of({ranks, 1}));
    p.compute_s += (tensors * m.kernel_overhead_s + 16 * static_cast<double>(reduced_elements) / m.memory_bandwidth) / share;
    if (!slowest || p.total_s() > slowest->total_s()) slowest = std::move(p);
  }
  return *slowest;
}

std::vector<StepPrediction> PerfModel::ranking(int ranks) const {
  std::vector<StepPrediction> out;
  for (const GridDims& g : factorizations(ranks))
    if (!why_invalid(g)) out.push_back(predict(g));
  std::stable_sort(out.begin(), out.end(),
                   [](const StepPrediction& a, const StepPrediction& b) { return a.total_s() < b.total_s(); });
  return out;
}

StepPrediction PerfModel::best(int ranks) const {
  std::vector<StepPrediction> r = ranking(ranks);
  if (r.empty()) {
    const GridDims fallback = default_grid(ranks);
    throw std::invalid_argument("no process grid of " + std::to_string(ranks) + " ranks can run this model; " +
                                grid_text(fallback) + ": " + why_invalid(fallback).value_or("?"));
  }
  return r.front();
}

}  // namespace tessera::models
