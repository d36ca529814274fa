#include "distarray/box_pack.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace tessera {

PackLayout PackLayout::end_to_end(std::vector<Box> boxes) {
  PackLayout layout;
  layout.boxes.reserve(boxes.size());
  for (const Box& box : boxes) {
    layout.boxes.push_back({box, layout.total});
    layout.total += box.size();
  }
  return layout;
}

int mpi_count(std::int64_t elements) {
  if (elements > INT_MAX)
    throw std::overflow_error("tessera: a message of " + std::to_string(elements) +
                              " elements exceeds MPI's int count; use a finer process grid");
  return static_cast<int>(elements);
}

MpiCounts mpi_counts(const PackLayout& layout) {
  MpiCounts result;
  mpi_count(layout.total);  // the last displacement must fit as well as each count
  result.counts.reserve(layout.boxes.size());
  result.displs.reserve(layout.boxes.size());
  for (const BoxInBuffer& b : layout.boxes) {
    result.counts.push_back(static_cast<int>(b.box.size()));
    result.displs.push_back(static_cast<int>(b.buffer_offset));
  }
  return result;
}

}  // namespace tessera
