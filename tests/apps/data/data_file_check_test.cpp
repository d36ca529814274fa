// Reads back, with Hdf5File, the files the tessera-data end-to-end tests wrote, and checks
// them against their sources: shapes and element types of the contract (docs/data.md),
// Fashion-MNIST's labels and first image against the IDX files read here with plain zlib,
// and the image set's tiles against the pixels the sample maker drew. ctest passes the
// paths in the environment; without them the tests skip.
#include <gtest/gtest.h>
#include <mpi.h>
#include <zlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "data/fashion_mnist.hpp"
#include "distarray/hdf5_file.hpp"
#include "sample_files.hpp"

namespace tessera::data {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// `count` bytes of a gzip'd file from `offset` on, read independently of the converter.
std::vector<std::uint8_t> gz_bytes(const std::string& path, long offset, unsigned count) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr) << path;
  std::vector<std::uint8_t> bytes(count);
  if (!file) return bytes;
  gzseek(file, offset, SEEK_SET);
  EXPECT_EQ(gzread(file, bytes.data(), count), int(count)) << path;
  gzclose(file);
  return bytes;
}

void check_fashion_split(const std::string& file_path, const std::string& idx_prefix, std::int64_t n) {
  SCOPED_TRACE(file_path);
  Hdf5File file(file_path, Hdf5File::Mode::read, MPI_COMM_SELF);
  ASSERT_EQ(file.shape("/images"), (Dims{n, 1, 28, 28}));
  EXPECT_EQ(file.element_kind("/images"), ElementKind::uint8);
  ASSERT_EQ(file.shape("/labels"), (Dims{n}));
  EXPECT_EQ(file.element_kind("/labels"), ElementKind::int64);
  EXPECT_EQ(file.read_string("/classes"), kFashionMnistClasses);

  // IDX: labels after an 8-byte header, images after a 16-byte one.
  const auto idx_labels = gz_bytes(idx_prefix + "-labels-idx1-ubyte.gz", 8, unsigned(n));
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  file.read_block("/labels", {0}, {n}, labels.data());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(labels[i], idx_labels[i]) << "label " << i;

  const auto idx_first_image = gz_bytes(idx_prefix + "-images-idx3-ubyte.gz", 16, 28 * 28);
  std::vector<std::uint8_t> first_image(28 * 28);
  file.read_block("/images", {0, 0, 0, 0}, {1, 1, 28, 28}, first_image.data());
  EXPECT_EQ(first_image, idx_first_image);
}

TEST(FashionMnistFile, MatchesTheIdxFiles) {
  const std::string dir = env("TESSERA_DATA_FMNIST_DIR"), source = env("TESSERA_DATA_FMNIST_SOURCE");
  if (dir.empty() || source.empty()) GTEST_SKIP() << "TESSERA_DATA_FMNIST_DIR/SOURCE not set";
  const std::int64_t n = std::atoll(env("TESSERA_DATA_FMNIST_LIMIT").c_str());
  check_fashion_split(dir + "/fashion-mnist-train.h5", source + "/train", n);
  check_fashion_split(dir + "/fashion-mnist-test.h5", source + "/t10k", n);
}

// The tiles of data_make_samples' photo.png (40x50 -> 2x3 tiles of 16x16) then grey.jpg
// (30x70 -> 1x4), every one labelled 2.
TEST(ImageSetFile, HoldsTheTilesInOrder) {
  const std::string path = env("TESSERA_DATA_TILES_FILE");
  if (path.empty()) GTEST_SKIP() << "TESSERA_DATA_TILES_FILE not set";
  Hdf5File file(path, Hdf5File::Mode::read, MPI_COMM_SELF);
  const std::int64_t n = 2 * 3 + 1 * 4;
  ASSERT_EQ(file.shape("/images"), (Dims{n, 3, 16, 16}));
  EXPECT_EQ(file.element_kind("/images"), ElementKind::uint8);
  std::vector<std::int64_t> labels(n);
  file.read_block("/labels", {0}, {n}, labels.data());
  EXPECT_EQ(labels, std::vector<std::int64_t>(n, 2));

  std::vector<std::uint8_t> frames(static_cast<std::size_t>(n * 3 * 16 * 16));
  file.read_block("/images", {0, 0, 0, 0}, {n, 3, 16, 16}, frames.data());
  auto at = [&](std::int64_t f, int c, int y, int x) { return frames[static_cast<std::size_t>(((f * 3 + c) * 16 + y) * 16 + x)]; };
  const RgbImage photo = samples::coordinates(40, 50);
  for (int f = 0; f < 6; ++f)  // row-major tiles, each exactly the photo's pixels
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x)
          ASSERT_EQ(at(f, c, y, x), photo.at(f / 3 * 16 + y, f % 3 * 16 + x, c)) << "tile " << f;
  for (int f = 6; f < n; ++f)  // the grey JPEG: three equal channels
    for (int y = 0; y < 16; ++y)
      for (int x = 0; x < 16; ++x) {
        ASSERT_EQ(at(f, 0, y, x), at(f, 1, y, x));
        ASSERT_EQ(at(f, 0, y, x), at(f, 2, y, x));
      }
}

}  // namespace
}  // namespace tessera::data
