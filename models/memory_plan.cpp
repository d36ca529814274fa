#include "models/memory_plan.hpp"

#include <algorithm>
#include <new>
#include <map>
#include <numeric>

#include "distarray/node_memory.hpp"
#include "models/rank_agreement.hpp"

namespace tessera::models {
namespace {

// "layer 0 (conv(out=4)) weight+grad 400000000x1x3x3 (26.8 GiB)" for the three largest.
std::string largest_text(const MemoryPlan& plan) {
  std::string text;
  for (const MemoryItem& item : plan.largest(3))
    text += (text.empty() ? "" : ", ") + item.what + " " + item.shape + " (" + format_bytes(item.bytes) + ")";
  return text;
}

int rank_of(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

}  // namespace

void MemoryPlan::add(std::string what, std::string shape, std::int64_t bytes, MemoryUse use, std::string precision) {
  items_.push_back({std::move(what), std::move(shape), bytes, use, std::move(precision)});
}

std::vector<std::pair<std::string, std::int64_t>> MemoryPlan::by_precision() const {
  std::map<std::string, std::int64_t> sums;
  for (const MemoryItem& item : items_) sums[item.precision] += item.bytes;
  return {sums.begin(), sums.end()};
}

std::int64_t MemoryPlan::total() const {
  return std::accumulate(items_.begin(), items_.end(), std::int64_t{0},
                         [](std::int64_t sum, const MemoryItem& item) { return sum + item.bytes; });
}

std::int64_t MemoryPlan::total(MemoryUse use) const {
  std::int64_t sum = 0;
  for (const MemoryItem& item : items_)
    if (item.use == use) sum += item.bytes;
  return sum;
}

std::vector<MemoryItem> MemoryPlan::largest(std::size_t count) const {
  std::vector<MemoryItem> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  sorted.resize(std::min(count, sorted.size()));
  return sorted;
}

std::optional<MemoryBudget> memory_budget(MPI_Comm comm, std::optional<std::int64_t> limit_bytes) {
  if (limit_bytes) return MemoryBudget{*limit_bytes, "--memory-limit"};
  const std::optional<MemoryShare> share = rank_memory_share(comm);
  if (!share) return std::nullopt;
  return MemoryBudget{share->bytes, share->source};
}

void check_memory(const MemoryPlan& plan, const std::optional<MemoryBudget>& budget, MPI_Comm comm) {
  std::string error;
  if (budget && plan.total() > budget->bytes)
    error = "the model does not fit: rank " + std::to_string(rank_of(comm)) + " needs " + format_bytes(plan.total()) +
            " but may use " + format_bytes(budget->bytes) + " (" + budget->source + "); largest: " + largest_text(plan) +
            " (use more ranks, a smaller batch or model, or set --memory-limit)";
  const std::string agreed = agreed_error(comm, error);
  if (!agreed.empty()) throw MemoryExceeded(agreed);
}

std::optional<std::string> failed_allocation(const std::exception& e) {
  const std::string what = e.what();
  if (what.rfind("Kokkos failed to allocate memory", 0) == 0) {
    // ...for label "conv.weight".  Allocation using MemorySpace named "Host" failed with the
    // following error:  Allocation of size 53.64 G failed, likely due to insufficient memory. ...
    auto between = [&](const std::string& open, const std::string& close) -> std::string {
      const auto from = what.find(open);
      if (from == std::string::npos) return "";
      const auto to = what.find(close, from + open.size());
      return to == std::string::npos ? "" : what.substr(from + open.size(), to - from - open.size());
    };
    const std::string label = between("label \"", "\""), space = between("MemorySpace named \"", "\""),
                      size = between("Allocation of size ", " failed");
    return "Kokkos could not allocate \"" + label + "\" (" + size + "B in " + space + " memory)";
  }
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "an allocation failed (" + what.substr(0, what.find('\n')) + ")";
  return std::nullopt;
}

std::string allocation_failure(const std::string& what_failed, const MemoryPlan& plan,
                               const std::optional<MemoryBudget>& budget) {
  std::string text = "out of memory: " + what_failed + "; the planned tensors need " + format_bytes(plan.total());
  if (budget) text += " of the " + format_bytes(budget->bytes) + " this rank may use (" + budget->source + ")";
  if (!plan.items().empty()) text += "; largest: " + largest_text(plan);
  return text;
}

}  // namespace tessera::models
