// A training set reads every rank's tile of a batch with the values the file holds, on
// every process grid (column, row, sample and mixed splits, uneven tiles), from its tile
// cache (filled whole, or in whole-width bands on a column split, one chunk or several)
// and straight from the file, for uint8 and float32 pixels.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "distarray/hdf5_file.hpp"
#include "models/training_set.hpp"
#include "tests/models/checkpoint_test_support.hpp"

namespace tessera::models {
namespace {

using testing::all_grids;
using testing::world_size;

constexpr std::int64_t kSamples = 37, kChannels = 2, kHeight = 7, kWidth = 11;

// Distinct values, exact in float: the pixel says where it came from.
float float_pixel(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return static_cast<float>(n * 10000 + c * 1000 + h * 100 + w);
}
std::uint8_t byte_pixel(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return static_cast<std::uint8_t>((n * 7 + c * 31 + h * 13 + w * 3) % 251);
}

template <class Pixel>
void write_images(const std::string& path, Pixel pixel) {
  if (testing::world_rank() == 0) {
    std::vector<decltype(pixel(0, 0, 0, 0))> images;
    for (std::int64_t n = 0; n < kSamples; ++n)
      for (std::int64_t c = 0; c < kChannels; ++c)
        for (std::int64_t h = 0; h < kHeight; ++h)
          for (std::int64_t w = 0; w < kWidth; ++w) images.push_back(pixel(n, c, h, w));
    Hdf5File file(path, Hdf5File::Mode::create, MPI_COMM_SELF);
    const Dims shape{kSamples, kChannels, kHeight, kWidth};
    file.write_block("/images", shape, {0, 0, 0, 0}, shape, images.data());
    file.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

enum class Route { cache, cache_small_chunks, file };

const char* route_name(Route r) {
  return r == Route::cache ? "tile cache" : r == Route::cache_small_chunks ? "tile cache, 3-sample chunks" : "file";
}

// Reads two batches through `route` on `grid` and counts the owned cells (halo included in
// the tensor, untouched) that differ from expected(row, c, h, w).
template <class Expected>
std::int64_t wrong_cells(const std::string& path, const ProcessGrid& grid, Route route, Expected expected) {
  TrainingSet set(path, grid.comm());
  if (route == Route::file) set.disable_tile_cache();
  // 3 samples' widest band: chunks of 3 samples, the last one short (37 = 12 * 3 + 1).
  if (route == Route::cache_small_chunks) set.limit_band_staging(3 * 4 * kChannels * kHeight * kWidth);
  const layers::Tensor<float> images(grid, set.batch_shape(6), HaloWidths::symmetric_hw(1, 1), "test.images");
  std::int64_t wrong = 0;
  for (const std::vector<std::int64_t>& rows : {std::vector<std::int64_t>{36, 0, 17, -1, 5, 17},
                                                 std::vector<std::int64_t>{1, 2, 35, 30, 3, 4}}) {
    set.read_images(rows, images);
    const auto owned = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), images.owned());
    const Box box = images.owned_box();
    for (std::int64_t n = box.lo[N]; n < box.hi[N]; ++n)
      for (std::int64_t c = box.lo[C]; c < box.hi[C]; ++c)
        for (std::int64_t h = box.lo[H]; h < box.hi[H]; ++h)
          for (std::int64_t w = box.lo[W]; w < box.hi[W]; ++w) {
            const std::int64_t row = rows[static_cast<std::size_t>(n)] < 0 ? 0 : rows[static_cast<std::size_t>(n)];
            const float got = owned(n - box.lo[N], c - box.lo[C], h - box.lo[H], w - box.lo[W]);
            wrong += got != expected(row, c, h, w) ? 1 : 0;
          }
  }
  return wrong;
}

template <class Pixel, class Expected>
void check_every_grid_and_route(const char* name, Pixel pixel, Expected expected) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file(std::string(name) + ".h5");
  write_images(path, pixel);
  for (const GridDims& dims : all_grids(world_size())) {
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    for (Route route : {Route::cache, Route::cache_small_chunks, Route::file})
      EXPECT_EQ(wrong_cells(path, grid, route, expected), 0)
          << name << " pixels on grid " << format_grid(dims) << ", read through the " << route_name(route);
  }
}

TEST(TrainingSet, FloatPixelsReachEveryTileOnEveryGrid) {
  check_every_grid_and_route("float32", float_pixel, float_pixel);
}

TEST(TrainingSet, BytePixelsReachEveryTileScaledOnEveryGrid) {
  // The reader scales a byte by the float 1 / 255, as the check does.
  check_every_grid_and_route("uint8", byte_pixel, [](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    return static_cast<float>(byte_pixel(n, c, h, w)) * (1.0f / 255.0f);
  });
}

}  // namespace
}  // namespace tessera::models
