#include "data/image_set.hpp"

#include <ostream>
#include <stdexcept>

#include "data/atomic_output.hpp"
#include "data/data_file_writer.hpp"
#include "data/image_reader.hpp"

namespace tessera::data {
namespace {

std::string size_text(std::int64_t h, std::int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

std::vector<RgbImage> frames_of(const RgbImage& image, const std::string& path, const ImageSetOptions& options) {
  switch (options.fit) {
    case Fit::tile: return tile_frames(image, options.size);
    case Fit::resize: return {resize_bilinear(image, options.size)};
    case Fit::crop: break;
  }
  try {
    return {center_crop(image, options.size)};
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("image '" + path + "' " + e.what());
  }
}

}  // namespace

void convert_image_set(const ImageSetOptions& options, std::ostream& log) {
  if (options.inputs.empty()) throw std::runtime_error("no image files given");
  if (options.size.height < 1 || options.size.width < 1) throw std::runtime_error("--size must be positive");
  if (options.label && *options.label < 0) throw std::runtime_error("--label must be 0 or more");
  AtomicOutput out(options.out_file);

  DataSet set;
  std::int64_t frames = 0;
  for (const std::string& path : options.inputs) {
    const RgbImage image = read_image(path);
    const std::vector<RgbImage> cut = frames_of(image, path, options);
    if (cut.empty())
      log << "tessera-data: skipped '" << path << "' (" << size_text(image.height, image.width)
          << "): smaller than one " << size_text(options.size.height, options.size.width) << " frame\n";
    for (const RgbImage& frame : cut) append_planar(frame, set.images);
    frames += static_cast<std::int64_t>(cut.size());
  }
  if (frames == 0)
    throw std::runtime_error("no frames: every image is smaller than " +
                             size_text(options.size.height, options.size.width));
  set.image_dims = {frames, 3, options.size.height, options.size.width};
  if (options.label) set.labels.assign(static_cast<std::size_t>(frames), *options.label);
  write_data_file(set, out);
  out.commit();
  log << "tessera-data: " << options.out_file << ": " << frames << " images (3x"
      << size_text(options.size.height, options.size.width) << " uint8) from " << options.inputs.size()
      << " file(s)" << (options.label ? ", labels" : "") << "\n";
}

}  // namespace tessera::data
