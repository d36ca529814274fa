#pragma once
// Fashion-MNIST (Xiao et al. 2017) as shipped by the Debian package dataset-fashion-mnist:
// four gzip'd IDX files, converted to fashion-mnist-train.h5 and fashion-mnist-test.h5.
#include <cstdint>
#include <iosfwd>
#include <string>

namespace tessera::data {

inline constexpr const char* kFashionMnistSource = "/usr/share/datasets/fashion-mnist";
// Label i names class i, in the order of the dataset's documentation.
inline constexpr const char* kFashionMnistClasses =
    "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot";

struct FashionMnistOptions {
  std::string source = kFashionMnistSource;
  std::string out_dir;
  std::int64_t limit = 0;  // > 0: only the first `limit` samples of each split
};

// Checks the source files and the destination first, then converts both splits and
// commits the two files together: on any error neither output file is created or changed.
void convert_fashion_mnist(const FashionMnistOptions& options, std::ostream& log);

}  // namespace tessera::data
