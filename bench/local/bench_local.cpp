// bench_local: forward and backward time of the locally connected layer with each engine
// (gemm: patches + one batched GEMM over positions; team: a Kokkos team per position) on
// one shape, by default a Le et al. (2012)-like first layer: 8 maps of 18x18 receptive
// fields over 3 channels, a 40x40 tile of outputs, 8 samples.
//
//   mpiexec -n P bench_local [--shape NxCxHxW] [--out K] [--k R] [--stride S] [--iters N]
//                            [--grid NxHxW]
//
// Every rank runs its tile of the default (or given) grid; times are the slowest rank's
// mean and best step. GFLOP/s (from the best step) counts 2*K*C*R*S flops per output cell
// and direction (forward; backward = data + weights, twice that).
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "bench/support/bench_args.hpp"
#include "distarray/runtime.hpp"
#include "layers/locally_connected.hpp"

namespace {

using tessera::bench::positive;

using namespace tessera;
using layers::LocalEngine;

struct Options {
  Shape4 shape{8, 3, 57, 57};
  std::int64_t out = 8, k = 18, stride = 1;
  int iters = 10;
  std::string grid;
};

const char* const kUsage =
    "usage: bench_local [--shape NxCxHxW] [--out K] [--k R] [--stride S] [--iters N] [--grid NxHxW]\n";

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--shape") {
      std::size_t pos = 0;
      for (int d = 0; d < 4; ++d) {
        const std::size_t end = value.find('x', pos);
        o.shape[d] = positive(value.substr(pos, end == std::string::npos ? std::string::npos : end - pos), "--shape");
        pos = end == std::string::npos ? value.size() : end + 1;
      }
    } else if (arg == "--out") {
      o.out = positive(value, "--out");
    } else if (arg == "--k") {
      o.k = positive(value, "--k");
    } else if (arg == "--stride") {
      o.stride = positive(value, "--stride");
    } else if (arg == "--iters") {
      o.iters = static_cast<int>(positive(value, "--iters"));
    } else if (arg == "--grid") {
      o.grid = value;
    } else {
      throw std::invalid_argument("unknown argument " + arg);
    }
  }
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double slowest(double local, MPI_Comm comm) {
  double out = 0;
  MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, comm);
  return out;
}

// Per step: the mean and the best (least disturbed by other work on the machine).
struct Times {
  double forward = 0, backward = 0, best_forward = 1e30, best_backward = 1e30;
};

Times measure(const ProcessGrid& grid, const Options& o, LocalEngine engine) {
  layers::LocalOptions options;
  options.out = o.out;
  options.kh = options.kw = o.k;
  options.sh = options.sw = o.stride;
  options.engine = engine;
  layers::LocallyConnected2d<float> layer(options, o.shape, 1);
  layer.place(layers::owned_output(grid, o.shape, layer));
  layers::Tensor<float> x = layers::make_input(grid, o.shape, layer, "x"), dx = layers::make_input(grid, o.shape, layer, "dx");
  layers::Tensor<float> y = layers::make_output(grid, o.shape, layer, "y"), dy = layers::make_output(grid, o.shape, layer, "dy");
  x.fill(0.5f);
  dy.fill(0.25f);
  layer.forward(x, y);  // warm-up: workspaces, primitives, exchanges
  layer.backward(dy, dx);
  Times t;
  for (int i = 0; i < o.iters; ++i) {
    MPI_Barrier(grid.comm());
    auto start = std::chrono::steady_clock::now();
    layer.forward(x, y);
    Kokkos::fence();
    const double forward = seconds_since(start);
    start = std::chrono::steady_clock::now();
    layer.backward(dy, dx);
    Kokkos::fence();
    const double backward = seconds_since(start);
    t.forward += forward, t.backward += backward;
    t.best_forward = std::min(t.best_forward, forward), t.best_backward = std::min(t.best_backward, backward);
  }
  return {slowest(t.forward / o.iters, grid.comm()), slowest(t.backward / o.iters, grid.comm()),
          slowest(t.best_forward, grid.comm()), slowest(t.best_backward, grid.comm())};
}

int run(const Runtime& runtime, const Options& o) {
  const GridDims dims = o.grid.empty() ? default_grid(runtime.size()) : parse_grid(o.grid);
  const ProcessGrid grid(runtime.world(), dims);
  const bool root = runtime.rank() == 0;
  layers::LocalOptions probe;
  probe.out = o.out, probe.kh = probe.kw = o.k, probe.sh = probe.sw = o.stride;
  const Shape4 out = layers::LocallyConnected2d<float>(probe, o.shape, 1).output_shape(o.shape);
  const double flops = 2.0 * double(out[0] * out[1] * out[2] * out[3]) * double(o.shape[1] * o.k * o.k);
  if (root) {
    std::printf("%s\n", runtime.describe().c_str());
    std::printf("local(out=%lld,k=%lld,stride=%lld) on %lldx%lldx%lldx%lld -> %lldx%lldx%lldx%lld, grid %s, %d iterations\n",
                (long long)o.out, (long long)o.k, (long long)o.stride, (long long)o.shape[0], (long long)o.shape[1],
                (long long)o.shape[2], (long long)o.shape[3], (long long)out[0], (long long)out[1], (long long)out[2],
                (long long)out[3], format_grid(dims).c_str(), o.iters);
    std::printf("%-6s %12s %12s %12s %12s %12s %12s\n", "engine", "fwd_ms_mean", "fwd_ms_best", "bwd_ms_mean",
                "bwd_ms_best", "fwd GFLOP/s", "bwd GFLOP/s");
  }
  for (LocalEngine engine : {LocalEngine::gemm, LocalEngine::team}) {
    const Times t = measure(grid, o, engine);
    if (root)
      std::printf("%-6s %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f\n",
                  std::string(layers::local_engine_name(engine)).c_str(), t.forward * 1e3, t.best_forward * 1e3,
                  t.backward * 1e3, t.best_backward * 1e3, flops / t.best_forward / 1e9,
                  2 * flops / t.best_backward / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const std::exception& e) {
    if (runtime.rank() == 0) std::fprintf(stderr, "bench_local: %s\n%s", e.what(), kUsage);
    return runtime.finish_with(2);
  }
  try {
    return runtime.finish_with(run(runtime, options));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_local (rank %d): %s\n", runtime.rank(), e.what());
    return runtime.finish_with(1);
  }
}
