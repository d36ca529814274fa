#pragma once
// Which samples make up each training step. The order is a pure function of (seed, epoch),
// the same on every rank and on every run, so a resumed run on any grid sees exactly the
// batches the uninterrupted run would have seen: nothing but the step count needs saving.
//
// Epoch e is a Fisher-Yates shuffle of 0..N-1 driven by SplitMix64 seeded with
// (seed, e) — chosen over std::shuffle because its output is specified (a Python script can
// reproduce it), where the standard library's distributions are not. Step s (from 1) takes
// batch (s-1) mod B of epoch (s-1) div B, B = floor(N / batch): a last partial batch is
// dropped, as PyTorch's DataLoader(drop_last=True), so every step has the global batch.

#include <cstdint>
#include <vector>

namespace tessera::models {

class SampleOrder {
 public:
  // Throws std::invalid_argument when batch < 1 or the data has fewer than `batch` samples.
  SampleOrder(std::int64_t samples, std::int64_t batch, std::uint64_t seed);

  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::int64_t epoch_of(std::int64_t step) const { return (step - 1) / batches_per_epoch_; }
  // The sample indices of step `step` (>= 1), in batch order.
  std::vector<std::int64_t> rows(std::int64_t step);

  // The permutation of epoch `epoch`.
  static std::vector<std::int64_t> permutation(std::int64_t samples, std::uint64_t seed, std::int64_t epoch);

 private:
  std::int64_t samples_, batch_, batches_per_epoch_;
  std::uint64_t seed_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> order_;
};

// Batches covering samples 0..N-1 in order for evaluation; the last is padded with -1
// (a row that counts for nothing: its label is ignored) up to `batch`.
std::vector<std::vector<std::int64_t>> evaluation_batches(std::int64_t samples, std::int64_t batch);

}  // namespace tessera::models
