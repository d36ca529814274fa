#include "models/buffer_sharing.hpp"

#include <algorithm>
#include <numeric>

namespace tessera::models {

std::vector<std::size_t> share_buffers(const std::vector<BufferRequest>& requests) {
  std::vector<std::size_t> by_start(requests.size());
  std::iota(by_start.begin(), by_start.end(), std::size_t{0});
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].first < requests[b].first; });
  struct Buffer {
    std::size_t kind, busy_until;
  };
  std::vector<Buffer> buffers;
  std::vector<std::size_t> assigned(requests.size());
  for (const std::size_t r : by_start) {
    const BufferRequest& q = requests[r];
    std::size_t b = 0;
    while (b < buffers.size() && (buffers[b].kind != q.kind || buffers[b].busy_until >= q.first)) ++b;
    if (b == buffers.size()) buffers.push_back({q.kind, q.last});
    buffers[b].busy_until = std::max(buffers[b].busy_until, q.last);
    assigned[r] = b;
  }
  // Renumber in order of first use, so that buffer 0 is the one the pass needs first.
  std::vector<std::size_t> number(buffers.size(), buffers.size());
  std::size_t next = 0;
  for (const std::size_t r : by_start)
    if (number[assigned[r]] == buffers.size()) number[assigned[r]] = next++;
  for (std::size_t& b : assigned) b = number[b];
  return assigned;
}

}  // namespace tessera::models
