#pragma once
// GradientBuckets: the gradient reduction of reduce_gradients (grad_reduce.hpp) overlapped
// with the backward pass, as PyTorch DDP's buckets. Backward runs the layers last to first;
// once a layer is done its parameters' gradients are final, so the trainer hands them to
// ready() and the layers before it keep computing. Ready gradients are packed into a
// bucket; a full bucket (>= bucket_bytes) starts its sum through the collectives seam
// (collectives.hpp: non-blocking MPI on the host, NCCL on its own stream on the device) at
// once, and finish() starts the partial ones, waits, and unpacks.
//
// The same rule as reduce_gradients (gradient_group.hpp): each group — the whole grid, the
// sample group, a group of another layout's grid (GradientGroups) — has its own buckets. Every rank calls ready() with the same parameters in
// the same order (the backward order is the model's), which keeps the collectives matched.
//
// MPI progresses a non-blocking collective inside other MPI calls, so the reduction moves
// while later layers exchange their halos and while finish() waits.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "distarray/process_grid.hpp"
#include "layers/collectives.hpp"
#include "layers/fused_bucket.hpp"
#include "layers/gradient_group.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
class GradientBuckets {
 public:
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{4} << 20;

  explicit GradientBuckets(const ProcessGrid& grid, std::size_t bucket_bytes = kDefaultBucketBytes)
      : bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(Compute<T>))), groups_(grid) {}
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;
  // An exception between ready() and finish() leaves sums in flight: groups_' collectives,
  // destroyed first (declared last), wait for them while the buckets' buffers are still alive.

  // p's gradient is final on this rank: reduce it with its group.
  void ready(Parameter<T>* p) {
    const std::size_t g = groups_.index_of(*p);
    if (!groups_.reduces(g)) return;
    if (g >= streams_.size()) streams_.resize(groups_.size());
    Stream& s = streams_[g];
    s.group = g;
    s.pending.push_back(p);
    s.pending_elements += p->grad.extent(0);
    if (s.pending_elements >= bucket_elements_) launch(s);
  }

  // Starts what is left, waits for every bucket and writes the sums back into the
  // gradients. Returns the seconds spent waiting here: the reduction time backward did not
  // hide. Afterwards the object is ready for the next step's ready() calls.
  double finish() {
    for (Stream& s : streams_)
      if (!s.pending.empty()) launch(s);
    const double start = MPI_Wtime();
    for (Stream& s : streams_) {
      for (std::size_t i = 0; i < s.launched; ++i) {
        Bucket& b = s.buckets[i];
        groups_.collectives(s.group).wait(b.pending);
        b.fused.unpack();
      }
      s.launched = 0;
    }
    return MPI_Wtime() - start;
  }

 private:
  struct Bucket {
    FusedBucket<T> fused;
    Collectives::Pending pending;
  };
  // Buckets are kept from step to step: the k-th bucket a step launches holds the same
  // parameters every step (every step calls ready() in the model's backward order), so its
  // buffer is allocated once (fused_bucket.hpp), as are the seam's slots.
  struct Stream {
    std::size_t group = 0;  // GradientGroups index
    std::vector<Parameter<T>*> pending;
    std::size_t pending_elements = 0;
    std::vector<Bucket> buckets;
    std::size_t launched = 0;  // buckets[0, launched) are in flight
  };

  void launch(Stream& s) {
    if (s.launched == s.buckets.size()) s.buckets.emplace_back();
    Bucket& b = s.buckets[s.launched];
    b.pending = b.fused.start_allreduce(s.pending, groups_.collectives(s.group), groups_.group(s.group));
    ++s.launched;
    s.pending.clear();
    s.pending_elements = 0;
  }

  std::size_t bucket_elements_;
  std::vector<Stream> streams_;  // [GradientGroups index]
  GradientGroups groups_;        // last: its collectives are destroyed first (see above)
};

}  // namespace tessera::layers
