#include "bench/layers/mpi_wait_timer.hpp"

#include <mpi.h>

namespace {
tessera::bench::WaitTotals g_totals;
}

namespace tessera::bench {

void reset_wait_timer() { g_totals = {}; }
WaitTotals wait_totals() { return g_totals; }

}  // namespace tessera::bench

// The MPI profiling interface: this definition takes the place of the MPI library's for
// every caller in the program (the library's own stays reachable as PMPI_Waitall).
extern "C" int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  const double start = PMPI_Wtime();
  const int rc = PMPI_Waitall(count, requests, statuses);
  g_totals.seconds += PMPI_Wtime() - start;
  ++g_totals.calls;
  return rc;
}
