#include "models/sample_order.hpp"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace tessera::models {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, one multiply-xorshift output.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by rejection, so no index is favoured.
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    std::uint64_t x;
    do x = next();
    while (x >= limit);
    return x % bound;
  }
};

}  // namespace

SampleOrder::SampleOrder(std::int64_t samples, std::int64_t batch, std::uint64_t seed)
    : samples_(samples), batch_(batch), batches_per_epoch_(batch > 0 ? samples / batch : 0), seed_(seed) {
  if (batch < 1) throw std::invalid_argument("the batch size must be at least 1, got " + std::to_string(batch));
  if (batches_per_epoch_ < 1)
    throw std::invalid_argument("a global batch of " + std::to_string(batch) + " needs at least that many samples; the data has " +
                                std::to_string(samples));
}

std::vector<std::int64_t> SampleOrder::permutation(std::int64_t samples, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(samples));
  std::iota(order.begin(), order.end(), 0);
  SplitMix64 rng{seed * 0x100000001b3ULL ^ static_cast<std::uint64_t>(epoch) * 0x9e3779b97f4a7c15ULL};
  for (std::int64_t i = samples - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)], order[rng.below(static_cast<std::uint64_t>(i) + 1)]);
  return order;
}

std::vector<std::int64_t> SampleOrder::rows(std::int64_t step) {
  if (step < 1) throw std::invalid_argument("steps count from 1, got " + std::to_string(step));
  const std::int64_t epoch = epoch_of(step);
  if (epoch != cached_epoch_) order_ = permutation(samples_, seed_, epoch), cached_epoch_ = epoch;
  const auto first = order_.begin() + ((step - 1) % batches_per_epoch_) * batch_;
  return {first, first + batch_};
}

std::vector<std::vector<std::int64_t>> evaluation_batches(std::int64_t samples, std::int64_t batch) {
  if (batch < 1) throw std::invalid_argument("the batch size must be at least 1, got " + std::to_string(batch));
  std::vector<std::vector<std::int64_t>> batches;
  for (std::int64_t first = 0; first < samples; first += batch) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(batch), -1);
    for (std::int64_t i = 0; i < batch && first + i < samples; ++i) rows[static_cast<std::size_t>(i)] = first + i;
    batches.push_back(std::move(rows));
  }
  return batches;
}

}  // namespace tessera::models
