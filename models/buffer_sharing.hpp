#pragma once
// Buffers shared by liveness: every array a pass needs is a request with a lifetime (the
// first and last step of the pass that touch it) and a kind (arrays of one kind — one
// grid and global shape — are interchangeable). Requests whose lifetimes do not overlap
// may use one buffer. Planned once, when a model is built: the pass itself allocates
// nothing. Graph (models/graph.hpp) plans its activation gradients and gradient-sum
// scratch arrays this way, and in a forward-only model its activations too.

#include <cstddef>
#include <vector>

namespace tessera::models {

struct BufferRequest {
  std::size_t kind = 0;    // requests of equal kind may share a buffer
  std::size_t first = 0;   // first step that writes or reads it
  std::size_t last = 0;    // last step that reads it (inclusive)
};

// The buffer of each request, numbered from 0 in order of first use. Requests are taken
// by start (ties: in order) and each goes to the lowest-numbered buffer of its kind that is
// free from its first step on, or to a new one: for lifetimes (intervals), this uses the
// fewest buffers of each kind — as many as the most requests of that kind alive at once.
std::vector<std::size_t> share_buffers(const std::vector<BufferRequest>& requests);

}  // namespace tessera::models
