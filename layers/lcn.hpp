#pragma once
// LocalContrastNorm (spec name "lcn"): local contrast normalisation (Jarrett et al. 2009,
// "What is the best multi-stage architecture for object recognition?"; used by Le et al.
// 2012): a subtractive, then a divisive normalisation with a k x k Gaussian window over all
// maps — v = x - (weighted local mean over maps and window), sigma = sqrt(weighted local
// mean of v^2), y = v / max(mean over the image of sigma, sigma). Formulas and the border
// rule in layers/lcn_kernels.hpp; output shaped as the input.
//
// Border: near the IMAGE edge the window's weights are renormalised by the part of the
// window inside the image, computed in global coordinates; a tile seam is never an edge,
// its cells come from the halo. The image-wide mean of sigma is one sum over the spatial
// group per sample (group_sum), forward and backward.
//
// Halo: sigma at (h, w) needs v within r = k/2 of it, and v needs x within r of that, so the
// window of an output box is the box grown by 2r — one fill exchange of x with a 2r halo
// rather than an r-halo exchange of x and another of v. Both move the same bytes (2r rows
// of C maps per side), but one exchange costs one latency instead of two, keeps the
// layer within Windowed's single-window model (overlap of interior work with the exchange
// forward, one accumulate exchange backward), and needs no second halo'd array for v; the
// price is recomputing the local mean on the r-wide ring around the tile (one plane).
// Backward is the adjoint of exactly that local computation: each rank writes the gradient
// of its owned outputs with respect to its whole 2r-window, and the accumulate exchange
// adds the halo parts at their owners.
// No parameters; any T (float, double): the kernels are Kokkos and sum in double.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "layers/group_sum.hpp"
#include "layers/layer.hpp"
#include "layers/lcn_kernels.hpp"
#include "layers/lcn_options.hpp"
#include "layers/scratch.hpp"
#include "layers/windowed.hpp"

namespace tessera::layers {

template <class T>
class LocalContrastNorm final : public Layer<T> {
 public:
  // Throws std::invalid_argument for invalid options.
  explicit LocalContrastNorm(const LcnOptions& options) : options_(options), windowed_(options.windowed) {
    options_.validate();
    const std::int64_t k = options_.k, r = options_.radius();
    Kokkos::View<lcn::Acc*, lcn::Space> a("tessera::lcn::gaussian", static_cast<std::size_t>(k));
    auto host = Kokkos::create_mirror_view(a);
    lcn::Acc total = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      const double d = static_cast<double>(p - r);
      host(p) = std::exp(-d * d / (2 * options_.sigma * options_.sigma));
      total += host(p);
    }
    for (std::int64_t p = 0; p < k; ++p) host(p) /= total;
    Kokkos::deep_copy(a, host);
    gaussian_ = a;
  }

  std::string kind() const override { return "lcn"; }
  std::string options() const override { return options_.to_spec(); }
  const LcnOptions& lcn_options() const { return options_; }

  Shape4 output_shape(const Shape4& input) const override { return input; }

  // The box grown by 2r rows and columns (sigma needs v within r, v needs x within r),
  // every channel (the means run over all maps), clipped to the image: the border
  // renormalises instead of padding, so no cell outside the image is ever read.
  Box input_window(const Box& output, const Shape4& input) const override {
    const std::int64_t reach = 2 * options_.radius();
    Box w = output;
    w.lo[C] = 0, w.hi[C] = input[C];
    w.lo[H] = std::max<std::int64_t>(w.lo[H] - reach, 0), w.hi[H] = std::min(w.hi[H] + reach, input[H]);
    w.lo[W] = std::max<std::int64_t>(w.lo[W] - reach, 0), w.hi[W] = std::min(w.hi[W] + reach, input[W]);
    return w;
  }

  // x must be allocated with make_input(grid, shape, *this); it is kept (by reference to
  // its storage) for backward. Collective over x's spatial group (the mean of sigma).
  void forward(const Tensor<T>& x, const Tensor<T>& y) override {
    const Shape4& image = x.distribution().global_shape();
    const Box owned = y.owned_box();
    const std::int64_t samples = owned.extent(N);
    const lcn::Stencil st = stencil(image);
    const lcn::Region own = region(owned), ring = grown(own, image);
    ensure(mean_, samples, ring);
    ensure(sigma_, samples, own);
    if (static_cast<std::int64_t>(mu_.extent(0)) != samples) mu_ = lcn::Samples("tessera::lcn::mu", samples);
    const auto xs = input_at(x);
    const auto mean = lcn::at(mean_, ring.h0, ring.w0), sigma = lcn::at(sigma_, own.h0, own.w0);
    windowed_.forward(*this, x, y, [&](const Box& out) {
      const lcn::Region part = region(out);
      lcn::local_mean(xs, mean, st, grown(part, image), samples);
      lcn::local_sigma(xs, mean, sigma, st, part, samples);
    });
    lcn::region_sums(sigma, mu_, own, 1.0, block_sums_);
    sums_staging_.sum(mu_, x.grid(), SumGroup::spatial, "lcn");
    lcn::scale(mu_, 1.0 / static_cast<double>(image[H] * image[W]));
    lcn::normalize(xs, mean, sigma, mu_, lcn::at(y.owned(), own.h0, own.w0), own, samples, image[C], kLcnFloor);
    saved_x_.emplace(x);
  }

  // dx must be allocated like x (make_input). Collective over the spatial group (the
  // gradient of the mean of sigma).
  void backward(const Tensor<T>& dy, const Tensor<T>& dx) override {
    if (!saved_x_) throw std::logic_error("lcn(" + options() + "): backward() before forward()");
    const Tensor<T>& x = *saved_x_;
    if (!(dx.distribution() == x.distribution()))
      throw std::invalid_argument("lcn(" + options() + "): dx is " + dx.distribution().describe() +
                                  " but forward's x was " + x.distribution().describe());
    const Shape4& image = x.distribution().global_shape();
    const Box owned = dy.owned_box();
    const std::int64_t samples = owned.extent(N);
    const lcn::Stencil st = stencil(image);
    const lcn::Region own = region(owned), ring = grown(own, image);
    windowed_.backward(
        *this, dy, dx,
        [&](const Box& window) {
          ensure(grad_, samples, own);
          ensure(ring_grad_, samples, ring);
          if (static_cast<std::int64_t>(dv_.extent(0)) != samples || std::int64_t(dv_.extent(1)) != image[C] ||
              std::int64_t(dv_.extent(2)) != ring.rows() || std::int64_t(dv_.extent(3)) != ring.cols())
            dv_ = lcn::Volume("tessera::lcn::dv", samples, image[C], ring.rows(), ring.cols());
          const lcn::Samples& dmu = sized(dmu_, "tessera::lcn::dmu", samples);  // divisor_gradient writes all
          const auto xs = input_at(x);
          const auto mean = lcn::at(mean_, ring.h0, ring.w0), sigma = lcn::at(sigma_, own.h0, own.w0);
          const auto dys = lcn::at(dy.owned(), own.h0, own.w0);
          const auto grad = lcn::at(grad_, own.h0, own.w0), ring_grad = lcn::at(ring_grad_, ring.h0, ring.w0);
          const auto dv = lcn::at(dv_, ring.h0, ring.w0);
          lcn::divisor_gradient(xs, mean, sigma, mu_, dys, grad, dmu, own, image[C], kLcnFloor, block_sums_);
          sums_staging_.sum(dmu, dx.grid(), SumGroup::spatial, "lcn");
          lcn::sigma_gradient(sigma, grad, dmu, st, own, samples, 1.0 / static_cast<double>(image[H] * image[W]));
          lcn::centred_gradient(xs, mean, sigma, mu_, dys, grad, dv, st, ring, own, samples, kLcnFloor);
          lcn::mean_gradient(dv, ring_grad, st, ring, samples);
          lcn::input_gradient(dv, ring_grad, lcn::at(dx.local(window), window.lo[H], window.lo[W]), st, ring,
                              region(window), samples);
        },
        [] {});
  }

  void set_halo_config(const WindowedConfig& config) override { windowed_.set_config(config); }

 private:
  lcn::Stencil stencil(const Shape4& image) const {
    return {gaussian_.data(), options_.radius(), image[H], image[W], image[C]};
  }

  static lcn::Region region(const Box& b) { return {b.lo[H], b.hi[H], b.lo[W], b.hi[W]}; }

  // `r` grown by the window radius, clipped to the image: where the local mean is needed.
  lcn::Region grown(const lcn::Region& r, const Shape4& image) const {
    const std::int64_t k = options_.radius();
    return {std::max<std::int64_t>(r.h0 - k, 0), std::min(r.h1 + k, image[H]), std::max<std::int64_t>(r.w0 - k, 0),
            std::min(r.w1 + k, image[W])};
  }

  // x's whole allocation, addressed by global (h, w): the kernels read only cells of the
  // image inside the window of the box they work on, which the fill has made present.
  static auto input_at(const Tensor<T>& x) { return lcn::at(x.window(), x.window_box().lo[H], x.window_box().lo[W]); }

  static void ensure(lcn::Plane& plane, std::int64_t samples, const lcn::Region& r) {
    if (static_cast<std::int64_t>(plane.extent(0)) != samples || std::int64_t(plane.extent(1)) != r.rows() ||
        std::int64_t(plane.extent(2)) != r.cols())
      plane = lcn::Plane("tessera::lcn::plane", samples, r.rows(), r.cols());
  }

  LcnOptions options_;
  Kokkos::View<const lcn::Acc*, lcn::Space> gaussian_;
  Windowed<T> windowed_;
  // Forward's results kept for backward: the local mean over the ring (owned box grown by
  // r, inside the image), sigma over the owned box, the image-wide mean of sigma per sample.
  lcn::Plane mean_, sigma_;
  lcn::Samples mu_, dmu_;
  lcn::SumScratch block_sums_;  // the per-sample sums' partials, kept between steps
  GroupSum<lcn::Acc> sums_staging_;  // host staging of mu and dmu, kept between steps
  lcn::Plane grad_, ring_grad_;  // backward's workspaces
  lcn::Volume dv_;
  std::optional<Tensor<T>> saved_x_;
};

}  // namespace tessera::layers
