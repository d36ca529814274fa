#include "data/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace tessera::data {
namespace {

constexpr std::uint8_t kUnsignedByte = 0x08;

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", static_cast<unsigned>(v));
  return text;
}

// gzread reads plain files unchanged too, so one path serves .gz and uncompressed IDX files.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw std::runtime_error("'" + path + "': cannot open for reading");
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to `size` bytes; fewer only at the end of the data.
  std::size_t read(void* into, std::size_t size) {
    std::size_t done = 0;
    auto* out = static_cast<unsigned char*>(into);
    while (done < size) {
      // gzread takes an unsigned count: read big arrays in chunks.
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        throw std::runtime_error("'" + path_ + "' is corrupt or truncated (zlib: " + gzerror(file_, &code) + ")");
      }
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    // A gzip stream cut short reads as a short count plus an error, not always as < 0.
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END)
      throw std::runtime_error("'" + path_ + "' is corrupt or truncated (zlib: " + message + ")");
    return done;
  }

 private:
  std::string path_;
  gzFile file_;
};

std::uint32_t big_endian32(const std::uint8_t* b) {
  return std::uint32_t{b[0]} << 24 | std::uint32_t{b[1]} << 16 | std::uint32_t{b[2]} << 8 | b[3];
}

}  // namespace

std::uint32_t idx_ubyte_magic(int rank) { return std::uint32_t{kUnsignedByte} << 8 | static_cast<std::uint32_t>(rank); }

IdxArray read_idx_ubyte(const std::string& path, int rank, std::int64_t max_items) {
  if (!std::filesystem::is_regular_file(path)) throw std::runtime_error("'" + path + "' does not exist or is not a file");
  GzFile file(path);
  std::uint8_t magic_bytes[4];
  if (file.read(magic_bytes, 4) != 4) throw std::runtime_error("'" + path + "' is truncated: no IDX header");
  const std::uint32_t magic = big_endian32(magic_bytes), expected = idx_ubyte_magic(rank);
  if (magic != expected)
    throw std::runtime_error("'" + path + "' is not an IDX file of unsigned bytes with " + std::to_string(rank) +
                             " dimension(s): magic number " + hex32(magic) + ", expected " + hex32(expected));

  IdxArray array;
  std::int64_t item_size = 1;
  for (int d = 0; d < rank; ++d) {
    std::uint8_t size_bytes[4];
    if (file.read(size_bytes, 4) != 4) throw std::runtime_error("'" + path + "' is truncated inside its header");
    array.dims.push_back(big_endian32(size_bytes));
    if (d > 0 && array.dims.back() == 0)
      throw std::runtime_error("'" + path + "' is corrupt: its header gives dimension " + std::to_string(d) +
                               " a size of 0");
    if (d > 0) item_size *= array.dims.back();
  }
  const std::int64_t in_file = array.items_in_file = array.dims[0];
  const std::int64_t items = max_items >= 0 ? std::min(max_items, in_file) : in_file;
  array.dims[0] = items;
  // Read in chunks, growing the array as data arrives: a corrupt header that promises
  // terabytes fails as truncated after the data there is, not as an allocation failure.
  constexpr std::int64_t kChunk = std::int64_t{64} << 20;
  const std::int64_t want = items * item_size;
  std::int64_t got = 0;
  while (got < want) {
    const std::int64_t chunk = std::min(kChunk, want - got);
    array.bytes.resize(static_cast<std::size_t>(got + chunk));
    const auto read = static_cast<std::int64_t>(file.read(array.bytes.data() + got, static_cast<std::size_t>(chunk)));
    got += read;
    if (read != chunk)
      throw std::runtime_error("'" + path + "' is truncated: its header promises " + std::to_string(in_file) +
                               " items of " + std::to_string(item_size) + " bytes, but the data ends after " +
                               std::to_string(got) + " bytes");
  }
  if (max_items < 0) {
    std::uint8_t extra;
    if (file.read(&extra, 1) != 0)
      throw std::runtime_error("'" + path + "' has bytes after the " + std::to_string(in_file) +
                               " items its header announces (wrong or concatenated file?)");
  }
  return array;
}

}  // namespace tessera::data
