// tessera-data: builds Tessera's HDF5 data files (docs/data.md).
//   tessera-data fashion-mnist --out DIR [--source DIR] [--limit N]
//   tessera-data images --out FILE.h5 --size HxW [--crop | --resize | --tile] [--label K] IMAGE...
// Exit status: 0 done, 1 the conversion failed (bad input, I/O), 2 bad command line.
#include <boost/program_options.hpp>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <string>

#include "data/fashion_mnist.hpp"
#include "data/image_set.hpp"
#include "distarray/same_file.hpp"

namespace po = boost::program_options;
using namespace tessera::data;

namespace {

constexpr int kUsageError = 2;

// A usage error: reported as such, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

FrameSize parse_size(const std::string& text) {
  const std::size_t x = text.find('x');
  auto number = [&](const std::string& part) -> std::int64_t {
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(part) < 1)
      throw UsageError("--size '" + text + "' is not HxW with positive sizes (e.g. 200x200)");
    return std::stoll(part);
  };
  if (x == std::string::npos) number("");
  return {number(text.substr(0, x)), number(text.substr(x + 1))};
}

// MPI for HDF5's MPI-IO driver: initialized here (a singleton, or under mpiexec -n 1) and
// finalized after every HDF5 file is closed.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) owns_ = MPI_Init(&argc, &argv) == MPI_SUCCESS;
  }
  ~MpiSession() {
    if (owns_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owns_ = false;
};

struct Command {
  const char* name;
  const char* summary;
  po::options_description options;
  po::positional_options_description positional;
  std::function<void()> run;  // once the options are parsed into the variables it captures
};

}  // namespace

int main(int argc, char** argv) {
  po::variables_map vm;
  FashionMnistOptions fashion;
  Command fashion_command{"fashion-mnist",
                          "Fashion-MNIST's IDX files -> DIR/fashion-mnist-{train,test}.h5 "
                          "(/images uint8 (N,1,28,28), /labels int64 (N), /classes)",
                          po::options_description("tessera-data fashion-mnist options"),
                          {},
                          {}};
  fashion_command.options.add_options()("help,h", "show this help and exit")
      ("out", po::value(&fashion.out_dir)->required(), "output directory, created if missing (required)")
      ("source", po::value(&fashion.source)->default_value(fashion.source),
       "directory of the gzip'd IDX files (train-images-idx3-ubyte.gz, ...)")
      ("limit", po::value(&fashion.limit)->default_value(0), "take only the first N samples of each split; 0: all");
  fashion_command.run = [&] {
    if (fashion.limit < 0) throw UsageError("--limit must be 0 (all) or more");
    convert_fashion_mnist(fashion, std::cout);
  };

  ImageSetOptions images;
  std::string size_text;
  bool crop = false, resize = false, tile = false;
  std::int64_t label = 0;
  Command images_command{"images",
                         "PNG/JPEG files -> FILE.h5 with /images uint8 (N,3,H,W) (grey -> RGB, alpha dropped)",
                         po::options_description("tessera-data images options"),
                         {},
                         {}};
  images_command.options.add_options()("help,h", "show this help and exit")
      ("out", po::value(&images.out_file)->required(), "output HDF5 file (required)")
      ("size", po::value(&size_text)->required(), "frame size HxW, e.g. 200x200 (required)")
      ("crop", po::bool_switch(&crop), "center-crop each image to HxW (the default)")
      ("resize", po::bool_switch(&resize), "resize each image to HxW, bilinear, aspect ratio not kept")
      ("tile", po::bool_switch(&tile), "cut each image into as many non-overlapping HxW frames as fit")
      ("label", po::value(&label), "write /labels with this class for every image (default: no labels)")
      ("image", po::value(&images.inputs)->composing(), "an input image (also positional: IMAGE...)");
  images_command.positional.add("image", -1);
  images_command.run = [&] {
    images.size = parse_size(size_text);
    if (int(crop) + int(resize) + int(tile) > 1) throw UsageError("choose one of --crop, --resize, --tile");
    images.fit = tile ? Fit::tile : resize ? Fit::resize : Fit::crop;
    if (vm.count("label")) {
      if (label < 0) throw UsageError("--label must be 0 or more");
      images.label = label;
    }
    if (images.inputs.empty()) throw UsageError("no image files given");
    for (const std::string& input : images.inputs)
      if (tessera::same_file(images.out_file, input))
        throw UsageError("--out '" + images.out_file + "' names the same file as input image '" + input +
                         "': writing it would destroy that image");
    convert_image_set(images, std::cout);
  };

  Command* commands[] = {&fashion_command, &images_command};
  auto print_help = [&] {
    std::cout << "tessera-data: builds Tessera's HDF5 data files (see docs/data.md)\n\n"
                 "usage: tessera-data <subcommand> [options]\n\nsubcommands:\n";
    for (const Command* c : commands) std::cout << "  " << c->name << ": " << c->summary << "\n";
    for (const Command* c : commands) std::cout << "\n" << c->options;
    std::cout << "\nexit status: 0 done, 1 conversion failed, 2 bad command line\n";
  };
  auto usage_error = [](const std::string& what) {
    std::fprintf(stderr, "tessera-data: error: %s (try --help)\n", what.c_str());
    return kUsageError;
  };

  if (argc < 2) return usage_error("no subcommand given (fashion-mnist or images)");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_help();
    return 0;
  }
  Command* command = nullptr;
  for (Command* c : commands)
    if (first == c->name) command = c;
  if (!command) {
    if (!first.empty() && first[0] == '-') return usage_error("unrecognised option '" + first + "' before the subcommand");
    return usage_error("unknown subcommand '" + first + "' (expected fashion-mnist or images)");
  }

  try {
    po::store(po::command_line_parser(argc - 1, argv + 1).options(command->options).positional(command->positional).run(),
              vm);
    if (vm.count("help")) {
      std::cout << command->summary << "\n\n" << command->options << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return usage_error(e.what());
  }

  try {
    MpiSession mpi(argc, argv);
    try {
      // Each rank would convert alike, into the same files: say so instead.
      int ranks = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &ranks);
      if (ranks > 1) throw UsageError("tessera-data is one process; run it without mpiexec or with -n 1");
      command->run();
      return 0;
    } catch (const UsageError& e) {
      return usage_error(e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera-data: error: %s\n", e.what());
    return 1;
  }
}
