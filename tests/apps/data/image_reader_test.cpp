// The image reader on PNG and JPEG files written here with libpng and libjpeg: PNG comes
// back exactly (RGB, grey as three equal channels, RGBA with alpha dropped and colours
// kept), JPEG within a small tolerance, and broken or foreign files are errors naming
// the file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "data/image_reader.hpp"
#include "sample_files.hpp"

namespace tessera::data {
namespace {

using samples::Bytes;

class ImageReader : public testing::Test {
 protected:
  std::string dir = samples::fresh_dir("images");
  std::string path(const std::string& name) const { return dir + "/" + name; }
};

void expect_error(const std::string& file, const std::string& says) {
  try {
    read_image(file);
    ADD_FAILURE() << "no error for " << file;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + file + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST_F(ImageReader, RgbPngRoundTripsExactly) {
  const Bytes rgb = samples::noise(7 * 5 * 3, 1);
  samples::write_png(path("rgb.png"), rgb, 7, 5, 3);
  const RgbImage image = read_image(path("rgb.png"));
  EXPECT_EQ(image.height, 7);
  EXPECT_EQ(image.width, 5);
  EXPECT_EQ(image.pixels, rgb);
}

TEST_F(ImageReader, GreyPngBecomesThreeEqualChannels) {
  const Bytes grey = samples::noise(4 * 6, 2);
  samples::write_png(path("grey.png"), grey, 4, 6, 1);
  const RgbImage image = read_image(path("grey.png"));
  ASSERT_EQ(image.pixels.size(), grey.size() * 3);
  for (std::size_t i = 0; i < grey.size(); ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(image.pixels[3 * i + c], grey[i]) << "pixel " << i << " channel " << c;
}

TEST_F(ImageReader, RgbaPngDropsAlphaAndKeepsColours) {
  const Bytes rgba = samples::noise(3 * 3 * 4, 3);
  samples::write_png(path("rgba.png"), rgba, 3, 3, 4);
  const RgbImage image = read_image(path("rgba.png"));
  for (std::size_t i = 0; i < 9; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(image.pixels[3 * i + c], rgba[4 * i + c]) << "pixel " << i;
}

TEST_F(ImageReader, RgbJpegDecodesWithinTolerance) {
  const RgbImage ramp = samples::ramp(32, 48);
  samples::write_jpeg(path("ramp.jpg"), ramp.pixels, 32, 48, 3, 95);
  const RgbImage image = read_image(path("ramp.jpg"));
  ASSERT_EQ(image.height, 32);
  ASSERT_EQ(image.width, 48);
  int worst = 0;
  double total = 0;
  for (std::size_t i = 0; i < ramp.pixels.size(); ++i) {
    const int diff = std::abs(int(image.pixels[i]) - int(ramp.pixels[i]));
    worst = std::max(worst, diff);
    total += diff;
  }
  // Lossy at quality 95 with chroma subsampling: small errors, never a wrong image.
  EXPECT_LE(worst, 12);
  EXPECT_LE(total / double(ramp.pixels.size()), 2.0);
}

TEST_F(ImageReader, GreyJpegBecomesThreeEqualChannels) {
  const RgbImage ramp = samples::ramp(16, 16);
  Bytes grey(16 * 16);
  for (std::size_t i = 0; i < grey.size(); ++i) grey[i] = ramp.pixels[3 * i];
  samples::write_jpeg(path("grey.jpg"), grey, 16, 16, 1, 95);
  const RgbImage image = read_image(path("grey.jpg"));
  for (std::size_t i = 0; i < grey.size(); ++i) {
    EXPECT_EQ(image.pixels[3 * i], image.pixels[3 * i + 1]);
    EXPECT_EQ(image.pixels[3 * i], image.pixels[3 * i + 2]);
    EXPECT_LE(std::abs(int(image.pixels[3 * i]) - int(grey[i])), 6);
  }
}

TEST_F(ImageReader, TruncatedFilesAreErrors) {
  samples::write_png(path("whole.png"), samples::noise(20 * 20 * 3, 4), 20, 20, 3);
  Bytes png = samples::read_plain(path("whole.png"));
  png.resize(png.size() / 2);
  samples::write_plain(path("half.png"), png);
  expect_error(path("half.png"), "corrupt PNG");

  const RgbImage ramp = samples::ramp(64, 64);
  samples::write_jpeg(path("whole.jpg"), ramp.pixels, 64, 64, 3, 90);
  Bytes jpeg = samples::read_plain(path("whole.jpg"));
  jpeg.resize(jpeg.size() / 2);
  samples::write_plain(path("half.jpg"), jpeg);
  expect_error(path("half.jpg"), "corrupt JPEG");
  jpeg.resize(40);  // inside the headers
  samples::write_plain(path("header.jpg"), jpeg);
  expect_error(path("header.jpg"), "corrupt JPEG");
}

TEST_F(ImageReader, OtherFilesAreErrors) {
  samples::write_plain(path("text.png"), Bytes{'h', 'e', 'l', 'l', 'o'});
  expect_error(path("text.png"), "not a PNG or JPEG file");
  samples::write_plain(path("empty.jpg"), {});
  expect_error(path("empty.jpg"), "not a PNG or JPEG file");
  expect_error(path("absent.png"), "does not exist");
}

}  // namespace
}  // namespace tessera::data
