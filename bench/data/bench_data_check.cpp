// bench_data_check: what refusing non-finite values costs the data loader (docs/data.md).
//
//   mpiexec -n P bench/data/bench_data_check [--samples N] [--sample CxHxW] [--batch B]
//                                            [--epochs E] [--grid NxHxW] [--file PATH]
//
// Writes a float32 data file (random pixels, N samples), then reads E shuffled epochs of
// batches through TrainingSet, the trainer's own loader, twice: with the tile cache (the
// default; each sample is checked once, in the first epoch) and without it (every batch is
// read from the file and checked). That is the epoch's data time. The check rides on a copy
// the loader makes anyway, so its cost is what copy_checking_finite adds over a plain copy
// of the same bytes, measured on this rank's tile of all N samples (the bytes one epoch
// checks; both copies are printed). Prints the epoch's data time, the check's cost and
// their ratio per mode; the slowest rank's figures.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/support/bench_args.hpp"
#include "bench/support/bench_main.hpp"
#include "distarray/finite_check.hpp"
#include "distarray/hdf5_file.hpp"
#include "distarray/process_grid.hpp"
#include "models/training_set.hpp"

namespace {

using tessera::Dims;
using tessera::ProcessGrid;

constexpr const char* kUsage =
    "usage: bench_data_check [--samples N] [--sample CxHxW] [--batch B] [--epochs E] [--grid NxHxW] [--file PATH]\n"
    "  defaults: 60000 samples of 1x28x28 (Fashion-MNIST's size), batch 64, 3 epochs, the default grid,\n"
    "  the file in the system's temporary directory (removed at the end)\n";

struct Options {
  bool help = false;
  std::int64_t samples = 60000, batch = 64, epochs = 3;
  std::array<std::int64_t, 3> sample{1, 28, 28};
  std::string grid, file;
};

Options parse(int argc, char** argv) {
  Options o;
  o.help = !tessera::bench::read_options(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--samples") {
      o.samples = tessera::bench::positive(value, "--samples");
    } else if (flag == "--batch") {
      o.batch = tessera::bench::positive(value, "--batch");
    } else if (flag == "--epochs") {
      o.epochs = tessera::bench::positive(value, "--epochs");
    } else if (flag == "--grid") {
      o.grid = value;
    } else if (flag == "--file") {
      o.file = value;
    } else if (flag == "--sample") {
      const auto parts = tessera::bench::split(value, 'x');
      if (parts.size() != 3) throw std::invalid_argument("--sample '" + value + "' is not CxHxW");
      for (int d = 0; d < 3; ++d) o.sample[d] = tessera::bench::positive(parts[d], "--sample");
    } else {
      throw std::invalid_argument("unknown option " + flag);
    }
  });
  return o;
}

double slowest(double seconds, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

// Rank 0 writes N random float32 samples and their labels.
void write_data(const std::string& path, const Options& o, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    const std::int64_t per_sample = o.sample[0] * o.sample[1] * o.sample[2];
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
    std::vector<float> images(static_cast<std::size_t>(o.samples * per_sample));
    for (float& v : images) v = pixel(rng);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(o.samples));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    tessera::Hdf5File file(path, tessera::Hdf5File::Mode::create, MPI_COMM_SELF);
    const Dims shape{o.samples, o.sample[0], o.sample[1], o.sample[2]};
    file.write_block("/images", shape, {0, 0, 0, 0}, shape, images.data());
    file.write_block("/labels", {o.samples}, {0}, {o.samples}, labels.data());
    file.close();
  }
  MPI_Barrier(comm);
}

// Seconds to read `epochs` shuffled epochs of batches through `set` into `images`.
double epoch_reads(const tessera::models::TrainingSet& set, const tessera::layers::Tensor<float>& images,
                   const Options& o, std::int64_t epochs, MPI_Comm comm) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(o.samples));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(11);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(o.batch));
  MPI_Barrier(comm);
  const double start = MPI_Wtime();
  for (std::int64_t e = 0; e < epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::int64_t first = 0; first < o.samples; first += o.batch) {
      for (std::int64_t b = 0; b < o.batch; ++b)
        rows[b] = first + b < o.samples ? order[static_cast<std::size_t>(first + b)] : -1;
      set.read_images(rows, images);
    }
  }
  Kokkos::fence();
  return slowest(MPI_Wtime() - start, comm);
}

// Best-of-5 seconds of a plain copy and of copy_checking_finite over `count` floats; the
// check's cost is their difference (the slowest rank's).
struct CopyTimes {
  double plain = 1e30, checking = 1e30;
  double check() const { return std::max(0.0, checking - plain); }
};
CopyTimes copy_times(std::size_t count, MPI_Comm comm) {
  std::vector<float> from(count), to(count);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (float& v : from) v = pixel(rng);
  CopyTimes t;
  for (int r = 0; r < 5; ++r) {
    double start = MPI_Wtime();
    std::memcpy(to.data(), from.data(), count * sizeof(float));
    t.plain = std::min(t.plain, MPI_Wtime() - start);
    start = MPI_Wtime();
    if (tessera::copy_checking_finite(from.data(), to.data(), count) != count)
      throw std::logic_error("the benchmark's own data is not finite");
    t.checking = std::min(t.checking, MPI_Wtime() - start);
  }
  t.plain = slowest(t.plain, comm), t.checking = slowest(t.checking, comm);
  return t;
}

int run(const tessera::Runtime& runtime, const Options& o) {
  const bool root = runtime.rank() == 0;
  const MPI_Comm comm = runtime.world();
  const auto dims = o.grid.empty() ? tessera::default_grid(runtime.size()) : tessera::parse_grid(o.grid);
  ProcessGrid grid(comm, dims);
  const std::string path =
      o.file.empty() ? (std::filesystem::temp_directory_path() / "tessera-bench-data-check.h5").string() : o.file;
  write_data(path, o, comm);

  const tessera::Shape4 shape{o.batch, o.sample[0], o.sample[1], o.sample[2]};
  const tessera::layers::Tensor<float> images(grid, shape, {}, "bench.images");
  // This rank's tile of all samples: the floats one epoch checks.
  const tessera::Box tile = images.owned_box();
  const std::size_t tile_floats =
      static_cast<std::size_t>(o.samples * (tile.hi[1] - tile.lo[1]) * (tile.hi[2] - tile.lo[2]) * (tile.hi[3] - tile.lo[3]));
  const CopyTimes copies = copy_times(tile_floats, comm);
  const double check = copies.check();

  const std::string grid_text = tessera::format_grid(dims);
  if (root) {
    std::printf("%s\n", runtime.describe().c_str());
    std::printf("data: %lld float32 samples of %lldx%lldx%lld, batch %lld, grid %s\n"
                "this rank's tile of all samples (%.1f MB, the bytes one epoch checks): plain copy %.3f ms, "
                "checking copy %.3f ms; check cost = the difference, %.3f ms\n",
                static_cast<long long>(o.samples), static_cast<long long>(o.sample[0]),
                static_cast<long long>(o.sample[1]), static_cast<long long>(o.sample[2]),
                static_cast<long long>(o.batch), grid_text.c_str(), tile_floats * 4.0 / 1e6, copies.plain * 1e3,
                copies.checking * 1e3, check * 1e3);
    std::printf("%-34s %12s %12s %10s\n", "epoch", "data ms", "check ms", "check %");
  }
  auto report = [&](const char* what, double data_seconds, double check_seconds) {
    if (root)
      std::printf("%-34s %12.1f %12.3f %9.2f%%\n", what, data_seconds * 1e3, check_seconds * 1e3,
                  100.0 * check_seconds / data_seconds);
  };
  {
    tessera::models::TrainingSet cached(path, comm);
    report("tile cache, first epoch (checks)", epoch_reads(cached, images, o, 1, comm), check);
    if (o.epochs > 1)
      report("tile cache, later epochs (none)", epoch_reads(cached, images, o, o.epochs - 1, comm) / double(o.epochs - 1),
             0.0);
  }
  {
    tessera::models::TrainingSet uncached(path, comm);
    uncached.disable_tile_cache();
    report("no tile cache, every epoch", epoch_reads(uncached, images, o, 1, comm), check);
  }
  if (root && o.file.empty()) std::filesystem::remove(path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tessera::bench::benchmark_main(
      argc, argv, "bench_data_check", kUsage, [&](const tessera::Runtime&) { return parse(argc, argv); },
      [](const tessera::Runtime& r, const Options& o) { return run(r, o); });
}
