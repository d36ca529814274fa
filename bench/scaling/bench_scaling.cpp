// bench_scaling: what one training step of a conv net costs on P ranks and one process
// grid — forward, MSE loss against a target, backward, gradient allreduce, SGD update,
// exactly as tessera-train takes it (its TrainingStep) — split into compute, exposed halo
// exchange (halo::exposed_wait_seconds) and gradient allreduce (with --overlap-allreduce on,
// the part backward did not hide); the median over repeats after
// warm-up, next to the performance model's prediction (models/perf_model.hpp).
//
//   mpiexec -n P bench_scaling [--model denoise-fcn] [--shape 1x1x1024x1024] [--grid auto]
//                              [--warmup 1] [--repeats 3] [--overlap on|off]
//                              [--overlap-allreduce on|off]  as tessera-train (default on)
//                              [--profile FILE]   write per-layer timings of this shape (P = 1)
//                              [--timings FILE]   predict from a --profile of a probe shape
//                              [--machine FILE]   override model machine fields (name value)
//                              [--measure-links FILE]  ranks 0 and 1: latency (ping-pong), bandwidth
//                                                      (both ways at once) and an allreduce's host
//                                                      work, written as the fields
//                                                      (intra_* on one node, inter_* on two), exit
//                              [--label TEXT]
//
// One JSON line per run on stdout (rank 0). Times are means over ranks of each repeat,
// then the median over repeats; compute = step - halo - allreduce, so it includes halo
// pack/unpack, the loss and the optimizer. cpu_s is the CPU time a rank ran during the
// step: with no more ranks than cores, the step time of a quiet machine. bench/scaling/run.sh drives strong and weak
// scaling and writes tables and plots into bench/results/.
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/support/bench_main.hpp"
#include "bench/support/bench_args.hpp"
#include "distarray/runtime.hpp"
#include "halo/wait_clock.hpp"
#include "layers/loss/mse.hpp"
#include "models/input_noise.hpp"
#include "models/layer_profile.hpp"
#include "models/optimizer_factory.hpp"
#include "models/perf_model.hpp"
#include "models/presets.hpp"
#include "models/sequential.hpp"
#include "models/training_step.hpp"

namespace {

using tessera::bench::split;
using tessera::bench::positive;

using namespace tessera;

struct Options {
  std::string model = "denoise-fcn";
  Shape4 shape{1, 1, 1024, 1024};
  std::string grid = "auto";
  int warmup = 1;
  int repeats = 3;
  layers::WindowedConfig halo;
  bool overlap_allreduce = true;
  std::string profile, timings, machine, measure_links, label;
  bool help = false;
};

const char* const kUsage =
    "usage: bench_scaling [--model M] [--shape NxCxHxW] [--grid NxHxW|auto] [--warmup N] [--repeats N]\n"
    "                     [--overlap on|off] [--overlap-allreduce on|off] [--profile FILE] [--timings FILE]\n"
    "                     [--machine FILE]"
    " [--measure-links FILE] [--label TEXT]\n";

Shape4 parse_shape(const std::string& text) {
  const auto parts = split(text, 'x');
  if (parts.size() != 4) throw std::invalid_argument("--shape '" + text + "' is not NxCxHxW");
  Shape4 s{};
  for (int d = 0; d < kDims; ++d) s[d] = positive(parts[static_cast<std::size_t>(d)], "--shape");
  return s;
}

std::string shape_text(const Shape4& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" + std::to_string(s[3]);
}

Options parse(int argc, char** argv) {
  Options o;
  o.help = !bench::read_options(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--model") o.model = value;
    else if (flag == "--shape") o.shape = parse_shape(value);
    else if (flag == "--grid") o.grid = value;
    else if (flag == "--warmup") o.warmup = static_cast<int>(std::strtol(value.c_str(), nullptr, 10));
    else if (flag == "--repeats") o.repeats = static_cast<int>(positive(value, "--repeats"));
    else if (flag == "--overlap") {
      if (value != "on" && value != "off") throw std::invalid_argument("--overlap must be on or off");
      o.halo.overlap = value == "on" ? layers::Overlap::on : layers::Overlap::off;
    } else if (flag == "--overlap-allreduce") {
      if (value != "on" && value != "off")
        throw std::invalid_argument("--overlap-allreduce must be on or off, got '" + value + "'");
      o.overlap_allreduce = value == "on";
    } else if (flag == "--profile") o.profile = value;
    else if (flag == "--timings") o.timings = value;
    else if (flag == "--machine") o.machine = value;
    else if (flag == "--measure-links") o.measure_links = value;
    else if (flag == "--label") o.label = value;
    else throw std::invalid_argument("unknown option " + flag);
  });
  if (o.help) return o;
  if (o.warmup < 0) throw std::invalid_argument("--warmup must not be negative");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double mean_over_ranks(double v, MPI_Comm comm) {
  double sum = 0;
  int size = 1;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  MPI_Comm_size(comm, &size);
  return sum / size;
}

// ---- files: "name value" lines, '#' comments ----------------------------------------

std::vector<std::pair<std::string, std::string>> read_fields(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::vector<std::pair<std::string, std::string>> fields;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string name, rest;
    words >> name;
    std::getline(words >> std::ws, rest);
    if (!name.empty()) fields.emplace_back(name, rest);
  }
  return fields;
}

void apply_machine_file(models::Machine& m, const std::string& path) {
  for (const auto& [name, value] : read_fields(path)) models::set_machine_field(m, name, value);
}

// Profile file: "probe NxCxHxW", "share S", then "layer <i> <forward_s> <backward_s> <spec entry>".
struct Profile {
  Shape4 probe{};
  double share = 1;
  std::vector<models::LayerTiming> timings;
};

void write_profile(const std::string& path, const std::string& model, const Shape4& probe, double share,
                   const std::vector<models::LayerTiming>& t, const models::PerfModel& perf) {
  std::ofstream out(path);
  out << "# bench_scaling --profile: model " << model << ", each layer alone on one rank\n";
  out << "probe " << shape_text(probe) << "\nshare " << share << "\n" << std::setprecision(9);
  for (std::size_t i = 0; i < t.size(); ++i)
    out << "layer " << i << " " << t[i].forward_s << " " << t[i].backward_s << " " << perf.layer(i).kind() << "\n";
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

Profile read_profile(const std::string& path) {
  Profile p;
  for (const auto& [name, value] : read_fields(path)) {
    std::istringstream words(value);
    if (name == "probe") p.probe = parse_shape(value);
    else if (name == "share") words >> p.share;
    else if (name == "layer") {
      std::size_t index = 0;
      models::LayerTiming t;
      words >> index >> t.forward_s >> t.backward_s;
      if (!words || index != p.timings.size()) throw std::runtime_error("'" + path + "': bad layer line '" + value + "'");
      p.timings.push_back(t);
    }
  }
  return p;
}

// ---- link parameters: ping-pong between ranks 0 and 1 -------------------------------

// Half the round-trip time of `bytes`: batches of `trips` back-to-back round trips, the
// fastest batch's mean (other processes share the cores and preempt some batches).
double one_way_seconds(std::size_t bytes, int trips, MPI_Comm comm, int rank) {
  std::vector<char> buffer(std::max<std::size_t>(bytes, 1));
  double best = 1e30;
  for (int batch = 0; batch < 40; ++batch) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    for (int t = 0; t < trips; ++t) {
      if (rank == 0) {
        MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 1, 0, comm);
        MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 1, 0, comm, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_BYTE, 0, 0, comm);
      }
    }
    const double one_way = (MPI_Wtime() - t0) / (2.0 * trips);
    if (batch > 0) best = std::min(best, one_way);  // batch 0: warm-up
  }
  MPI_Bcast(&best, 1, MPI_DOUBLE, 0, comm);
  return best;
}

// Seconds of one `trip()` (what a rank does in it; ranks with nothing to do return): batches
// of `trips`, each batch's time the slower rank's; `best` is the fastest batch after the
// first (a warm-up; other processes share the cores and preempt some batches), `median` the
// typical one (their spread shows how steady the link is).
struct BatchSeconds {
  double best, median;
};
template <class Trip>
BatchSeconds slowest_rank_batches(int batches, int trips, MPI_Comm comm, const Trip& trip) {
  std::vector<double> times;
  for (int batch = 0; batch < batches; ++batch) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    for (int t = 0; t < trips; ++t) trip();
    double each = (MPI_Wtime() - t0) / trips;
    MPI_Allreduce(MPI_IN_PLACE, &each, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (batch > 0) times.push_back(each);
  }
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2]};
}

// The time for `bytes` to cross each way at once (MPI_Sendrecv between ranks 0 and 1), as in
// every step of a halo exchange or an allreduce. On a full-duplex link this is the one-way
// time; where both directions share something (the cores that run TCP for network-namespace
// hosts on one machine) it is longer.
BatchSeconds exchange_seconds(std::size_t bytes, int trips, MPI_Comm comm, int rank) {
  std::vector<char> out(std::max<std::size_t>(bytes, 1)), in(out.size());
  const int peer = rank == 0 ? 1 : 0;
  return slowest_rank_batches(40, trips, comm, [&] {
    if (rank <= 1)
      MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_BYTE, peer, 1, in.data(), static_cast<int>(bytes), MPI_BYTE,
                   peer, 1, comm, MPI_STATUS_IGNORE);
  });
}

// Seconds of an MPI_Allreduce (sum) of `count` floats between world ranks 0 and 1 alone.
double allreduce_pair_seconds(std::size_t count, int trips, MPI_Comm comm, int rank) {
  MPI_Comm pair;
  MPI_Comm_split(comm, rank <= 1 ? 0 : MPI_UNDEFINED, rank, &pair);
  std::vector<float> values(count, 1.0f);
  const double best = slowest_rank_batches(20, trips, comm, [&] {
    if (pair != MPI_COMM_NULL)
      MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, pair);
  }).best;
  if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
  return best;
}

// Whether world ranks 0 and 1 share a node (MPI's view: MPICH goes by host name).
bool first_two_share_a_node(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Group world_group, node_group;
  MPI_Comm_group(comm, &world_group);
  MPI_Comm_group(node, &node_group);
  const int both[2] = {0, 1};
  int in_node[2];
  MPI_Group_translate_ranks(world_group, 2, both, node_group, in_node);
  int shared = in_node[0] != MPI_UNDEFINED && in_node[1] != MPI_UNDEFINED;
  MPI_Bcast(&shared, 1, MPI_INT, 0, comm);
  MPI_Group_free(&world_group);
  MPI_Group_free(&node_group);
  MPI_Comm_free(&node);
  return shared != 0;
}

// Writes intra_* fields when ranks 0 and 1 share a node, inter_* when they do not (launch
// them on two hosts: srun -N 2 -n 2).
int measure_links(const tessera::Runtime& runtime, const std::string& path) {
  if (runtime.size() < 2) throw std::invalid_argument("--measure-links needs at least 2 ranks");
  const MPI_Comm comm = runtime.world();
  const bool same_node = first_two_share_a_node(comm);
  const char* link = same_node ? "intra" : "inter";
  const std::size_t big = std::size_t{1} << 22;
  const double latency = one_way_seconds(8, 20, comm, runtime.rank());
  const double big_s = one_way_seconds(big, 4, comm, runtime.rank());
  const BatchSeconds exchange = exchange_seconds(big, 4, comm, runtime.rank());
  // The model's bandwidth is what each direction gets while both carry traffic: halo
  // exchanges and allreduce steps send and receive at once. The ping-pong's one-way figure
  // is printed beside it.
  const double one_way = static_cast<double>(big) / std::max(big_s - latency, 1e-9);
  const double both_ways = static_cast<double>(big) / std::max(exchange.best - latency, 1e-9);
  const double both_ways_median = static_cast<double>(big) / std::max(exchange.median - latency, 1e-9);
  // An allreduce of the same 4 MiB between the two moves the 4 MiB each way (the model's
  // allreduce_seconds with 2 ranks); what it takes beyond the link's latency and that
  // transfer is the host's own work per byte (MPI's copies through the network stack, the
  // sum) that the transfer does not hide. None where the allreduce is no slower.
  const double allreduce_s = allreduce_pair_seconds(big / sizeof(float), 4, comm, runtime.rank());
  const double wire_s = 2 * latency + static_cast<double>(big) / both_ways;
  const double host_s = allreduce_s - wire_s;
  const double reduce_bandwidth = host_s > 0 ? static_cast<double>(big) / host_s : 0;
  if (runtime.rank() == 0) {
    std::ofstream out(path);
    out << "# bench_scaling --measure-links: MPI between ranks 0 and 1 (" << (same_node ? "same node" : "two nodes")
        << "): latency from an 8-byte ping-pong, bandwidth from 4 MiB sent each way at once (MPI_Sendrecv), "
        << "the allreduce's host work from an MPI_Allreduce of 4 MiB beyond both; "
        << "one way alone (ping-pong): " << std::setprecision(6) << one_way << " B/s"
        << "; each way at once in the median batch (the model takes the best): " << both_ways_median << " B/s"
        << "; an MPI_Allreduce of 4 MiB between them: " << allreduce_s << " s\n"
        << link << "_latency_s " << latency << "\n" << link << "_bandwidth " << both_ways << "\n"
        << link << "_reduce_bandwidth " << reduce_bandwidth << "\n";
    if (!out) throw std::runtime_error("cannot write '" + path + "'");
    std::printf("links (%s): latency %.2f us, bandwidth %.2f GB/s each way at once (%.2f GB/s one way alone); "
                "allreduce of 4 MiB %.2f ms, %.2f ms beyond the link (host work %.2f GB/s) -> %s\n",
                link, latency * 1e6, both_ways / 1e9, one_way / 1e9, allreduce_s * 1e3, std::max(host_s, 0.0) * 1e3,
                reduce_bandwidth / 1e9, path.c_str());
  }
  return 0;
}

// ---- the step ----------------------------------------------------------------------

struct Sample {
  double step = 0, halo = 0, allreduce = 0, cpu = 0;
};

// CPU seconds this process has run: on a shared machine, the step time other processes'
// preemption did not add (MPI's busy-waiting counts as running).
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string json_prediction(const models::StepPrediction& p, const char* source) {
  std::ostringstream out;
  out << std::setprecision(6) << "{\"source\": \"" << source << "\", \"step_s\": " << p.total_s()
      << ", \"compute_s\": " << p.compute_s << ", \"halo_s\": " << p.halo_s << ", \"allreduce_s\": " << p.allreduce_s
      << ", \"halo_bytes\": " << p.halo_bytes << ", \"allreduce_bytes\": " << p.allreduce_bytes << "}";
  return out.str();
}

int run(const tessera::Runtime& runtime, const Options& o) {
  const bool root = runtime.rank() == 0;
  const int ranks = runtime.size();
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = Kokkos::DefaultHostExecutionSpace().concurrency();

  // The machine as the model sees this run: one node, its cores shared by the ranks.
  models::Machine machine = models::Machine::cpu_core();
#ifdef KOKKOS_ENABLE_CUDA
  machine = models::Machine::h100_node();
#endif
  machine.ranks_per_node = ranks;
#ifndef KOKKOS_ENABLE_CUDA
  machine.devices_per_node = cores;
  machine.devices_per_rank = threads;
#endif
  if (!o.machine.empty()) apply_machine_file(machine, o.machine);
  models::PerfModel perf(o.model, o.shape, machine);
  perf.set_overlap(o.halo.overlap == layers::Overlap::on);

  if (!o.profile.empty()) {
    if (ranks != 1) throw std::invalid_argument("--profile measures one rank alone: run it with 1 rank");
#ifdef KOKKOS_ENABLE_CUDA
    const auto clock = models::ProfileClock::wall;
#else
    // The development machine is shared: CPU time leaves out what other processes took.
    const auto clock = models::ProfileClock::process_cpu;
#endif
    const auto timings = models::profile_layers(o.model, o.shape, o.repeats, o.halo, clock);
    write_profile(o.profile, o.model, o.shape, machine.rank_share(1), timings, perf);
    perf.use_timings(timings, o.shape, machine.rank_share(1));
  }
  const char* source = o.profile.empty() ? "roofline" : "profile";
  if (!o.timings.empty()) {
    const Profile p = read_profile(o.timings);
    perf.use_timings(p.timings, p.probe, p.share);
    source = "profile";
  }

  const std::vector<models::StepPrediction> ranking = perf.ranking(ranks);
  if (ranking.empty()) throw std::invalid_argument("no grid of " + std::to_string(ranks) + " ranks fits the model");
  const GridDims dims = o.grid == "auto" ? ranking.front().grid : parse_grid(o.grid);
  const models::StepPrediction predicted = perf.predict(dims);

  ProcessGrid grid(runtime.world(), dims);
  models::Sequential<float> model(o.model, o.shape, grid, 1);
  model.set_halo_config(o.halo);
  layers::Tensor<float> target(model.output_grid(), model.shape(model.size()), HaloWidths{}, "target");
  models::add_gaussian_noise(model.input(), 1.0, 1, 1);
  models::add_gaussian_noise(target, 1.0, 2, 1);
  models::OptimizerSettings sgd;
  sgd.lr = 1e-6;
  auto optimizer = models::make_optimizer(sgd, model.parameters(), grid);
  // The trainer's own step object: its buckets and their collectives' slots persist across
  // steps, so the timed steps allocate nothing (a reduction built per step allocated and
  // first-touched its 4.7 MB bucket inside the timed allreduce).
  models::TrainingStepOf<float> training(model, grid, *optimizer, o.overlap_allreduce);

  std::vector<Sample> samples;
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    Kokkos::fence();
    MPI_Barrier(grid.comm());
    const double t0 = MPI_Wtime(), halo0 = halo::exposed_wait_seconds(), cpu0 = cpu_seconds();
    const layers::Tensor<float>& out = model.forward(model.input());
    layers::mse_loss(out, target.owned(), model.output_gradient());
    training.backward();
    const double reduce_s = training.reduce();
    training.update();
    Kokkos::fence();
    Sample s{MPI_Wtime() - t0, halo::exposed_wait_seconds() - halo0, reduce_s, cpu_seconds() - cpu0};
    s = {mean_over_ranks(s.step, grid.comm()), mean_over_ranks(s.halo, grid.comm()),
         mean_over_ranks(s.allreduce, grid.comm()), mean_over_ranks(s.cpu, grid.comm())};
    if (r >= o.warmup) samples.push_back(s);
  }
  if (!root) return 0;

  std::vector<double> step, halo, allreduce, compute, cpu;
  for (const Sample& s : samples) {
    step.push_back(s.step), halo.push_back(s.halo), allreduce.push_back(s.allreduce), cpu.push_back(s.cpu);
    compute.push_back(s.step - s.halo - s.allreduce);
  }
  std::ostringstream line;
  line << std::setprecision(6) << "{\"bench\": \"scaling\", \"label\": \"" << o.label << "\", \"model\": \"" << o.model
       << "\", \"shape\": \"" << shape_text(o.shape) << "\", \"ranks\": " << ranks << ", \"grid\": \""
       << format_grid(dims) << "\", \"threads_per_rank\": " << threads << ", \"cores\": " << cores
       << ", \"oversubscribed\": " << (ranks * threads > cores ? "true" : "false")
       << ", \"overlap\": \"" << (o.halo.overlap == layers::Overlap::on ? "on" : "off")
       << "\", \"overlap_allreduce\": \"" << (o.overlap_allreduce ? "on" : "off") << "\", \"warmup\": " << o.warmup
       << ", \"repeats\": " << o.repeats << ", \"parameters\": " << model.parameter_count()
       << ", \"step_s\": " << median(step) << ", \"compute_s\": " << median(compute) << ", \"halo_s\": " << median(halo)
       << ", \"allreduce_s\": " << median(allreduce) << ", \"step_s_min\": " << *std::min_element(step.begin(), step.end())
       << ", \"step_s_max\": " << *std::max_element(step.begin(), step.end()) << ", \"cpu_s\": " << median(cpu)
       << ", \"predicted\": " << json_prediction(predicted, source) << ", \"model_choice\": \""
       << format_grid(ranking.front().grid) << "\", \"ranking\": [";
  for (std::size_t i = 0; i < ranking.size(); ++i)
    line << (i ? ", " : "") << "{\"grid\": \"" << format_grid(ranking[i].grid) << "\", \"step_s\": " << ranking[i].total_s()
         << "}";
  line << "]}";
  std::printf("%s\n", line.str().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::benchmark_main(
      argc, argv, "bench_scaling", kUsage, [&](const tessera::Runtime&) { return parse(argc, argv); },
      [](const tessera::Runtime& r, const Options& o) { return o.measure_links.empty() ? run(r, o) : measure_links(r, o.measure_links); });
}
