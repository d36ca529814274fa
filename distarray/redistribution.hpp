#pragma once
// Redistribution: redistribute() (redistribute.hpp) planned once for one pair of
// distributions and kept, for code that moves the same arrays every step (the regrid
// layer, layers/regrid.hpp). The boxes (owned(me) ∩ owned(q) in the other distribution,
// for every peer q: Distribution::owners and Box::intersect, so generic in the number of
// axes the distributions split), MPI's counts and the message buffers are made at
// construction; the pack tables once per array window seen (a model passes the same one
// or two every step). After the first move each way nothing is allocated.
//
// It moves owned cells either way: forward() from an array distributed as `from` into one
// distributed as `to`, reverse() back — the reverse messages are the forward ones read the
// other way (what a rank sent it now receives), so they share the plan and the buffers.
// Halo cells are neither read nor written.

#include <mpi.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "distarray/cuda_launch_check.hpp"
#include "distarray/box_pack.hpp"
#include "distarray/dist_array.hpp"
#include "distarray/mpi_datatype.hpp"
#include "distarray/redistribute.hpp"
#include "distarray/segment_table.hpp"
#include "distarray/staged_buffer.hpp"

namespace tessera {

template <class T, class MemorySpace = Kokkos::DefaultExecutionSpace::memory_space>
class Redistribution {
 public:
  using Array = DistArray<T, MemorySpace>;

  // Throws std::invalid_argument (redistribute's checks) unless the grids span the same
  // ranks in the same order and the distributions cut the same global shape. Local: no
  // communication. Both grids must outlive this object.
  Redistribution(const ProcessGrid& from_grid, const Distribution& from, const ProcessGrid& to_grid,
                 const Distribution& to)
      : from_(from),
        to_(to),
        comm_(from_grid.comm()),
        plan_(detail::plan_redistribution(from_grid, from, to_grid, to)),
        send_counts_(mpi_counts(plan_.send)),
        receive_counts_(mpi_counts(plan_.receive)),
        send_(plan_.send.total),
        receive_(plan_.receive.total) {}

  const Distribution& from() const { return from_; }
  const Distribution& to() const { return to_; }
  // Elements this rank sends (forward) and receives; reverse() swaps the two.
  std::int64_t send_elements() const { return plan_.send.total; }
  std::int64_t receive_elements() const { return plan_.receive.total; }

  // Collective over the grids' ranks: every owned cell of `y` (distributed as to()) gets
  // the value of the same global cell of `x` (distributed as from()).
  void forward(const Array& x, const Array& y) {
    require(x, from_, "forward: x");
    require(y, to_, "forward: y");
    move(x, table(send_tables_, x, plan_.send), send_, send_counts_, y, table(receive_tables_, y, plan_.receive),
         receive_, receive_counts_);
  }

  // The adjoint: every owned cell of `dx` (distributed as from()) gets the value of the
  // same global cell of `dy` (distributed as to()).
  void reverse(const Array& dy, const Array& dx) {
    require(dy, to_, "reverse: dy");
    require(dx, from_, "reverse: dx");
    move(dy, table(receive_tables_, dy, plan_.receive), receive_, receive_counts_, dx,
         table(send_tables_, dx, plan_.send), send_, send_counts_);
  }

 private:
  using Table = SegmentTable<MemorySpace>;
  using Tables = std::vector<std::pair<Box, Table>>;  // per window box seen

  static void require(const Array& a, const Distribution& d, const char* what) {
    if (!(a.distribution() == d))
      throw std::invalid_argument(std::string("redistribution ") + what + " is " + a.distribution().describe() +
                                  ", planned for " + d.describe());
  }

  static const Table& table(Tables& tables, const Array& a, const PackLayout& layout) {
    for (const auto& [box, t] : tables)
      if (box == a.window_box()) return t;
    tables.emplace_back(a.window_box(), Table(a.window_box(), layout.boxes));
    return tables.back().second;
  }

  void move(const Array& from, const Table& from_table, StagedBuffer<T, MemorySpace>& out, const MpiCounts& out_counts,
            const Array& to, const Table& to_table, StagedBuffer<T, MemorySpace>& in, const MpiCounts& in_counts) {
    using Exec = typename MemorySpace::execution_space;
    pack(from_table, from.window(), out.here());
    fence_checked(Exec());
    out.to_host();
    MPI_Alltoallv(out.host_data(), out_counts.counts.data(), out_counts.displs.data(), mpi_datatype<T>(),
                  in.host_data(), in_counts.counts.data(), in_counts.displs.data(), mpi_datatype<T>(), comm_);
    in.from_host();
    unpack(to_table, to.window(), in.here());
    fence_checked(Exec());
  }

  Distribution from_, to_;
  MPI_Comm comm_;
  detail::RedistributionPlan plan_;
  MpiCounts send_counts_, receive_counts_;
  StagedBuffer<T, MemorySpace> send_, receive_;
  Tables send_tables_, receive_tables_;
};

}  // namespace tessera
