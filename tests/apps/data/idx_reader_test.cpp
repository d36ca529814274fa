// The IDX reader on small IDX files written here: it returns the header's dimensions and
// the bytes unchanged (gzip'd or plain), honours a limit, and turns every kind of broken
// file (wrong magic, short header, short data, extra data, damaged gzip, a header that
// promises terabytes or a zero-sized dimension) into an error
// that names the file.
#include <gtest/gtest.h>

#include <stdexcept>

#include "data/idx_reader.hpp"
#include "sample_files.hpp"

namespace tessera::data {
namespace {

using samples::Bytes;

class IdxReader : public testing::Test {
 protected:
  std::string dir = samples::fresh_dir("idx");
  std::string path(const std::string& name) const { return dir + "/" + name; }
  const Bytes pixels = samples::noise(5 * 3 * 4, 7);
  std::string images_gz() const {
    samples::write_gz(path("images.gz"), samples::idx_file(0x00000803, {5, 3, 4}, pixels));
    return path("images.gz");
  }
};

// Expects `call` to throw a runtime_error whose message names `file` and says `says`.
template <class Call>
void expect_error(Call call, const std::string& file, const std::string& says) {
  try {
    call();
    ADD_FAILURE() << "no error for " << file;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST_F(IdxReader, ReadsGzippedImagesExactly) {
  const IdxArray a = read_idx_ubyte(images_gz(), 3);
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{5, 3, 4}));
  EXPECT_EQ(a.items_in_file, 5);
  EXPECT_EQ(a.bytes, pixels);
}

TEST_F(IdxReader, ReadsPlainFilesToo) {
  const Bytes labels{9, 0, 3};
  samples::write_plain(path("labels"), samples::idx_file(0x00000801, {3}, labels));
  const IdxArray a = read_idx_ubyte(path("labels"), 1);
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(a.bytes, labels);
}

TEST_F(IdxReader, LimitTakesTheLeadingItems) {
  const IdxArray a = read_idx_ubyte(images_gz(), 3, 2);
  EXPECT_EQ(a.dims, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(a.items_in_file, 5);
  EXPECT_EQ(a.bytes, Bytes(pixels.begin(), pixels.begin() + 24));
  EXPECT_EQ(read_idx_ubyte(images_gz(), 3, 99).dims[0], 5) << "a limit beyond the file takes it all";
}

TEST_F(IdxReader, WrongMagicNamesBothNumbers) {
  // A labels file where images are expected, and a file of another element type (int32).
  samples::write_gz(path("labels.gz"), samples::idx_file(0x00000801, {3}, {1, 2, 3}));
  expect_error([&] { read_idx_ubyte(path("labels.gz"), 3); }, "labels.gz", "magic number 0x00000801, expected 0x00000803");
  samples::write_gz(path("ints.gz"), samples::idx_file(0x00000C01, {1}, {0, 0, 0, 1}));
  expect_error([&] { read_idx_ubyte(path("ints.gz"), 1); }, "ints.gz", "not an IDX file of unsigned bytes");
}

TEST_F(IdxReader, TruncatedDataIsAnError) {
  Bytes file = samples::idx_file(0x00000803, {5, 3, 4}, pixels);
  file.resize(file.size() - 1);
  samples::write_gz(path("short.gz"), file);
  expect_error([&] { read_idx_ubyte(path("short.gz"), 3); }, "short.gz", "is truncated");
  samples::write_gz(path("header.gz"), Bytes{0, 0, 8, 3, 0, 0});
  expect_error([&] { read_idx_ubyte(path("header.gz"), 3); }, "header.gz", "truncated inside its header");
  samples::write_gz(path("empty.gz"), {});
  expect_error([&] { read_idx_ubyte(path("empty.gz"), 1); }, "empty.gz", "no IDX header");
}

// A corrupt header: a count of 0x7fffffff 28x28 images (1.6 TB) fails as truncated once
// the data there is runs out, not as an allocation failure; a zero-sized item dimension
// is named as such (it used to read as "bytes after the items").
TEST_F(IdxReader, ImpossibleHeadersAreNamed) {
  Bytes huge = samples::idx_file(0x00000803, {5, 28, 28}, samples::noise(5 * 28 * 28, 3));
  huge[4] = 0x7f, huge[5] = huge[6] = huge[7] = 0xff;
  samples::write_gz(path("huge.gz"), huge);
  expect_error([&] { read_idx_ubyte(path("huge.gz"), 3); }, "huge.gz", "promises 2147483647 items of 784 bytes");
  samples::write_gz(path("rows0.gz"), samples::idx_file(0x00000803, {5, 0, 4}, {1, 2, 3}));
  expect_error([&] { read_idx_ubyte(path("rows0.gz"), 3); }, "rows0.gz", "gives dimension 1 a size of 0");
}

TEST_F(IdxReader, TrailingBytesAreAnErrorUnlessLimited) {
  Bytes file = samples::idx_file(0x00000801, {2}, {4, 5});
  file.push_back(6);
  samples::write_gz(path("long.gz"), file);
  expect_error([&] { read_idx_ubyte(path("long.gz"), 1); }, "long.gz", "bytes after the 2 items");
  EXPECT_EQ(read_idx_ubyte(path("long.gz"), 1, 2).bytes, (Bytes{4, 5}));
}

TEST_F(IdxReader, DamagedGzipStreamIsAnError) {
  samples::write_gz(path("whole.gz"), samples::idx_file(0x00000803, {5, 3, 4}, pixels));
  Bytes gz = samples::read_plain(path("whole.gz"));
  gz.resize(gz.size() / 2);  // the compressed stream ends mid-way
  samples::write_plain(path("cut.gz"), gz);
  expect_error([&] { read_idx_ubyte(path("cut.gz"), 3); }, "cut.gz", "truncated");
}

TEST_F(IdxReader, MissingFileIsAnError) {
  expect_error([&] { read_idx_ubyte(path("absent.gz"), 1); }, "absent.gz", "does not exist");
}

}  // namespace
}  // namespace tessera::data
