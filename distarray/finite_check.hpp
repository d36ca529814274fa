#pragma once
// Refusing non-finite values where data and checkpoints are read (docs/data.md,
// docs/checkpoints.md): a scan of the host buffer a read has just filled, or one folded into
// a copy the reader makes anyway, and the one-line message that names the value's index in
// its dataset. Shared by tile I/O (distarray/tile_io.hpp), the data loader and checkpoint
// loading.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "distarray/hdf5_file.hpp"

namespace tessera {

struct NonFinite {
  Dims index;    // the element's index in its dataset, one entry per dimension
  double value;  // NaN or +-inf
};

// The position of the first NaN or +-inf in values[0, count); count when every value is
// finite. Runs at about memory speed (finite_check.cpp says how).
std::size_t first_non_finite(const float* values, std::size_t count);
std::size_t first_non_finite(const double* values, std::size_t count);

// Copies from[0, count) to `to` and returns first_non_finite(from, count): a copy a reader
// makes anyway checks the values at no measurable cost.
std::size_t copy_checking_finite(const float* from, float* to, std::size_t count);
std::size_t copy_checking_finite(const double* from, double* to, std::size_t count);

// The dataset index of element `position` of a row-major block of `extent` read at
// `offset`; block row i (the first dimension) is dataset row rows[i] when rows are given
// (a shuffled batch), offset[0] + i otherwise.
Dims block_element_index(std::size_t position, const Dims& offset, const Dims& extent,
                         const std::vector<std::int64_t>& rows = {});

// The first non-finite value of such a block; none for element types that cannot hold one.
template <class T>
std::optional<NonFinite> find_non_finite(const T* values, const Dims& offset, const Dims& extent,
                                         const std::vector<std::int64_t>& rows = {}) {
  if constexpr (!std::is_floating_point_v<T>) {
    return std::nullopt;
  } else {
    std::size_t count = 1;
    for (std::int64_t e : extent) count *= static_cast<std::size_t>(std::max<std::int64_t>(e, 0));
    const std::size_t at = first_non_finite(values, count);
    if (at == count) return std::nullopt;
    return NonFinite{block_element_index(at, offset, extent, rows), static_cast<double>(values[at])};
  }
}

// One line: "<source>: <dataset>[3,0,5,7] is nan (non-finite values are refused)", e.g.
// with source "data file 'train.h5'".
std::string non_finite_message(const std::string& source, const std::string& dataset, const NonFinite& found);

// "<dataset>[3,0,5,7]": one element of a dataset, as the messages above and other value
// checks of a read (checkpoint loading's negative variances) name it.
std::string element_text(const std::string& dataset, const Dims& index);

}  // namespace tessera
