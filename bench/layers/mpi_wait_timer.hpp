#pragma once
// Time this process spends blocked in MPI_Waitall: where the halo transports that use MPI
// (mpi, mpi-staged) wait for their messages, in Exchange::finish(). Measured through MPI's
// profiling interface: mpi_wait_timer.cpp defines MPI_Waitall itself, timing the library's
// PMPI_Waitall, so linking that file into a program is what turns the timer on — the
// library code is unchanged. An NCCL exchange makes no such call (calls stays 0).

namespace tessera::bench {

struct WaitTotals {
  double seconds = 0;
  long calls = 0;
};

void reset_wait_timer();
WaitTotals wait_totals();  // since the last reset

}  // namespace tessera::bench
