#pragma once
// Layer: the interface every Tessera layer implements, built-in or custom.
//
// The one idea (DESIGN.md): a layer states, for an output box a rank owns, which input box
// it needs (`input_window`); the framework makes that window present on the rank (halo
// exchange, boundary fill for cells outside the image) and the layer's local kernel runs
// on it with no padding of its own. A layer never calls MPI itself.
//
// Shapes are global NCHW shapes; boxes are in global coordinates. The output of a layer is
// distributed on the same process grid as its input, with the balanced partition of the
// output shape.

#include <memory>
#include <string>
#include <vector>

#include "distarray/box.hpp"
#include "distarray/dist_array.hpp"
#include "layers/parameter.hpp"
#include "layers/windowed_config.hpp"

namespace tessera::layers {

template <class T>
using Tensor = DistArray<T>;

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

  virtual std::vector<Parameter<T>*> params() { return {}; }

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
};

}  // namespace tessera::layers
