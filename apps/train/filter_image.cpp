#include "train/filter_image.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "distarray/hdf5_file.hpp"

namespace tessera::train {

data::RgbImage render_first_layer_filters(const std::string& checkpoint, int zoom) {
  const Hdf5File file(checkpoint, Hdf5File::Mode::read, MPI_COMM_SELF);
  const std::string name = "/params/0/weight";
  if (!file.has(name)) throw std::runtime_error("checkpoint '" + checkpoint + "' has no " + name);
  const Dims dims = file.shape(name);
  if (dims.size() != 4)
    throw std::runtime_error("layer 0's weight has shape " + dims_text(dims) + ", not a filter bank (O, C, KH, KW)");
  std::vector<float> w(static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]));
  file.read_block(name, {0, 0, 0, 0}, dims, w.data());

  const std::int64_t filters = dims[0], channels = dims[1], kh = dims[2], kw = dims[3];
  const auto columns = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(filters))));
  const std::int64_t rows = (filters + columns - 1) / columns;
  zoom = std::max<int>(zoom, static_cast<int>((48 + std::max(kh, kw) - 1) / std::max(kh, kw)));  // tiles >= 48 px
  const std::int64_t tile_h = kh * zoom, tile_w = kw * zoom, gap = 2;
  data::RgbImage image(rows * (tile_h + gap) + gap, columns * (tile_w + gap) + gap);
  std::fill(image.pixels.begin(), image.pixels.end(), std::uint8_t{255});
  const bool rgb = channels == 3;
  const std::int64_t per_filter = channels * kh * kw;
  for (std::int64_t f = 0; f < filters; ++f) {
    const float* first = w.data() + f * per_filter;
    float top = 0;
    for (std::int64_t i = 0; i < per_filter; ++i) top = std::max(top, std::fabs(first[i]));
    const float scale = top > 0 ? 127.5f / top : 0.f;
    const std::int64_t y0 = gap + (f / columns) * (tile_h + gap), x0 = gap + (f % columns) * (tile_w + gap);
    for (std::int64_t y = 0; y < tile_h; ++y)
      for (std::int64_t x = 0; x < tile_w; ++x)
        for (int c = 0; c < 3; ++c) {
          const float v = first[((rgb ? c : 0) * kh + y / zoom) * kw + x / zoom];
          image.at(y0 + y, x0 + x, c) = static_cast<std::uint8_t>(std::clamp(127.5f + v * scale, 0.f, 255.f));
        }
  }
  return image;
}

}  // namespace tessera::train
