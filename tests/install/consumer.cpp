// Uses the installed headers and libraries: a halo exchange on whatever ranks it gets.
#include <cstdio>

#include "distarray/gather_scatter.hpp"
#include "distarray/runtime.hpp"
#include "halo/exchange.hpp"

int main(int argc, char** argv) {
  tessera::Runtime runtime(argc, argv);
  tessera::ProcessGrid grid(MPI_COMM_WORLD, tessera::default_grid(runtime.size()));
  tessera::DistArray<float> a(grid, {1, 1, 8, 8}, tessera::HaloWidths::symmetric_hw(1, 1));
  a.fill(1.0f);
  auto exchange = tessera::halo::make_exchange(a, tessera::halo::grown_by(a.halo()));
  exchange.run();
  float sum = 0;
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.window());
  for (std::size_t i = 0; i < host.size(); ++i) sum += host.data()[i];
  float total = 0;
  MPI_Allreduce(&sum, &total, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (runtime.rank() == 0) std::printf("consumer: ok, window sum %g on %d rank(s)\n", total, runtime.size());
  return 0;
}
