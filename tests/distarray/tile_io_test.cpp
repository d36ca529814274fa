// Tile I/O through parallel HDF5: each rank reads and writes only its tile, and the file
// is in global layout, so what one grid writes any other grid reads back exactly.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <fstream>
#include <numeric>
#include <string>

#include "distarray/finite_check.hpp"
#include "distarray/hdf5_file.hpp"
#include "distarray/tile_io.hpp"
#include "tests/support/error_message.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera {
namespace {

using testing::all_grids;
using testing::world_rank;

// A file name every rank agrees on, removed when the test ends.
class TempFile {
 public:
  TempFile() {
    char name[256] = {};
    if (world_rank() == 0) std::snprintf(name, sizeof name, "/tmp/tessera_tile_io_%d_%d.h5", getpid(), counter_++);
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = name;
  }
  ~TempFile() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

// The value stored for global cell (n, c, h, w) of sample `sample`.
double cell_value(std::int64_t sample, std::int64_t c, std::int64_t h, std::int64_t w) {
  return 1000.0 * sample + 100.0 * c + 10.0 * h + w + 0.25;
}

template <class T>
void fill_owned(const DistArray<T>& a, const std::vector<std::int64_t>& rows) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.window());
  const Box o = a.owned_box(), win = a.window_box();
  for (auto n = o.lo[N]; n < o.hi[N]; ++n)
    for (auto c = o.lo[C]; c < o.hi[C]; ++c)
      for (auto h = o.lo[H]; h < o.hi[H]; ++h)
        for (auto w = o.lo[W]; w < o.hi[W]; ++w)
          host(n - win.lo[N], c - win.lo[C], h - win.lo[H], w - win.lo[W]) =
              static_cast<T>(cell_value(rows[static_cast<std::size_t>(n)], c, h, w));
  Kokkos::deep_copy(a.window(), host);
}

// Number of owned cells whose value is not the one sample rows[n] should have.
template <class T>
int wrong_cells(const DistArray<T>& a, const std::vector<std::int64_t>& rows) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.window());
  const Box o = a.owned_box(), win = a.window_box();
  int wrong = 0;
  for (auto n = o.lo[N]; n < o.hi[N]; ++n)
    for (auto c = o.lo[C]; c < o.hi[C]; ++c)
      for (auto h = o.lo[H]; h < o.hi[H]; ++h)
        for (auto w = o.lo[W]; w < o.hi[W]; ++w)
          wrong += host(n - win.lo[N], c - win.lo[C], h - win.lo[H], w - win.lo[W]) !=
                   static_cast<T>(cell_value(rows[static_cast<std::size_t>(n)], c, h, w));
  return wrong;
}

std::vector<std::int64_t> identity(std::int64_t n) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

const Shape4 kShape{7, 2, 9, 7};  // 7 samples: every grid of up to 6 ranks fits

// Every grid writes once and the next grid in the list reads (a cycle), which covers every
// grid as writer and as reader without a quadratic number of (slow, oversubscribed) opens.
TEST(TileIo, WhatOneGridWritesAnotherGridReadsExactly) {
  const auto grids = all_grids(testing::world_size());
  for (std::size_t i = 0; i < grids.size(); ++i) {
    const GridDims& writer_dims = grids[i];
    const GridDims& reader_dims = grids[(i + 1) % grids.size()];
    TempFile file;
    ProcessGrid writer_grid(MPI_COMM_WORLD, writer_dims);
    DistArray<double> written(writer_grid, kShape, HaloWidths::symmetric_hw(1, 2));
    fill_owned(written, identity(kShape[N]));
    {
      Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
      write_array(out, "/images", written);
      out.close();
    }
    ProcessGrid reader_grid(MPI_COMM_WORLD, reader_dims);
    DistArray<double> read(reader_grid, kShape, {{0, 0, 0, 2}, {0, 0, 1, 0}});
    Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
    read_array(in, "/images", read);
    EXPECT_EQ(wrong_cells(read, identity(kShape[N])), 0)
        << "written on " << format_grid(writer_dims) << ", read on " << format_grid(reader_dims);
  }
}

TEST(TileIo, ReadsAShuffledBatchConvertingUint8ToFloat) {
  TempFile file;
  const std::int64_t samples = 6;
  {
    // uint8 images as a data converter writes them: value = (sample * 7 + h + w) % 256.
    Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
    std::vector<std::uint8_t> all(static_cast<std::size_t>(samples * 1 * 4 * 5));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const std::int64_t s = static_cast<std::int64_t>(i) / 20, h = static_cast<std::int64_t>(i) / 5 % 4,
                         w = static_cast<std::int64_t>(i) % 5;
      all[i] = static_cast<std::uint8_t>((s * 7 + h + w) % 256);
    }
    const bool root = world_rank() == 0;
    out.write_block<std::uint8_t>("/images", {samples, 1, 4, 5}, {0, 0, 0, 0},
                                  {root ? samples : 0, 1, 4, 5}, all.data());
    out.close();
  }
  const std::vector<std::int64_t> batch{4, 0, 5, 2};  // shuffled, not sorted
  for (const GridDims& dims : all_grids(testing::world_size())) {
    if (dims[0] > 4 || dims[1] > 4 || dims[2] > 5) continue;
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    DistArray<float> images(grid, {4, 1, 4, 5});
    Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
    EXPECT_EQ(in.element_kind("/images"), ElementKind::uint8);
    read_samples(in, "/images", batch, images);
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), images.window());
    const Box o = images.owned_box();
    int wrong = 0;
    for (auto n = o.lo[N]; n < o.hi[N]; ++n)
      for (auto h = o.lo[H]; h < o.hi[H]; ++h)
        for (auto w = o.lo[W]; w < o.hi[W]; ++w)
          wrong += host(n - o.lo[N], 0, h - o.lo[H], w - o.lo[W]) !=
                   static_cast<float>((batch[static_cast<std::size_t>(n)] * 7 + h + w) % 256);
    EXPECT_EQ(wrong, 0) << format_grid(dims);
  }
}

// A non-finite value read is reported by its index in the file (a shuffled batch row maps
// back to its sample) by the rank whose tile holds it, and still copied into the array.
TEST(TileIo, ReadSamplesReportsTheFirstNonFiniteValueByItsFileIndex) {
  TempFile file;
  std::vector<float> all(static_cast<std::size_t>(6 * 4 * 5), 0.5f);
  all[(4 * 4 + 2) * 5 + 3] = std::numeric_limits<float>::quiet_NaN();  // [4,0,2,3]
  all[(5 * 4 + 0) * 5 + 0] = -std::numeric_limits<float>::infinity();  // [5,0,0,0]
  {
    Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
    const std::int64_t mine = world_rank() == 0 ? 6 : 0;
    out.write_block<float>("/images", {6, 1, 4, 5}, {0, 0, 0, 0}, {mine, 1, 4, 5}, all.data());
    out.close();
  }
  const std::vector<std::int64_t> batch{4, 0, 5, 2};
  for (const GridDims& dims : all_grids(testing::world_size())) {
    if (dims[0] > 4 || dims[1] > 4 || dims[2] > 5) continue;
    ProcessGrid grid(MPI_COMM_WORLD, dims);
    DistArray<float> images(grid, {4, 1, 4, 5}, HaloWidths::symmetric_hw(1, 1));
    Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
    const std::optional<NonFinite> found = read_samples(in, "/images", batch, images);
    // The first non-finite cell of this rank's tile in (n, c, h, w) order, as the file indexes it.
    std::optional<Dims> want;
    const Box o = images.owned_box();
    for (auto n = o.lo[N]; n < o.hi[N] && !want; ++n)
      for (auto h = o.lo[H]; h < o.hi[H] && !want; ++h)
        for (auto w = o.lo[W]; w < o.hi[W] && !want; ++w) {
          const std::int64_t sample = batch[static_cast<std::size_t>(n)];
          if (!std::isfinite(all[static_cast<std::size_t>((sample * 4 + h) * 5 + w)])) want = Dims{sample, 0, h, w};
        }
    ASSERT_EQ(found.has_value(), want.has_value()) << format_grid(dims);
    if (found) {
      EXPECT_EQ(found->index, *want) << format_grid(dims);
    }
    // The whole allocation: a GPU build copies to the host only contiguous views.
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), images.window());
    const Box a = images.window_box();
    for (auto h = o.lo[H]; h < o.hi[H] && o.lo[N] <= 2 && o.hi[N] > 2; ++h)
      for (auto w = o.lo[W]; w < o.hi[W]; ++w)  // batch row 2 is sample 5: -inf at (0, 0), copied like any value
        EXPECT_EQ(host(2 - a.lo[N], 0, h - a.lo[H], w - a.lo[W]), h == 0 && w == 0 ? -INFINITY : 0.5f);
  }
}

// The scan across its chunks, the copy that checks (and still copies everything), and the
// one-line message.
TEST(FiniteCheck, FindsTheFirstNonFiniteValueAnywhere) {
  std::vector<float> values(10000, 1.0f), copy(values.size(), 0.0f);
  EXPECT_EQ(first_non_finite(values.data(), values.size()), values.size());
  values[9000] = std::numeric_limits<float>::quiet_NaN();
  values[4097] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite(values.data(), values.size()), 4097u);
  EXPECT_EQ(copy_checking_finite(values.data(), copy.data(), values.size()), 4097u);
  EXPECT_TRUE(std::isnan(copy[9000]));
  EXPECT_EQ(copy[9999], 1.0f);
  std::vector<double> doubles(5, std::numeric_limits<double>::max());
  EXPECT_EQ(first_non_finite(doubles.data(), doubles.size()), 5u);
  doubles[3] = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(first_non_finite(doubles.data(), doubles.size()), 3u);
  const std::optional<NonFinite> found = find_non_finite(doubles.data(), {2, 10}, {1, 5});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(non_finite_message("checkpoint 'c.h5'", "/params/0/weight", *found),
            "checkpoint 'c.h5': /params/0/weight[2,13] is -inf (non-finite values are refused)");
}

TEST(TileIo, RowsMayRepeatAndComeInAnyOrder) {
  TempFile file;
  Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
  const std::vector<std::int64_t> labels{10, 11, 12, 13, 14};
  out.write_block<std::int64_t>("/labels", {5}, {0}, {world_rank() == 0 ? 5 : 0}, labels.data());
  out.close();
  Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
  std::vector<std::int64_t> got(4);
  in.read_rows<std::int64_t>("/labels", {3, 1, 3, 0}, {0}, {1}, got.data());
  EXPECT_EQ(got, (std::vector<std::int64_t>{13, 11, 13, 10}));
}

TEST(TileIo, StringsRoundTrip) {
  TempFile file;
  {
    Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
    out.write_string("/meta/spec", "conv(out=16,k=3,pad=1),relu");
    out.write_string("/meta/empty", "");
    out.close();
  }
  Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
  EXPECT_EQ(in.read_string("/meta/spec"), "conv(out=16,k=3,pad=1),relu");
  EXPECT_EQ(in.read_string("/meta/empty"), "");
  EXPECT_TRUE(in.has("/meta/spec"));
  EXPECT_FALSE(in.has("/meta/nothing"));
  EXPECT_FALSE(in.has("/nowhere/deeper"));
}

// Each failure must be an exception naming the problem, thrown on every rank alike.
TEST(TileIo, BadFilesAndShapesAreClearErrors) {
  auto message_of = [](auto&& action) { return tessera::testing::error_message(action); };
  EXPECT_NE(message_of([] { Hdf5File f("/tmp/tessera-no-such-file.h5", Hdf5File::Mode::read, MPI_COMM_WORLD); })
                .find("does not exist"),
            std::string::npos);

  TempFile garbage;
  if (world_rank() == 0) std::ofstream(garbage.path()) << "not an HDF5 file\n";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_NE(message_of([&] { Hdf5File f(garbage.path(), Hdf5File::Mode::read, MPI_COMM_WORLD); })
                .find("is not a readable HDF5 file"),
            std::string::npos);

  TempFile file;
  ProcessGrid grid(MPI_COMM_WORLD, {1, 1, testing::world_size()});
  DistArray<float> a(grid, {2, 1, 3, 8});
  {
    Hdf5File out(file.path(), Hdf5File::Mode::create, MPI_COMM_WORLD);
    write_array(out, "/images", a);
    out.close();
  }
  Hdf5File in(file.path(), Hdf5File::Mode::read, MPI_COMM_WORLD);
  EXPECT_NE(message_of([&] { in.shape("/labels"); }).find("'/labels': no such dataset"), std::string::npos);
  DistArray<float> wrong_shape(grid, {2, 3, 3, 8});
  EXPECT_NE(message_of([&] { read_array(in, "/images", wrong_shape); }).find("(CxHxW) are expected"),
            std::string::npos);
  DistArray<float> batch(grid, {2, 1, 3, 8});
  EXPECT_NE(message_of([&] { read_samples(in, "/images", {0, 7}, batch); }).find("row 7 is outside"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
