#include "models/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "distarray/mpi_progress.hpp"
#include "layers/batch_norm_options.hpp"
#include "layers/windowed.hpp"
#include "models/presets.hpp"
#include "models/spec_parser.hpp"

namespace tessera::models {

namespace {

constexpr double kElementBytes = sizeof(float);  // training precision

std::int64_t cells(const Shape4& s) { return s[N] * s[C] * s[H] * s[W]; }

bool spatially_split(const GridDims& g) { return g[1] * g[2] > 1; }

// A box's contiguous runs in an NCHW allocation wider than the box: one per (n, c, h).
std::int64_t runs(const Box& b) { return b.extent(N) * b.extent(C) * b.extent(H); }

std::string grid_text(const GridDims& g) { return format_grid(g); }

}  // namespace

// ---------------------------------------------------------------------------------------
// Machines. The CPU numbers were measured on the project's development VM (AMD EPYC,
// oneDNN fp32 on one core, MPICH 4 shared memory; docs/performance.md); the H100 numbers
// are stated assumptions, not measurements.

Machine Machine::cpu_core() {
  Machine m;
  m.name = "cpu-core";
  m.flop_rate = 50e9;            // oneDNN fp32 3x3 conv, 32 channels, one core (bench_scaling profile)
  m.memory_bandwidth = 8e9;      // one core streaming
  m.kernel_overhead_s = 20e-6;   // a oneDNN primitive call or a Kokkos OpenMP dispatch
  m.ranks_per_node = 1;
  m.devices_per_node = 1;
  m.devices_per_rank = 1;
  m.intra_node = {2e-6, 5e9};    // MPICH shared memory
  m.inter_node = {5e-6, 12.5e9};  // 100 Gb/s Ethernet/InfiniBand
  m.pack_bandwidth = 10e9;       // bench_halo: row halos 10-17 GB/s
  m.pack_run_s = 10e-9;          // bench_halo: column halos ~0.3 GB/s at 4-byte runs
  m.overlap = 1;                 // the progress thread moves messages during interior work (for_this_build)
  m.staging_bandwidth = 0;       // gradients already live on the host
  return m;
}

Machine Machine::h100_node() {
  Machine m;
  m.name = "h100-node";
  m.flop_rate = 30e12;           // cuDNN fp32 FMA (no TF32: CUDNN_FMA_MATH), ~45% of H100 SXM5's 67 TFLOP/s
  m.memory_bandwidth = 2.5e12;   // of 3.35 TB/s HBM3
  m.kernel_overhead_s = 10e-6;   // launch + cuDNN dispatch
  m.ranks_per_node = 8;
  m.devices_per_node = 8;
  m.devices_per_rank = 1;
  m.intra_node = {3e-6, 450e9};  // NVLink 4 through NVSwitch, per direction
  m.inter_node = {8e-6, 50e9};   // 400 Gb/s NIC per GPU
  m.pack_bandwidth = 1e12;       // pack/unpack kernels
  m.pack_run_s = 1e-11;          // a strided column costs a 32-byte sector per element
  m.overlap = 1;                 // NCCL moves halos on its own stream while interior kernels run
  m.staging_bandwidth = 50e9;    // gradients are reduced through host memory (PCIe 5)
  return m;
}

Machine Machine::for_this_build(int ranks_per_node) {
#ifdef KOKKOS_ENABLE_CUDA
  Machine m = h100_node();
  m.ranks_per_node = std::max(1, ranks_per_node);
  m.devices_per_node = m.ranks_per_node;  // one GPU per rank
#else
  Machine m = cpu_core();
  m.ranks_per_node = std::max(1, ranks_per_node);
  m.devices_per_node = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  m.devices_per_rank = m.devices_per_node;  // a lone rank gets every core's thread
  // Without the progress thread (MPI below MPI_THREAD_MULTIPLE, or TESSERA_MPI_PROGRESS=off)
  // a message moves only inside finish(): the whole transfer, and a late neighbour, is exposed.
  if (!MpiProgress::enabled()) m.overlap = 0;
#endif
  return m;
}

double Machine::rank_share(int ranks_on_node) const {
  const double per_rank = static_cast<double>(devices_per_node) / std::max(1, ranks_on_node);
  return std::min(devices_per_rank, per_rank);
}

std::string Machine::describe() const {
  std::ostringstream out;
  out << name << ": flop_rate " << flop_rate << " FLOP/s, memory " << memory_bandwidth << " B/s, kernel "
      << kernel_overhead_s << " s, " << ranks_per_node << " ranks and " << devices_per_node
      << " devices per node (at most " << devices_per_rank << " per rank), intra-node " << intra_node.latency_s
      << " s + B/" << intra_node.bandwidth << ", inter-node " << inter_node.latency_s << " s + B/"
      << inter_node.bandwidth << ", pack " << pack_bandwidth << " B/s + " << pack_run_s << " s/run, overlap "
      << overlap << ", staging " << staging_bandwidth << " B/s";
  return out.str();
}

void set_machine_field(Machine& m, const std::string& name, double value) {
  struct Field {
    const char* name;
    double* rate;  // must be positive
    int* count;    // must be positive
  };
  const Field fields[] = {{"flop_rate", &m.flop_rate, nullptr},
                          {"memory_bandwidth", &m.memory_bandwidth, nullptr},
                          {"kernel_overhead_s", &m.kernel_overhead_s, nullptr},
                          {"ranks_per_node", nullptr, &m.ranks_per_node},
                          {"devices_per_node", nullptr, &m.devices_per_node},
                          {"devices_per_rank", &m.devices_per_rank, nullptr},
                          {"intra_latency_s", &m.intra_node.latency_s, nullptr},
                          {"intra_bandwidth", &m.intra_node.bandwidth, nullptr},
                          {"inter_latency_s", &m.inter_node.latency_s, nullptr},
                          {"inter_bandwidth", &m.inter_node.bandwidth, nullptr},
                          {"pack_bandwidth", &m.pack_bandwidth, nullptr},
                          {"pack_run_s", &m.pack_run_s, nullptr},
                          {"overlap", &m.overlap, nullptr},
                          {"staging_bandwidth", &m.staging_bandwidth, nullptr}};
  std::string names;
  for (const Field& f : fields) {
    names += (names.empty() ? "" : ", ") + std::string(f.name);
    if (name != f.name) continue;
    const std::string what = "machine field " + name + " = " + std::to_string(value);
    const bool may_be_zero = name.ends_with("_s") || name == "overlap" || name == "staging_bandwidth";
    if (!(value > 0 || (may_be_zero && value == 0))) throw std::invalid_argument(what + ": must be positive");
    if (name == "overlap" && value > 1) throw std::invalid_argument(what + ": overlap is a fraction in [0, 1]");
    if (f.count) {
      if (value != std::floor(value)) throw std::invalid_argument(what + ": must be a whole number");
      *f.count = static_cast<int>(value);
    } else {
      *f.rate = value;
    }
    return;
  }
  throw std::invalid_argument("unknown machine field '" + name + "' (fields: " + names + ")");
}

double allreduce_seconds(double bytes, int group, const Link& link) {
  if (group <= 1 || bytes <= 0) return 0;
  const double steps = std::ceil(std::log2(static_cast<double>(group)));
  return 2 * steps * link.latency_s + 2.0 * (group - 1) / group * bytes / link.bandwidth;
}

std::vector<GridDims> factorizations(int ranks) {
  std::vector<GridDims> grids;
  for (int pn = 1; pn <= ranks; ++pn)
    for (int ph = 1; pn * ph <= ranks; ++ph)
      if (ranks % (pn * ph) == 0) grids.push_back({pn, ph, ranks / (pn * ph)});
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
  const LayerRecipe* recipe = nullptr;
  std::unique_ptr<layers::Layer<float>> layer;
  bool input_on_head = false;   // after a head layer: its input lives on the head grid
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

PerfModel::PerfModel(std::string_view model, const Shape4& input, Machine machine, const LayerRegistry& registry)
    : shapes_{input}, machine_(std::move(machine)) {
  const std::vector<SpecEntry> entries = parse_spec(resolve_model(model, input));
  bool on_head = false;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    try {
      Facts f;
      f.entry = entries[i];
      f.recipe = &registry.find(entries[i].name);
      f.layer = f.recipe->make(entries[i].options, shapes_.back(), i + 1);
      f.input_on_head = on_head;
      const Shape4 out = f.layer->output_shape(shapes_.back());
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
      f.head_partial_sum = f.recipe->placement == OutputPlacement::head_grid && !on_head;
      if (f.recipe->placement == OutputPlacement::head_grid) on_head = true;
      shapes_.push_back(out);
      facts_.push_back(std::move(f));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("layer " + std::to_string(i) + " (" + entries[i].text + "): " + e.what());
    }
  }
}

PerfModel::~PerfModel() = default;

std::size_t PerfModel::size() const { return facts_.size(); }
const Shape4& PerfModel::shape(std::size_t activation) const { return shapes_.at(activation); }
const layers::Layer<float>& PerfModel::layer(std::size_t i) const { return *facts_.at(i).layer; }

std::int64_t PerfModel::parameter_count() const {
  std::int64_t n = 0;
  for (const Facts& f : facts_) n += f.replicated + f.tiled;
  return n;
}

void PerfModel::use_timings(std::vector<LayerTiming> timings, const Shape4& probe, double probe_share) {
  if (timings.size() != facts_.size())
    throw std::invalid_argument("perf model: " + std::to_string(timings.size()) + " layer timings for " +
                                std::to_string(facts_.size()) + " layers");
  if (!(probe_share > 0)) throw std::invalid_argument("perf model: the probe's device share must be positive");
  // The probe's shapes must chain through the layers as the model's do.
  Shape4 s = probe;
  for (const Facts& f : facts_) s = f.layer->output_shape(s);
  timings_ = std::move(timings);
  probe_ = probe;
  probe_share_ = probe_share;
}

// ---------------------------------------------------------------------------------------
// Validity: the checks Sequential makes before allocating anything.

std::optional<std::string> PerfModel::why_invalid(const GridDims& grid) const {
  const GridDims head{grid[0], 1, 1};
  for (std::size_t i = 0; i < facts_.size(); ++i)
    if (facts_[i].input_on_head && spatially_split(grid) && facts_[i].param_tensors > 0 &&
        facts_[i].recipe->placement != OutputPlacement::head_grid)
      return "layer " + std::to_string(i) + " (" + facts_[i].entry.text +
             ") has parameters after the head, which a grid with ph * pw > 1 would count once per replica";
  for (std::size_t i = 0; i <= facts_.size(); ++i) {
    const bool on_head = i > 0 && (facts_[i - 1].input_on_head || facts_[i - 1].recipe->placement == OutputPlacement::head_grid);
    try {
      Distribution(shapes_[i], on_head ? head : grid);
    } catch (const std::invalid_argument& e) {
      const std::string what = i == 0 ? "the model's input" : "the output of layer " + std::to_string(i - 1) + " (" +
                                                                  facts_[i - 1].entry.text + ")";
      return what + " cannot be distributed on grid " + grid_text(on_head ? head : grid) + ": " + e.what();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// One rank's step.

PerfModel::Work PerfModel::layer_work(std::size_t i, const Box& out_tile, const Box& in_tile, double share) const {
  const Facts& f = facts_[i];
  const bool head_output = f.recipe->placement == OutputPlacement::head_grid;
  const Shape4& in = shapes_[i];
  const Shape4& out = shapes_[i + 1];
  // Work follows the output cells, except in a head layer, where each rank takes its
  // tile's share of the input (its partial product).
  auto fraction_of = [&](double in_cells, double out_cells) {
    return head_output ? in_cells / static_cast<double>(cells(in)) : out_cells / static_cast<double>(cells(out));
  };
  const double fraction = fraction_of(static_cast<double>(in_tile.size()), static_cast<double>(out_tile.size()));
  if (!timings_.empty()) {
    Shape4 probe_in = probe_;
    for (std::size_t k = 0; k < i; ++k) probe_in = facts_[k].layer->output_shape(probe_in);
    const Shape4 probe_out = f.layer->output_shape(probe_in);
    const double scale = fraction / fraction_of(static_cast<double>(cells(probe_in)), static_cast<double>(cells(probe_out))) *
                         probe_share_ / share;
    return {timings_[i].forward_s * scale, timings_[i].backward_s * scale};
  }
  const Machine& m = machine_;
  const double flops = f.forward_flops * fraction;
  const double bytes = (static_cast<double>(in_tile.size()) + static_cast<double>(out_tile.size())) * kElementBytes;
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
  bool input_on_head = false, output_on_head = false;
  std::optional<Distribution> exchange;  // the input's distribution when the layer exchanges a halo
  HaloWidths widths;
};

// Bytes and messages one exchange moves over one kind of link.
struct LinkLoad {
  double send = 0, receive = 0;
  int messages = 0;
  double seconds(const Link& link) const {
    return messages * link.latency_s + std::max(send, receive) / link.bandwidth;
  }
};

// The ranks that may be slowest: per axis the first (largest tile, fewest neighbours), the
// second, the middle, the last two — corners, edges and the interior.
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

}  // namespace

StepPrediction PerfModel::predict(const GridDims& grid) const {
  if (const auto why = why_invalid(grid)) throw std::invalid_argument("grid " + grid_text(grid) + ": " + *why);
  const Machine& m = machine_;
  const int ranks = grid[0] * grid[1] * grid[2];
  const int spatial = grid[1] * grid[2];
  const GridDims head{grid[0], 1, 1};
  const int rpn = std::max(1, m.ranks_per_node);
  const double share = m.rank_share(std::min(ranks, rpn));
  // Ranks are numbered row-major over (n, h, w): a spatial group is consecutive ranks, a
  // sample group strided by ph * pw.
  const Link& all_link = ranks <= rpn ? m.intra_node : m.inter_node;
  const Link& spatial_link = spatial <= rpn ? m.intra_node : m.inter_node;
  const Link& sample_link = spatial * (grid[0] - 1) >= rpn ? m.inter_node : m.intra_node;
  auto group_size = [&](layers::SumGroup g) {
    return g == layers::SumGroup::all ? ranks : g == layers::SumGroup::spatial ? spatial : 1;
  };

  std::vector<LayerOnGrid> on_grid(facts_.size());
  for (std::size_t i = 0; i < facts_.size(); ++i) {
    const Facts& f = facts_[i];
    on_grid[i].input_on_head = f.input_on_head;
    on_grid[i].output_on_head = f.input_on_head || f.recipe->placement == OutputPlacement::head_grid;
    if (f.recipe->input_halo != InputHalo::window) continue;
    const Distribution input(shapes_[i], f.input_on_head ? head : grid);
    if (layers::windows_inside_owned(*f.layer, input)) continue;
    on_grid[i].widths = layers::input_halo(*f.layer, shapes_[i], input.grid());
    if (has_exchange(on_grid[i].widths)) on_grid[i].exchange = input;
  }

  // The gradient allreduce (layers/grad_reduce.hpp), the same on every rank.
  std::int64_t replicated = 0, per_sample_group = 0;
  int tensors = 0;
  for (const Facts& f : facts_) {
    (f.input_on_head && spatially_split(grid) ? per_sample_group : replicated) += f.replicated;
    per_sample_group += f.tiled / spatial;
    tensors += f.param_tensors;
  }
  const double replicated_bytes = ranks > 1 ? static_cast<double>(replicated) * kElementBytes : 0;
  const double sample_bytes = grid[0] > 1 ? static_cast<double>(per_sample_group) * kElementBytes : 0;
  double allreduce = allreduce_seconds(replicated_bytes, ranks, all_link) +
                     allreduce_seconds(sample_bytes, grid[0], sample_link);
  if (replicated_bytes + sample_bytes > 0) {
    // Packing the fused bucket and unpacking it, and the trip through host memory.
    allreduce += 4 * m.kernel_overhead_s + 2 * (replicated_bytes + sample_bytes) / m.memory_bandwidth;
    if (m.staging_bandwidth > 0) allreduce += 2 * (replicated_bytes + sample_bytes) / m.staging_bandwidth;
  }

  std::optional<StepPrediction> slowest;
  for (int rank : representative_ranks(grid)) {
    StepPrediction p;
    p.grid = grid;
    p.rank = rank;
    p.allreduce_s = allreduce;
    p.allreduce_bytes = static_cast<std::int64_t>(replicated_bytes + sample_bytes);
    for (std::size_t i = 0; i < facts_.size(); ++i) {
      const Facts& f = facts_[i];
      const LayerOnGrid& g = on_grid[i];
      // On the head grid {pn, 1, 1} a rank is its sample group's replica (rank / spatial).
      const Box in_owned = Distribution(shapes_[i], g.input_on_head ? head : grid)
                               .owned_box(g.input_on_head ? rank / spatial : rank);
      const Box out_tile = Distribution(shapes_[i + 1], g.output_on_head ? head : grid)
                               .owned_box(g.output_on_head ? rank / spatial : rank);
      const Box in_tile = f.recipe->input_halo == InputHalo::window ? f.layer->input_window(out_tile, shapes_[i])
                                                                     : in_owned;
      const Work work = layer_work(i, out_tile, in_tile, share);
      LayerPrediction lp;
      lp.text = f.entry.text;
      lp.compute_s = work.forward_s + work.backward_s;
      // The layer's own collectives run inside forward and backward: compute, as measured.
      if (f.stats_group) {
        const int members = group_size(*f.stats_group);
        const double bytes = 2.0 * static_cast<double>(shapes_[i][C]) * sizeof(double);
        lp.compute_s += 2 * allreduce_seconds(bytes, members, members == ranks ? all_link : spatial_link);
      }
      if (f.head_partial_sum)
        lp.compute_s += allreduce_seconds(static_cast<double>(out_tile.size()) * kElementBytes, spatial, spatial_link);
      if (g.exchange) {
        // Overlapped forward: the interior outputs while the halo travels, then one call
        // per border strip.
        double interior_fraction = 0;
        if (overlap_on_) {
          const Box interior = layers::interior_outputs(
              *f.layer, out_tile, layers::available_before_halo(in_owned, shapes_[i]), shapes_[i]);
          if (!interior.empty()) {
            lp.compute_s += static_cast<double>(halo::subtract(out_tile, interior).size()) * m.kernel_overhead_s / share;
            interior_fraction = static_cast<double>(interior.size()) / static_cast<double>(out_tile.size());
          }
        }
        std::vector<Piece> receives, sends;
        fill_pieces(*f.layer, *g.exchange, rank, g.widths, receives, sends);
        const int node = rank / rpn;
        LinkLoad near, far;
        double moved = 0, run_count = 0;
        for (const Piece& pc : receives) {
          const double bytes = static_cast<double>(pc.box.size()) * kElementBytes;
          LinkLoad& load = pc.peer / rpn == node ? near : far;
          load.receive += bytes, ++load.messages;
          moved += bytes, run_count += static_cast<double>(runs(pc.box));
        }
        for (const Piece& pc : sends) {
          const double bytes = static_cast<double>(pc.box.size()) * kElementBytes;
          LinkLoad& load = pc.peer / rpn == node ? near : far;
          load.send += bytes, ++load.messages;
          moved += bytes, run_count += static_cast<double>(runs(pc.box));
        }
        // Fill forward, accumulate backward (the same boxes reversed): each rank sends what
        // it sends in one direction plus what it receives in the other.
        lp.halo_bytes = static_cast<std::int64_t>(near.send + far.send + near.receive + far.receive);
        lp.compute_s += 2 * (moved / m.pack_bandwidth + run_count * m.pack_run_s) / share;
        const double transfer = near.seconds(m.intra_node) + far.seconds(m.inter_node);
        // Forward hides the transfer behind the interior outputs, backward behind the
        // weight gradient (about half of a weighted layer's backward).
        const double hidden_forward = overlap_on_ ? m.overlap * interior_fraction * work.forward_s : 0;
        const double hidden_backward = overlap_on_ && f.has_weights ? m.overlap * work.backward_s / 2 : 0;
        lp.halo_s = std::max(0.0, transfer - hidden_forward) + std::max(0.0, transfer - hidden_backward);
      }
      p.compute_s += lp.compute_s;
      p.halo_s += lp.halo_s;
      p.halo_bytes += lp.halo_bytes;
      p.layers.push_back(std::move(lp));
    }
    // The loss reads the output and the target and writes the gradient, then sums over
    // every rank; the optimizer streams over the parameters a few times.
    const bool out_on_head = on_grid.back().output_on_head;
    const Box out_tile = Distribution(shapes_.back(), out_on_head ? head : grid).owned_box(out_on_head ? rank / spatial : rank);
    p.compute_s += (m.kernel_overhead_s + 3 * static_cast<double>(out_tile.size()) * kElementBytes / m.memory_bandwidth) / share +
                   allreduce_seconds(16, ranks, all_link);
    p.compute_s += (tensors * m.kernel_overhead_s +
                    16 * static_cast<double>(replicated + per_sample_group) / m.memory_bandwidth) / share;
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
