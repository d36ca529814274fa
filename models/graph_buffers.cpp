// Graph's memory (models/graph.hpp, "Memory"): where each activation, gradient and
// gradient-sum scratch array lies, and allocating the blocks once, at construction.
#include "models/graph.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "models/buffer_sharing.hpp"
#include "models/graph_internal.hpp"

namespace tessera::models {
namespace {

using graph_internal::kDirect;

}  // namespace

// Arrays laid out by liveness (models/buffer_sharing.hpp), in the steps of a pass.
//
// Backward: the loss writes the output's gradient at step 0, node i runs at step
// count - i. The gradient of activation a is first written by its last reader (the first
// to run backward) and last read by its producer, node a-1; the input's is the result, kept
// past the pass. Node i reads its dy and writes its dxs in one step, so they never share.
// A reader after the first writes a scratch array, summed into the gradient in its own step.
//
// Forward (forward-only models): the loader writes the input at step 0, node i runs at
// step i+1; activation a lives from its producer to its last reader, the output past the
// pass.
//
// Activations in training: forward as above, then the loss at step count+1 and node i's
// backward at step 2*count+1-i. Activation a lives from its producer to the last step that
// reads it: its last reader's forward, the backward of each reader that reads its inputs
// again, and its producer's backward where that reads its output (Layer::backward_reads).
// The input and the output are kept past the pass (the loader and the loss use them), and
// with Passes::training_with_activations_kept every activation is (its caller reads them).
// With Passes::training, activations and gradients are one block on this one timeline (the
// backward steps above offset by count+1): a gradient takes memory an activation left.
template <class T>
void Graph<T>::plan_sharing() {
  const std::size_t count = nodes_.size();
  // last_reader: in node order; last_training_read: in the training pass's steps.
  std::vector<std::size_t> last_reader(count + 1, 0), last_training_read(count + 1, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t backward_step = 2 * count + 1 - i;
    const typename layers::Layer<T>::BackwardReads reads = nodes_[i].layer->backward_reads();
    for (const std::size_t a : nodes_[i].inputs) {
      last_reader[a] = std::max(last_reader[a], i);
      last_training_read[a] = std::max(last_training_read[a], reads.inputs ? backward_step : i + 1);
    }
    if (reads.output) last_training_read[i + 1] = std::max(last_training_read[i + 1], backward_step);
  }
  last_training_read.front() = last_training_read.back() = 2 * count + 2;  // kept past the pass

  // Every array is a request: those of kind kShared lie in one block, an array of a kind of
  // its own has a block to itself.
  constexpr std::size_t kShared = 0;
  std::size_t next_alone = kShared + 1;
  std::vector<BufferRequest> requests;
  array_plan_.clear();
  const auto add = [&](std::size_t a, Role role, bool alone, std::size_t first, std::size_t last) {
    requests.push_back({alone ? next_alone++ : kShared, first, last,
                        layers::Tensor<T>::window_elements(*grids_[a], shapes_[a], halos_[a])});
    array_plan_.push_back({a, role});
    return array_plan_.size() - 1;
  };
  activation_of_.clear();
  gradient_of_.clear();
  scratch_use_.assign(count, {});
  if (passes_ == Passes::forward_only) {
    for (std::size_t a = 0; a <= count; ++a)
      activation_of_.push_back(add(a, Role::activation, false, a, a == count ? count + 1 : last_reader[a] + 1));
  } else {
    // Training: activations and gradients on one timeline (backward step s above is step
    // count+1+s of the pass), where a gradient takes memory an activation left. The input
    // and the output, kept past the pass, have blocks of their own; with the activations
    // kept, every activation has, and the gradients share one among themselves.
    const bool kept = passes_ == Passes::training_with_activations_kept;
    const std::size_t backward_start = kept ? 0 : count + 1;
    for (std::size_t a = 0; a <= count; ++a)
      activation_of_.push_back(add(a, Role::activation, kept || a == 0 || a == count, a, last_training_read[a]));
    for (std::size_t a = 0; a <= count; ++a) {
      const std::size_t first = a == count ? 0 : count - last_reader[a], last = a == 0 ? count + 1 : count - (a - 1);
      gradient_of_.push_back(add(a, Role::gradient, false, backward_start + first, backward_start + last));
    }
    // Who writes which gradient in backward (reverse order): the first reader of an
    // activation writes it, later ones a scratch array, summed in in the same step.
    std::vector<bool> written(count + 1, false);
    for (std::size_t i = 0; i < count; ++i) scratch_use_[i].assign(nodes_[i].inputs.size(), kDirect);
    for (std::size_t i = count; i-- > 0;)
      for (std::size_t slot = 0; slot < nodes_[i].inputs.size(); ++slot) {
        const std::size_t a = nodes_[i].inputs[slot];
        if (!written[a]) {
          written[a] = true;
          continue;
        }
        const std::size_t step = backward_start + count - i;
        scratch_use_[i][slot] = add(a, Role::scratch, false, step, step);
      }
  }
  // Every array starts at a multiple of 16 elements (a 64-byte line in fp32), for vector
  // loads; the same offsets in either precision, so bf16 arrays take exactly half the bytes.
  const BlockLayout layout = lay_out_blocks(requests, 16);
  block_plan_.assign(layout.size.size(), BlockPlan{});
  for (std::size_t b = 0; b < layout.size.size(); ++b) block_plan_[b].elements = layout.size[b];
  for (std::size_t r = 0; r < requests.size(); ++r) {
    array_plan_[r].block = layout.block[r];
    array_plan_[r].offset = layout.offset[r];
    block_plan_[layout.block[r]].arrays.push_back(r);
  }
}

template <class T>
void Graph<T>::allocate() {
  for (std::size_t b = 0; b < block_plan_.size(); ++b)
    blocks_.emplace_back("graph_block" + std::to_string(b), static_cast<std::size_t>(block_plan_[b].elements));
  for (const ArrayPlan& p : array_plan_) {
    const std::size_t a = p.activation;
    arrays_.emplace_back(*grids_[a], shapes_[a], halos_[a], blocks_[p.block].data() + p.offset);
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    for (std::size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const std::size_t a = node.inputs[slot];
      node.xs.push_back(&activation(a));
      if (passes_ == Passes::forward_only) continue;
      const std::size_t s = scratch_use_[i][slot];
      node.dxs.push_back(s == kDirect ? &gradient(a) : &arrays_[s]);
      if (s != kDirect) node.sums.emplace_back(s, a);
    }
  }
}

// Member by member: graph.cpp holds the class's one `template class` instantiation (a
// program may have only one), which covers the members defined there.
template void Graph<float>::plan_sharing();
template void Graph<float>::allocate();
template void Graph<bf16>::plan_sharing();
template void Graph<bf16>::allocate();

}  // namespace tessera::models
