#include "data/fashion_mnist.hpp"

#include <filesystem>
#include <iterator>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "data/atomic_output.hpp"
#include "data/data_file_writer.hpp"
#include "data/idx_reader.hpp"

namespace tessera::data {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSide = 28;
constexpr std::int64_t kClasses = 10;

struct Split {
  const char* name;    // in the output file name
  const char* prefix;  // of the IDX file names
};
constexpr Split kSplits[] = {{"train", "train"}, {"test", "t10k"}};

std::string images_file(const std::string& source, const Split& s) {
  return (fs::path(source) / (std::string(s.prefix) + "-images-idx3-ubyte.gz")).string();
}
std::string labels_file(const std::string& source, const Split& s) {
  return (fs::path(source) / (std::string(s.prefix) + "-labels-idx1-ubyte.gz")).string();
}

DataSet read_split(const std::string& source, const Split& split, std::int64_t limit) {
  const std::string image_path = images_file(source, split), label_path = labels_file(source, split);
  IdxArray images = read_idx_ubyte(image_path, 3, limit > 0 ? limit : -1);
  const IdxArray labels = read_idx_ubyte(label_path, 1, limit > 0 ? limit : -1);
  if (images.dims[1] != kSide || images.dims[2] != kSide)
    throw std::runtime_error("'" + image_path + "' holds " + std::to_string(images.dims[1]) + "x" +
                             std::to_string(images.dims[2]) + " images, not 28x28");
  if (images.items_in_file != labels.items_in_file)
    throw std::runtime_error("'" + image_path + "' has " + std::to_string(images.items_in_file) + " images but '" +
                             label_path + "' has " + std::to_string(labels.items_in_file) + " labels");
  DataSet set;
  set.image_dims = {images.dims[0], 1, kSide, kSide};
  set.images = std::move(images.bytes);
  set.labels.assign(labels.bytes.begin(), labels.bytes.end());
  for (std::size_t i = 0; i < set.labels.size(); ++i)
    if (set.labels[i] >= kClasses)
      throw std::runtime_error("'" + label_path + "': label " + std::to_string(set.labels[i]) + " of item " +
                               std::to_string(i) + " is not a class (0-9)");
  set.classes = kFashionMnistClasses;
  return set;
}

}  // namespace

void convert_fashion_mnist(const FashionMnistOptions& options, std::ostream& log) {
  if (!fs::is_directory(options.source))
    throw std::runtime_error("Fashion-MNIST source directory '" + options.source +
                             "' does not exist (install the Debian package dataset-fashion-mnist, or pass --source)");
  for (const Split& split : kSplits)
    for (const std::string& file : {images_file(options.source, split), labels_file(options.source, split)})
      if (!fs::is_regular_file(file)) throw std::runtime_error("Fashion-MNIST file '" + file + "' is missing");

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + options.out_dir + "': " + ec.message());
  std::vector<std::unique_ptr<AtomicOutput>> outputs;
  for (const Split& split : kSplits)
    outputs.push_back(std::make_unique<AtomicOutput>(
        (fs::path(options.out_dir) / ("fashion-mnist-" + std::string(split.name) + ".h5")).string()));

  // Both splits are read (and checked) before either is written or reported, so a corrupt
  // test split reports no train file that is then never put in place.
  std::vector<DataSet> sets;
  for (const Split& split : kSplits) sets.push_back(read_split(options.source, split, options.limit));
  for (std::size_t s = 0; s < sets.size(); ++s) write_data_file(sets[s], *outputs[s]);
  for (std::size_t s = 0; s < sets.size(); ++s)
    log << "tessera-data: " << outputs[s]->path() << ": " << sets[s].image_dims[0]
        << " images (1x28x28 uint8), labels, classes\n";
  for (auto& out : outputs) out->commit();
}

}  // namespace tessera::data
