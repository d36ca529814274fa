// bench_scaling_project: the performance model's strong-scaling projection (no
// measurement): for each rank count, the fastest grid and its predicted step, split into
// compute, exposed halo and allreduce, with speedup and efficiency against the first rank
// count — a markdown table for docs/performance.md.
//
//   bench_scaling_project [--model denoise-dilated] [--shape 64x1x2048x2048]
//                         [--ranks 1,8,64,1024] [--machine h100|cpu] [--set name=value,...]
//
// --set overrides machine fields (models/perf_model.hpp: set_machine_field). Runs on one
// rank; the layers are built (Kokkos) but never run.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/support/bench_args.hpp"
#include "distarray/runtime.hpp"
#include "models/perf_model.hpp"

namespace {

using tessera::bench::split;

using namespace tessera;

// Memory the model keeps per rank for activations and their gradients (rank 0's tiles, no
// halos): what decides the smallest rank count that fits, which the step model ignores.
double activation_bytes(const models::PerfModel& perf, const GridDims& grid) {
  double bytes = 0;
  for (std::size_t i = 0; i <= perf.size(); ++i) {
    const Shape4& s = perf.shape(i);
    const bool head = s[H] == 1 && s[W] == 1;  // linear / gap outputs live on the head grid
    bytes += 2.0 * sizeof(float) * static_cast<double>(Distribution(s, head ? GridDims{grid[0], 1, 1} : grid).owned_box(0).size());
  }
  return bytes;
}

int run(int argc, char** argv) {
  std::string model = "denoise-dilated", machine_name = "h100";
  Shape4 shape{64, 1, 2048, 2048};
  std::vector<int> ranks{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  std::vector<std::string> sets;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--machine") machine_name = value;
    else if (flag == "--shape") {
      const auto parts = split(value, 'x');
      if (parts.size() != 4) throw std::invalid_argument("--shape '" + value + "' is not NxCxHxW");
      for (int d = 0; d < kDims; ++d) shape[d] = std::stoll(parts[static_cast<std::size_t>(d)]);
    } else if (flag == "--ranks") {
      ranks.clear();
      for (const auto& r : split(value, ',')) ranks.push_back(std::stoi(r));
    } else if (flag == "--set") {
      for (const auto& s : split(value, ',')) sets.push_back(s);
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }
  if (argc % 2 == 0) throw std::invalid_argument(std::string("option ") + argv[argc - 1] + " needs a value");
  if (machine_name != "h100" && machine_name != "cpu") throw std::invalid_argument("--machine must be h100 or cpu");
  models::Machine machine = machine_name == "h100" ? models::Machine::h100_node() : models::Machine::cpu_core();
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--set '" + s + "' is not name=value");
    models::set_machine_field(machine, s.substr(0, eq), s.substr(eq + 1));
  }
  models::PerfModel perf(model, shape, machine);
  std::printf("model %s, input %lldx%lldx%lldx%lld, %lld parameters\n%s\n\n", model.c_str(),
              static_cast<long long>(shape[0]), static_cast<long long>(shape[1]), static_cast<long long>(shape[2]),
              static_cast<long long>(shape[3]), static_cast<long long>(perf.parameter_count()),
              machine.describe().c_str());
  std::printf("| P | grid | step (ms) | compute | halo | allreduce | halo MB/rank | activations GB/rank | speedup | "
              "efficiency | runner-up |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  double base = 0;
  int base_ranks = 0;
  for (int p : ranks) {
    const auto ranking = perf.ranking(p);
    if (ranking.empty()) {
      std::printf("| %d | (no valid grid) | | | | | | | | |\n", p);
      continue;
    }
    const models::StepPrediction& b = ranking.front();
    if (base_ranks == 0) base = b.total_s(), base_ranks = p;
    const double speedup = base / b.total_s();
    std::string next = "-";
    if (ranking.size() > 1) {
      char text[64];
      std::snprintf(text, sizeof text, "%s %.2f ms", format_grid(ranking[1].grid).c_str(), ranking[1].total_s() * 1e3);
      next = text;
    }
    std::printf("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f%% | %s |\n", p,
                format_grid(b.grid).c_str(), b.total_s() * 1e3, b.compute_s * 1e3, b.halo_s * 1e3,
                b.allreduce_s * 1e3, static_cast<double>(b.halo_bytes) / 1e6, activation_bytes(perf, b.grid) / 1e9,
                speedup, 100 * speedup * base_ranks / p, next.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::Runtime runtime(argc, argv);
  try {
    return runtime.finish_with(run(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_scaling_project: %s\n", e.what());
    return runtime.finish_with(2);
  }
}
