#include "train/filter_image.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "distarray/hdf5_file.hpp"

namespace tessera::train {
namespace {

// A picture of rows x columns tiles of kh x kw weights, `zoom` pixels per weight, on white.
struct Layout {
  Layout(std::int64_t rows, std::int64_t columns, std::int64_t kh, std::int64_t kw, int min_zoom)
      : rows(rows), columns(columns), kh(kh), kw(kw),
        zoom(std::max<std::int64_t>(min_zoom, (48 + std::max(kh, kw) - 1) / std::max(kh, kw))) {}  // tiles >= 48 px

  data::RgbImage blank() const {
    data::RgbImage image(rows * (tile_h() + gap) + gap, columns * (tile_w() + gap) + gap);
    std::fill(image.pixels.begin(), image.pixels.end(), std::uint8_t{255});
    return image;
  }
  std::int64_t tile_h() const { return kh * zoom; }
  std::int64_t tile_w() const { return kw * zoom; }

  std::int64_t rows, columns, kh, kw, zoom;
  static constexpr std::int64_t gap = 2;
};

// Draws one filter (channels, kh, kw), row-major from `first`, into tile (row, column).
void draw_tile(data::RgbImage& image, const Layout& l, std::int64_t row, std::int64_t column, const float* first,
               std::int64_t channels) {
  const std::int64_t per_filter = channels * l.kh * l.kw;
  float top = 0;
  for (std::int64_t i = 0; i < per_filter; ++i) top = std::max(top, std::fabs(first[i]));
  const float scale = top > 0 ? 127.5f / top : 0.f;
  const bool rgb = channels == 3;
  const std::int64_t y0 = Layout::gap + row * (l.tile_h() + Layout::gap);
  const std::int64_t x0 = Layout::gap + column * (l.tile_w() + Layout::gap);
  for (std::int64_t y = 0; y < l.tile_h(); ++y)
    for (std::int64_t x = 0; x < l.tile_w(); ++x)
      for (int c = 0; c < 3; ++c) {
        const float v = first[((rgb ? c : 0) * l.kh + y / l.zoom) * l.kw + x / l.zoom];
        image.at(y0 + y, x0 + x, c) = static_cast<std::uint8_t>(std::clamp(127.5f + v * scale, 0.f, 255.f));
      }
}

// Conv (O, C, KH, KW): the O filters on a near-square grid.
data::RgbImage render_conv(const Hdf5File& file, const std::string& name, const Dims& dims, int zoom) {
  std::vector<float> w(static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]));
  file.read_block(name, {0, 0, 0, 0}, dims, w.data());
  const std::int64_t filters = dims[0], channels = dims[1];
  const auto columns = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(filters))));
  const Layout layout((filters + columns - 1) / columns, columns, dims[2], dims[3], zoom);
  data::RgbImage image = layout.blank();
  const std::int64_t per_filter = channels * dims[2] * dims[3];
  for (std::int64_t f = 0; f < filters; ++f)
    draw_tile(image, layout, f / columns, f % columns, w.data() + f * per_filter, channels);
  return image;
}

// The indices at 1/4, 1/2 and 3/4 of 0..n-1 (n*q/4), each once.
std::vector<std::int64_t> quartiles(std::int64_t n) {
  std::vector<std::int64_t> at;
  for (std::int64_t q = 1; q <= 3; ++q)
    if (at.empty() || at.back() != n * q / 4) at.push_back(n * q / 4);
  return at;
}

// Local (Hout, Wout, K, C, KH, KW): a row per sampled position, read on its own.
data::RgbImage render_local(const Hdf5File& file, const std::string& name, const Dims& dims, int zoom) {
  const std::int64_t maps = dims[2], channels = dims[3], kh = dims[4], kw = dims[5];
  const std::vector<std::int64_t> rows = quartiles(dims[0]), columns = quartiles(dims[1]);
  const Layout layout(static_cast<std::int64_t>(rows.size() * columns.size()), maps, kh, kw, zoom);
  data::RgbImage image = layout.blank();
  std::vector<float> bank(static_cast<std::size_t>(maps * channels * kh * kw));
  const std::int64_t per_filter = channels * kh * kw;
  std::int64_t row = 0;
  for (std::int64_t i : rows)
    for (std::int64_t j : columns) {
      file.read_block(name, {i, j, 0, 0, 0, 0}, {1, 1, maps, channels, kh, kw}, bank.data());
      for (std::int64_t k = 0; k < maps; ++k) draw_tile(image, layout, row, k, bank.data() + k * per_filter, channels);
      ++row;
    }
  return image;
}

}  // namespace

constexpr int kLayersSearched = 1024;

data::RgbImage render_first_layer_filters(const std::string& checkpoint, int zoom) {
  const Hdf5File file(checkpoint, Hdf5File::Mode::read, MPI_COMM_SELF);
  // The first layer that has a weight: layers without parameters (an lcn that normalises
  // the input) may come before it.
  std::string name;
  int layer = 0;
  for (; layer < kLayersSearched && name.empty(); ++layer)
    if (file.has("/params/" + std::to_string(layer))) name = "/params/" + std::to_string(layer) + "/weight";
  if (name.empty() || !file.has(name))
    throw std::runtime_error("checkpoint '" + checkpoint + "' has no layer weight to draw (no " +
                             (name.empty() ? std::string("/params/<layer>") : name) + ")");
  const Dims dims = file.shape(name);
  if (dims.size() == 4) return render_conv(file, name, dims, zoom);
  if (dims.size() == 6) return render_local(file, name, dims, zoom);
  throw std::runtime_error(name + " has shape " + dims_text(dims) +
                           ", neither a conv filter bank (O, C, KH, KW) nor a local one (Hout, Wout, K, C, KH, KW)");
}

}  // namespace tessera::train
