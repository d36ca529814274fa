#include "data/png_writer.hpp"

#include <png.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

#include "data/atomic_output.hpp"

namespace tessera::data {
namespace {

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* text = static_cast<std::string*>(png_get_error_ptr(png));
  *text = message;
  png_longjmp(png, 1);
}

}  // namespace

void write_png(const RgbImage& image, const std::string& path) {
  if (image.height < 1 || image.width < 1) throw std::runtime_error("cannot write '" + path + "': the image is empty");
  AtomicOutput out(path);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(out.temporary().c_str(), "wb"), &std::fclose);
  if (!file) throw std::runtime_error("cannot write '" + path + "'");
  std::string error;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, on_png_error, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw std::runtime_error("cannot write '" + path + "': out of memory");
  }
  // libpng reports errors by longjmp: nothing with a destructor may be created below.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("cannot write '" + path + "': " + error);
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::int64_t y = 0; y < image.height; ++y)
    png_write_row(png, image.pixels.data() + static_cast<std::size_t>(y * image.width * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(file.release()) != 0) throw std::runtime_error("cannot write '" + path + "': closing failed");
  out.commit();
}

}  // namespace tessera::data
