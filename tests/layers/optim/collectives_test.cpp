// The collectives seam (layers/collectives.hpp) on every process grid the rank count
// allows: every group (local, spatial, samples, all), float and double, blocking and
// non-blocking (several sums in flight, waited in another order than started), raw host
// pointers and views in the execution space's memory (the device path in CUDA builds); a
// repeated sequence of sums allocates nothing after the first; group sums and the rule of
// which group reduces which parameter. Sums of small integers are exact in float, so
// results are compared exactly.
#include <gtest/gtest.h>

#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "layers/collectives.hpp"
#include "layers/gradient_group.hpp"
#include "layers/group_sum.hpp"
#include "layers/parameter.hpp"
#include "tests/support/allocation_counter.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers {
namespace {

using testing::all_grids;
using testing::world_size;

constexpr SumGroup kGroups[] = {SumGroup::local, SumGroup::spatial, SumGroup::samples, SumGroup::all};

// Rank r's (of the grid) i-th element of sum number `which`.
double element(int r, std::size_t i, int which) { return (r + 1) * 10 + static_cast<double>(i % 7) + 100 * which; }

bool same_group(const ProcessGrid& grid, int a, int b, SumGroup group) {
  const GridCoord ca = grid.coord_of(a), cb = grid.coord_of(b);
  switch (group) {
    case SumGroup::local: return a == b;
    case SumGroup::spatial: return ca[0] == cb[0];
    case SumGroup::samples: return ca[1] == cb[1] && ca[2] == cb[2];
    case SumGroup::all: return true;
  }
  return false;
}

template <class T>
std::vector<T> mine(const ProcessGrid& grid, std::size_t count, int which) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<T>(element(grid.rank(), i, which));
  return v;
}

template <class T>
std::vector<T> expected(const ProcessGrid& grid, std::size_t count, SumGroup group, int which) {
  std::vector<T> v(count, T(0));
  for (int r = 0; r < grid.size(); ++r)
    if (same_group(grid, grid.rank(), r, group))
      for (std::size_t i = 0; i < count; ++i) v[i] += static_cast<T>(element(r, i, which));
  return v;
}

std::string trace(const GridDims& dims, SumGroup group, const char* type) {
  return "grid " + format_grid(dims) + ", group " + group_name(group) + ", " + type;
}

// Every grid of the rank count, built once for all the tests here (building a Cartesian
// communicator is most of the time of a test on oversubscribed ranks).
class CollectivesOnGrids : public ::testing::Test {
 public:
  static const std::vector<std::unique_ptr<ProcessGrid>>& grids() { return grids_; }

 protected:
  static void SetUpTestSuite() {
    for (const GridDims& dims : all_grids(world_size())) grids_.push_back(std::make_unique<ProcessGrid>(MPI_COMM_WORLD, dims));
  }
  static void TearDownTestSuite() { grids_.clear(); }

 private:
  static inline std::vector<std::unique_ptr<ProcessGrid>> grids_;
};

TEST_F(CollectivesOnGrids, GroupSizesAreTheirCommunicators) {
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    for (SumGroup group : kGroups) {
      int size = 0;
      MPI_Comm_size(group_comm(grid, group), &size);
      EXPECT_EQ(size, group_size(grid, group)) << trace(dims, group, "");
    }
  }
}

template <class T>
void blocking_host(const char* type) {
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    Collectives collectives(grid);
    for (SumGroup group : kGroups) {
      SCOPED_TRACE(trace(dims, group, type));
      for (std::size_t count : {std::size_t{1}, std::size_t{13}, std::size_t{1000}}) {
        std::vector<T> v = mine<T>(grid, count, 0);
        collectives.allreduce_sum(v.data(), v.size(), group);
        EXPECT_EQ(v, (expected<T>(grid, count, group, 0))) << count << " elements";
      }
      collectives.allreduce_sum(static_cast<T*>(nullptr), 0, group);  // nothing to sum: a no-op
    }
  }
}
TEST_F(CollectivesOnGrids, BlockingSumOverEveryGroupFloat) { blocking_host<float>("float"); }
TEST_F(CollectivesOnGrids, BlockingSumOverEveryGroupDouble) { blocking_host<double>("double"); }

// Every group's sum in flight at once, float and double mixed, waited in reverse order.
TEST_F(CollectivesOnGrids, NonBlockingSumsInFlightTogether) {
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    Collectives collectives(grid);
    for (int round = 0; round < 2; ++round) {  // the second round reuses the slots
      std::vector<std::vector<float>> floats;
      std::vector<std::vector<double>> doubles;
      std::vector<Collectives::Pending> pending;
      int which = 0;
      for (SumGroup group : kGroups) {
        floats.push_back(mine<float>(grid, 37, which++));
        pending.push_back(collectives.start_allreduce_sum(floats.back().data(), floats.back().size(), group));
        doubles.push_back(mine<double>(grid, 5, which++));
        pending.push_back(collectives.start_allreduce_sum(doubles.back().data(), doubles.back().size(), group));
      }
      for (std::size_t k = pending.size(); k-- > 0;) {
        collectives.wait(pending[k]);
        EXPECT_FALSE(pending[k].active());
        collectives.wait(pending[k]);  // a completed handle: nothing to do
      }
      which = 0;
      for (std::size_t g = 0; g < std::size(kGroups); ++g) {
        SCOPED_TRACE(trace(dims, kGroups[g], "mixed") + ", round " + std::to_string(round));
        EXPECT_EQ(floats[g], (expected<float>(grid, 37, kGroups[g], which++)));
        EXPECT_EQ(doubles[g], (expected<double>(grid, 5, kGroups[g], which++)));
      }
    }
  }
}

// Views in the execution space's memory: NCCL or host staging in CUDA builds, in place on
// the host otherwise; blocking and started, through the view overloads.
template <class T>
void execution_space_views(const char* type) {
  using View = Kokkos::View<T*, Kokkos::DefaultExecutionSpace::memory_space>;
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    Collectives collectives(grid);
    for (SumGroup group : kGroups) {
      SCOPED_TRACE(trace(dims, group, type));
      const std::size_t count = 257;
      View a("a", count), b("b", count);
      const std::vector<T> va = mine<T>(grid, count, 1), vb = mine<T>(grid, count, 2);
      Kokkos::deep_copy(a, Kokkos::View<const T*, Kokkos::HostSpace>(va.data(), count));
      Kokkos::deep_copy(b, Kokkos::View<const T*, Kokkos::HostSpace>(vb.data(), count));
      collectives.allreduce_sum(a, group);
      Collectives::Pending pending = collectives.start_allreduce_sum(b, group);
      collectives.wait(pending);
      std::vector<T> ra(count), rb(count);
      Kokkos::deep_copy(Kokkos::View<T*, Kokkos::HostSpace>(ra.data(), count), a);
      Kokkos::deep_copy(Kokkos::View<T*, Kokkos::HostSpace>(rb.data(), count), b);
      EXPECT_EQ(ra, (expected<T>(grid, count, group, 1)));
      EXPECT_EQ(rb, (expected<T>(grid, count, group, 2)));
    }
  }
}
TEST_F(CollectivesOnGrids, ExecutionSpaceViewsFloat) { execution_space_views<float>("float"); }
TEST_F(CollectivesOnGrids, ExecutionSpaceViewsDouble) { execution_space_views<double>("double"); }

// The same sequence of sums again (a training step's pattern) allocates nothing: no Kokkos
// allocation in any space (staging, events' slots) and no operator new.
TEST_F(CollectivesOnGrids, RepeatedSumsAllocateNothingAfterTheFirst) {
  using View = Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space>;
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    SCOPED_TRACE("grid " + format_grid(dims));
    Collectives collectives(grid);
    View big("big", 4096), small("small", 16);
    std::vector<double> host(8, 1.0);
    std::vector<Collectives::Pending> pending(2);
    auto step = [&] {
      pending[0] = collectives.start_allreduce_sum(big, SumGroup::all);
      pending[1] = collectives.start_allreduce_sum(small, SumGroup::samples);
      collectives.allreduce_sum(host.data(), host.size(), SumGroup::spatial);
      collectives.allreduce_sum(small, SumGroup::spatial);
      collectives.wait(pending[1]);
      collectives.wait(pending[0]);
    };
    step();
    testing::KokkosAllocations kokkos;
    testing::HeapAllocations heap;
    step();
    const long heap_count = heap.stop().total;
    const testing::KokkosAllocations::Counts counted = kokkos.stop();
    EXPECT_EQ(counted.count, 0) << counted.labels;
    EXPECT_EQ(heap_count, 0);
  }
}

TEST_F(CollectivesOnGrids, MoreThanOneMpiCountIsALengthError) {
  Collectives collectives(*grids().back());
  const std::size_t too_many = static_cast<std::size_t>(std::numeric_limits<int>::max()) + 1;
  // Checked before any element is touched, on every rank and for every group alike.
  EXPECT_THROW(collectives.allreduce_sum(static_cast<float*>(nullptr), too_many, SumGroup::all), std::length_error);
  EXPECT_THROW((void)collectives.start_allreduce_sum(static_cast<double*>(nullptr), too_many, SumGroup::local),
               std::length_error);
}

// group_sum over the sample group (the group the seam added) and a GroupSum rebound to
// another grid.
TEST_F(CollectivesOnGrids, GroupSumOverTheSampleGroup) {
  GroupSum<double> sums;
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    for (SumGroup group : kGroups) {
      SCOPED_TRACE(trace(dims, group, "double"));
      const std::vector<double> v = mine<double>(grid, 9, 3);
      Kokkos::View<double*, Kokkos::DefaultExecutionSpace::memory_space> values("values", v.size());
      Kokkos::deep_copy(values, Kokkos::View<const double*, Kokkos::HostSpace>(v.data(), v.size()));
      sums.sum(values, grid, group, "test");
      std::vector<double> got(v.size());
      Kokkos::deep_copy(Kokkos::View<double*, Kokkos::HostSpace>(got.data(), got.size()), values);
      EXPECT_EQ(got, (expected<double>(grid, v.size(), group, 3)));
    }
  }
}

// The one rule: replicated parameters over the grid, tiled ones over the sample group,
// head replicas over the sample group when the grid splits space (and over the grid, which
// is then the sample group, when it does not).
TEST_F(CollectivesOnGrids, WhichGroupReducesWhichParameter) {
  for (const auto& owned : CollectivesOnGrids::grids()) {
    const ProcessGrid& grid = *owned;
    const GridDims& dims = grid.dims();
    SCOPED_TRACE("grid " + format_grid(dims));
    Parameter<float> replicated, tiled, head;
    tiled.sharing = Sharing::tiled;
    head.head_replica = true;
    EXPECT_EQ(gradient_group(replicated, grid), SumGroup::all);
    EXPECT_EQ(gradient_group(tiled, grid), SumGroup::samples);
    const bool spatially_split = dims[1] * dims[2] > 1;
    EXPECT_EQ(gradient_group(head, grid), spatially_split ? SumGroup::samples : SumGroup::all);
  }
}

}  // namespace
}  // namespace tessera::layers
