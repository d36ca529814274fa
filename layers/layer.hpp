#pragma once
// Layer: the interface every Tessera layer implements, built-in or custom.
//
// The one idea (DESIGN.md): a layer states, for an output box a rank owns, which input box
// it needs (`input_window`); the framework makes that window present on the rank (halo
// exchange, boundary fill for cells outside the image) and the layer's local kernel runs
// on it with no padding of its own. A layer never calls MPI itself.
//
// Shapes are global NCHW shapes; boxes are in global coordinates. The output of a layer is
// distributed on the same process grid as its input (unless output_grid() names another),
// with the balanced partition of the output shape.

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/dist_array.hpp"
#include "layers/parameter.hpp"
#include "layers/windowed_config.hpp"

namespace tessera::layers {

template <class T>
using Tensor = DistArray<T>;

// How many inputs a layer takes: [min, max]. Every single-input layer is {1, 1}.
struct InputArity {
  std::size_t min = 1, max = 1;
  static constexpr std::size_t unbounded = static_cast<std::size_t>(-1);
};

template <class T>
class Layer {
 public:
  virtual ~Layer() = default;

  // The spec-string name, e.g. "conv", and the options as they would be written in a
  // spec, e.g. "out=16,k=3,pad=1" (used in logs, checkpoints' /meta and errors).
  virtual std::string kind() const = 0;
  virtual std::string options() const = 0;

  // Global output shape for a global input shape. Throws std::invalid_argument naming the
  // problem when the input does not fit (e.g. a window larger than the padded image).
  virtual Shape4 output_shape(const Shape4& input) const = 0;

  // The global input box that the output box `output` needs. It may reach outside the
  // image (padding: those cells are zero) and need not contain the owned input box
  // (a strided layer may skip rows: a "negative halo").
  virtual Box input_window(const Box& output, const Shape4& input) const = 0;

  // x: the input, allocated with a window containing input_window(y's owned box); its
  // halo cells are made present by the layer's forward (through halo::Exchange).
  // y: the output, owned cells written. Keeps what backward needs.
  virtual void forward(const Tensor<T>& x, const Tensor<T>& y) = 0;

  // dy: gradient of the loss w.r.t. y (owned cells). dx: gradient w.r.t. x, owned cells
  // written (contributions to x's halo cells are accumulated into their owners). Adds
  // parameter gradients into params()[i]->grad (local contributions; the trainer reduces
  // them over the ranks that share each parameter).
  virtual void backward(const Tensor<T>& dy, const Tensor<T>& dx) = 0;

  // Backward when nothing reads d(loss)/d(x) — a layer on the model's input in training,
  // as PyTorch skips the gradient of an input that does not require it: adds the parameter
  // gradients exactly as backward does; dx is scratch, its cells left unspecified. The
  // default runs backward. Layers whose input gradient is a library call and an exchange
  // (conv, deconv, linear, local) skip it: for a ResNet stem on a 512x512 image that is a
  // third of the step.
  virtual void backward_parameters(const Tensor<T>& dy, const Tensor<T>& dx) { backward(dy, dx); }

  virtual std::vector<Parameter<T>*> params() { return {}; }

  // Which of forward's tensors backward (and backward_parameters) reads besides dy: its
  // inputs, its output. In training a model lets an activation's buffer hold another array
  // once no later step reads it (models/graph.hpp, "Memory"), so a layer must not declare
  // less than it reads: its gradients would come from overwritten cells. The default, both,
  // is always right; built-in layers declare what they read (conv: its input; relu: its
  // output; add, concat, upsample: neither).
  struct BackwardReads {
    bool inputs = true;
    bool output = true;
  };
  virtual BackwardReads backward_reads() const { return {}; }

  // Overlap and transport of this layer's halo exchanges, set for a whole model by the
  // trainer (--overlap, --halo-transport); a layer without exchanges ignores it. Call
  // before the first forward.
  virtual void set_halo_config(const WindowedConfig&) {}

  // Tells the layer which output box this rank owns, before forward() and params() are
  // used: the hook for tiled parameters, whose storage is only the slice of the output
  // positions a rank owns (locally connected layers allocate and initialise their slice
  // here). Sequential calls it for every layer once the activations are allocated; code
  // that builds a layer by hand calls it with y's owned box (layers::owned_output). Only
  // the rows and columns of the box matter: ranks of one sample group hold the same slice.
  // The default does nothing: layers with replicated or no parameters ignore it.
  virtual void place(const Box& /*owned_output*/) {}

  // The process grid the output lives on when it is not the input's: a layer that moves
  // its input to another layout of the same ranks (regrid, layers/regrid.hpp) names the
  // grid's dims, and the model builds that grid and distributes the output, and every
  // layer after it, there. Nothing for every other layer.
  virtual std::optional<GridDims> output_grid() const { return std::nullopt; }

  // ---- Several inputs (models/graph.hpp) ------------------------------------------------
  // A graph node calls a layer only through these. Their defaults are the single-input
  // methods above, so a single-input layer (built-in or custom) implements nothing more;
  // a layer with several inputs (add, concat) derives from MultiInputLayer below and
  // implements these instead. Inputs are listed in the node's order; every input shares
  // the output's process grid.
  virtual InputArity arity() const { return {}; }
  virtual Shape4 output_shape_multi(std::span<const Shape4> inputs) const { return output_shape(only(inputs)); }
  // The box of input `index` that `output` needs (the window rule per input).
  virtual Box input_window_multi(const Box& output, std::size_t index, std::span<const Shape4> inputs) const {
    (void)index;
    return input_window(output, only(inputs));
  }
  virtual void forward_multi(std::span<const Tensor<T>* const> xs, const Tensor<T>& y) { forward(*only(xs), y); }
  // dxs[i]: d(loss)/d(input i), owned cells written (overwritten, not added to: the
  // graph sums the gradients of an input read by several nodes itself).
  virtual void backward_multi(const Tensor<T>& dy, std::span<const Tensor<T>* const> dxs) { backward(dy, *only(dxs)); }

 private:
  template <class E>
  const E& only(std::span<E> inputs) const {
    if (inputs.size() != 1)
      throw std::invalid_argument(kind() + " takes one input, not " + std::to_string(inputs.size()));
    return inputs[0];
  }
};

// The base of a layer with several inputs: it implements the multi-input methods, and the
// single-input ones become the one-input case of them (so that code holding a Layer<T>&
// still works on it).
template <class T>
class MultiInputLayer : public Layer<T> {
 public:
  InputArity arity() const override = 0;
  Shape4 output_shape_multi(std::span<const Shape4> inputs) const override = 0;
  Box input_window_multi(const Box& output, std::size_t index, std::span<const Shape4> inputs) const override = 0;
  void forward_multi(std::span<const Tensor<T>* const> xs, const Tensor<T>& y) override = 0;
  void backward_multi(const Tensor<T>& dy, std::span<const Tensor<T>* const> dxs) override = 0;

  Shape4 output_shape(const Shape4& input) const final { return output_shape_multi(std::span(&input, 1)); }
  Box input_window(const Box& output, const Shape4& input) const final {
    return input_window_multi(output, 0, std::span(&input, 1));
  }
  void forward(const Tensor<T>& x, const Tensor<T>& y) final {
    const Tensor<T>* xs[] = {&x};
    forward_multi(xs, y);
  }
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) final {
    const Tensor<T>* dxs[] = {&dx};
    backward_multi(dy, dxs);
  }
};

}  // namespace tessera::layers
