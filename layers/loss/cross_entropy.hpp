#pragma once
// Softmax cross-entropy over the class dimension, mean over every (n, h, w) cell of the
// global batch — nn.CrossEntropyLoss(reduction='mean') for logits (N, K) as (N, K, 1, 1),
// and per-pixel segmentation for (N, K, H, W). See docs/training.md for the formulas.

#include "layers/loss/classification.hpp"

namespace tessera::layers {

// The loss, identical on every rank; writes dlogits' owned cells. Collective over the grid.
template <class T>
double cross_entropy_loss(const Tensor<T>& logits, const OwnedLabels& labels, const Tensor<T>& dlogits) {
  return classification_stats(logits, labels, dlogits).loss;
}

// The loss alone.
template <class T>
double cross_entropy_loss(const Tensor<T>& logits, const OwnedLabels& labels) {
  return classification_stats(logits, labels).loss;
}

}  // namespace tessera::layers
