#include "sample_files.hpp"

#include <png.h>
#include <zlib.h>
// jpeglib.h needs size_t and FILE declared first.
#include <cstdio>
#include <jpeglib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <gtest/gtest.h>
#include <unistd.h>

namespace tessera::data::samples {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name, const std::string& root) {
  const fs::path base = root.empty() ? fs::path(testing::TempDir()) : fs::path(root);
  const fs::path dir = base / ("tessera-data-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

Bytes idx_file(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes out;
  auto put32 = [&](std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
  };
  put32(magic);
  for (std::uint32_t d : dims) put32(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot write " + path);
  if (!bytes.empty()) gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(file);
}

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

Bytes read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes noise(std::size_t count, std::uint32_t seed) {
  Bytes out(count);
  std::uint32_t state = seed * 2654435761u + 1;
  for (auto& b : out) {
    state = state * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(state >> 24);
  }
  return out;
}

RgbImage ramp(std::int64_t height, std::int64_t width) {
  RgbImage image(height, width);
  for (std::int64_t y = 0; y < height; ++y)
    for (std::int64_t x = 0; x < width; ++x) {
      image.at(y, x, 0) = static_cast<std::uint8_t>(40 + 160 * x / width);
      image.at(y, x, 1) = static_cast<std::uint8_t>(40 + 160 * y / height);
      image.at(y, x, 2) = static_cast<std::uint8_t>(120);
    }
  return image;
}

RgbImage coordinates(std::int64_t height, std::int64_t width) {
  RgbImage image(height, width);
  for (std::int64_t y = 0; y < height; ++y)
    for (std::int64_t x = 0; x < width; ++x) {
      image.at(y, x, 0) = static_cast<std::uint8_t>(y);
      image.at(y, x, 1) = static_cast<std::uint8_t>(x);
      image.at(y, x, 2) = static_cast<std::uint8_t>(y + x);
    }
  return image;
}

void write_png(const std::string& path, const Bytes& pixels, int height, int width, int channels) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  if (!png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr))
    throw std::runtime_error("libpng cannot write " + path + ": " + image.message);
}

void write_jpeg(const std::string& path, const Bytes& pixels, int height, int width, int channels, int quality) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw std::runtime_error("cannot write " + path);
  jpeg_compress_struct info;
  jpeg_error_mgr errors;  // the default handler exits the test program on an error
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  jpeg_stdio_dest(&info, file);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = channels;
  info.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() + std::size_t{info.next_scanline} * width * channels);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::fclose(file);
}

}  // namespace tessera::data::samples
