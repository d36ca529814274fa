// bench_overlap: how much halo time a spatial layer's forward + backward leaves exposed,
// with the overlap option on (exchange around interior work, layers/windowed.hpp) and off
// (exchange, then compute), side by side.
//
//   mpiexec -n 4 bench_overlap [--shape NxCxHxW] [--spec 'conv(out=32,k=3,pad=1)' ...]
//                              [--grids 1x2x2,1x4x1] [--warmup N] [--repeats N]
//
// Per repeat, every rank runs forward then backward of the layer once (a "step"); the
// slowest rank's time counts and the median over repeats is printed. Columns:
//   step     one forward + backward on the grid, ms
//   alone    the same layer on each rank's own tile with no neighbours (its halo is zero
//            padding, nothing is sent), every rank at once so the cores are as busy: the
//            compute of a step without communication
//   exposed  step - alone: halo time not hidden behind compute — packing, waiting,
//            unpacking, and the cost of splitting the kernel into interior and border
//            strips when overlapping
//   wait     time blocked in MPI_Waitall inside the halo transport (Exchange::finish),
//            measured directly (bench/layers/mpi_wait_timer.hpp): the part of exposed
//            that is messages not yet arrived
//   on/off   the overlap=on value divided by the overlap=off value (< 1: overlap helps)
// The `on` path column says what the layer did with overlap on (it falls back to plain,
// and says why, when no output of a tile avoids the halo).
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/support/bench_main.hpp"
#include "bench/support/bench_args.hpp"
#include "bench/layers/layer_cases.hpp"
#include "bench/layers/mpi_wait_timer.hpp"
#include "bench/layers/step_timing.hpp"
#include "distarray/gather_scatter.hpp"
#include "distarray/runtime.hpp"
#include "layers/log.hpp"
#include "layers/windowed.hpp"
#include "models/layer_registry.hpp"
#include "models/spec_parser.hpp"

namespace {

using tessera::bench::split;

using namespace tessera;
using Layer = layers::Layer<float>;
using Tensor = layers::Tensor<float>;

struct Options {
  Shape4 shape{8, 32, 128, 128};
  std::vector<std::string> specs;  // default: conv 3x3 and 5x5, "same" padding
  std::vector<GridDims> grids;     // default: default_grid(P)
  int warmup = 2;
  int repeats = 10;
  bool help = false;
};

const char* const kUsage =
    "usage: bench_overlap [--shape NxCxHxW] [--spec SPEC]... [--grids 1x2x2,...] [--warmup N] [--repeats N]\n"
    "  SPEC: one spatial layer taking the overlap option, e.g. 'conv(out=32,k=3,pad=1)'\n";

Options parse(int argc, char** argv, int ranks) {
  Options o;
  o.help = !bench::read_options(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--shape") {
      o.shape = bench::parse_shape(value);
    } else if (flag == "--spec") {
      o.specs.push_back(value);
    } else if (flag == "--grids") {
      for (const auto& g : split(value, ',')) o.grids.push_back(parse_grid(g));
    } else if (flag == "--warmup") {
      o.warmup = bench::non_negative_int(value, "--warmup");
    } else if (flag == "--repeats") {
      o.repeats = bench::positive_int(value, "--repeats");
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  });
  if (o.help) return o;
  if (o.specs.empty()) o.specs = {"conv(out=32,k=3,pad=1)", "conv(out=32,k=5,pad=2)"};
  if (o.grids.empty()) o.grids.push_back(default_grid(ranks));
  return o;
}

// `spec` (one entry) with overlap=on|off added to its options. Throws std::invalid_argument
// for a spec of several layers, an unknown layer, or one that is not spatial.
std::unique_ptr<Layer> make_layer(const std::string& spec, const char* overlap, const Shape4& input) {
  const auto entries = models::parse_spec(spec);
  if (entries.size() != 1) throw std::invalid_argument("--spec '" + spec + "' must be one layer");
  const models::SpecEntry& e = entries[0];
  const models::LayerRecipe& recipe = models::LayerRegistry::global().find(e.name);
  if (recipe.placement != models::OutputPlacement::input_grid || recipe.input_halo != models::InputHalo::window)
    throw std::invalid_argument("--spec '" + spec + "': " + e.name + " is not a spatial layer with a halo");
  const std::string options = e.options + (e.options.empty() ? "" : ",") + "overlap=" + overlap;
  return recipe.make(options, input, /*seed=*/1);
}

HostArray<float> random_array(const Shape4& s, std::uint32_t seed) {
  HostArray<float> a(Kokkos::view_alloc(Kokkos::WithoutInitializing, "random"), s[0], s[1], s[2], s[3]);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = uniform(gen);
  return a;
}

// A layer with its input, output and gradients, on one grid.
struct Setup {
  std::unique_ptr<Layer> layer;
  Tensor x, y, dy, dx;

  Setup(std::unique_ptr<Layer> l, const ProcessGrid& grid, const Shape4& input)
      : layer(std::move(l)),
        x(layers::make_input(grid, input, *layer, "x")),
        y(layers::make_output(grid, input, *layer, "y")),
        dy(grid, layer->output_shape(input), HaloWidths{}, "dy"),
        dx(layers::make_input(grid, input, *layer, "dx")) {
    scatter(random_array(input, 21), x);
    scatter(random_array(layer->output_shape(input), 22), dy);
  }
};

struct StepTimes {
  double step_ms = 0, wait_ms = 0;
};

// Median over repeats of the slowest rank's forward + backward time and MPI wait time.
// `comm` spans every rank taking part (all ranks run at once even when each is alone).
StepTimes time_steps(Setup& s, MPI_Comm comm, const Options& o) {
  std::vector<double> steps, waits;
  for (int i = 0; i < o.warmup + o.repeats; ++i) {
    for (layers::Parameter<float>* p : s.layer->params()) p->zero_grad();
    Kokkos::fence();
    MPI_Barrier(comm);
    bench::reset_wait_timer();
    const double t0 = MPI_Wtime();
    s.layer->forward(s.x, s.y);
    s.layer->backward(s.dy, s.dx);
    const double step = bench::seconds_since(t0);
    const double wait = bench::wait_totals().seconds;
    if (i < o.warmup) continue;
    steps.push_back(bench::max_over_ranks(step, comm));
    waits.push_back(bench::max_over_ranks(wait, comm));
  }
  return {1e3 * bench::median(steps), 1e3 * bench::median(waits)};
}

// The forward path the layer logged last on this rank ("overlapped", "plain", "local");
// lines still reach the sink there was before (TESSERA_VERBOSE=1 shows them).
struct PathRecorder {
  std::string last;
  layers::LogSink previous;
  PathRecorder() {
    previous = layers::set_log_sink([this](const std::string& line) {
      const auto at = line.find(": forward ");
      if (at != std::string::npos) last = line.substr(at + 10);
      if (previous) previous(line);
    });
  }
  ~PathRecorder() { layers::set_log_sink(previous); }
};

// "on/off" as printed: "-" when off is not positive (an exposed time within the noise).
std::string ratio(double on, double off) {
  char text[32] = "-";
  if (off > 0) std::snprintf(text, sizeof text, "%.2f", on / off);
  return text;
}

void measure(const std::string& spec, const GridDims& dims, const tessera::Runtime& runtime, const Options& o) {
  ProcessGrid grid(runtime.world(), dims);
  PathRecorder path;
  Setup on(make_layer(spec, "on", o.shape), grid, o.shape);
  const StepTimes t_on = time_steps(on, grid.comm(), o);
  const std::string path_on = path.last;
  Setup off(make_layer(spec, "off", o.shape), grid, o.shape);
  const StepTimes t_off = time_steps(off, grid.comm(), o);

  // Every rank alone with its own tile: the same compute, no neighbours.
  ProcessGrid self(MPI_COMM_SELF, {1, 1, 1});
  const Shape4 tile = on.x.owned_box().shape();
  Setup alone(make_layer(spec, "on", tile), self, tile);
  const double alone_ms = time_steps(alone, grid.comm(), o).step_ms;

  if (runtime.rank() != 0) return;
  const double exposed_on = t_on.step_ms - alone_ms, exposed_off = t_off.step_ms - alone_ms;
  std::printf("%-24s %-7s %8.2f %8.2f %6s | %8.2f %8.2f %8.2f %6s | %8.2f %8.2f %6s | %s\n", spec.c_str(),
              format_grid(dims).c_str(), t_on.step_ms, t_off.step_ms, ratio(t_on.step_ms, t_off.step_ms).c_str(),
              alone_ms, exposed_on, exposed_off, ratio(exposed_on, exposed_off).c_str(), t_on.wait_ms, t_off.wait_ms,
              ratio(t_on.wait_ms, t_off.wait_ms).c_str(), path_on.c_str());
  std::fflush(stdout);
}

int run(const tessera::Runtime& runtime, const Options& o) {
  if (runtime.rank() == 0) {
    std::printf("%s\n", runtime.describe().c_str());
    std::printf("forward + backward of float %s; %d warm-up + %d timed repeats; median ms of the slowest rank\n",
                bench::format_shape(o.shape).c_str(), o.warmup, o.repeats);
    std::printf("step: one forward+backward; alone: each rank's tile with no neighbours (compute only);\n"
                "exposed = step - alone; wait: blocked in MPI_Waitall of the halo exchange; on/off: overlap on / off\n");
    std::printf("%-24s %-7s %8s %8s %6s | %8s %8s %8s %6s | %8s %8s %6s | %s\n", "layer", "grid", "step_on", "step_off",
                "on/off", "alone", "exp_on", "exp_off", "on/off", "wait_on", "wait_off", "on/off", "path (overlap on)");
  }
  for (const std::string& spec : o.specs)
    for (const GridDims& dims : o.grids) measure(spec, dims, runtime, o);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::benchmark_main(
      argc, argv, "bench_overlap", kUsage, [&](const tessera::Runtime& r) { return parse(argc, argv, r.size()); },
      [](const tessera::Runtime& r, const Options& o) { return run(r, o); });
}
