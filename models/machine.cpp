// The machines the performance model (models/perf_model.hpp) predicts for: their named
// figures, the fields a --machine file may set, and the cost of an allreduce over a link.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "distarray/mpi_progress.hpp"
#include "distarray/number_text.hpp"
#include "models/perf_model.hpp"  // declares Machine, Link and these functions

namespace tessera::models {

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
      << " s + B/" << intra_node.bandwidth << " (allreduce host B/" << intra_node.reduce_bandwidth
      << "), inter-node " << inter_node.latency_s << " s + B/" << inter_node.bandwidth << " (allreduce host B/"
      << inter_node.reduce_bandwidth << "), pack " << pack_bandwidth << " B/s + " << pack_run_s << " s/run, overlap "
      << overlap << ", staging " << staging_bandwidth << " B/s";
  return out.str();
}

void set_machine_field(Machine& m, const std::string& name, const std::string& value) {
  const auto number = number_from_text(value);
  if (!number) throw std::invalid_argument("machine field " + name + ": '" + value + "' is not a number");
  set_machine_field(m, name, *number);
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
                          {"intra_reduce_bandwidth", &m.intra_node.reduce_bandwidth, nullptr},
                          {"inter_reduce_bandwidth", &m.inter_node.reduce_bandwidth, nullptr},
                          {"pack_bandwidth", &m.pack_bandwidth, nullptr},
                          {"pack_run_s", &m.pack_run_s, nullptr},
                          {"overlap", &m.overlap, nullptr},
                          {"staging_bandwidth", &m.staging_bandwidth, nullptr}};
  std::string names;
  for (const Field& f : fields) {
    names += (names.empty() ? "" : ", ") + std::string(f.name);
    if (name != f.name) continue;
    const std::string what = "machine field " + name + " = " + std::to_string(value);
    const bool may_be_zero = name.ends_with("_s") || name == "overlap" || name == "staging_bandwidth" ||
                             name.ends_with("_reduce_bandwidth");
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
  const double moved = 2.0 * (group - 1) / group * bytes;  // each rank's bytes each way, ring or halving
  return 2 * steps * link.latency_s + moved / link.bandwidth +
         (link.reduce_bandwidth > 0 ? moved / link.reduce_bandwidth : 0);
}

}  // namespace tessera::models
