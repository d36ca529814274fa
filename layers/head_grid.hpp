#pragma once
// The head grid: where the (N, K, 1, 1) results of a reduction over the image live —
// Linear's output and GlobalAvgPool's — and the check that an array is such a result.

#include <memory>
#include <stdexcept>
#include <string>

#include "distarray/process_grid.hpp"
#include "layers/layer.hpp"

namespace tessera::layers {

// The sample group of `grid` (ranks at the same spatial position) arranged as {pn, 1, 1}.
// Each of the ph*pw spatial positions gets its own head grid, and each holds every sample
// once, so a loss that reduces over its head grid's comm (cross_entropy_loss) counts every
// sample exactly once while the ph*pw replicas compute the same value. The samples a rank
// holds are the same as on `grid` (the same balanced split of N over pn). Collective over
// `grid`. A head grid's own head grid has the same layout (a head-grid input of Linear).
inline std::unique_ptr<ProcessGrid> make_head_grid(const ProcessGrid& grid) {
  return std::make_unique<ProcessGrid>(grid.sample_comm(), GridDims{grid.dims()[0], 1, 1});
}

// Whether a grid has the layout of a head grid ({pn, 1, 1}): every rank holds whole
// samples. (A tiled grid with ph = pw = 1 has it too; there the two coincide.)
inline bool is_head_layout(const ProcessGrid& grid) { return grid.dims()[1] == 1 && grid.dims()[2] == 1; }

// Throws std::invalid_argument, prefixed by `who` and naming `name`, unless `head` has
// global shape `want` on a grid laid out as make_head_grid(input's grid) and holds the
// same samples as `input`.
template <class T>
void require_head_output(const Tensor<T>& input, const Tensor<T>& head, const Shape4& want, const std::string& who,
                         const char* name) {
  const Box& t = input.owned_box();
  const Box& h = head.owned_box();
  const bool head_grid = head.grid().dims() == GridDims{input.grid().dims()[0], 1, 1};
  if (head.distribution().global_shape() == want && head_grid && h.lo[N] == t.lo[N] && h.hi[N] == t.hi[N]) return;
  throw std::invalid_argument(who + ": " + name + " is " + head.distribution().describe() + " but it must be (N, " +
                              std::to_string(want[C]) +
                              ", 1, 1) on make_head_grid() of the input's grid, holding the same samples");
}

}  // namespace tessera::layers
