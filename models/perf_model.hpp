#pragma once
// PerfModel: predicts the time of one training step — forward, loss, backward, gradient
// allreduce, optimizer — of a model (chain or graph, models/graph.hpp) on any process grid, from arithmetic alone
// (no communication, the same numbers on every rank), and ranks the grids of a rank count.
// tessera-train --grid auto runs the fastest (models/auto_grid.hpp); docs/performance.md
// states the assumptions and checks the predictions against bench/scaling.
//
// A step, for each of a few representative ranks (the tile corners, edges and the middle;
// the slowest one is the prediction):
//   compute    every layer forward and backward: a roofline, max(FLOPs / flop_rate,
//              bytes / memory_bandwidth), plus a fixed cost per kernel call (the overlapped
//              forward is one call per border strip more) — or, when measured timings are
//              given, the probe's seconds scaled by the tile's share of the probe's cells;
//              divided by the rank's share of its node's devices (2 ranks per core: half);
//              plus halo pack and unpack (bytes / pack_bandwidth + a cost per contiguous
//              run: a column halo in NCHW is one run per row) and the layers' own small
//              collectives (batch norm statistics, the head's partial sums, the loss);
//   halo       per exchange, one latency (its messages travel at once) + bytes / bandwidth,
//              by link (same node or not; ranks are numbered row-major over the grid and
//              packed onto nodes in order), minus what interior work hides (overlap × the
//              interior part of the forward, × the weight gradient in backward);
//   allreduce  the fused gradient buckets (layers/grad_reduce.hpp), one per group of ranks
//              (all; the sample group of each layout a parameter's layer runs on):
//              2·⌈log2 g⌉ latencies + 2·(g−1)/g · bytes / bandwidth (the reduce-scatter +
//              allgather bound), plus staging through the host;
//   regrid     a layout change (regrid(grid=...)): one latency per link + the bytes of the
//              boxes the all-to-all moves (exact, as the halo), forward and backward, plus
//              pack and unpack.
// Layouts: the grid evaluated is the model's; a node after a regrid runs on the regrid's
// grid (fixed by the spec), and a head after it on that grid's head grid. The nodes of a
// graph run in topological order; a node with several inputs (add, concat) reads its
// inputs' owned cells (no halo) and costs its output's bytes.
// Precision (set_precision): activations, their halos and regrids move 2 bytes an element in
// bf16 and 4 in fp32; the gradient allreduce and the head's partial sums are fp32 in both.
// Halo traffic is exact: per peer the cells of owned(peer) ∩ window(me) (fill) and of
// owned(me) ∩ window(peer), the boxes halo::Plan computes; backward's accumulate sends them
// the other way. Not modelled: waiting for a slower neighbour (it appears as exposed halo
// time in measurements), contention between messages, the tile shape's effect on kernel
// efficiency beyond the per-call cost, oversubscribed scheduling.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/distribution.hpp"
#include "distarray/process_grid.hpp"
#include "layers/layer.hpp"
#include "models/layer_registry.hpp"

namespace tessera::models {

struct Link {
  double latency_s = 0;
  double bandwidth = 1;  // bytes per second, one direction
  // Bytes per second of the host's own work for each byte an allreduce moves over this link
  // that the transfer does not hide (MPI's copies through the network stack, the sum); 0:
  // none. Measured, not assumed: bench_scaling --measure-links times an MPI_Allreduce of
  // 4 MiB beside the link's latency and bandwidth.
  double reduce_bandwidth = 0;
};

// What one node offers a rank. The named machines state their numbers in the .cpp.
struct Machine {
  std::string name;
  double flop_rate = 1;          // sustained convolution / GEMM FLOP/s of one device (core or GPU)
  double memory_bandwidth = 1;   // bytes/s one device streams in elementwise kernels
  double kernel_overhead_s = 0;  // fixed cost of one kernel or library call
  int ranks_per_node = 1;        // consecutive ranks share a node
  int devices_per_node = 1;      // cores or GPUs the ranks of a node share
  double devices_per_rank = 1;   // at most this many devices serve one rank (its threads; 1 GPU)
  Link intra_node, inter_node;
  double pack_bandwidth = 1;     // bytes/s of halo pack or unpack
  double pack_run_s = 0;         // extra cost per contiguous run packed or unpacked
  double overlap = 0;            // fraction of a halo transfer that concurrent work can hide, [0, 1]
  double staging_bandwidth = 0;  // bytes/s device <-> host for the gradient allreduce; 0: none

  // One rank per core of this project's CPU build (oneDNN fp32, MPICH shared memory).
  static Machine cpu_core();
  // An H100 SXM node: 8 GPUs on NVLink, 400 Gb/s between nodes (docs/performance.md).
  static Machine h100_node();
  // The build's machine (cpu_core or h100_node) with `ranks_per_node` and, on CPUs, the
  // node's cores.
  static Machine for_this_build(int ranks_per_node);

  // Devices serving one rank when `ranks_on_node` ranks share the node.
  double rank_share(int ranks_on_node) const;
  std::string describe() const;  // one line of every number
};

// Sets the Machine field `name` to `value`: flop_rate, memory_bandwidth, kernel_overhead_s,
// ranks_per_node, devices_per_node, devices_per_rank, intra_latency_s, intra_bandwidth,
// inter_latency_s, inter_bandwidth, intra_reduce_bandwidth, inter_reduce_bandwidth,
// pack_bandwidth, pack_run_s, overlap, staging_bandwidth. Throws std::invalid_argument listing them for any other name, and
// for a value out of range (a non-positive rate or count, overlap outside [0, 1]).
void set_machine_field(Machine& machine, const std::string& name, double value);
// The same from text (a machine file's or --set's value): anything but a whole number is
// refused naming the field and the text.
void set_machine_field(Machine& machine, const std::string& name, const std::string& value);

// Measured seconds of one layer's forward and backward on a probe input held by one rank.
struct LayerTiming {
  double forward_s = 0;
  double backward_s = 0;
};

// Halo traffic of one exchange for one rank, in elements.
struct HaloTraffic {
  std::int64_t send_cells = 0, receive_cells = 0;
  int send_messages = 0, receive_messages = 0;
};

// The forward fill of `layer`'s input window on `input` (its input distribution) for
// `rank`: what it receives (owned(q) ∩ window(rank)) and sends (owned(rank) ∩ window(q)).
// The backward accumulate moves the same boxes the other way. Zero when every window lies
// in its owned box (no exchange is made then).
HaloTraffic fill_traffic(const layers::Layer<float>& layer, const Distribution& input, int rank);

// What a regrid (layers/regrid.hpp) moves for one rank, in elements, forward: the boxes
// owned_from(rank) ∩ owned_to(q) it sends and owned_to(rank) ∩ owned_from(q) it receives,
// q != rank (its own overlap is a local copy). Backward moves the same boxes the other way.
HaloTraffic regrid_traffic(const Distribution& from, const Distribution& to, int rank);

struct LayerPrediction {
  std::string text;            // the spec entry
  GridDims grid{};             // the grid the layer runs on (its input's)
  bool on_head = false;        // that grid is the head grid of the layout before
  double compute_s = 0;        // forward + backward kernels, pack/unpack, own collectives
  double halo_s = 0;           // exposed transfer, forward + backward
  std::int64_t halo_bytes = 0; // sent by the predicted rank, forward + backward
  double regrid_s = 0;         // a regrid's all-to-all, forward + backward
  std::int64_t regrid_bytes = 0;  // sent by the predicted rank, forward + backward
};

struct StepPrediction {
  GridDims grid{};
  int rank = 0;                  // the slowest representative rank, whose numbers these are
  double compute_s = 0, halo_s = 0, allreduce_s = 0, regrid_s = 0;
  double total_s() const { return compute_s + halo_s + allreduce_s + regrid_s; }
  std::int64_t halo_bytes = 0;       // sent per step by that rank
  std::int64_t allreduce_bytes = 0;  // gradient bytes each rank reduces per step
  std::int64_t regrid_bytes = 0;     // sent per step by that rank in regrids' all-to-alls
  std::vector<LayerPrediction> layers;
};

class PerfModel {
 public:
  // `model`: preset or spec, as Sequential takes it; input: global (N, C, H, W). Builds the
  // layers (no grid, no communication). Throws std::invalid_argument as Sequential would
  // for a spec it cannot build.
  PerfModel(std::string_view model, const Shape4& input, Machine machine,
            const LayerRegistry& registry = LayerRegistry::global());
  ~PerfModel();
  PerfModel(const PerfModel&) = delete;
  PerfModel& operator=(const PerfModel&) = delete;

  // Replaces the roofline by measured times, one per layer, taken on `probe` (a global
  // input shape held whole by one rank of share `probe_share` devices).
  void use_timings(std::vector<LayerTiming> timings, const Shape4& probe, double probe_share = 1);
  const Machine& machine() const { return machine_; }
  void set_overlap(bool on) { overlap_on_ = on; }  // tessera-train --overlap
  // The training precision's activations: "fp32" (4 bytes an element) or "bf16" (2: halos,
  // regrids and the layers' memory traffic halve; the gradient allreduce stays fp32).
  // Throws std::invalid_argument naming any other value.
  void set_precision(std::string_view precision);

  // Why `grid` cannot run the model (an activation it would cut into empty tiles, a layer
  // with parameters after the head), or nothing.
  std::optional<std::string> why_invalid(const GridDims& grid) const;
  // Throws std::invalid_argument when the grid is invalid.
  StepPrediction predict(const GridDims& grid) const;
  // Every valid pn x ph x pw == ranks, fastest first (ties: fewer sample groups first).
  std::vector<StepPrediction> ranking(int ranks) const;
  // The fastest valid grid; throws std::invalid_argument naming why when none is valid.
  StepPrediction best(int ranks) const;

  std::size_t size() const;
  const Shape4& shape(std::size_t activation) const;  // 0: input
  // The activations node i reads (chain: {i}), and the grid activation a lives on when the
  // model runs on `grid` (a regrid's layout, a head grid, or `grid`).
  const std::vector<std::size_t>& inputs(std::size_t i) const;
  GridDims activation_grid(std::size_t a, const GridDims& grid) const;
  const layers::Layer<float>& layer(std::size_t i) const;
  std::int64_t parameter_count() const;

 private:
  struct Facts;  // per layer, built once (perf_model.cpp)
  struct Work {
    double forward_s = 0, backward_s = 0;
  };
  // Layer i's kernels on a rank owning `out_tile` and reading `in_tile`, at `share` devices.
  Work layer_work(std::size_t i, const Box& out_tile, const Box& in_tile, double share) const;

  struct Placement {  // where an activation lives
    std::optional<GridDims> layout;  // a regrid's grid; nothing: the model's grid
    bool head = false;               // on the head grid of that layout (when it is split)
  };
  // Rank `rank` of the model's grid as a rank of activation a's grid (a head grid numbers
  // its sample groups' replicas).
  int rank_on(std::size_t a, const GridDims& grid, int rank) const;

  std::vector<Facts> facts_;
  std::vector<Shape4> shapes_;
  std::vector<Placement> placements_;  // [a]: of activation a
  Machine machine_;
  std::vector<LayerTiming> timings_;
  std::vector<Shape4> probe_shapes_;  // [a]: activation a on the probe
  double probe_share_ = 1;
  bool overlap_on_ = true;
  double activation_bytes_ = 4;  // per activation element (set_precision)
};

// Every {pn, ph, pw} with pn * ph * pw == ranks, pn ascending then ph ascending.
std::vector<GridDims> factorizations(int ranks);

// Seconds of an allreduce of `bytes` over `group` ranks on `link`.
double allreduce_seconds(double bytes, int group, const Link& link);

}  // namespace tessera::models
