#include "layers/conv_algorithm_choice.hpp"

#include <algorithm>
#include <stdexcept>

namespace tessera::layers {
namespace {

bool acceptable(const AlgorithmCandidate& c, std::size_t cap) {
  return c.supported && c.deterministic && !c.transform && c.workspace <= cap;
}

}  // namespace

std::vector<AlgorithmCandidate> acceptable_algorithms(std::span<const AlgorithmCandidate> ranked,
                                                      std::size_t workspace_cap, std::optional<int> preferred) {
  std::vector<AlgorithmCandidate> order;
  for (const AlgorithmCandidate& c : ranked)
    if (acceptable(c, workspace_cap)) order.push_back(c);
  if (preferred) {
    const auto it = std::find_if(order.begin(), order.end(), [&](const auto& c) { return c.id == *preferred; });
    if (it != order.end()) std::rotate(order.begin(), it, it + 1);
  }
  return order;
}

std::string no_acceptable_algorithm(std::span<const AlgorithmCandidate> ranked, std::size_t workspace_cap,
                                    const char* direction) {
  std::string why;
  for (const AlgorithmCandidate& c : ranked) {
    std::string lacks;
    if (!c.supported) lacks = "unsupported";
    else if (!c.deterministic) lacks = "non-deterministic";
    else if (c.transform) lacks = "FFT/Winograd";
    else if (c.workspace > workspace_cap) lacks = "workspace " + std::to_string(c.workspace >> 20) + " MiB";
    else lacks = "failed to run";
    why += (why.empty() ? "" : ", ") + std::to_string(c.id) + " " + lacks;
  }
  return std::string("convolution ") + direction + ": no deterministic, exact-sum algorithm within the " +
         std::to_string(workspace_cap >> 20) + " MiB workspace cap runs this shape (candidates: " +
         (why.empty() ? "none" : why) + ")";
}

void check_tensor_span(const Shape4& dims, const Index4& strides, const char* what) {
  constexpr std::int64_t limit = std::int64_t(1) << 31;
  std::int64_t span = 1, elements = 1;  // one past the last element's offset; the element count
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] <= 0) return;  // empty: nothing to index
    span += (dims[d] - 1) * strides[d];
    elements = std::min(limit, elements * std::min(dims[d], limit));
  }
  if (std::max(span, elements) >= limit)
    throw std::length_error(std::string(what) + " spans " + std::to_string(std::max(span, elements)) +
                            " elements; the library indexes at most 2^31 - 1: use more ranks or a smaller batch");
}

}  // namespace tessera::layers
