#pragma once
// Memory shared by liveness: every array a pass needs is a request with a lifetime (the
// first and last step of the pass that touch it), a size and a kind. Requests of one kind
// are laid out in one block, each at an offset of its own, and two whose lifetimes overlap
// never overlap in memory; the others may. Each array keeps its own shape and halo there.
// Planned once, when a model is built: the pass itself allocates nothing. Graph
// (models/graph.hpp) lays out its activations, their gradients and gradient-sum scratch
// arrays this way.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::models {

struct BufferRequest {
  std::size_t kind = 0;    // requests of equal kind share a block
  std::size_t first = 0;   // first step that writes or reads it
  std::size_t last = 0;    // last step that reads it (inclusive)
  std::int64_t size = 1;   // elements
};

struct BlockLayout {
  std::vector<std::size_t> block;    // [request]: its block, numbered in order of first use
  std::vector<std::int64_t> offset;  // [request]: its first element in the block
  std::vector<std::int64_t> size;    // [block]: elements
};

// Greedy by size: the requests are taken largest first (ties: by start, then in order), and
// each goes to the lowest offset, a multiple of `alignment`, where it meets no request of
// its block already placed whose lifetime overlaps its own. Requests of one size take
// turns in slots (as many as are alive at once); of mixed sizes, the block is usually
// within a few percent of the most elements alive at once (peak_alive), its lower bound.
BlockLayout lay_out_blocks(const std::vector<BufferRequest>& requests, std::int64_t alignment = 1);

// The most elements of requests of `kind` alive at any one step.
std::int64_t peak_alive(const std::vector<BufferRequest>& requests, std::size_t kind);

}  // namespace tessera::models
