// data_make_samples DIR: writes the image files the tessera-data end-to-end tests convert
// (a fixture, so that no binary files live in the repository):
//   photo.png         40x50 RGB, pixel (y, x) = (y, x, y + x): tiles show where they came from
//   grey.jpg          30x70 greyscale JPEG
//   truncated.png     the first half of a valid PNG
//   not-an-image.png  text
//   fmnist-bad-test/  Fashion-MNIST's four IDX files: a valid train split of 3 images, a
//                     test split whose second label (12) is no class
#include <cstdio>
#include <exception>
#include <filesystem>

#include "sample_files.hpp"

using namespace tessera::data;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: data_make_samples DIR\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    std::filesystem::create_directories(dir);
    samples::write_png(dir + "/photo.png", samples::coordinates(40, 50).pixels, 40, 50, 3);
    const RgbImage ramp = samples::ramp(30, 70);
    samples::Bytes grey(30 * 70);
    for (std::size_t i = 0; i < grey.size(); ++i) grey[i] = ramp.pixels[3 * i];
    samples::write_jpeg(dir + "/grey.jpg", grey, 30, 70, 1, 95);
    samples::Bytes png = samples::read_plain(dir + "/photo.png");
    png.resize(png.size() / 2);
    samples::write_plain(dir + "/truncated.png", png);
    samples::write_plain(dir + "/not-an-image.png", {'t', 'e', 'x', 't', '\n'});
    const std::string split = dir + "/fmnist-bad-test";
    std::filesystem::create_directories(split);
    samples::write_gz(split + "/train-images-idx3-ubyte.gz", samples::idx_file(0x803, {3, 28, 28}, samples::noise(3 * 784, 1)));
    samples::write_gz(split + "/train-labels-idx1-ubyte.gz", samples::idx_file(0x801, {3}, {1, 2, 3}));
    samples::write_gz(split + "/t10k-images-idx3-ubyte.gz", samples::idx_file(0x803, {2, 28, 28}, samples::noise(2 * 784, 2)));
    samples::write_gz(split + "/t10k-labels-idx1-ubyte.gz", samples::idx_file(0x801, {2}, {4, 12}));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_make_samples: %s\n", e.what());
    return 1;
  }
}
