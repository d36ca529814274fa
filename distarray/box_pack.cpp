#include "distarray/box_pack.hpp"

#include <climits>
#include <string>
#include <utility>

namespace tessera {

PackLayout PackLayout::end_to_end(std::vector<Box> boxes) {
  PackLayout layout;
  layout.offsets.reserve(boxes.size());
  for (const Box& box : boxes) {
    layout.offsets.push_back(layout.total);
    layout.total += box.size();
  }
  layout.boxes = std::move(boxes);
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
  for (std::size_t i = 0; i < layout.boxes.size(); ++i) {
    result.counts.push_back(static_cast<int>(layout.boxes[i].size()));
    result.displs.push_back(static_cast<int>(layout.offsets[i]));
  }
  return result;
}

}  // namespace tessera
