#pragma once
// Accuracy: the fraction of (n, h, w) cells of the global batch whose arg-max class (the
// first one on ties, as torch.argmax) is the label. Identical on every rank.

#include "layers/loss/classification.hpp"

namespace tessera::layers {

// Collective over the logits' grid; throws std::invalid_argument as cross_entropy_loss.
template <class T>
double accuracy(const Tensor<T>& logits, const OwnedLabels& labels) {
  return classification_stats(logits, labels).accuracy;
}

}  // namespace tessera::layers
