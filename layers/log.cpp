#include "layers/log.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace tessera::layers {
namespace {

LogSink default_sink() {
  const char* verbose = std::getenv("TESSERA_VERBOSE");
  if (verbose == nullptr || std::string_view(verbose).empty() || std::string_view(verbose) == "0") return {};
  return stderr_on_rank0();
}

LogSink& current_sink() {
  static LogSink sink = default_sink();
  return sink;
}

}  // namespace

LogSink set_log_sink(LogSink sink) { return std::exchange(current_sink(), std::move(sink)); }

LogSink stderr_on_rank0() {
  return [](const std::string& line) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::fprintf(stderr, "tessera: %s\n", line.c_str());
  };
}

void log_line(const std::string& line) {
  if (const LogSink& sink = current_sink()) sink(line);
}

}  // namespace tessera::layers
