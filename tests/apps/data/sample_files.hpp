#pragma once
// Small input files the data tests write themselves, through the same libraries real
// files come from (zlib, libpng, libjpeg), so no binary fixtures live in the repository.
#include <cstdint>
#include <string>
#include <vector>

#include "data/rgb_image.hpp"

namespace tessera::data::samples {

using Bytes = std::vector<std::uint8_t>;

// A fresh empty directory under gtest's temporary directory (or `root` when given).
std::string fresh_dir(const std::string& name, const std::string& root = "");

// An IDX file image: big-endian magic and sizes, then `payload`.
Bytes idx_file(std::uint32_t magic, const std::vector<std::uint32_t>& dims, const Bytes& payload);
void write_gz(const std::string& path, const Bytes& bytes);
void write_plain(const std::string& path, const Bytes& bytes);
Bytes read_plain(const std::string& path);

// Deterministic content: every value differs from its neighbours (for exact round trips).
Bytes noise(std::size_t count, std::uint32_t seed);
// A smooth colour ramp: what JPEG compresses with small errors.
RgbImage ramp(std::int64_t height, std::int64_t width);
// An image whose every pixel tells its position: r = y, g = x, b = y + x (mod 256).
RgbImage coordinates(std::int64_t height, std::int64_t width);

// `channels` 1 (grey), 3 (RGB) or 4 (RGBA), interleaved rows.
void write_png(const std::string& path, const Bytes& pixels, int height, int width, int channels);
// `channels` 1 (grey) or 3 (RGB).
void write_jpeg(const std::string& path, const Bytes& pixels, int height, int width, int channels, int quality);

}  // namespace tessera::data::samples
