#pragma once
// Reads IDX files (the format of MNIST and Fashion-MNIST), gzip'd or plain: a big-endian
// header (two zero bytes, an element-type code, the number of dimensions, then one 32-bit
// size per dimension) followed by the elements in row-major order. Only unsigned-byte
// elements (type 0x08) are read; that is what the image and label files hold.
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::data {

struct IdxArray {
  std::vector<std::int64_t> dims;   // dims[0] counts the items read (images, labels)
  std::vector<std::uint8_t> bytes;  // those items, row-major
  std::int64_t items_in_file = 0;   // as the header says; more than dims[0] under a limit
};

// Reads an IDX file whose elements are unsigned bytes with `rank` dimensions. With
// `max_items` >= 0 only that many leading items are read (dims[0] says how many were);
// otherwise the whole file is read, and bytes after the last item are an error.
// A missing, truncated or mistyped file throws std::runtime_error naming the file.
IdxArray read_idx_ubyte(const std::string& path, int rank, std::int64_t max_items = -1);

// The magic number of an unsigned-byte IDX file with `rank` dimensions (0x00000801 ...).
std::uint32_t idx_ubyte_magic(int rank);

}  // namespace tessera::data
