#pragma once
// The orchestration every spatial layer shares, written once. A layer states its window
// (Layer::input_window) and supplies local kernels; this file turns the window into halo
// widths, a halo::WindowRule and exchanges, and runs forward and backward around them:
//
// forward, overlapped:  start fill of x's window → kernel on the interior outputs (their
//                       window needs no halo) → finish → kernel on the border strips
// forward, plain:       fill x's window → kernel on the whole owned output box
// backward (adjoint):   zero dx's allocation → kernel writes d(loss)/d(x) for the whole
//                       input window from the owned dy → an accumulate exchange sends the
//                       halo part to its owners, who add it in; independent work (a weight
//                       gradient) runs while those messages travel when overlap is on.
//
// Backward never needs a halo of dy, whatever the stride, dilation or padding: the window
// gradient is computed where the window lives and the halo exchange runs in reverse.
// When a rank's window lies inside its owned box (a pointwise layer) no exchange is made.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "distarray/dist_array.hpp"
#include "halo/halo.hpp"
#include "layers/layer.hpp"
#include "layers/log.hpp"
#include "layers/windowed_config.hpp"

namespace tessera::layers {

// The window rule of `layer` applied to inputs of `input_shape`: rank r's window is the
// input window of r's owned box in the output distribution (same grid).
// The input span [lo, hi) along one axis that a sliding window reads for the outputs
// [out_lo, out_hi): kernel k, stride s, dilation d, `before` padding cells. Padded cells
// fall outside the image (lo < 0 or hi > size). Shared by conv and the pools.
inline std::pair<std::int64_t, std::int64_t> sliding_window_span(std::int64_t out_lo, std::int64_t out_hi,
                                                                 std::int64_t k, std::int64_t s, std::int64_t d,
                                                                 std::int64_t before) {
  return {out_lo * s - before, (out_hi - 1) * s - before + (k - 1) * d + 1};
}

// The adjoint: the input span [lo, hi) along one axis that a transposed convolution reads
// for the outputs [out_lo, out_hi), input i scattering into outputs i*s - before + j*d
// (j < k) — so i runs from ceil((out_lo + before - (k-1)*d) / s) to
// floor((out_hi - 1 + before) / s). Cut to the image [0, size): cells outside it are zero
// and add nothing. Empty (lo == hi) where no input reaches the outputs: the gaps between a
// stride's taps, or rows that only output padding adds. Both ends grow monotonically with
// the outputs, as interior_outputs needs. Used by deconv.
inline std::pair<std::int64_t, std::int64_t> transposed_window_span(std::int64_t out_lo, std::int64_t out_hi,
                                                                    std::int64_t k, std::int64_t s, std::int64_t d,
                                                                    std::int64_t before, std::int64_t size) {
  const auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const std::int64_t lo = -floor_div(-(out_lo + before - (k - 1) * d), s);
  const std::int64_t hi = floor_div(out_hi - 1 + before, s) + 1;
  const std::int64_t first = std::clamp<std::int64_t>(lo, 0, size);
  return {first, std::clamp<std::int64_t>(hi, first, size)};
}

template <class T>
halo::WindowRule window_rule(const Layer<T>& layer, const Shape4& input_shape) {
  return [&layer, input_shape, output_shape = layer.output_shape(input_shape)](const Distribution& input, int rank) {
    return layer.input_window(Distribution(output_shape, input.grid()).owned_box(rank), input_shape);
  };
}

// Halo widths an input allocation needs so that every rank's window fits: per side, the
// farthest any rank's window reaches past its owned box. The same on every rank, as a
// DistArray's widths must be.
template <class T>
HaloWidths input_halo(const Layer<T>& layer, const Shape4& input_shape, const GridDims& grid) {
  const Distribution input(input_shape, grid);
  const halo::WindowRule rule = window_rule(layer, input_shape);
  HaloWidths widths;
  for (int r = 0; r < input.ranks(); ++r) {
    const Box owned = input.owned_box(r);
    const Box window = rule(input, r);
    if (window.empty()) continue;
    for (int d = 0; d < kDims; ++d) {
      widths.below[d] = std::max(widths.below[d], owned.lo[d] - window.lo[d]);
      widths.above[d] = std::max(widths.above[d], window.hi[d] - owned.hi[d]);
    }
  }
  return widths;
}

// An input array (or its gradient) for `layer`, allocated with the halo the layer needs.
template <class T>
Tensor<T> make_input(const ProcessGrid& grid, const Shape4& input_shape, const Layer<T>& layer,
                     std::string label = "input") {
  return Tensor<T>(grid, input_shape, input_halo(layer, input_shape, grid.dims()), std::move(label));
}

// An output array for `layer` (no halo: the next layer's make_input decides its own).
template <class T>
Tensor<T> make_output(const ProcessGrid& grid, const Shape4& input_shape, const Layer<T>& layer,
                      std::string label = "output") {
  return Tensor<T>(grid, layer.output_shape(input_shape), HaloWidths{}, std::move(label));
}

// The output box `grid`'s rank owns for inputs of `input_shape`: what Layer::place takes.
template <class T>
Box owned_output(const ProcessGrid& grid, const Shape4& input_shape, const Layer<T>& layer) {
  return Distribution(layer.output_shape(input_shape), grid.dims()).owned_box(grid.rank());
}

// True when every rank's window lies inside its owned box: no rank sends, receives or pads,
// so no exchange is made. Decided from every rank's boxes so that all ranks agree (building
// an exchange can be collective: NCCL).
template <class T>
bool windows_inside_owned(const Layer<T>& layer, const Distribution& input) {
  const halo::WindowRule rule = window_rule(layer, input.global_shape());
  for (int r = 0; r < input.ranks(); ++r)
    if (!input.owned_box(r).contains(rule(input, r))) return false;
  return true;
}

// The cells whose values are in place once a fill exchange has *started*: the owned box,
// widened to infinity on every side where it touches the image border, since start() has
// already written the boundary fill (padding) there.
inline Box available_before_halo(const Box& owned, const Shape4& image) {
  constexpr std::int64_t far = std::int64_t(1) << 40;
  Box b = owned;
  for (int d = 0; d < kDims; ++d) {
    if (b.lo[d] == 0) b.lo[d] = -far;
    if (b.hi[d] == image[d]) b.hi[d] = far;
  }
  return b;
}

// The largest sub-box of `output` (owned output) whose input window lies inside
// `available`, found row by row and column by column (windows grow monotonically with
// the output box, so the rows that qualify are contiguous). Empty when none qualifies.
template <class T>
Box interior_outputs(const Layer<T>& layer, const Box& output, const Box& available, const Shape4& input_shape) {
  Box interior = output;
  for (int d : {int(H), int(W)}) {
    std::int64_t first = output.hi[d], last = output.lo[d] - 1;
    for (std::int64_t i = output.lo[d]; i < output.hi[d]; ++i) {
      Box line = output;
      line.lo[d] = i, line.hi[d] = i + 1;
      const Box window = layer.input_window(line, input_shape);
      if (window.lo[d] < available.lo[d] || window.hi[d] > available.hi[d]) continue;
      first = std::min(first, i);
      last = i;
    }
    if (last < first) return Box{};
    interior.lo[d] = first, interior.hi[d] = last + 1;
  }
  return interior;
}

// The exchange one layer keeps for one array: rebuilt only when the array changes.
// `rule()` makes the window rule, called only then.
template <class T>
class ExchangeSlot {
 public:
  template <class MakeRule>
  halo::Exchange<T>& get(const Tensor<T>& array, const MakeRule& rule, halo::Mode mode, const std::string& transport) {
    const bool same = exchange_ && data_ == array.window().data() && window_ == array.window_box() &&
                      distribution_ == array.distribution();
    if (!same) {
      exchange_.reset();
      exchange_.emplace(halo::make_exchange(array, rule(), mode, halo::BoundaryFill::zero(), transport));
      data_ = array.window().data();
      window_ = array.window_box();
      distribution_ = array.distribution();
    }
    return *exchange_;
  }

 private:
  std::optional<halo::Exchange<T>> exchange_;  // holds the array's view: its address stays unique
  const T* data_ = nullptr;
  Box window_;
  std::optional<Distribution> distribution_;
};

template <class T>
class Windowed {
 public:
  explicit Windowed(WindowedConfig config = {}) : config_(std::move(config)) {}
  const WindowedConfig& config() const { return config_; }
  // Takes effect for exchanges built from now on: call before the first forward.
  void set_config(WindowedConfig config) {
    config_ = std::move(config);
    resolved_transport_.clear();
    fill_ = {}, accumulate_ = {};
    forward_plan_.reset(), backward_plan_.reset();
  }

  // Computes y's owned cells: `compute(b)` must write y over output box b from x over
  // layer.input_window(b). Makes x's window present first (or around the interior).
  // The kernels are template parameters, not std::function: a layer's lambda capturing
  // more than two references would otherwise be copied to the heap on every call.
  template <class BoxKernel>
  void forward(const Layer<T>& layer, const Tensor<T>& x, const Tensor<T>& y, const BoxKernel& compute) {
    const ForwardPlan& plan = forward_plan(layer, x, y);
    const std::string& transport_name = transport(x);
    note(layer, plan.note);
    if (plan.path == Path::local) {
      compute(y.owned_box());
      return;
    }
    halo::Exchange<T>& fill = fill_.get(
        x, [&] { return window_rule(layer, x.distribution().global_shape()); }, halo::Mode::fill, transport_name);
    if (plan.path == Path::plain) {
      fill.run();
      compute(y.owned_box());
      return;
    }
    fill.start();
    compute(plan.interior);
    fill.finish();
    for (const Box& strip : plan.strips) compute(strip);
  }

  // Computes dx's owned cells. `window_gradient(w)` must write d(loss)/d(x) over the whole
  // input window w from dy's owned cells; `meanwhile` (e.g. the weight gradient) must not
  // touch dx and runs while the halo part travels home. dx is zeroed first, for kernels that
  // add into it and for owned cells outside the window (a strided layer's skipped rows);
  // Overwrites::every_cell says the kernel assigns every cell of w, so where w covers the
  // owned box the zeroing (a whole pass over dx) is skipped.
  enum class Overwrites { add_into_zeroed, every_cell };
  template <class WindowKernel, class Work>
  void backward(const Layer<T>& layer, const Tensor<T>& dy, const Tensor<T>& dx, const WindowKernel& window_gradient,
                const Work& meanwhile, Overwrites writes = Overwrites::add_into_zeroed) {
    const BackwardPlan& plan = backward_plan(layer, dy, dx);
    const std::string& transport_name = transport(dx);
    if (writes == Overwrites::add_into_zeroed || !plan.window.contains(dx.owned_box())) dx.fill_window(T(0));
    window_gradient(plan.window);
    if (plan.path == Path::local) {
      meanwhile();
      return;
    }
    halo::Exchange<T>& accumulate = accumulate_.get(
        dx, [&] { return window_rule(layer, dx.distribution().global_shape()); }, halo::Mode::accumulate,
        transport_name);
    if (plan.path == Path::plain) {
      accumulate.run();
      meanwhile();
      return;
    }
    accumulate.start();
    meanwhile();
    accumulate.finish();
  }

 private:
  // local: every window inside its owned tile, no exchange; plain: exchange, then compute;
  // overlapped: compute the interior while the exchange travels (forward), or the
  // independent work while the accumulation travels home (backward).
  enum class Path { local, plain, overlapped };

  // What one forward does for one pair of allocations, derived (and checked) once — the
  // path, the interior and border strips — and reused while x's distribution and halo and
  // y's distribution stay the same, as the halo plan is (halo::Plan::cached).
  struct ForwardPlan {
    Distribution x, y;
    HaloWidths x_halo;
    Box output;  // y's owned box: this rank's place in the grid
    Path path = Path::local;
    Box interior;
    std::vector<Box> strips;
    std::string note;  // logged when the path changes
  };
  // The same for backward: its path and the input window of dy's owned box.
  struct BackwardPlan {
    Distribution dx, dy;
    HaloWidths dx_halo;
    Box output;  // dy's owned box
    Path path = Path::local;
    Box window;
  };

  const ForwardPlan& forward_plan(const Layer<T>& layer, const Tensor<T>& x, const Tensor<T>& y) {
    if (forward_plan_ && forward_plan_->x == x.distribution() && forward_plan_->x_halo == x.halo() &&
        forward_plan_->y == y.distribution() && forward_plan_->output == y.owned_box())
      return *forward_plan_;
    forward_plan_.reset();
    const Shape4& input_shape = x.distribution().global_shape();
    check_output(layer, x, y, "y");
    check_allocation(layer, x, "x");
    ForwardPlan plan{x.distribution(), y.distribution(), x.halo(), y.owned_box(), Path::local, Box{}, {}, {}};
    if (windows_inside_owned(layer, x.distribution())) {
      plan.note = "forward local (every window inside its owned tile: no exchange)";
    } else if (config_.overlap == Overlap::off) {
      plan.path = Path::plain;
      plan.note = "forward plain (overlap off)";
    } else {
      const Box& output = plan.output;
      plan.interior = interior_outputs(layer, output, available_before_halo(x.owned_box(), input_shape), input_shape);
      if (plan.interior.empty()) {
        plan.path = Path::plain;
        plan.note = "forward plain (overlap on, but no output of this tile avoids the halo: tile too small)";
      } else {
        plan.path = Path::overlapped;
        plan.strips = halo::subtract(output, plan.interior);
        plan.note = "forward overlapped (interior " + describe(plan.interior.shape()) + " while the halo travels, then " +
                    std::to_string(plan.strips.size()) + " border strips)";
      }
    }
    forward_plan_.emplace(std::move(plan));
    return *forward_plan_;
  }

  const BackwardPlan& backward_plan(const Layer<T>& layer, const Tensor<T>& dy, const Tensor<T>& dx) {
    if (backward_plan_ && backward_plan_->dx == dx.distribution() && backward_plan_->dx_halo == dx.halo() &&
        backward_plan_->dy == dy.distribution() && backward_plan_->output == dy.owned_box())
      return *backward_plan_;
    backward_plan_.reset();
    check_output(layer, dx, dy, "dy");
    check_allocation(layer, dx, "dx");
    BackwardPlan plan{dx.distribution(), dy.distribution(), dx.halo(), dy.owned_box(), Path::local, Box{}};
    plan.window = layer.input_window(dy.owned_box(), dx.distribution().global_shape());
    if (!windows_inside_owned(layer, dx.distribution()))
      plan.path = config_.overlap == Overlap::off ? Path::plain : Path::overlapped;
    backward_plan_.emplace(std::move(plan));
    return *backward_plan_;
  }

  // "auto" is resolved once, collectively, on the first forward or backward (every rank
  // calls it); later exchanges name the concrete transport, which keeps rebuilding an
  // exchange for a new array a local decision.
  const std::string& transport(const Tensor<T>& array) {
    if (resolved_transport_.empty())
      resolved_transport_ = std::string(halo::resolve_transport(
          config_.transport, array.grid().comm(), halo::buffer_place_of<typename Tensor<T>::memory_space>()));
    return resolved_transport_;
  }

  void note(const Layer<T>& layer, const std::string& what) {
    if (what == last_note_) return;
    last_note_ = what;
    log_line(layer.kind() + "(" + layer.options() + "): " + what);
  }

  static std::string describe(const Shape4& s) {
    std::ostringstream out;
    out << s[0] << "x" << s[1] << "x" << s[2] << "x" << s[3];
    return out.str();
  }

  // `out` must be distributed like the layer's output of `in`, on the same grid.
  static void check_output(const Layer<T>& layer, const Tensor<T>& in, const Tensor<T>& out, const char* name) {
    const Distribution expected(layer.output_shape(in.distribution().global_shape()), in.distribution().grid());
    if (out.distribution() == expected) return;
    throw std::invalid_argument(layer.kind() + "(" + layer.options() + "): " + name + " is " +
                                out.distribution().describe() + " but the layer's output is " + expected.describe());
  }

  // Every rank checks every rank's allocation (pure arithmetic), so all throw together.
  static void check_allocation(const Layer<T>& layer, const Tensor<T>& a, const char* name) {
    const Distribution& dist = a.distribution();
    const Shape4& shape = dist.global_shape();
    const halo::WindowRule rule = window_rule(layer, shape);
    for (int r = 0; r < dist.ranks(); ++r) {
      const Box allocated = dist.owned_box(r).grow(a.halo().below, a.halo().above);
      const Box window = rule(dist, r);
      if (allocated.contains(window)) continue;
      const HaloWidths need = input_halo(layer, shape, dist.grid());
      std::ostringstream msg;
      msg << layer.kind() << "(" << layer.options() << "): " << name << "'s allocation on rank " << r << " is "
          << allocated << " but the input window its output tile needs is " << window
          << "; allocate it with layers::make_input (halo widths h " << need.below[H] << "/" << need.above[H]
          << ", w " << need.below[W] << "/" << need.above[W] << " below/above)";
      throw std::invalid_argument(msg.str());
    }
  }

  WindowedConfig config_;
  std::string resolved_transport_;
  ExchangeSlot<T> fill_, accumulate_;
  std::optional<ForwardPlan> forward_plan_;
  std::optional<BackwardPlan> backward_plan_;
  std::string last_note_;
};

}  // namespace tessera::layers
