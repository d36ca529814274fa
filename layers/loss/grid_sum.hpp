#pragma once
// One allreduce per loss evaluation, through the collectives seam (layers/collectives.hpp,
// host memory: MPI in place), carries both the partial sums and the verdict on the inputs. A rank that found bad input must not throw alone — the others would wait in
// the collective forever — so every rank joins the sum and all throw together afterwards.

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"

namespace tessera::layers::detail {

// Partial sums of one rank and, when non-empty, what is wrong with its inputs.
template <std::size_t Count>
struct LocalPart {
  std::array<double, Count> sums{};
  std::string problem;
};

// The sums over every rank of the grid (every cell is owned by exactly one rank, so this
// counts each cell once). Throws std::invalid_argument on every rank if any rank reported
// a problem: the rank's own message, or a pointer to the rank that has one.
template <std::size_t Count>
std::array<double, Count> sum_over_grid(const ProcessGrid& grid, const LocalPart<Count>& part, const char* what) {
  std::array<double, Count + 1> buffer{};
  for (std::size_t i = 0; i < Count; ++i) buffer[i] = part.sums[i];
  buffer[Count] = part.problem.empty() ? 0.0 : 1.0;
  Collectives(grid).allreduce_sum(buffer.data(), buffer.size(), SumGroup::all);  // host: nothing kept, nothing allocated
  if (!part.problem.empty()) throw std::invalid_argument(part.problem);
  if (buffer[Count] > 0)
    throw std::invalid_argument(std::string(what) + ": invalid input on another rank (see its message)");
  std::array<double, Count> sums{};
  for (std::size_t i = 0; i < Count; ++i) sums[i] = buffer[i];
  return sums;
}

}  // namespace tessera::layers::detail
