#pragma once
// GradientBuckets: the gradient reduction of reduce_gradients (grad_reduce.hpp) overlapped
// with the backward pass, as PyTorch DDP's buckets. Backward runs the layers last to first;
// once a layer is done its parameters' gradients are final, so the trainer hands them to
// ready() and the layers before it keep computing. Ready gradients are packed into a
// bucket; a full bucket (>= bucket_bytes) is reduced by a non-blocking MPI_Iallreduce at
// once, and finish() sends the partial ones, waits, and unpacks.
//
// The same sharing rule as reduce_gradients: replicated parameters over the whole grid,
// tiled parameters and head replicas over the sample group; each group has its own
// buckets. Every rank calls ready() with the same parameters in the same order (the
// backward order is the model's), which keeps the collectives matched.
//
// MPI progresses a non-blocking collective inside other MPI calls, so the reduction moves
// while later layers exchange their halos and while finish() waits. Device gradients are
// staged through a host copy of each bucket, as in reduce_gradients.

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"
#include "layers/fused_bucket.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
class GradientBuckets {
 public:
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{4} << 20;

  explicit GradientBuckets(const ProcessGrid& grid, std::size_t bucket_bytes = kDefaultBucketBytes)
      : grid_(&grid), bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(T))) {
    whole_.reduce = grid.size() > 1;
    whole_.comm = grid.comm();
    samples_.reduce = grid.dims()[0] > 1;
    samples_.comm = grid.sample_comm();
  }
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;
  ~GradientBuckets() {
    // An exception between ready() and finish() must not leave requests behind.
    for (Stream* s : {&whole_, &samples_})
      for (std::size_t i = 0; i < s->launched; ++i)
        if (s->buckets[i].request != MPI_REQUEST_NULL) MPI_Wait(&s->buckets[i].request, MPI_STATUS_IGNORE);
  }

  // p's gradient is final on this rank: reduce it with its group.
  void ready(Parameter<T>* p) {
    Stream& s = reduces_over_grid(*p, *grid_) ? whole_ : samples_;
    if (!s.reduce) return;
    s.pending.push_back(p);
    s.pending_elements += p->grad.extent(0);
    if (s.pending_elements >= bucket_elements_) launch(s);
  }

  // Sends what is left, waits for every bucket and writes the sums back into the gradients.
  // Returns the seconds spent waiting here: the reduction time backward did not hide.
  // Afterwards the object is ready for the next step's ready() calls.
  double finish() {
    for (Stream* s : {&whole_, &samples_})
      if (!s->pending.empty()) launch(*s);
    const double start = MPI_Wtime();
    for (Stream* s : {&whole_, &samples_}) {
      for (std::size_t i = 0; i < s->launched; ++i) {
        Bucket& b = s->buckets[i];
        MPI_Wait(&b.request, MPI_STATUS_IGNORE);
        b.fused.unpack();
      }
      s->launched = 0;
    }
    return MPI_Wtime() - start;
  }

 private:
  struct Bucket {
    FusedBucket<T> fused;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  // Buckets are kept from step to step: the k-th bucket a step launches holds the same
  // parameters every step (every step calls ready() in the model's backward order), so its
  // buffers are allocated once (fused_bucket.hpp).
  struct Stream {
    bool reduce = false;
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<Parameter<T>*> pending;
    std::size_t pending_elements = 0;
    std::vector<Bucket> buckets;
    std::size_t launched = 0;  // buckets[0, launched) are in flight
  };

  void launch(Stream& s) {
    if (s.launched == s.buckets.size()) s.buckets.emplace_back();
    Bucket& b = s.buckets[s.launched];
    const auto [data, count] = b.fused.pack(s.pending);
    MPI_Iallreduce(MPI_IN_PLACE, data, count, mpi_datatype<T>(), MPI_SUM, s.comm, &b.request);
    ++s.launched;
    s.pending.clear();
    s.pending_elements = 0;
  }

  const ProcessGrid* grid_;
  std::size_t bucket_elements_;
  Stream whole_, samples_;
};

}  // namespace tessera::layers
