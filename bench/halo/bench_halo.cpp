// bench_halo: what one halo fill costs, per process grid and halo width, and how close the
// batched pack and unpack kernels come to a plain Kokkos deep_copy of the same bytes on the
// same ranks in the same run.
//
//   mpiexec -n 4 bench_halo [--shape NxCxHxW] [--widths 1,2,4] [--iters N]
//                           [--grids 1x2x2,1x4x1] [--transport auto|mpi|...]
//                           [--precision fp32|bf16]
//
// --precision bf16 exchanges a bf16 array (--precision bf16 training's activations and
// their gradients): the same cells, half the bytes.
// Bytes are payload bytes (what leaves a rank); GB/s is 1e9 bytes per second. Exchange
// time is the slowest rank's mean; pack/unpack/copy rates are averaged over ranks.
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/support/bench_main.hpp"
#include "bench/support/bench_args.hpp"
#include "distarray/bf16.hpp"
#include "distarray/runtime.hpp"
#include "halo/halo.hpp"

namespace {

using tessera::bench::positive;
using tessera::bench::split;

using namespace tessera;
using MemorySpace = DistArray<float>::memory_space;

struct Options {
  Shape4 shape{8, 16, 256, 256};
  std::vector<std::int64_t> widths{1, 2, 4};
  int iters = 20;
  std::vector<GridDims> grids;  // default: every spatial grid (pn = 1) of the rank count
  std::string transport = "auto";
  std::string precision = "fp32";  // of the array: fp32 or bf16
  bool help = false;
};

const char* const kUsage =
    "usage: bench_halo [--shape NxCxHxW] [--widths 1,2,4] [--iters N] [--grids 1x2x2,...]\n"
    "                  [--transport auto|mpi|mpi-staged|nccl] [--precision fp32|bf16]\n";

Options parse(int argc, char** argv, int ranks) {
  Options o;
  o.help = !bench::read_options(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--shape") {
      const auto parts = split(value, 'x');
      if (parts.size() != 4) throw std::invalid_argument("--shape '" + value + "' is not NxCxHxW");
      for (int d = 0; d < kDims; ++d) o.shape[d] = positive(parts[static_cast<std::size_t>(d)], "--shape");
    } else if (flag == "--widths") {
      o.widths.clear();
      for (const auto& w : split(value, ',')) o.widths.push_back(positive(w, "--widths"));
    } else if (flag == "--iters") {
      o.iters = static_cast<int>(positive(value, "--iters"));
    } else if (flag == "--grids") {
      for (const auto& g : split(value, ',')) o.grids.push_back(parse_grid(g));
    } else if (flag == "--transport") {
      o.transport = value;
    } else if (flag == "--precision") {
      if (value != "fp32" && value != "bf16") throw std::invalid_argument("--precision '" + value + "' is not fp32 or bf16");
      o.precision = value;
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  });
  if (o.help) return o;
  if (o.grids.empty())
    for (int ph = 1; ph <= ranks; ++ph)
      if (ranks % ph == 0) o.grids.push_back({1, ph, ranks / ph});
  return o;
}

double max_over_ranks(double v, MPI_Comm comm) {
  double r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, comm);
  return r;
}
double sum_over_ranks(double v, MPI_Comm comm) {
  double r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_SUM, comm);
  return r;
}

// Mean seconds per call of f over `iters` calls, after one untimed call.
template <class F>
double seconds_per_call(int iters, F f) {
  f();
  Kokkos::fence();
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) f();
  Kokkos::fence();
  return (MPI_Wtime() - t0) / iters;
}

struct Row {
  double messages = 0, bytes = 0, exchange_s = 0, pack_gbs = 0, unpack_gbs = 0, copy_gbs = 0;
};

template <class Element>
Row measure(const ProcessGrid& grid, const Options& o, std::int64_t width) {
  const HaloWidths halo{{0, 0, width, width}, {0, 0, width, width}};
  DistArray<Element> a(grid, o.shape, halo);
  a.fill_window(Element(1.0f));
  auto exchange = halo::make_exchange(a, halo::grown_by(halo), halo::Mode::fill, halo::BoundaryFill::zero(), o.transport);
  const halo::Plan& plan = exchange.plan();
  const MPI_Comm comm = grid.comm();

  MPI_Barrier(comm);
  const double exchange_s = seconds_per_call(o.iters, [&] { exchange.run(); });

  // The kernels alone, on buffers laid out exactly as the exchange lays them out.
  const auto sends = halo::BufferLayout::of(plan.sends()), receives = halo::BufferLayout::of(plan.receives());
  const SegmentTable<MemorySpace> send_table(a.window_box(), sends.boxes), receive_table(a.window_box(), receives.boxes);
  BufferView<Element, MemorySpace> send("send", sends.total), receive("receive", receives.total);
  BufferView<Element, MemorySpace> copy_from("copy_from", sends.total), copy_to("copy_to", sends.total);
  const double pack_s = seconds_per_call(o.iters, [&] { pack(send_table, a.window(), send); });
  const double unpack_s = seconds_per_call(o.iters, [&] { unpack(receive_table, a.window(), receive); });
  const double copy_s = seconds_per_call(o.iters, [&] { Kokkos::deep_copy(copy_to, copy_from); });

  const double send_bytes = static_cast<double>(sends.total) * sizeof(Element);
  const double receive_bytes = static_cast<double>(receives.total) * sizeof(Element);
  auto rate = [](double bytes, double s) { return s > 0 && bytes > 0 ? bytes / s / 1e9 : 0.0; };
  const int ranks = grid.size();
  Row row;
  row.messages = max_over_ranks(static_cast<double>(plan.sends().size()), comm);
  row.bytes = sum_over_ranks(send_bytes, comm);
  row.exchange_s = max_over_ranks(exchange_s, comm);
  row.pack_gbs = sum_over_ranks(rate(send_bytes, pack_s), comm) / ranks;
  row.unpack_gbs = sum_over_ranks(rate(receive_bytes, unpack_s), comm) / ranks;
  row.copy_gbs = sum_over_ranks(rate(send_bytes, copy_s), comm) / ranks;
  return row;
}

int run(const tessera::Runtime& runtime, const Options& o) {
  const bool root = runtime.rank() == 0;
  if (root) {
    std::printf("%s\n", runtime.describe().c_str());
    std::printf("halo fill of %s %lldx%lldx%lldx%lld, symmetric H/W widths, transport %s, %d iterations\n",
                o.precision.c_str(), static_cast<long long>(o.shape[0]), static_cast<long long>(o.shape[1]),
                static_cast<long long>(o.shape[2]), static_cast<long long>(o.shape[3]), o.transport.c_str(), o.iters);
    std::printf("%-7s %5s %8s %12s %12s %9s | %9s %9s %9s %9s %11s\n", "grid", "width", "msgs/rk", "bytes(all)",
                "exchange_us", "GB/s", "pack GB/s", "unpk GB/s", "copy GB/s", "pack/copy", "unpack/copy");
  }
  for (const GridDims& g : o.grids) {
    ProcessGrid grid(runtime.world(), g);
    for (std::int64_t width : o.widths) {
      const Row r = o.precision == "bf16" ? measure<bf16>(grid, o, width) : measure<float>(grid, o, width);
      if (!root) continue;
      auto ratio = [&](double x) { return r.copy_gbs > 0 ? x / r.copy_gbs : 0.0; };
      std::printf("%-7s %5lld %8.0f %12.0f %12.1f %9.2f | %9.2f %9.2f %9.2f %9.2f %11.2f\n", format_grid(g).c_str(),
                  static_cast<long long>(width), r.messages, r.bytes, r.exchange_s * 1e6,
                  r.exchange_s > 0 ? r.bytes / r.exchange_s / 1e9 : 0.0, r.pack_gbs, r.unpack_gbs, r.copy_gbs,
                  ratio(r.pack_gbs), ratio(r.unpack_gbs));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::benchmark_main(
      argc, argv, "bench_halo", kUsage, [&](const tessera::Runtime& r) { return parse(argc, argv, r.size()); },
      [](const tessera::Runtime& r, const Options& o) { return run(r, o); });
}
