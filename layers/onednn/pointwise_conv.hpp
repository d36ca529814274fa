#pragma once
// bf16 1x1 convolutions (stride 1, one group) as oneDNN matmuls on the caller's NCHW
// memory: each image is read in place as a C x (H*W) matrix, y[n] = W . x[n] + b, so no
// operand changes layout. oneDNN's AMX convolutions take NHWC operands, and for a 1x1
// convolution the NCHW <-> NHWC transposes around them cost more than the arithmetic
// (bench/results/layers-bf16-amx-cpu-2026-11-27.md). fp32 keeps the convolution path: its
// blocked reorders are cheap, and this route measured 0.89-1.31x of it there.
//
// Taken where every operand of the call holds each (n, c) plane's H x W cells one after
// another (no halo columns inside the plane) and oneDNN has more than its reference matmul
// for the shapes; elsewhere the caller runs its convolution path. The route depends only
// on the layouts and shapes, never on a timing, so a run's results are reproducible.
// - forward: one batched matmul, the weight broadcast over the images. With a bias, y is
//   first filled with it and the matmul adds into y (a sum post-op): oneDNN 2.6's brgemm
//   matmul has no per-row bias, and a binary post-op with a per-row operand added 0.35 ms
//   to 8x64x64x64's 0.83 where the fill and the sum add 0.1 (the fill leaves y in cache
//   for the matmul's stores). Each output is its fp32 product plus the bf16 bias, rounded
//   once, as with the post-op.
// - backward data: dx[n] = W^T . dy[n], W^T read by swapped strides.
// - weight gradient: dy[n] . x[n]^T, batched into fp32 scratch, then added over the images
//   in order into the gradient. Images are taken in chunks that keep the scratch at 1 MiB
//   (one matmul per image instead took twice the time on small images: 64 of 28x14, 32
//   channels).
// - bias gradient: each channel's planes of dy summed in double (host_channel_sums): 0.18
//   ms of 8x64x64x64's backward, where a matmul of dy with a vector of ones (oneDNN's
//   matmul has no bias gradient) took 0.23.
// After a shape's first call nothing is allocated or re-planned: primitives and memory
// objects are kept and pointed at each call's data.

#include <Kokkos_Core.hpp>
#include <dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "distarray/kernel_label.hpp"
#include "layers/blocked_channel_sums.hpp"
#include "layers/cell_loop.hpp"
#include "layers/conv_backend.hpp"
#include "layers/onednn/onednn_bf16.hpp"
#include "layers/onednn/onednn_data_type.hpp"
#include "layers/onednn/onednn_execute.hpp"

namespace tessera::layers::onednn {

// t as N matrices of C rows and H*W columns, in place; nullopt where a plane's cells do not
// follow each other or t is empty.
template <class E>
std::optional<dnnl::memory::desc> planes_desc(const Tensor4Ref<E>& t) {
  const Shape4& d = t.dims;
  const Index4& s = t.strides;
  if (d[N] <= 0 || d[C] <= 0 || d[H] <= 0 || d[W] <= 0) return std::nullopt;
  const bool rows_dense = d[W] == 1 || s[W] == 1;
  const bool rows_follow = d[H] == 1 || s[H] == d[W];
  if (!rows_dense || !rows_follow) return std::nullopt;
  return dnnl::memory::desc({d[N], d[C], d[H] * d[W]}, data_type_of<E>(), {s[N], s[C], 1});
}

class PointwiseConv {
 public:
  explicit PointwiseConv(const dnnl::engine& engine) : engine_(engine) {}

  // Each call returns false, having done nothing, where this route does not take it.
  template <class E>
  bool forward(const ConvGeometry& g, const Tensor4Ref<const E>& x, const E* weight, const E* bias,
               const Tensor4Ref<E>& y, dnnl::stream& stream) {
    if (!pointwise<E>(g) || !same_cells(x.dims, y.dims)) return false;
    const auto xs = planes_desc(x), ys = planes_desc(y);
    if (!xs || !ys) return false;
    Product* p = product(bias ? Kind::forward_into_y : Kind::forward, weight_desc<E>(y.dims[C], x.dims[C], false),
                         *xs, *ys);
    if (!p) return false;
    if (bias) fill_planes(y, bias);
    point(p->src, weight);
    point(p->weights, x.data);
    point(p->dst, y.data);
    run(p->primitive, stream, {arg(DNNL_ARG_SRC, p->src), arg(DNNL_ARG_WEIGHTS, p->weights), arg(DNNL_ARG_DST, p->dst)});
    stream.wait();
    return true;
  }

  template <class E>
  bool backward_data(const ConvGeometry& g, const Tensor4Ref<const E>& dy, const E* weight, const Tensor4Ref<E>& dx,
                     dnnl::stream& stream) {
    if (!pointwise<E>(g) || !same_cells(dy.dims, dx.dims)) return false;
    const auto dys = planes_desc(dy), dxs = planes_desc(dx);
    if (!dys || !dxs) return false;
    Product* p = product(Kind::data, weight_desc<E>(dy.dims[C], dx.dims[C], true), *dys, *dxs);
    if (!p) return false;
    point(p->src, weight);
    point(p->weights, dy.data);
    point(p->dst, dx.data);
    run(p->primitive, stream, {arg(DNNL_ARG_SRC, p->src), arg(DNNL_ARG_WEIGHTS, p->weights), arg(DNNL_ARG_DST, p->dst)});
    stream.wait();
    return true;
  }

  template <class E>
  bool backward_weights(const ConvGeometry& g, const Tensor4Ref<const E>& x, const Tensor4Ref<const E>& dy,
                        float* dweight, float* dbias, dnnl::stream& stream) {
    if (!pointwise<E>(g) || !same_cells(x.dims, dy.dims) || !planes_desc(x) || !planes_desc(dy)) return false;
    const std::int64_t images = x.dims[N], in = x.dims[C], out = dy.dims[C];
    const std::int64_t chunk = std::clamp<std::int64_t>(kScratchFloats / (out * in), 1, images);
    Product* whole = weight_product(x, dy, chunk);
    Product* rest = images % chunk ? weight_product(x, dy, images % chunk) : whole;
    if (!whole || !rest) return false;
    for (std::int64_t first = 0; first < images; first += chunk) {
      Product& p = first + chunk <= images ? *whole : *rest;
      point(p.src, dy.data + first * dy.strides[N]);
      point(p.weights, x.data + first * x.strides[N]);
      add_over_images(p, std::min(chunk, images - first), out * in, dweight, stream);
    }
    if (dbias) {
      const Rows<const E> rows{dy.data, dy.strides[N], dy.strides[C], dy.strides[H]};
      host_channel_sums<E>("tessera::onednn::pointwise_bias_gradient", rows,
                           CellExtents{images, out, dy.dims[H], dy.dims[W]},
                           [=](const std::int64_t c, const double s) { dbias[c] += static_cast<float>(s); });
    }
    return true;
  }

 private:
  using Dt = dnnl::memory::data_type;
  // forward_into_y: y += the product (a sum post-op), y already holding the bias.
  enum class Kind { forward, forward_into_y, data, weight_gradient };

  // One matmul of this route and its memory objects, pointed at each call's data.
  struct Product {
    Kind kind;
    dnnl::memory::desc src_md, weights_md, dst_md;
    dnnl::matmul primitive;
    dnnl::memory src, weights, dst;
  };
  // A problem oneDNN only has its reference matmul for: refused once, remembered.
  struct Refused {
    Kind kind;
    dnnl::memory::desc src_md, weights_md, dst_md;
  };

  template <class E>
  static bool pointwise(const ConvGeometry& g) {
    const bool one_by_one = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.groups == 1 && !g.padded();
    // bf16 without oneDNN's bf16 kernels: the convolution path widens to fp32 (conv_onednn).
    return one_by_one && data_type_of<E>() == Dt::bf16 && onednn_bf16_native();
  }

  // A 1x1 stride-1 convolution keeps the images and cells; a mismatch is left to the
  // convolution path, which names it.
  static bool same_cells(const Shape4& in, const Shape4& out) {
    return in[N] == out[N] && in[H] == out[H] && in[W] == out[W];
  }

  // The dense OI weight as a (1 x out x in) matrix broadcast over the images, or its
  // transpose (1 x in x out) by swapped strides.
  template <class E>
  static dnnl::memory::desc weight_desc(std::int64_t out, std::int64_t in, bool transposed) {
    if (transposed) return dnnl::memory::desc({1, in, out}, data_type_of<E>(), {out * in, 1, in});
    return dnnl::memory::desc({1, out, in}, data_type_of<E>(), {out * in, in, 1});
  }

  // The kept matmul for these operands, made on first use; null where oneDNN offers only
  // its reference implementation (slower than the convolution path by far).
  Product* product(Kind kind, const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                   const dnnl::memory::desc& dst) {
    const auto same = [&](const auto& e) {
      return e.kind == kind && e.src_md == src && e.weights_md == weights && e.dst_md == dst;
    };
    for (Product& p : products_)
      if (same(p)) return &p;
    for (const Refused& r : refused_)
      if (same(r)) return nullptr;
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    if (kind == Kind::forward_into_y) ops.append_sum(1.0f);
    attr.set_post_ops(ops);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attr, engine_);
    if (std::string_view(pd.impl_info_str()).rfind("ref", 0) == 0) {
      refused_.push_back({kind, src, weights, dst});
      return nullptr;
    }
    products_.push_back({kind, src, weights, dst, dnnl::matmul(pd), dnnl::memory(src, engine_, nullptr),
                         dnnl::memory(weights, engine_, nullptr), dnnl::memory(dst, engine_, nullptr)});
    return &products_.back();
  }

  // dW[n] = dy[n] . x[n]^T for `images` images from `first` on: dy[n] as out x cells, x[n]
  // read transposed (cells x in) by swapped strides, into fp32 scratch.
  template <class E>
  Product* weight_product(const Tensor4Ref<const E>& x, const Tensor4Ref<const E>& dy, std::int64_t images) {
    const Dt dt = data_type_of<E>();
    const std::int64_t in = x.dims[C], out = dy.dims[C], cells = x.dims[H] * x.dims[W];
    return product(Kind::weight_gradient, dnnl::memory::desc({images, out, cells}, dt, {dy.strides[N], dy.strides[C], 1}),
                   dnnl::memory::desc({images, cells, in}, dt, {x.strides[N], 1, x.strides[C]}),
                   dnnl::memory::desc({images, out, in}, Dt::f32, {out * in, in, 1}));
  }

  // Every (n, c) plane of y (dense: planes_desc) set to bias[c].
  template <class E>
  static void fill_planes(const Tensor4Ref<E>& y, const E* bias) {
    const std::int64_t channels = y.dims[C], cells = y.dims[H] * y.dims[W];
    E* const data = y.data;
    const std::int64_t sn = y.strides[N], sc = y.strides[C];
    Kokkos::parallel_for(kernel_label("tessera::onednn::pointwise_bias_fill"),
                         Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>(
                             0, y.dims[N] * channels),
                         [=](const std::int64_t plane) {
                           const std::int64_t n = plane / channels, c = plane % channels;
                           const E value = bias[c];  // a local: the stores cannot change it
                           E* const cell = data + n * sn + c * sc;
                           TESSERA_SIMD_LOOP
                           for (std::int64_t i = 0; i < cells; ++i) cell[i] = value;
                         });
    Kokkos::fence();
  }

  // Runs p (its inputs already pointed) into the scratch, then grad += the sum of its
  // `images` per-image results of `count` values each, added image by image in order.
  void add_over_images(Product& p, std::int64_t images, std::int64_t count, float* grad, dnnl::stream& stream) {
    if (static_cast<std::int64_t>(scratch_.size()) < images * count)
      scratch_.resize(static_cast<std::size_t>(images * count));
    point(p.dst, scratch_.data());
    run(p.primitive, stream, {arg(DNNL_ARG_SRC, p.src), arg(DNNL_ARG_WEIGHTS, p.weights), arg(DNNL_ARG_DST, p.dst)});
    stream.wait();
    const float* per_image = scratch_.data();
    Kokkos::parallel_for(kernel_label("tessera::onednn::pointwise_gradient_sum"),
                         Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>(0, count),
                         [=](const std::int64_t i) {
                           float sum = grad[i];
                           for (std::int64_t n = 0; n < images; ++n) sum += per_image[n * count + i];
                           grad[i] = sum;
                         });
    Kokkos::fence();
  }

  // oneDNN reads inputs through a non-const handle but never writes them.
  template <class E>
  static void point(const dnnl::memory& m, E* data) {
    m.set_data_handle(const_cast<std::remove_const_t<E>*>(data));
  }

  dnnl::engine engine_;
  std::deque<Product> products_;  // a deque: a product's address stays valid as others are added
  std::vector<Refused> refused_;
  // Kept between calls; it only grows, to at most kScratchFloats weight gradients (images
  // are taken in chunks).
  static constexpr std::int64_t kScratchFloats = std::int64_t{1} << 18;
  std::vector<float> scratch_;
};

}  // namespace tessera::layers::onednn
