#pragma once
// Writes one Tessera data file (docs/data.md): /images uint8 (N,C,H,W), and optionally
// /labels int64 (N) and /classes (the class names, comma-separated).
#include <cstdint>
#include <string>
#include <vector>

#include "data/atomic_output.hpp"

namespace tessera::data {

struct DataSet {
  std::vector<std::int64_t> image_dims;  // N, C, H, W
  std::vector<std::uint8_t> images;      // row-major over image_dims
  std::vector<std::int64_t> labels;      // empty, or one per image
  std::string classes;                   // empty, or "name0,name1,..."
};

// Writes `data` into `out`'s temporary file through HDF5 (one process: MPI_COMM_SELF).
// MPI must be initialized. The caller commits `out` once every file of a conversion is written.
void write_data_file(const DataSet& data, const AtomicOutput& out);

}  // namespace tessera::data
