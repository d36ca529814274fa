// tessera-demo: a small MPI job of the distributed array, end to end. An image is scattered
// over a process grid, and each sweep exchanges halos (start, interior work, finish, border
// work) and smooths every tile with a 3x3 stencil. The gathered result is compared with the
// same computation on one rank; any difference is a failure (exit 1).
#include <boost/program_options.hpp>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "demo/smoothing.hpp"
#include "distarray/distribution.hpp"
#include "distarray/gather_scatter.hpp"
#include "distarray/node_memory.hpp"
#include "distarray/runtime.hpp"
#include "halo/exchange.hpp"

namespace po = boost::program_options;
using namespace tessera;

namespace {

struct Options {
  std::string grid = "auto";
  std::string shape = "4x3x256x256";
  int sweeps = 20;
  std::string transport = "auto";
  bool verbose = false;
};

Shape4 parse_shape(const std::string& text) {
  Shape4 s{};
  std::size_t pos = 0;
  for (int d = 0; d < kDims; ++d) {
    const std::size_t end = d < kDims - 1 ? text.find('x', pos) : text.size();
    const std::string part = end == std::string::npos ? "" : text.substr(pos, end - pos);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(part) < 1)
      throw std::invalid_argument("--shape '" + text + "' is not NxCxHxW with positive sizes");
    s[d] = std::stoll(part);
    pos = end + 1;
  }
  if (pos <= text.size()) throw std::invalid_argument("--shape '" + text + "' has more than four sizes");
  return s;
}

// The owned box minus a one-cell rim: the outputs whose stencil needs no halo cell.
Box interior_of(const Box& owned) { return owned.grow({0, 0, -1, -1}, {0, 0, -1, -1}); }

// owned minus interior, as up to four strips (top, bottom, left, right).
std::vector<Box> rim_of(const Box& owned, const Box& inner) {
  if (inner.empty()) return {owned};
  Box top = owned, bottom = owned, left = inner, right = inner;
  top.hi[H] = inner.lo[H];
  bottom.lo[H] = inner.hi[H];
  left.lo[W] = owned.lo[W], left.hi[W] = inner.lo[W];
  right.lo[W] = inner.hi[W], right.hi[W] = owned.hi[W];
  return {top, bottom, left, right};
}

// A shape too large for memory is refused before any allocation: Kokkos' own failure is
// several lines, and may come from rank 0 alone (the whole image) while the others wait.
// Rank 0 holds the image four times at once (input, gathered result, serial reference and
// its padded copy) besides its tiles of u (with a one-cell halo) and v.
void check_memory(const Shape4& shape, const ProcessGrid& grid) {
  const Box owned = Distribution(shape, grid.dims()).owned_box(grid.rank());
  double bytes = 4.0 * double(owned.grow({0, 0, 1, 1}, {0, 0, 1, 1}).size() + owned.size());
  if (grid.rank() == 0) bytes += 4.0 * 4.0 * double(shape[0]) * double(shape[1]) * double(shape[2]) * double(shape[3]);
  const std::optional<MemoryShare> share = rank_memory_share(grid.comm());
  int over = share && bytes > double(share->bytes) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, grid.comm());
  if (!over) return;
  const double whole = 4.0 * double(shape[0]) * double(shape[1]) * double(shape[2]) * double(shape[3]);
  throw std::invalid_argument("--shape " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + "x" +
                              std::to_string(shape[2]) + "x" + std::to_string(shape[3]) +
                              " is too large: the image is " +
                              (whole < 9e18 ? format_bytes(std::int64_t(whole)) : std::string("over 8 EiB")) +
                              ", and rank 0 holds it four times besides its tiles: more than a rank may use here");
}

int run(const Runtime& runtime, const Options& opt) {
  const Shape4 shape = parse_shape(opt.shape);
  const GridDims dims = opt.grid == "auto" ? default_grid(runtime.size()) : parse_grid(opt.grid);
  if (opt.sweeps < 1) throw std::invalid_argument("--sweeps must be at least 1");
  ProcessGrid grid(MPI_COMM_WORLD, dims);
  check_memory(shape, grid);

  DistArray<float> u(grid, shape, HaloWidths::symmetric_hw(1, 1), "u");
  DistArray<float> v(grid, shape, {}, "v");
  const HostArray<float> image = runtime.rank() == 0 ? demo::make_image(shape) : HostArray<float>();
  scatter(image, u);
  auto exchange = halo::make_exchange(u, halo::grown_by(u.halo()), halo::Mode::fill,
                                      halo::BoundaryFill::zero(), opt.transport);

  const Box owned = u.owned_box(), inner = interior_of(owned);
  double exposed = 0;
  MPI_Barrier(grid.comm());
  const double t0 = MPI_Wtime();
  for (int s = 0; s < opt.sweeps; ++s) {
    exchange.start();
    demo::smooth_box(u, v, inner);
    Kokkos::fence();
    const double wait_start = MPI_Wtime();
    exchange.finish();
    exposed += MPI_Wtime() - wait_start;
    for (const Box& strip : rim_of(owned, inner)) demo::smooth_box(u, v, strip);
    Kokkos::deep_copy(u.owned(), v.owned());
  }
  Kokkos::fence();
  const double elapsed = MPI_Wtime() - t0;
  const HostArray<float> result = gather(u);

  double max_exposed = 0;
  MPI_Reduce(&exposed, &max_exposed, 1, MPI_DOUBLE, MPI_MAX, 0, grid.comm());
  if (runtime.rank() != 0) return 0;

  const HostArray<float> reference = demo::smooth_serial(image, opt.sweeps);
  double max_diff = 0;
  for (std::size_t i = 0; i < reference.size(); ++i)
    max_diff = std::fmax(max_diff, std::fabs(double(result.data()[i]) - double(reference.data()[i])));
  const double cells = double(shape[0]) * shape[1] * shape[2] * shape[3];
  std::printf("{\"ranks\": %d, \"grid\": \"%s\", \"shape\": \"%s\", \"sweeps\": %d, \"transport\": \"%s\", "
              "\"ms_per_sweep\": %.3f, \"exposed_halo_ms_per_sweep\": %.3f, \"halo_bytes_rank0\": %lld, "
              "\"mcells_per_s\": %.1f, \"max_abs_diff_vs_one_rank\": %g}\n",
              runtime.size(), format_grid(dims).c_str(), opt.shape.c_str(), opt.sweeps,
              std::string(exchange.transport().name()).c_str(), 1e3 * elapsed / opt.sweeps, 1e3 * max_exposed / opt.sweeps,
              static_cast<long long>(exchange.send_bytes() + exchange.receive_bytes()),
              cells * opt.sweeps / elapsed / 1e6, max_diff);
  if (max_diff != 0) {
    std::fprintf(stderr, "tessera-demo: error: tiled result differs from the one-rank result (max |diff| %g)\n",
                 max_diff);
    return 1;
  }
  std::printf("tessera-demo: %d sweeps on grid %s match the one-rank result exactly\n", opt.sweeps,
              format_grid(dims).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  po::options_description desc("tessera-demo: halo exchange and 3x3 smoothing on a tiled image\noptions");
  desc.add_options()("help,h", "show this help and exit")
      ("grid", po::value(&opt.grid)->default_value(opt.grid), "process grid NxHxW, or auto (all ranks on space)")
      ("shape", po::value(&opt.shape)->default_value(opt.shape), "global image shape NxCxHxW")
      ("sweeps", po::value(&opt.sweeps)->default_value(opt.sweeps), "smoothing sweeps (one halo exchange each)")
      ("halo-transport", po::value(&opt.transport)->default_value(opt.transport), "auto | mpi | mpi-staged | nccl")
      ("verbose", po::bool_switch(&opt.verbose), "print the runtime configuration on rank 0");
  po::variables_map vm;
  try {
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(desc).run();
    const std::vector<std::string> stray = po::collect_unrecognized(parsed.options, po::include_positional);
    if (!stray.empty()) throw po::error("unexpected argument '" + stray.front() + "': every option is --name value");
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-demo: error: %s (try --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  try {
    Runtime runtime(argc, argv, RuntimeOptions{opt.verbose});
    try {
      return runtime.finish_with(run(runtime, opt));
    } catch (const std::exception& e) {
      // Option and grid errors are found alike on every rank; rank 0 says it once.
      if (runtime.rank() == 0) std::fprintf(stderr, "tessera-demo: error: %s\n", e.what());
      return runtime.finish_with(2);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-demo: error: %s\n", e.what());
    return 2;
  }
}
