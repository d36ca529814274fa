#pragma once
// The main() every benchmark binary shares: start the Runtime, parse the options (a bad
// command line: rank 0 prints the error and the usage, exit 2; --help: the usage, exit 0),
// then run; a failure while running is printed with its rank, exit 1 (argument-dependent
// failures such as a grid that does not fit happen alike on every rank).

#include <cstdio>
#include <exception>

#include "distarray/runtime.hpp"

namespace tessera::bench {

// parse(runtime) -> Options with a bool `help`; run(runtime, options) -> exit status.
template <class Parse, class Run>
int benchmark_main(int argc, char** argv, const char* name, const char* usage, const Parse& parse, const Run& run) {
  tessera::Runtime runtime(argc, argv);
  decltype(parse(runtime)) options;
  try {
    options = parse(runtime);
  } catch (const std::exception& e) {
    if (runtime.rank() == 0) std::fprintf(stderr, "%s: %s\n%s", name, e.what(), usage);
    return runtime.finish_with(2);
  }
  if (options.help) {
    if (runtime.rank() == 0) std::printf("%s", usage);
    return runtime.finish_with(0);
  }
  try {
    return runtime.finish_with(run(runtime, options));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s (rank %d): %s\n", name, runtime.rank(), e.what());
    return runtime.finish_with(1);
  }
}

}  // namespace tessera::bench
