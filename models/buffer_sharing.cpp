#include "models/buffer_sharing.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

namespace tessera::models {
namespace {

bool overlap(const BufferRequest& a, const BufferRequest& b) { return a.first <= b.last && b.first <= a.last; }

std::int64_t round_up(std::int64_t n, std::int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

BlockLayout lay_out_blocks(const std::vector<BufferRequest>& requests, std::int64_t alignment) {
  const std::size_t count = requests.size();
  BlockLayout layout{std::vector<std::size_t>(count), std::vector<std::int64_t>(count, 0), {}};
  // Blocks by kind, numbered in order of first use.
  std::vector<std::size_t> by_start(count);
  std::iota(by_start.begin(), by_start.end(), std::size_t{0});
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].first < requests[b].first; });
  std::map<std::size_t, std::size_t> block_of_kind;
  for (const std::size_t r : by_start)
    layout.block[r] = block_of_kind.try_emplace(requests[r].kind, block_of_kind.size()).first->second;
  layout.size.assign(block_of_kind.size(), 0);

  std::vector<std::size_t> by_size = by_start;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].size > requests[b].size; });
  std::vector<std::vector<std::size_t>> placed(layout.size.size());  // [block]: requests, by offset
  std::vector<std::pair<std::int64_t, std::int64_t>> taken;          // [begin, end) of overlapping ones
  for (const std::size_t r : by_size) {
    const BufferRequest& q = requests[r];
    std::vector<std::size_t>& in_block = placed[layout.block[r]];
    taken.clear();
    for (const std::size_t other : in_block)
      if (overlap(q, requests[other]))
        taken.emplace_back(layout.offset[other], layout.offset[other] + requests[other].size);
    std::int64_t at = 0;  // taken is in offset order: the first gap that holds q
    for (const auto& [begin, end] : taken) {
      if (at + q.size <= begin) break;
      at = std::max(at, round_up(end, alignment));
    }
    layout.offset[r] = at;
    layout.size[layout.block[r]] = std::max(layout.size[layout.block[r]], at + q.size);
    in_block.insert(std::upper_bound(in_block.begin(), in_block.end(), at,
                                     [&](std::int64_t o, std::size_t p) { return o < layout.offset[p]; }),
                    r);
  }
  return layout;
}

std::int64_t peak_alive(const std::vector<BufferRequest>& requests, std::size_t kind) {
  std::map<std::size_t, std::int64_t> change;  // step -> elements starting (+) or ended before it (-)
  for (const BufferRequest& q : requests)
    if (q.kind == kind) change[q.first] += q.size, change[q.last + 1] -= q.size;
  std::int64_t alive = 0, peak = 0;
  for (const auto& [step, delta] : change) peak = std::max(peak, alive += delta);
  return peak;
}

}  // namespace tessera::models
