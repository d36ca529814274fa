#include "demo/smoothing.hpp"

#include <cmath>

#include "layers/cell_loop.hpp"

namespace tessera::demo {
namespace {

// Copies box `box` of a (window-indexed) view into a padded host image and back: the
// serial reference pads with one ring of zeros, as the halo exchange's boundary fill does.
HostArray<float> padded(const HostArray<float>& image) {
  HostArray<float> p("padded", image.extent(0), image.extent(1), image.extent(2) + 2, image.extent(3) + 2);
  Kokkos::deep_copy(p, 0.0f);
  for (std::size_t n = 0; n < image.extent(0); ++n)
    for (std::size_t c = 0; c < image.extent(1); ++c)
      for (std::size_t h = 0; h < image.extent(2); ++h)
        for (std::size_t w = 0; w < image.extent(3); ++w) p(n, c, h + 1, w + 1) = image(n, c, h, w);
  return p;
}

}  // namespace

void smooth_box(const DistArray<float>& in, const DistArray<float>& out, const Box& box) {
  if (box.empty()) return;
  const auto src = in.window();
  const auto dst = out.window();
  const Index4 s = in.window_box().lo, d = out.window_box().lo;
  const std::int64_t sh = box.lo[H] - s[H], sw = box.lo[W] - s[W];
  const std::int64_t dh = box.lo[H] - d[H], dw = box.lo[W] - d[W];
  const std::int64_t n0 = box.lo[N], c0 = box.lo[C];
  const std::int64_t sn = n0 - s[N], dn = n0 - d[N];
  layers::for_each_cell(
      "demo::smooth", layers::CellExtents{box.extent(N), box.extent(C), box.extent(H), box.extent(W)},
      KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
        dst(dn + n, c0 + c, dh + h, dw + w) = smoothed(src, sn + n, c0 + c, sh + h, sw + w);
      });
}

HostArray<float> smooth_serial(const HostArray<float>& image, int sweeps) {
  HostArray<float> current("reference", image.extent(0), image.extent(1), image.extent(2), image.extent(3));
  Kokkos::deep_copy(current, image);
  for (int s = 0; s < sweeps; ++s) {
    const HostArray<float> p = padded(current);
    for (std::size_t n = 0; n < current.extent(0); ++n)
      for (std::size_t c = 0; c < current.extent(1); ++c)
        for (std::size_t h = 0; h < current.extent(2); ++h)
          for (std::size_t w = 0; w < current.extent(3); ++w)
            current(n, c, h, w) = smoothed(p, n, c, static_cast<std::int64_t>(h) + 1, static_cast<std::int64_t>(w) + 1);
  }
  return current;
}

HostArray<float> make_image(const Shape4& shape) {
  HostArray<float> image("image", shape[0], shape[1], shape[2], shape[3]);
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w)
          image(n, c, h, w) = static_cast<float>(std::sin(0.05 * (h + 1) * (c + 1)) * std::cos(0.07 * w + n) +
                                                 ((h / 8 + w / 8) % 2 ? 0.5 : -0.5));
  return image;
}

}  // namespace tessera::demo
