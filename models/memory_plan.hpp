#pragma once
// MemoryPlan: what one rank will allocate for a run — each tensor with its owner and
// shape — worked out before anything is allocated (Sequential::memory_plan builds the
// layers without their storage), and checked against what the rank may use
// (distarray/node_memory.hpp). A model too large for the machine is then a one-line error
// with the figures, not a rank killed by the kernel halfway through its allocations.

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessera::models {

enum class MemoryUse { parameters, activations, other };

struct MemoryItem {
  std::string what;   // "layer 0 (conv(out=8,k=3)) weight and its gradient"
  std::string shape;  // "8x1x3x3"
  std::int64_t bytes = 0;
  MemoryUse use = MemoryUse::other;
  std::string precision = "fp32";  // of its elements: "fp32" or "bf16" (--precision bf16)
};

class MemoryPlan {
 public:
  void add(std::string what, std::string shape, std::int64_t bytes, MemoryUse use = MemoryUse::other,
           std::string precision = "fp32");
  const std::vector<MemoryItem>& items() const { return items_; }
  std::int64_t total() const;
  std::int64_t total(MemoryUse use) const;
  // Bytes per precision ("bf16", "fp32"), in name order.
  std::vector<std::pair<std::string, std::int64_t>> by_precision() const;
  // The parameters' elements on this rank (each counted once, whatever its precisions):
  // what an optimizer's fp32 state per parameter takes is state buffers x this x 4 bytes.
  void count_parameters(std::int64_t elements) { parameter_elements_ += elements; }
  std::int64_t parameter_elements() const { return parameter_elements_; }
  // The `count` largest items, largest first.
  std::vector<MemoryItem> largest(std::size_t count) const;

 private:
  std::vector<MemoryItem> items_;
  std::int64_t parameter_elements_ = 0;
};

// A run needs more memory than a rank may use: a bad configuration (model, grid or batch
// for this machine), found before any allocation.
struct MemoryExceeded : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// What each rank may use: `limit_bytes` when given (--memory-limit), else the detected
// share (node_memory.hpp). Collective. nullopt when neither is known.
struct MemoryBudget {
  std::int64_t bytes = 0;
  std::string source;
};
std::optional<MemoryBudget> memory_budget(MPI_Comm comm, std::optional<std::int64_t> limit_bytes);

// Throws MemoryExceeded on every rank of `comm` when any rank's plan exceeds its budget
// (the message is the lowest such rank's): bytes needed, bytes available and where that
// figure came from, and the largest tensors. Collective.
void check_memory(const MemoryPlan& plan, const std::optional<MemoryBudget>& budget, MPI_Comm comm);

// What failed, in a few words, when `e` reports a failed allocation: std::bad_alloc, or the
// std::runtime_error Kokkos 3.x turns its RawMemoryAllocationFailure into (a multi-line
// text naming the View's label and the size). nullopt for any other error.
std::optional<std::string> failed_allocation(const std::exception& e);

// The one-line message for an allocation that failed anyway (a library workspace, or
// memory taken by others since the check): what failed, and the plan's figures.
std::string allocation_failure(const std::string& what_failed, const MemoryPlan& plan,
                               const std::optional<MemoryBudget>& budget);

}  // namespace tessera::models
