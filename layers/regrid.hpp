#pragma once
// Regrid (spec "regrid(grid=4x1x1)"): moves an activation to another process grid of the
// same ranks — a layout per stage. Early wide stages of a ResNet split their images over
// space (1x2x2: small halos against large tiles); late stages with small images and many
// channels split over samples (4x1x1: no halo, one allreduce); a regrid between them
// switches. The output is the input, value for value, distributed on the named grid; every
// layer after it runs there, batch norm sums its statistics over that grid's groups, and
// parameters reduce their gradients over that grid's groups (Parameter::grid).
//
// Forward sends each peer the part of this rank's input tile that the peer owns in the new
// layout (one all-to-all of the boxes owned_old(me) ∩ owned_new(q)); backward sends the
// gradient back along the same boxes. The boxes, counts and buffers are planned on the
// first call for the pair of distributions and kept (distarray/redistribution.hpp), so a
// step allocates nothing. The layer reads owned cells only: its input carries no halo
// for it (models/layer_registry.cpp: InputHalo::none).
//
// T: float, or bf16 (--precision bf16): values and gradients move as they are stored, two
// bytes each in bf16 (half fp32's all-to-all). Each cell is copied, never summed (the
// boxes of one rank's tile in the other layout are disjoint), so a bf16 regrid rounds
// nothing and its output equals its input bit for bit.

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "distarray/process_grid.hpp"
#include "distarray/redistribution.hpp"
#include "layers/layer.hpp"
#include "layers/spec_options.hpp"

namespace tessera::layers {

// The text inside regrid(...): grid=NxHxW (required).
inline GridDims parse_regrid_options(std::string_view text) {
  SpecOptions spec("regrid", text);
  const std::optional<std::string> grid = spec.take_string("grid");
  spec.finish();
  if (!grid) throw std::invalid_argument("regrid needs grid=NxHxW, the layout its output moves to (e.g. grid=4x1x1)");
  return parse_grid(*grid);
}

template <class T>
class Regrid final : public Layer<T> {
 public:
  explicit Regrid(const GridDims& grid) : grid_(grid) {}

  std::string kind() const override { return "regrid"; }
  typename Layer<T>::BackwardReads backward_reads() const override { return {.inputs = false, .output = false}; }
  std::string options() const override { return "grid=" + format_grid(grid_); }
  Shape4 output_shape(const Shape4& input) const override { return input; }
  // The same global cells, wherever they live (the window is not on the input's grid, so
  // the model asks for no halo: InputHalo::none).
  Box input_window(const Box& output, const Shape4&) const override { return output; }
  std::optional<GridDims> output_grid() const override { return grid_; }
  const GridDims& grid() const { return grid_; }

  void forward(const Tensor<T>& x, const Tensor<T>& y) override { plan(x, y).forward(x, y); }
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override { plan(dx, dy).reverse(dy, dx); }

 private:
  Redistribution<T>& plan(const Tensor<T>& x, const Tensor<T>& y) {
    if (y.grid().dims() != grid_)
      throw std::invalid_argument("regrid(grid=" + format_grid(grid_) + "): its output is " +
                                  y.distribution().describe() + ", not on grid " + format_grid(grid_));
    if (!plan_ || !(plan_->from() == x.distribution()) || !(plan_->to() == y.distribution()))
      plan_.emplace(x.grid(), x.distribution(), y.grid(), y.distribution());
    return *plan_;
  }

  GridDims grid_;
  std::optional<Redistribution<T>> plan_;
};

}  // namespace tessera::layers
