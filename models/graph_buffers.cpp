// Graph's buffers (models/graph.hpp, "Memory"): which buffer holds each activation,
// gradient and gradient-sum scratch array, and allocating them once, at construction.
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
using graph_internal::union_of;

}  // namespace

// Buffers by liveness (models/buffer_sharing.hpp), in the steps of a pass.
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
// With Passes::training, activations and gradients are one pool on this one timeline (the
// backward steps above offset by count+1): a gradient takes a buffer an activation left.
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
  // Arrays may share only with arrays of the same grid and global shape (the buffer takes
  // the union of their halos).
  std::vector<std::pair<const ProcessGrid*, Shape4>> kinds;
  const auto kind_of = [&](std::size_t a) {
    const std::pair<const ProcessGrid*, Shape4> k{grids_[a], shapes_[a]};
    const auto it = std::find(kinds.begin(), kinds.end(), k);
    if (it != kinds.end()) return static_cast<std::size_t>(it - kinds.begin());
    kinds.push_back(k);
    return kinds.size() - 1;
  };
  // requests[r] is for activation owner[r] (its gradient, its activation, or a scratch sum);
  // the first `activations` requests are activations themselves.
  const auto plan = [&](const std::vector<BufferRequest>& requests, const std::vector<std::size_t>& owner,
                        std::vector<BufferPlan>& buffers, std::size_t activations = 0) {
    const std::vector<std::size_t> assigned = share_buffers(requests);
    for (std::size_t r = 0; r < requests.size(); ++r) {
      const std::size_t a = owner[r], b = assigned[r];
      if (b >= buffers.size()) buffers.resize(b + 1, {nullptr, {}, HaloWidths{}, {}, false});
      if (buffers[b].owners.empty()) buffers[b].grid = grids_[a], buffers[b].shape = shapes_[a];
      buffers[b].halo = union_of(buffers[b].halo, halos_[a]);
      buffers[b].owners.push_back(a);
      buffers[b].holds_activation = buffers[b].holds_activation || r < activations;
    }
    return assigned;
  };

  std::vector<BufferRequest> requests;
  std::vector<std::size_t> owner;
  if (passes_ == Passes::forward_only) {
    for (std::size_t a = 0; a <= count; ++a) {
      requests.push_back({kind_of(a), a, a == count ? count + 1 : last_reader[a] + 1});
      owner.push_back(a);
    }
    activation_of_ = plan(requests, owner, activation_plan_, count + 1);
    scratch_use_.assign(count, std::vector<std::size_t>{});
    return;
  }
  // Training with shared activations: activations and gradients in one timeline and one
  // pool (a gradient takes a buffer an activation left): backward step s below is step
  // count+1+s of the pass.
  const bool one_pool = passes_ == Passes::training;
  const std::size_t backward_start = one_pool ? count + 1 : 0;
  if (one_pool) {
    // The input and the output, kept past the pass, keep buffers of their own: the output's
    // stays the last activation in the plan, where the trainer reads its size (and no halo
    // of an earlier array's joins it).
    const auto alone = [](std::size_t a) { return std::numeric_limits<std::size_t>::max() - a; };
    for (std::size_t a = 0; a <= count; ++a) {
      requests.push_back({a == 0 || a == count ? alone(a) : kind_of(a), a, last_training_read[a]});
      owner.push_back(a);
    }
  } else {
    for (std::size_t a = 0; a <= count; ++a) {
      activation_plan_.push_back({grids_[a], shapes_[a], halos_[a], {a}, true});
      activation_of_.push_back(a);
    }
  }
  const std::size_t gradients_from = requests.size();
  for (std::size_t a = 0; a <= count; ++a) {
    const std::size_t first = a == count ? 0 : count - last_reader[a], last = a == 0 ? count + 1 : count - (a - 1);
    requests.push_back({kind_of(a), backward_start + first, backward_start + last});
    owner.push_back(a);
  }
  // Who writes which gradient in backward (reverse order): the first reader of an
  // activation writes it, later ones a scratch array.
  std::vector<bool> written(count + 1, false);
  std::vector<std::pair<std::size_t, std::size_t>> scratch_slots;  // (node, slot) of request count+1+k
  for (std::size_t i = count; i-- > 0;)
    for (std::size_t slot = 0; slot < nodes_[i].inputs.size(); ++slot) {
      const std::size_t a = nodes_[i].inputs[slot];
      if (!written[a]) {
        written[a] = true;
        continue;
      }
      requests.push_back({kind_of(a), backward_start + count - i, backward_start + count - i});
      owner.push_back(a);
      scratch_slots.emplace_back(i, slot);
    }
  const std::vector<std::size_t> assigned =
      plan(requests, owner, one_pool ? activation_plan_ : gradient_plan_, gradients_from);
  if (one_pool) activation_of_.assign(assigned.begin(), assigned.begin() + static_cast<std::ptrdiff_t>(count + 1));
  const auto gradients = assigned.begin() + static_cast<std::ptrdiff_t>(gradients_from);
  gradient_of_.assign(gradients, gradients + static_cast<std::ptrdiff_t>(count + 1));
  scratch_use_.assign(count, {});
  for (std::size_t i = 0; i < count; ++i) scratch_use_[i].assign(nodes_[i].inputs.size(), kDirect);
  for (std::size_t k = 0; k < scratch_slots.size(); ++k)
    scratch_use_[scratch_slots[k].first][scratch_slots[k].second] = gradients[static_cast<std::ptrdiff_t>(count + 1 + k)];
}

template <class T>
void Graph<T>::allocate() {
  for (std::size_t b = 0; b < activation_plan_.size(); ++b) {
    const BufferPlan& p = activation_plan_[b];
    activations_.emplace_back(*p.grid, p.shape, p.halo, "activation" + std::to_string(b));
  }
  for (std::size_t b = 0; b < gradient_plan_.size(); ++b) {
    const BufferPlan& p = gradient_plan_[b];
    gradients_.emplace_back(*p.grid, p.shape, p.halo, "d_activation" + std::to_string(b));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    for (std::size_t slot = 0; slot < node.inputs.size(); ++slot) {
      const std::size_t a = node.inputs[slot];
      node.xs.push_back(&activation(a));
      if (passes_ == Passes::forward_only) continue;
      const std::size_t s = scratch_use_[i][slot];
      node.dxs.push_back(s == kDirect ? &gradient(a) : &gradient_buffer(s));
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
