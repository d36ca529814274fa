// bench_layers: forward and backward time of every layer kind at realistic shapes, one case
// per line of a case list (bench/layers/cases.txt, shared with torch_layers.py). Each case
// is built through the public API exactly as a model would be: a Sequential of its spec on
// the default process grid, input and output gradient random, parameters from seed 1.
//
//   bench_layers [--cases FILE] [--case I,J,...] [--warmup N] [--repeats N]
//                [--format table|tsv] [--list] [--grid NxHxW|auto] [--precision fp32|bf16]
//
// --precision bf16 builds the cases as Sequential<bf16> (docs/training.md, "Mixed
// precision"); a case with a layer that has no bf16 implementation is skipped with a note.
// Compare with torch_layers.py --precision bf16 (PyTorch autocast).
//
// Times are milliseconds, the median over repeats of the slowest rank; "total" is the median
// of forward + backward per repeat (not the sum of the two medians); "cpu" is the process's
// CPU time (all threads) for forward + backward, a cross-check that a busy machine disturbs
// less than the wall clock (meaningful in CPU builds only). Gradients are zeroed between
// repeats, untimed. --format tsv: '#' lines describing the run, then a header and one
// tab-separated row per case (bench/layers/join_results.py reads it). A spec naming a layer this build lacks is skipped with a
// note; a spec a layer rejects is reported as an error; neither stops the run. Compare with
// PyTorch on one rank (bench/layers/run.sh); on more ranks every case runs on --grid
// (default auto: default_grid(P)).
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/support/bench_main.hpp"
#include "bench/support/bench_args.hpp"
#include "bench/layers/layer_cases.hpp"
#include "bench/layers/step_timing.hpp"
#include "distarray/gather_scatter.hpp"
#include "distarray/runtime.hpp"
#include "layers/backend_info.hpp"
#include "models/presets.hpp"
#include "models/sequential.hpp"

namespace {

using namespace tessera;
using bench::LayerCase;

struct Options {
  std::string cases = TESSERA_BENCH_LAYERS_CASES;  // the source tree's cases.txt
  int warmup = 2;
  int repeats = 10;
  std::vector<int> only;  // case numbers (1-based) to run; empty: all
  std::string grid = "auto";
  std::string precision = "fp32";
  bool tsv = false;
  bool list = false;
  bool help = false;
};

const char* const kUsage =
    "usage: bench_layers [--cases FILE] [--case I,J,...] [--warmup N] [--repeats N] [--format table|tsv] [--list]\n"
    "                    [--grid NxHxW|auto] [--precision fp32|bf16]\n";

Options parse(int argc, char** argv) {
  Options o;
  o.help = !bench::read_options(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--list") {
      o.list = true;
    } else if (flag == "--cases") {
      o.cases = value;
    } else if (flag == "--case") {
      for (std::size_t pos = 0, end = 0; end != std::string::npos; pos = end + 1) {
        end = value.find(',', pos);
        o.only.push_back(bench::positive_int(value.substr(pos, end - pos), "--case"));
      }
    } else if (flag == "--warmup") {
      o.warmup = bench::non_negative_int(value, "--warmup");
    } else if (flag == "--repeats") {
      o.repeats = bench::positive_int(value, "--repeats");
    } else if (flag == "--grid") {
      if (value != "auto") parse_grid(value);  // a malformed grid fails here, before MPI work
      o.grid = value;
    } else if (flag == "--precision") {
      if (value != "fp32" && value != "bf16") throw std::invalid_argument("--precision '" + value + "' is not fp32 or bf16");
      o.precision = value;
    } else if (flag == "--format") {
      if (value != "table" && value != "tsv") throw std::invalid_argument("--format '" + value + "' is not table or tsv");
      o.tsv = value == "tsv";
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  }, {"--list"});
  return o;
}

enum class Outcome { ok, skip, error };

struct Result {
  Outcome outcome = Outcome::ok;
  double forward_ms = 0, backward_ms = 0, total_ms = 0, cpu_ms = 0;
  std::string note;  // why skipped or failed; the output shape when timed
};

// Why `spec` (or the preset it names) cannot run in this build at `precision`: the first
// layer it does not register, or has no bf16 implementation of; "" when all can run.
std::string unknown_layer(const std::string& spec, const Shape4& input, const std::string& precision = "fp32") {
  const models::LayerRegistry& registry = models::LayerRegistry::global();
  for (const models::SpecEntry& e : models::parse_spec(models::resolve_model(spec, input))) {
    if (!registry.contains(e.name)) return "no layer '" + e.name + "' in this build";
    if (precision == "bf16" && !registry.find(e.name).make_bf16) return "no bf16 '" + e.name + "' yet";
  }
  return "";
}

// Uniform in [-1, 1): every rank draws the same array (scatter reads the root's).
HostArray<float> random_array(const Shape4& s, std::uint32_t seed) {
  HostArray<float> a(Kokkos::view_alloc(Kokkos::WithoutInitializing, "random"), s[0], s[1], s[2], s[3]);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = uniform(gen);
  return a;
}

template <class T>
HostArray<T> as_type(const HostArray<float>& a) {
  if constexpr (std::is_same_v<T, float>) {
    return a;
  } else {
    HostArray<T> r(Kokkos::view_alloc(Kokkos::WithoutInitializing, "as_type"), a.extent(0), a.extent(1), a.extent(2),
                   a.extent(3));
    for (std::size_t i = 0; i < a.size(); ++i) r.data()[i] = T(a.data()[i]);
    return r;
  }
}

template <class T>
Result time_case(const LayerCase& c, const ProcessGrid& grid, const Options& o) {
  Result r;
  try {
    if (const std::string why = unknown_layer(c.spec, c.input, o.precision); !why.empty()) {
      r.outcome = Outcome::skip;
      r.note = why;
      return r;
    }
    models::Sequential<T> model(c.spec, c.input, grid, /*seed=*/1);
    scatter(as_type<T>(random_array(c.input, 11)), model.input());
    scatter(as_type<T>(random_array(model.output().distribution().global_shape(), 12)), model.output_gradient());
    std::vector<double> forward, backward, total, cpu;
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
      model.zero_grad();
      Kokkos::fence();
      MPI_Barrier(grid.comm());
      const double c0 = bench::process_cpu_seconds();
      const double t0 = MPI_Wtime();
      model.forward(model.input());
      const double f = bench::seconds_since(t0);
      const double t1 = MPI_Wtime();
      model.backward(model.output_gradient());
      const double b = bench::seconds_since(t1);
      const double c = bench::process_cpu_seconds() - c0;
      if (i < o.warmup) continue;
      forward.push_back(bench::max_over_ranks(f, grid.comm()));
      backward.push_back(bench::max_over_ranks(b, grid.comm()));
      total.push_back(bench::max_over_ranks(f + b, grid.comm()));
      cpu.push_back(bench::max_over_ranks(c, grid.comm()));
    }
    r.forward_ms = 1e3 * bench::median(forward);
    r.backward_ms = 1e3 * bench::median(backward);
    r.total_ms = 1e3 * bench::median(total);
    r.cpu_ms = 1e3 * bench::median(cpu);
    r.note = "-> " + bench::format_shape(model.output().distribution().global_shape());
  } catch (const std::invalid_argument& e) {
    // Bad specs and shapes are found alike on every rank, before any collective call.
    r.outcome = Outcome::error;
    r.note = e.what();
  }
  return r;
}

const char* outcome_name(Outcome o) { return o == Outcome::ok ? "ok" : o == Outcome::skip ? "skip" : "error"; }

void print_header(const tessera::Runtime& runtime, const Options& o, const GridDims& grid) {
  const tessera::layers::BackendInfo backend = tessera::layers::backend_info();
  const std::string about = runtime.describe() + " backend=\"" + backend.library + "\" isa=" + backend.isa +
                            " bf16-hardware=" + (backend.bf16_hardware ? "yes" : "no");
  if (o.tsv) {
    std::printf("# %s\n# grid %s, precision %s, %d warm-up + %d timed repeats\n", about.c_str(),
                format_grid(grid).c_str(), o.precision.c_str(), o.warmup, o.repeats);
    std::printf("case\tinput\tspec\tstatus\tforward_ms\tbackward_ms\ttotal_ms\tcpu_ms\tnote\n");
    return;
  }
  std::printf("%s\n", about.c_str());
  std::printf("cases from %s on grid %s, precision %s; %d warm-up + %d timed repeats; median ms of the slowest rank\n",
              o.cases.c_str(), format_grid(grid).c_str(), o.precision.c_str(), o.warmup, o.repeats);
  std::printf("%-4s %-14s %-36s %9s %9s %9s %9s  %s\n", "case", "input", "spec", "fwd_ms", "bwd_ms", "total_ms",
              "cpu_ms", "note");
}

void print_row(int index, const LayerCase& c, const Result& r, bool tsv) {
  const std::string input = bench::format_shape(c.input);
  if (tsv) {
    std::printf("%d\t%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%s\n", index, input.c_str(), c.spec.c_str(),
                outcome_name(r.outcome), r.forward_ms, r.backward_ms, r.total_ms, r.cpu_ms, r.note.c_str());
  } else if (r.outcome == Outcome::ok) {
    std::printf("%-4d %-14s %-36s %9.2f %9.2f %9.2f %9.2f  %s\n", index, input.c_str(), c.spec.c_str(), r.forward_ms,
                r.backward_ms, r.total_ms, r.cpu_ms, r.note.c_str());
  } else {
    std::printf("%-4d %-14s %-36s %s: %s\n", index, input.c_str(), c.spec.c_str(), outcome_name(r.outcome),
                r.note.c_str());
  }
  std::fflush(stdout);
}

int run(const tessera::Runtime& runtime, const Options& o) {
  const std::vector<LayerCase> cases = bench::read_cases(o.cases);
  const bool root = runtime.rank() == 0;
  if (o.list) {
    if (root)
      for (std::size_t i = 0; i < cases.size(); ++i) {
        std::string verdict = "known";
        try {
          if (const std::string missing = unknown_layer(cases[i].spec, cases[i].input, o.precision); !missing.empty())
            verdict = missing;
        } catch (const std::invalid_argument& e) {
          verdict = std::string("error: ") + e.what();
        }
        std::printf("%zu\t%s\t%s\t%s\n", i + 1, bench::format_shape(cases[i].input).c_str(), cases[i].spec.c_str(),
                    verdict.c_str());
      }
    return 0;
  }
  const GridDims dims = o.grid == "auto" ? default_grid(runtime.size()) : parse_grid(o.grid);
  ProcessGrid grid(runtime.world(), dims);
  if (root) print_header(runtime, o, dims);
  int errors = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), static_cast<int>(i + 1)) == o.only.end()) continue;
    const Result r = o.precision == "bf16" ? time_case<bf16>(cases[i], grid, o) : time_case<float>(cases[i], grid, o);
    errors += r.outcome == Outcome::error;
    if (root) print_row(static_cast<int>(i + 1), cases[i], r, o.tsv);
  }
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::benchmark_main(
      argc, argv, "bench_layers", kUsage, [&](const tessera::Runtime&) { return parse(argc, argv); },
      [](const tessera::Runtime& r, const Options& o) { return run(r, o); });
}
