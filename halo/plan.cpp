#include "halo/plan.hpp"

#include <algorithm>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace tessera::halo {
namespace {

const char* const kDimNames[kDims] = {"N", "C", "H", "W"};

void check_window_widths(const Distribution& dist, int rank, const Box& window) {
  if (window.empty()) return;  // a rank that needs nothing
  const Box owned = dist.owned_box(rank);
  const Shape4& extent = dist.global_shape();
  for (int d = 0; d < kDims; ++d) {
    const std::int64_t below = owned.lo[d] - window.lo[d], above = window.hi[d] - owned.hi[d];
    if (below <= extent[d] && above <= extent[d]) continue;
    std::ostringstream msg;
    msg << "halo plan: rank " << rank << "'s window " << window << " reaches " << std::max(below, above)
        << " cells past its owned box " << owned << " in " << kDimNames[d]
        << ", wider than the whole image there (" << extent[d] << " cells, image " << dist.describe() << ")";
    throw std::invalid_argument(msg.str());
  }
}

// A small most-recently-used list: a model holds a handful of distinct windows, and a
// linear scan over them costs nothing next to building an exchange.
struct PlanCache {
  static constexpr std::size_t kCapacity = 64;
  std::mutex mutex;
  std::vector<std::shared_ptr<const Plan>> plans;  // most recently used last
};

PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

}  // namespace

std::vector<Box> subtract(const Box& a, const Box& b) {
  const Box overlap = a.intersect(b);
  if (overlap.empty()) return a.empty() ? std::vector<Box>{} : std::vector<Box>{a};
  // Peel a slab off each side of `rest` in turn; what remains at the end is the overlap.
  std::vector<Box> pieces;
  Box rest = a;
  for (int d = 0; d < kDims; ++d) {
    if (rest.lo[d] < overlap.lo[d]) {
      Box slab = rest;
      slab.hi[d] = overlap.lo[d];
      pieces.push_back(slab);
      rest.lo[d] = overlap.lo[d];
    }
    if (overlap.hi[d] < rest.hi[d]) {
      Box slab = rest;
      slab.lo[d] = overlap.hi[d];
      pieces.push_back(slab);
      rest.hi[d] = overlap.hi[d];
    }
  }
  return pieces;
}

Plan::Plan(const Distribution& dist, int rank, std::vector<Box> windows)
    : dist_(dist), rank_(rank), windows_(std::move(windows)), owned_(dist.owned_box(rank)) {
  if (windows_.size() != static_cast<std::size_t>(dist_.ranks()))
    throw std::invalid_argument("halo plan: " + std::to_string(windows_.size()) + " windows for " +
                                std::to_string(dist_.ranks()) + " ranks");
  for (int r = 0; r < dist_.ranks(); ++r) check_window_widths(dist_, r, windows_[static_cast<std::size_t>(r)]);

  for (int peer : dist_.owners(window())) {
    if (peer == rank_) continue;
    receives_.push_back({peer, dist_.owned_box(peer).intersect(window())});
  }
  // Who needs my cells is not invertible from my window alone; one pass over every rank's
  // window is O(ranks) box arithmetic, done once per cached plan.
  for (int peer = 0; peer < dist_.ranks(); ++peer) {
    if (peer == rank_) continue;
    const Box box = owned_.intersect(windows_[static_cast<std::size_t>(peer)]);
    if (!box.empty()) sends_.push_back({peer, box});
  }
  boundary_ = subtract(window(), dist_.global_box());
}

std::vector<Box> Plan::windows_of(const Distribution& dist, const WindowRule& rule) {
  std::vector<Box> windows;
  windows.reserve(static_cast<std::size_t>(dist.ranks()));
  for (int r = 0; r < dist.ranks(); ++r) windows.push_back(rule(dist, r));
  return windows;
}

std::shared_ptr<const Plan> Plan::cached(const Distribution& dist, const WindowRule& rule, int rank) {
  std::vector<Box> windows = windows_of(dist, rule);
  PlanCache& cache = plan_cache();
  {
    std::lock_guard lock(cache.mutex);
    auto& plans = cache.plans;
    auto hit = std::find_if(plans.begin(), plans.end(), [&](const auto& p) {
      return p->rank() == rank && p->distribution() == dist && p->windows() == windows;
    });
    if (hit != plans.end()) {
      std::rotate(hit, hit + 1, plans.end());
      return plans.back();
    }
  }
  auto plan = std::make_shared<const Plan>(dist, rank, std::move(windows));  // may throw; outside the lock
  std::lock_guard lock(cache.mutex);
  if (cache.plans.size() == PlanCache::kCapacity) cache.plans.erase(cache.plans.begin());
  cache.plans.push_back(plan);
  return plan;
}

std::size_t Plan::cache_size() {
  std::lock_guard lock(plan_cache().mutex);
  return plan_cache().plans.size();
}

void Plan::clear_cache() {
  std::lock_guard lock(plan_cache().mutex);
  plan_cache().plans.clear();
}

}  // namespace tessera::halo
