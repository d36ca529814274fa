// halo::Exchange on every process grid the rank count allows: fill against global indices,
// accumulate against a serial sum, start/finish with work in between, and clear errors.
// Every rank runs the same sequence of exchanges; checks use EXPECT so that a failing rank
// still takes part in the collectives after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "halo/halo.hpp"
#include "halo/transport_mpi.hpp"
#include "halo_test_support.hpp"
#include "tessera_config.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::halo {
namespace {

using testing::all_grids;
using testing::count_mismatches;
using testing::set_window;
using testing::world_size;

constexpr double kPoison = -1.0;  // allocation cells no exchange may touch

struct WidthCase {
  const char* name;
  Shape4 (*shape)(const GridDims&);
  HaloWidths halo;
};

// 7x11 images cut unevenly on every grid; more samples than pn.
Shape4 uneven(const GridDims& g) { return {g[0] <= 3 ? 3 : g[0] + 1, 2, 7, 11}; }
// 6x6 images: on three or more rows/columns, tiles of two or one cells, thinner than a halo of 3.
Shape4 thin(const GridDims& g) { return {g[0], 2, 6, 6}; }

const WidthCase kCases[] = {
    {"symmetric 1", uneven, {{0, 0, 1, 1}, {0, 0, 1, 1}}},
    {"asymmetric H 0/2, W 2/1", uneven, {{0, 0, 0, 2}, {0, 0, 2, 1}}},
    {"every dimension", uneven, {{1, 1, 1, 2}, {1, 0, 2, 0}}},
    {"halo 3 on thin tiles", thin, {{0, 0, 3, 3}, {0, 0, 3, 3}}},
};

std::string describe(const GridDims& g, const WidthCase& c) { return format_grid(g) + " " + c.name; }

// Owned cells hold their global linear index; everything else holds kPoison.
template <class Array>
void write_owned_indices(const Array& a) {
  const Box image = a.distribution().global_box();
  using T = typename Array::value_type;
  set_window(a, [&](const Index4& g) { return a.owned_box().contains(g) ? T(image.linear(g)) : T(kPoison); });
}

// After a fill: inside the rule's window, the global index or (outside the image) the
// boundary value; the rest of the allocation untouched (a strided rule's window may leave
// out owned cells).
template <class Array>
int fill_errors(const Array& a, const Box& rule_window, double boundary, std::string* report) {
  const Box image = a.distribution().global_box();
  using T = typename Array::value_type;
  return count_mismatches(a, [&](const Index4& g) {
    if (!rule_window.contains(g)) return a.owned_box().contains(g) ? T(image.linear(g)) : T(kPoison);
    return image.contains(g) ? T(image.linear(g)) : T(boundary);
  }, report);
}

// A fill of a DistArray<T> of case `c` on `grid` over the whole allocation, checked.
template <class T>
int fill_case_errors(const ProcessGrid& grid, const GridDims& g, const WidthCase& c, std::string* report) {
  DistArray<T> a(grid, c.shape(g), c.halo);
  write_owned_indices(a);
  auto exchange = make_exchange(a, grown_by(c.halo));
  exchange.run();
  return fill_errors(a, a.window_box(), 0.0, report);
}

// What every rank writes into its whole window before an accumulate; boundary cells get a
// value that must vanish.
double contribution(const Box& image, const Index4& g, int rank) {
  if (!image.contains(g)) return 1.0e6;
  return static_cast<double>(image.linear(g) % 17 + 100 * (rank + 1));
}

// Sets the rule's window, runs the accumulate, and checks it against a serial sum over
// every rank's window.
template <class Array>
int accumulate_errors(const Array& a, const WindowRule& rule, std::string* report) {
  const Distribution& dist = a.distribution();
  const Box image = dist.global_box();
  const int me = a.grid().rank();
  const std::vector<Box> windows = Plan::windows_of(dist, rule);
  const Box& mine = windows[static_cast<std::size_t>(me)];
  set_window(a, [&](const Index4& g) { return mine.contains(g) ? contribution(image, g, me) : kPoison; });
  auto exchange = make_exchange(a, rule, Mode::accumulate);
  exchange.run();
  return count_mismatches(a, [&](const Index4& g) {
    if (a.owned_box().contains(g)) {
      double sum = mine.contains(g) ? contribution(image, g, me) : kPoison;
      for (int q = 0; q < dist.ranks(); ++q)
        if (q != me && windows[static_cast<std::size_t>(q)].contains(g)) sum += contribution(image, g, q);
      return sum;
    }
    return mine.contains(g) ? 0.0 : kPoison;
  }, report);
}

// The window rule of a 3x3 convolution with stride 2 and padding 1: output cells [a, b)
// along H and W need input cells [2a - 1, 2b).
WindowRule strided_conv_rule(const Distribution& out) {
  return [out](const Distribution&, int rank) {
    Box box = out.owned_box(rank);
    for (int d : {H, W}) {
      box.lo[d] = 2 * box.lo[d] - 1;
      box.hi[d] = 2 * box.hi[d];
    }
    return box;
  };
}

// The smallest halo widths whose allocation holds every rank's window.
HaloWidths covering(const Distribution& dist, const std::vector<Box>& windows) {
  HaloWidths h;
  for (int r = 0; r < dist.ranks(); ++r) {
    const Box owned = dist.owned_box(r), &win = windows[static_cast<std::size_t>(r)];
    for (int d = 0; d < kDims; ++d) {
      h.below[d] = std::max(h.below[d], owned.lo[d] - win.lo[d]);
      h.above[d] = std::max(h.above[d], win.hi[d] - owned.hi[d]);
    }
  }
  return h;
}

// Interior work: the sum of the owned cells (device code lives outside TEST bodies).
double sum_owned(const DistArray<double>& a) {
  const auto owned = a.owned();
  const Shape4 s = a.owned_box().shape();
  double total = 0;
  Kokkos::parallel_reduce(
      "sum_owned", Kokkos::MDRangePolicy<Kokkos::Rank<4>>({0, 0, 0, 0}, {s[0], s[1], s[2], s[3]}),
      KOKKOS_LAMBDA(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, double& acc) {
        acc += owned(n, c, h, w);
      },
      total);
  return total;
}

template <class F>
std::string message_of(F f) {
  return tessera::testing::error_message<std::invalid_argument>(f);
}

TEST(HaloFill, OwnersCellsFillEveryWindowOnEveryGrid) {
  for (const GridDims& g : all_grids(world_size())) {
    ProcessGrid grid(MPI_COMM_WORLD, g);
    for (const WidthCase& c : kCases) {
      std::string report;
      EXPECT_EQ(fill_case_errors<double>(grid, g, c, &report), 0) << describe(g, c) << report;
    }
  }
}

TEST(HaloAccumulate, HaloCellsAreAddedIntoTheirOwnersOnEveryGrid) {
  for (const GridDims& g : all_grids(world_size())) {
    ProcessGrid grid(MPI_COMM_WORLD, g);
    for (const WidthCase& c : kCases) {
      DistArray<double> a(grid, c.shape(g), c.halo);
      std::string report;
      EXPECT_EQ(accumulate_errors(a, grown_by(c.halo), &report), 0) << describe(g, c) << report;
    }
  }
}

TEST(HaloStrided, AsymmetricWindowsOfAStridedConvolutionFillAndAccumulate) {
  for (const GridDims& g : all_grids(world_size())) {
    ProcessGrid grid(MPI_COMM_WORLD, g);
    const Shape4 in_shape{g[0], 2, 12, 11};
    const Distribution out({g[0], 2, 6, 6}, g);  // (12 + 2 - 3) / 2 + 1 = 6, (11 + 2 - 3) / 2 + 1 = 6
    const WindowRule rule = strided_conv_rule(out);
    const Distribution in(in_shape, g);
    const HaloWidths halo = covering(in, Plan::windows_of(in, rule));
    const Box window = rule(in, grid.rank());

    DistArray<double> a(grid, in_shape, halo);
    write_owned_indices(a);
    auto exchange = make_exchange(a, rule);
    exchange.run();
    std::string report;
    EXPECT_EQ(fill_errors(a, window, 0.0, &report), 0) << format_grid(g) << " fill" << report;

    DistArray<double> b(grid, in_shape, halo);
    EXPECT_EQ(accumulate_errors(b, rule, &report), 0) << format_grid(g) << " accumulate" << report;
  }
}

TEST(HaloFill, RuleSmallerThanAllocationLeavesTheRestAndBoundaryRuleApplies) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const HaloWidths allocated{{0, 0, 2, 2}, {0, 0, 2, 2}}, needed{{0, 0, 1, 0}, {0, 0, 0, 2}};
  DistArray<double> a(grid, {2, 3, 7, 11}, allocated);
  const Box window = a.owned_box().grow(needed.below, needed.above);

  write_owned_indices(a);
  auto constant = make_exchange(a, grown_by(needed), Mode::fill, BoundaryFill::constant(-5.0));
  constant.run();
  std::string report;
  EXPECT_EQ(fill_errors(a, window, -5.0, &report), 0) << "constant boundary" << report;

  write_owned_indices(a);
  auto untouched = make_exchange(a, grown_by(needed), Mode::fill, BoundaryFill::untouched());
  untouched.run();
  EXPECT_EQ(fill_errors(a, window, kPoison, &report), 0) << "untouched boundary" << report;
}

TEST(HaloFill, IntegerElements) {
  for (const GridDims& g : all_grids(world_size())) {
    ProcessGrid grid(MPI_COMM_WORLD, g);
    const WidthCase& c = kCases[1];
    std::string report;
    EXPECT_EQ(fill_case_errors<std::int64_t>(grid, g, c, &report), 0) << describe(g, c) << report;
  }
}

TEST(HaloFill, ANamedTransportTypeNeedsNoFactory) {
  // Host memory in every build, so the Mpi transport can be named as a type.
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const HaloWidths halo{{0, 0, 1, 1}, {0, 0, 1, 1}};
  DistArray<double, Kokkos::HostSpace> a(grid, {2, 3, 7, 11}, halo);
  write_owned_indices(a);
  Exchange<double, Kokkos::HostSpace, Mpi> exchange(
      a, Plan::cached(a.distribution(), grown_by(halo), grid.rank()), std::make_unique<Mpi>(grid.comm()));
  exchange.run();
  std::string report;
  EXPECT_EQ(fill_errors(a, a.window_box(), 0.0, &report), 0) << report;
  EXPECT_EQ(exchange.transport().name(), "mpi");
}

TEST(HaloOverlap, WorkBetweenStartAndFinishGivesTheSameResult) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const WidthCase& c = kCases[0];
  const Shape4 shape = c.shape(grid.dims());
  DistArray<double> split(grid, shape, c.halo), whole(grid, shape, c.halo);
  write_owned_indices(split);
  write_owned_indices(whole);
  auto split_exchange = make_exchange(split, grown_by(c.halo));
  auto whole_exchange = make_exchange(whole, grown_by(c.halo));
  EXPECT_EQ(&split_exchange.plan(), &whole_exchange.plan());  // one cached plan for both

  EXPECT_FALSE(split_exchange.in_flight());
  split_exchange.start();
  EXPECT_TRUE(split_exchange.in_flight());
  const double interior = sum_owned(split);  // owned cells are readable while a fill is in flight
  split_exchange.finish();
  EXPECT_FALSE(split_exchange.in_flight());
  whole_exchange.run();

  double expected = 0;
  testing::for_each_index(split.owned_box(), [&](const Index4& g) { expected += split.distribution().global_box().linear(g); });
  EXPECT_EQ(interior, expected);
  const auto s = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), split.window());
  const auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), whole.window());
  EXPECT_TRUE(std::equal(s.data(), s.data() + s.size(), w.data()));
}

TEST(HaloOverlap, TwoExchangesInFlightAtOnce) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const WidthCase &c1 = kCases[0], &c2 = kCases[3];
  DistArray<double> a(grid, c1.shape(grid.dims()), c1.halo), b(grid, c2.shape(grid.dims()), c2.halo);
  write_owned_indices(a);
  write_owned_indices(b);
  auto first = make_exchange(a, grown_by(c1.halo));
  auto second = make_exchange(b, grown_by(c2.halo));
  first.start();
  second.start();
  second.finish();  // finishing in the other order is fine
  first.finish();
  std::string report;
  EXPECT_EQ(fill_errors(a, a.window_box(), 0.0, &report), 0) << report;
  EXPECT_EQ(fill_errors(b, b.window_box(), 0.0, &report), 0) << report;
}

TEST(HaloOverlap, MisorderedCallsAreLogicErrors) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const HaloWidths halo{{0, 0, 1, 1}, {0, 0, 1, 1}};
  DistArray<double> a(grid, {1, 1, 8, 8}, halo);
  auto exchange = make_exchange(a, grown_by(halo));
  EXPECT_THROW(exchange.finish(), std::logic_error);
  exchange.start();
  EXPECT_THROW(exchange.start(), std::logic_error);
  exchange.finish();
}

TEST(HaloErrors, BadRequestsAreClearErrors) {
  ProcessGrid grid(MPI_COMM_WORLD, default_grid(world_size()));
  const HaloWidths one{{0, 0, 1, 1}, {0, 0, 1, 1}}, two{{0, 0, 2, 2}, {0, 0, 2, 2}};
  DistArray<double> a(grid, {1, 2, 8, 8}, one);

  // The rule asks for more than the array allocated.
  EXPECT_NE(message_of([&] { make_exchange(a, grown_by(two)); }).find("allocates only"), std::string::npos);
  // A halo reaching past a whole image width.
  EXPECT_NE(message_of([&] { make_exchange(a, grown_by({{0, 0, 9, 0}, {0, 0, 0, 0}})); }).find("wider than the whole image"),
            std::string::npos);
  // A plan for another distribution.
  const Distribution other({1, 2, 9, 8}, grid.dims());
  EXPECT_NE(message_of([&] {
              Exchange<double>(a, Plan::cached(other, grown_by(one), grid.rank()),
                               make_transport("auto", grid.comm(), buffer_place_of<DistArray<double>::memory_space>()));
            }).find("the plan is for"),
            std::string::npos);

  // Transport names.
  const BufferPlace place = buffer_place_of<DistArray<double>::memory_space>();
  const std::string unknown = message_of([&] { make_transport("carrier-pigeon", grid.comm(), place); });
  EXPECT_NE(unknown.find("'carrier-pigeon'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("mpi-staged"), std::string::npos) << unknown;
  EXPECT_NE(message_of([&] { make_exchange(a, grown_by(one), Mode::fill, BoundaryFill::zero(), "MPI"); }).find("unknown"),
            std::string::npos);
#if TESSERA_ENABLE_CUDA
  EXPECT_NE(message_of([&] { make_transport("mpi", grid.comm(), BufferPlace::device); }).find("moves host memory"),
            std::string::npos);
  EXPECT_NE(message_of([&] { make_transport("nccl", grid.comm(), BufferPlace::host); }).find("moves device memory"),
            std::string::npos);
#else
  for (const char* gpu_only : {"nccl", "mpi-staged"}) {
    const std::string m = message_of([&] { make_transport(gpu_only, grid.comm(), BufferPlace::host); });
    EXPECT_NE(m.find("not available in this CPU build"), std::string::npos) << m;
  }
  EXPECT_EQ(resolve_transport("auto", grid.comm(), BufferPlace::host), "mpi");
  EXPECT_EQ(available_transports(BufferPlace::host), (std::vector<std::string_view>{"auto", "mpi"}));
  EXPECT_FALSE(ranks_share_a_gpu(grid.comm()));
#endif
}

}  // namespace
}  // namespace tessera::halo
