// train_make_data DIR: the small data files the tessera-train tests run on (a fixture, so
// that no binary files live in the repository):
//   train.h5        48 samples 1x12x12 uint8, 4 classes: class k has a bright bar in
//                   position k (rows 2-3 / rows 8-9 / columns 2-3 / columns 8-9) on noise
//   val.h5          22 such samples: not a multiple of the tests' batch, so the last
//                   evaluation batch is padded
//   targets.h5      16 samples 1x12x12 float32 with /targets = the clean image
//   nolabels.h5     /images only
//   rgb10.h5        16 samples 3x10x10 with labels: the wrong shape for train.h5's model
//   not-hdf5.h5     text
//   nan-images.h5   targets.h5's kind with /images[7,0,9,10] = NaN
//   inf-targets.h5  targets.h5's kind with /targets[5,0,9,4] = +inf
//                   (row 9: the second rank's tile on grid 1x2x1)
//   bad-label.h5    train.h5 with /labels[37] = 4: outside the 4 classes
//   ignored-label.h5 val.h5 with /labels[5] = -100 (PyTorch's ignore_index, not one here)
//   f64-targets.h5  targets.h5's kind with /targets stored as float64
// train_make_data truncate SRC DST BYTES: DST = the first BYTES bytes of SRC.
// train_make_data poison SRC DST DATASET I,J,... VALUE: DST = SRC with one element of
// DATASET (float32) set to VALUE (nan, inf, -inf or a number): a checkpoint with a NaN weight.
// train_make_data check-predictions A B CLEAN SIGMA [TOLERANCE]: A and B (tessera-train
// --predict-out files of one run on two grids, or in two precisions) hold every sample of
// CLEAN (uint8 /images), their /inputs and /outputs agree within TOLERANCE (relative to the
// largest value; 1e-5 unless given), the inputs are CLEAN with noise of standard deviation
// SIGMA (within 20%), and the outputs are not the inputs.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "distarray/hdf5_file.hpp"

using tessera::Dims;
using tessera::Hdf5File;

namespace {

struct Samples {
  std::vector<std::uint8_t> images;
  std::vector<float> clean;
  std::vector<std::int64_t> labels;
};

Samples make(std::int64_t n, std::int64_t channels, std::int64_t size, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(0, 60);
  Samples s;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = i % 4;
    s.labels.push_back(k);
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t y = 0; y < size; ++y)
        for (std::int64_t x = 0; x < size; ++x) {
          const std::int64_t along = k < 2 ? y : x, at = (k % 2 == 0) ? 2 : size - 4;
          const bool bar = along == at || along == at + 1;
          s.clean.push_back(bar ? 0.8f : 0.1f);
          s.images.push_back(static_cast<std::uint8_t>((bar ? 190 : 20) + noise(rng)));
        }
  }
  return s;
}

void write(const std::string& path, std::int64_t n, std::int64_t channels, std::int64_t size, bool labels,
           bool targets, std::uint32_t seed, bool float64_targets = false) {
  const Samples s = make(n, channels, size, seed);
  Hdf5File file(path, Hdf5File::Mode::create, MPI_COMM_SELF);
  const Dims shape{n, channels, size, size};
  if (targets) {
    std::vector<float> noisy(s.images.begin(), s.images.end());
    for (float& v : noisy) v /= 255.0f;
    file.write_block<float>("/images", shape, {0, 0, 0, 0}, shape, noisy.data());
    if (float64_targets) {
      const std::vector<double> clean(s.clean.begin(), s.clean.end());
      file.write_block<double>("/targets", shape, {0, 0, 0, 0}, shape, clean.data());
    } else {
      file.write_block<float>("/targets", shape, {0, 0, 0, 0}, shape, s.clean.data());
    }
  } else {
    file.write_block<std::uint8_t>("/images", shape, {0, 0, 0, 0}, shape, s.images.data());
  }
  if (labels) file.write_block<std::int64_t>("/labels", {n}, {0}, {n}, s.labels.data());
  file.close();
}

void truncate_copy(const std::string& from, const std::string& to, std::size_t bytes) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + from + "'");
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes > data.size()) throw std::runtime_error("'" + from + "' is shorter than " + std::to_string(bytes) + " bytes");
  std::ofstream(to, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
}

// Sets element `index` of dataset `dataset` (float32, or int64 for T = std::int64_t) in the
// existing file `path` to `value`.
template <class T>
void set_element(const std::string& path, const std::string& dataset, const Dims& index, T value) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t set = file < 0 ? -1 : H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  const hid_t space = set < 0 ? -1 : H5Dget_space(set);
  const std::vector<hsize_t> at(index.begin(), index.end()), one(index.size(), 1);
  const hid_t memory = H5Screate_simple(1, one.data(), nullptr);
  const bool ok = space >= 0 &&
                  H5Sselect_hyperslab(space, H5S_SELECT_SET, at.data(), nullptr, one.data(), nullptr) >= 0 &&
                  H5Dwrite(set, std::is_same_v<T, float> ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64, memory, space,
                           H5P_DEFAULT, &value) >= 0;
  H5Sclose(memory);
  if (space >= 0) H5Sclose(space);
  if (set >= 0) H5Dclose(set);
  if (file >= 0) H5Fclose(file);
  if (!ok) throw std::runtime_error("cannot set " + dataset + tessera::dims_text(index) + " in '" + path + "'");
}

std::vector<float> read_all(const Hdf5File& file, const std::string& name, Dims& shape) {
  shape = file.shape(name);
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  std::vector<float> data(static_cast<std::size_t>(count));
  file.read_block<float>(name, Dims(shape.size(), 0), shape, data.data());
  return data;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

void check_predictions(const std::string& a_path, const std::string& b_path, const std::string& clean_path,
                       double sigma, double tolerance) {
  Hdf5File a(a_path, Hdf5File::Mode::read, MPI_COMM_SELF), b(b_path, Hdf5File::Mode::read, MPI_COMM_SELF);
  Hdf5File clean_file(clean_path, Hdf5File::Mode::read, MPI_COMM_SELF);
  Dims clean_shape, shape, other;
  std::vector<float> clean = read_all(clean_file, "/images", clean_shape);
  for (float& v : clean) v /= 255.0f;
  for (const std::string name : {"/inputs", "/outputs"}) {
    const std::vector<float> x = read_all(a, name, shape), y = read_all(b, name, other);
    if (shape != clean_shape || other != clean_shape)
      throw std::runtime_error(name + " has shape " + tessera::dims_text(shape) + " and " + tessera::dims_text(other) +
                               ", the evaluation file " + tessera::dims_text(clean_shape));
    const double scale = std::max(max_abs(x), 1e-30);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::fabs(double(x[i]) - double(y[i])) > tolerance * scale)
        throw std::runtime_error(name + " differs at element " + std::to_string(i) + ": " + std::to_string(x[i]) +
                                 " against " + std::to_string(y[i]));
  }
  const std::vector<float> inputs = read_all(a, "/inputs", shape), outputs = read_all(a, "/outputs", shape);
  double noise = 0, change = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    noise += (double(inputs[i]) - clean[i]) * (double(inputs[i]) - clean[i]);
    change = std::max(change, std::fabs(double(outputs[i]) - double(inputs[i])));
  }
  noise = std::sqrt(noise / double(inputs.size()));
  if (std::fabs(noise - sigma) > 0.2 * sigma)
    throw std::runtime_error("the inputs differ from the clean images by " + std::to_string(noise) + ", not sigma " +
                             std::to_string(sigma));
  if (change == 0) throw std::runtime_error("the outputs are the inputs");
  std::printf("predictions agree: %s, noise %.4f\n", tessera::dims_text(shape).c_str(), noise);
}

Dims parse_index(const std::string& text) {
  Dims index;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) index.push_back(std::stoll(part));
  return index;
}

void poisoned_copy(const std::string& from, const std::string& to, const std::string& dataset, const std::string& index,
                   const std::string& value) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  set_element(to, dataset, parse_index(index), std::stof(value));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    if (argc == 5 && std::string(argv[1]) == "truncate") {
      truncate_copy(argv[2], argv[3], std::stoul(argv[4]));
    } else if (argc == 7 && std::string(argv[1]) == "poison") {
      poisoned_copy(argv[2], argv[3], argv[4], argv[5], argv[6]);
    } else if ((argc == 6 || argc == 7) && std::string(argv[1]) == "check-predictions") {
      check_predictions(argv[2], argv[3], argv[4], std::stod(argv[5]), argc == 7 ? std::stod(argv[6]) : 1e-5);
    } else if (argc == 2) {
      const std::string dir = argv[1];
      std::filesystem::create_directories(dir);
      write(dir + "/train.h5", 48, 1, 12, true, false, 1);
      write(dir + "/val.h5", 22, 1, 12, true, false, 2);
      write(dir + "/targets.h5", 16, 1, 12, false, true, 3);
      write(dir + "/nolabels.h5", 16, 1, 12, false, false, 4);
      write(dir + "/rgb10.h5", 16, 3, 10, true, false, 5);
      std::ofstream(dir + "/not-hdf5.h5") << "not an HDF5 file\n";
      write(dir + "/nan-images.h5", 16, 1, 12, false, true, 6);
      set_element(dir + "/nan-images.h5", "/images", {7, 0, 9, 10}, std::numeric_limits<float>::quiet_NaN());
      write(dir + "/inf-targets.h5", 16, 1, 12, false, true, 7);
      set_element(dir + "/inf-targets.h5", "/targets", {5, 0, 9, 4}, std::numeric_limits<float>::infinity());
      write(dir + "/bad-label.h5", 48, 1, 12, true, false, 1);
      set_element<std::int64_t>(dir + "/bad-label.h5", "/labels", {37}, 4);
      write(dir + "/ignored-label.h5", 22, 1, 12, true, false, 2);
      set_element<std::int64_t>(dir + "/ignored-label.h5", "/labels", {5}, -100);
      write(dir + "/f64-targets.h5", 16, 1, 12, false, true, 3, /*float64_targets=*/true);
    } else {
      std::fprintf(stderr,
                   "usage: train_make_data DIR | train_make_data truncate SRC DST BYTES |\n"
                   "       train_make_data poison SRC DST DATASET I,J,... VALUE |\n"
                   "       train_make_data check-predictions A B CLEAN SIGMA [TOLERANCE]\n");
      status = 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_make_data: %s\n", e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
