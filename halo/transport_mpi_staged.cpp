#include "halo/transport_mpi_staged.hpp"

#include <algorithm>

namespace tessera::halo {
namespace {

// Messages sit back to back in the exchange's buffer: one copy covers all of them.
std::size_t span_bytes(std::span<const Envelope> messages) {
  std::size_t end = 0;
  for (const Envelope& m : messages) end = std::max(end, m.offset + m.bytes);
  return end;
}

}  // namespace

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

std::byte* PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return data_;
  if (data_) check_cuda(cudaFreeHost(data_), "cudaFreeHost");
  data_ = nullptr;
  capacity_ = 0;
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, bytes), "cudaMallocHost");
  data_ = static_cast<std::byte*>(p);
  capacity_ = bytes;
  return data_;
}

MpiStaged::MpiStaged(MPI_Comm comm) : mpi_(comm) {}

MpiStaged::~MpiStaged() = default;

void MpiStaged::post_receives(std::byte* buffer, std::span<const Envelope> messages) {
  device_receive_ = buffer;
  receive_bytes_ = span_bytes(messages);
  mpi_.post_receives(host_receive_.reserve(receive_bytes_), messages);
}

void MpiStaged::post_sends(const std::byte* buffer, std::span<const Envelope> messages) {
  const std::size_t bytes = span_bytes(messages);
  std::byte* host = host_send_.reserve(bytes);
  if (bytes > 0) {
    check_cuda(cudaMemcpyAsync(host, buffer, bytes, cudaMemcpyDeviceToHost, stream_.get()), "staging sends");
    stream_.synchronize();
  }
  mpi_.post_sends(host, messages);
}

void MpiStaged::wait() {
  mpi_.wait();
  if (receive_bytes_ > 0) {
    check_cuda(cudaMemcpyAsync(device_receive_, host_receive_.reserve(receive_bytes_), receive_bytes_,
                               cudaMemcpyHostToDevice, stream_.get()),
               "staging receives");
    stream_.synchronize();
  }
  receive_bytes_ = 0;
}

}  // namespace tessera::halo
