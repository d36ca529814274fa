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

#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "distarray/mpi_datatype.hpp"
#include "distarray/process_grid.hpp"
#include "layers/parameter.hpp"

namespace tessera::layers {

template <class T>
class GradientBuckets {
 public:
  static constexpr std::size_t kDefaultBucketBytes = std::size_t{4} << 20;

  explicit GradientBuckets(const ProcessGrid& grid, std::size_t bucket_bytes = kDefaultBucketBytes)
      : grid_(&grid), bucket_elements_(std::max<std::size_t>(1, bucket_bytes / sizeof(T))) {
    const bool spatially_split = grid.dims()[1] * grid.dims()[2] > 1;
    spatially_split_ = spatially_split;
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
      for (Bucket& b : s->in_flight)
        if (b.request != MPI_REQUEST_NULL) MPI_Wait(&b.request, MPI_STATUS_IGNORE);
  }

  // p's gradient is final on this rank: reduce it with its group.
  void ready(Parameter<T>* p) {
    const bool over_all = p->sharing == Sharing::replicated && !(p->head_replica && spatially_split_);
    Stream& s = over_all ? whole_ : samples_;
    if (!s.reduce) return;
    s.pending.push_back(p);
    s.pending_elements += p->grad.extent(0);
    if (s.pending_elements >= bucket_elements_) launch(s);
  }

  // Sends what is left, waits for every bucket and writes the sums back into the gradients.
  // Returns the seconds spent waiting here: the reduction time backward did not hide.
  double finish() {
    for (Stream* s : {&whole_, &samples_})
      if (!s->pending.empty()) launch(*s);
    const double start = MPI_Wtime();
    for (Stream* s : {&whole_, &samples_}) {
      for (Bucket& b : s->in_flight) {
        MPI_Wait(&b.request, MPI_STATUS_IGNORE);
        unpack(b);
      }
      s->in_flight.clear();
    }
    return MPI_Wtime() - start;
  }

 private:
  using Space = typename Parameter<T>::View::memory_space;
  struct Bucket {
    std::vector<Parameter<T>*> params;
    Kokkos::View<T*, Space> device;
    typename Kokkos::View<T*, Space>::HostMirror host;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct Stream {
    bool reduce = false;
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<Parameter<T>*> pending;
    std::size_t pending_elements = 0;
    std::vector<Bucket> in_flight;
  };

  void launch(Stream& s) {
    if (s.pending_elements > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error("GradientBuckets: more gradient elements than one MPI count holds");
    Bucket b;
    b.params = std::move(s.pending);
    b.device = Kokkos::View<T*, Space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::grad_bucket"),
                                       s.pending_elements);
    std::size_t at = 0;
    for (const Parameter<T>* p : b.params) {
      Kokkos::deep_copy(Kokkos::subview(b.device, std::make_pair(at, at + p->grad.extent(0))), p->grad);
      at += p->grad.extent(0);
    }
    b.host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b.device);
    MPI_Iallreduce(MPI_IN_PLACE, b.host.data(), static_cast<int>(s.pending_elements), mpi_datatype<T>(), MPI_SUM,
                   s.comm, &b.request);
    s.in_flight.push_back(std::move(b));
    s.pending.clear();
    s.pending_elements = 0;
  }

  static void unpack(Bucket& b) {
    Kokkos::deep_copy(b.device, b.host);
    std::size_t at = 0;
    for (const Parameter<T>* p : b.params) {
      Kokkos::deep_copy(p->grad, Kokkos::subview(b.device, std::make_pair(at, at + p->grad.extent(0))));
      at += p->grad.extent(0);
    }
  }

  const ProcessGrid* grid_;
  std::size_t bucket_elements_;
  bool spatially_split_ = false;
  Stream whole_, samples_;
};

}  // namespace tessera::layers
