#include "data/image_reader.hpp"

#include <png.h>
// jpeglib.h needs size_t and FILE declared first.
#include <cstdio>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace tessera::data {
namespace {

using Bytes = std::vector<unsigned char>;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("image '" + path + "': " + what);
}

Bytes read_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail(path, "does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "cannot be read");
  return bytes;
}

bool starts_with(const Bytes& bytes, std::initializer_list<unsigned char> signature) {
  return bytes.size() >= signature.size() && std::equal(signature.begin(), signature.end(), bytes.begin());
}

// ---- PNG: libpng's simplified API reports errors through image.message, no longjmp here.

class PngImage {
 public:
  PngImage() {
    std::memset(&image_, 0, sizeof image_);
    image_.version = PNG_IMAGE_VERSION;
  }
  ~PngImage() { png_image_free(&image_); }  // safe after libpng freed it itself
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
  png_image* get() { return &image_; }

 private:
  png_image image_;
};

RgbImage decode_png(const std::string& path, const Bytes& bytes) {
  PngImage png;
  png_image* image = png.get();
  if (!png_image_begin_read_from_memory(image, bytes.data(), bytes.size()))
    fail(path, std::string("corrupt PNG: ") + image->message);
  // RGBA rather than RGB: libpng would composite alpha onto a background, and the
  // contract is to drop it and keep the stored colours.
  image->format = PNG_FORMAT_RGBA;
  Bytes rgba(PNG_IMAGE_SIZE(*image));
  if (!png_image_finish_read(image, nullptr, rgba.data(), 0, nullptr))
    fail(path, std::string("corrupt PNG: ") + image->message);
  RgbImage out(image->height, image->width);
  for (std::size_t i = 0, n = out.pixels.size() / 3; i < n; ++i)
    for (int c = 0; c < 3; ++c) out.pixels[3 * i + c] = rgba[4 * i + c];
  return out;
}

// ---- JPEG: libjpeg reports a fatal error by calling error_exit, which must not return;
// it longjmps back to the setjmp in jpeg_start / jpeg_rows, whose frames hold nothing that
// needs a destructor. Warnings (corrupt data the library papered over) are kept, not
// printed, and turned into an error afterwards.

struct JpegDecoder {
  jpeg_decompress_struct info;
  jpeg_error_mgr errors;
  std::jmp_buf on_error;
  char message[JMSG_LENGTH_MAX] = {};

  JpegDecoder() {
    info.err = jpeg_std_error(&errors);
    errors.error_exit = &error_exit;
    errors.output_message = &keep_first_message;
    info.client_data = this;
    jpeg_create_decompress(&info);
  }
  ~JpegDecoder() { jpeg_destroy_decompress(&info); }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  static void keep_first_message(j_common_ptr common) {
    auto* self = static_cast<JpegDecoder*>(common->client_data);
    if (self->message[0] == '\0') common->err->format_message(common, self->message);
  }
  static void error_exit(j_common_ptr common) {
    auto* self = static_cast<JpegDecoder*>(common->client_data);
    common->err->format_message(common, self->message);
    std::longjmp(self->on_error, 1);
  }
};

bool jpeg_start(JpegDecoder* d, const Bytes* bytes) {
  if (setjmp(d->on_error)) return false;
  jpeg_mem_src(&d->info, const_cast<unsigned char*>(bytes->data()), static_cast<unsigned long>(bytes->size()));
  jpeg_read_header(&d->info, TRUE);
  d->info.out_color_space = JCS_RGB;  // libjpeg-turbo expands greyscale to RGB itself
  jpeg_start_decompress(&d->info);
  return true;
}

bool jpeg_rows(JpegDecoder* d, unsigned char* out) {
  if (setjmp(d->on_error)) return false;
  const std::size_t stride = std::size_t{d->info.output_width} * 3;
  while (d->info.output_scanline < d->info.output_height) {
    JSAMPROW row = out + d->info.output_scanline * stride;
    jpeg_read_scanlines(&d->info, &row, 1);
  }
  jpeg_finish_decompress(&d->info);
  return true;
}

RgbImage decode_jpeg(const std::string& path, const Bytes& bytes) {
  JpegDecoder decoder;
  if (!jpeg_start(&decoder, &bytes)) fail(path, std::string("corrupt JPEG: ") + decoder.message);
  if (decoder.info.output_components != 3) fail(path, "JPEG did not decode to 3 channels");
  RgbImage out(decoder.info.output_height, decoder.info.output_width);
  if (!jpeg_rows(&decoder, out.pixels.data())) fail(path, std::string("corrupt JPEG: ") + decoder.message);
  if (decoder.errors.num_warnings > 0) fail(path, std::string("corrupt JPEG: ") + decoder.message);
  return out;
}

}  // namespace

RgbImage read_image(const std::string& path) {
  const Bytes bytes = read_file(path);
  if (starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'})) return decode_png(path, bytes);
  if (starts_with(bytes, {0xFF, 0xD8, 0xFF})) return decode_jpeg(path, bytes);
  fail(path, "is not a PNG or JPEG file (unrecognised signature)");
}

}  // namespace tessera::data
