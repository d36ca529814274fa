#pragma once
// FusedBucket: the flat buffer a group of gradients is packed into for ONE allreduce
// (tensor fusion, as Horovod and PyTorch DDP), shared by the fused reduction
// (grad_reduce.hpp) and GradientBuckets (grad_buckets.hpp). The buffer lives where the
// gradients do; the collectives seam (collectives.hpp) sums it there — NCCL on the device,
// MPI on the host, MPI through the seam's host staging where NCCL cannot run.
//
// The buffer is kept between steps: a training step packs the same parameters every time,
// so it is allocated on the first pack and reallocated only when the parameters' total
// length changes.
//
// Gradients are Compute<T> (fp32 for a bf16 model: layers/parameter.hpp), and so is the
// buffer: a bf16 model's gradients are summed over ranks in fp32, the same bytes as an fp32
// model's (docs/training.md, "Mixed precision" says why).

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "layers/collectives.hpp"
#include "layers/gradient_group.hpp"
#include "layers/parameter.hpp"
#include "layers/scratch.hpp"

namespace tessera::layers {

template <class T>
class FusedBucket {
 public:
  using Space = typename Parameter<T>::View::memory_space;
  using G = Compute<T>;  // the gradients' element type

  // Copies the gradients of `params` into the buffer, one after the other; returns the
  // buffer's elements (empty for no elements). Remembers `params` for unpack().
  std::pair<G*, std::size_t> pack(const std::vector<Parameter<T>*>& params) {
    if (params != params_) params_ = params;
    std::size_t total = 0;
    for (const Parameter<T>* p : params_) total += p->grad.extent(0);
    if (total > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::length_error("gradient reduction: more gradient elements than one MPI count holds");
    if (total == 0) return {nullptr, 0};
    sized(buffer_, "tessera::grad_bucket", total);
    std::size_t at = 0;
    for (const Parameter<T>* p : params_) Kokkos::deep_copy(slice(at, *p), p->grad), at += p->grad.extent(0);
    return {buffer_.data(), total};
  }

  // The buffer (as the sum left it) back into the gradients of the latest pack's parameters.
  void unpack() {
    if (params_.empty() || buffer_.extent(0) == 0) return;
    std::size_t at = 0;
    for (const Parameter<T>* p : params_) Kokkos::deep_copy(p->grad, slice(at, *p)), at += p->grad.extent(0);
  }

  // pack and start the sum over `group`; the caller waits on the handle, then unpack()s.
  Collectives::Pending start_allreduce(const std::vector<Parameter<T>*>& params, Collectives& collectives,
                                       SumGroup group) {
    const auto [data, count] = pack(params);
    return collectives.start_allreduce_sum(data, count, group, memory_of<Space>());
  }

  // pack, one blocking sum over `group`, unpack.
  void allreduce(const std::vector<Parameter<T>*>& params, Collectives& collectives, SumGroup group) {
    const auto [data, count] = pack(params);
    if (count == 0) return;
    collectives.allreduce_sum(data, count, group, memory_of<Space>());
    unpack();
  }

 private:
  auto slice(std::size_t at, const Parameter<T>& p) const {
    return Kokkos::subview(buffer_, std::make_pair(at, at + p.grad.extent(0)));
  }

  std::vector<Parameter<T>*> params_;
  Kokkos::View<G*, Space> buffer_;
};

}  // namespace tessera::layers
