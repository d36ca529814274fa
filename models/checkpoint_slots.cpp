#include "models/checkpoint_slots.hpp"

#include <functional>
#include <numeric>

#include "models/rank_agreement.hpp"

namespace tessera::models {

std::int64_t element_count(const Dims& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

std::string slot_problem(const TensorSlot& slot) {
  const std::string name = "slot '" + slot.dataset + "'";
  if (slot.dataset.empty() || slot.dataset[0] != '/') return name + " needs an absolute dataset name";
  if (slot.shape.empty()) return name + " has no dimensions";
  if (slot.offset.size() != slot.shape.size() || slot.extent.size() != slot.shape.size())
    return name + " has shape " + dims_text(slot.shape) + " but offset " + dims_text(slot.offset) + " and extent " +
           dims_text(slot.extent);
  for (std::size_t d = 0; d < slot.shape.size(); ++d)
    if (slot.offset[d] < 0 || slot.extent[d] < 0 || slot.offset[d] + slot.extent[d] > slot.shape[d])
      return name + ": the block " + dims_text(slot.extent) + " at " + dims_text(slot.offset) +
             " lies outside the shape " + dims_text(slot.shape);
  if (slot.sharing == layers::Sharing::replicated && slot.extent != slot.shape)
    return name + " is replicated but holds " + dims_text(slot.extent) + " of " + dims_text(slot.shape);
  if (static_cast<std::int64_t>(slot.values.extent(0)) != element_count(slot.extent))
    return name + " holds " + std::to_string(slot.values.extent(0)) + " values for a block of " +
           dims_text(slot.extent);
  return "";
}

void check_content(const CheckpointContent& content, MPI_Comm comm, const std::string& context) {
  std::string problem;
  for (const TensorSlot& slot : content.tensors)
    if (problem.empty()) problem = slot_problem(slot);
  for (const CounterSlot& counter : content.counters)
    if (problem.empty() && !counter.value) problem = "counter '" + counter.dataset + "' points nowhere";

  // The slots are visited in one collective sequence: every rank must list the same ones.
  const long long counts[2] = {static_cast<long long>(content.tensors.size()),
                               static_cast<long long>(content.counters.size())};
  long long lowest[2] = {}, highest[2] = {};
  MPI_Allreduce(counts, lowest, 2, MPI_LONG_LONG, MPI_MIN, comm);
  MPI_Allreduce(counts, highest, 2, MPI_LONG_LONG, MPI_MAX, comm);
  if (problem.empty() && (lowest[0] != highest[0] || lowest[1] != highest[1]))
    problem = "ranks list different numbers of slots";
  throw_if_any(comm, problem.empty() ? "" : context + ": " + problem);
}

}  // namespace tessera::models
