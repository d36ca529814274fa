#pragma once
// blocked_sums: per-group sums over many cells, deterministic, on any execution space.
//
// A reduction written as one team per group (a channel, a sample, an (n, c) plane) leaves a
// GPU mostly idle when there are few groups and many cells each: 64 channels of a large tile
// are 64 teams. Here the cells of each group are cut into fixed blocks of kSumBlockCells; a
// first pass gives every (group, block) its own team, which sums the block in double into a
// partial; a second pass adds each group's partials in block order. Fixed blocks and a
// fixed order make the result the same from run to run (no atomics) whatever the GPU.
// Host builds keep their own vectorised loops where a layer has them; the device passes run
// on the host too (tests call them with a host execution space).
//
// value(g, i) -> double: the i-th cell of group g (i < count), read once per call, so it may
// also write that cell's element-wise result. store(g, sum): where the sum goes (assigned or
// added, the caller's choice). Both are small device-callable structs: kernel arguments go
// by value on CUDA (launch_size.hpp), and nothing is allocated per call (the launches run on
// the held execution space instance; the partials live in the caller's scratch).

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"
#include "layers/launch_size.hpp"

namespace tessera::layers {

inline constexpr std::int64_t kSumBlockCells = 4096;

// (groups, blocks) partial sums; kept by the caller, grown when too small, never shrunk.
template <class Exec>
using BlockPartials = Kokkos::View<double**, Kokkos::LayoutRight, typename Exec::memory_space>;

namespace detail {

template <class Exec, class Value>
struct SumBlocks {
  using Team = typename Kokkos::TeamPolicy<Exec>::member_type;
  Value value;
  std::int64_t count, blocks;
  BlockPartials<Exec> partial;

  KOKKOS_INLINE_FUNCTION void operator()(const Team& team) const {
    const std::int64_t g = team.league_rank() / blocks, b = team.league_rank() % blocks;
    const std::int64_t lo = b * kSumBlockCells;
    const std::int64_t cells = count - lo < kSumBlockCells ? count - lo : kSumBlockCells;
    double total = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, cells), [&](const std::int64_t j, double& s) { s += value(g, lo + j); }, total);
    Kokkos::single(Kokkos::PerTeam(team), [&] { partial(g, b) = total; });
  }
};

template <class Exec, class Store>
struct FoldBlocks {
  BlockPartials<Exec> partial;
  Store store;
  std::int64_t blocks;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t g) const {
    double s = 0;
    for (std::int64_t b = 0; b < blocks; ++b) s += partial(g, b);
    store(g, s);
  }
};

}  // namespace detail

// A store that puts group g's sum at table(g / columns, g % columns), in the table's type:
// groups numbered row-major over a (rows, columns) table.
template <class Table>
struct StoreRowMajor {
  Table table;
  std::int64_t columns;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t g, const double s) const {
    table(g / columns, g % columns) = static_cast<typename Table::non_const_value_type>(s);
  }
};

// Blocks per group for `count` cells (at least one, so an empty group still stores 0).
inline std::int64_t sum_blocks(std::int64_t count) {
  return count <= 0 ? 1 : (count + kSumBlockCells - 1) / kSumBlockCells;
}

// For every group g < groups: store(g, the sum over i < count of value(g, i)). Labels are
// string literals (kernel_label keys them by address).
template <class Exec, class Value, class Store>
void blocked_sums(const char* blocks_label, const char* fold_label, std::int64_t groups, std::int64_t count,
                  const Value& value, const Store& store, BlockPartials<Exec>& partial) {
  using BlockPass = detail::SumBlocks<Exec, Value>;
  using FoldPass = detail::FoldBlocks<Exec, Store>;
  using TeamPolicy = Kokkos::TeamPolicy<Exec>;
  using RangePolicy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
  static_assert(launches_by_value<BlockPass, TeamPolicy>, "blocked_sums: kernel arguments over CUDA's by-value limit");
  static_assert(launches_by_value<FoldPass, RangePolicy>, "blocked_sums: kernel arguments over CUDA's by-value limit");
  if (groups <= 0) return;
  const std::int64_t blocks = sum_blocks(count);
  const auto had_groups = static_cast<std::int64_t>(partial.extent(0));
  const auto had_blocks = static_cast<std::int64_t>(partial.extent(1));
  if (had_groups < groups || had_blocks < blocks)  // grows to cover every call so far
    partial = BlockPartials<Exec>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "tessera::blocked_sums::partial"),
                                  static_cast<std::size_t>(had_groups > groups ? had_groups : groups),
                                  static_cast<std::size_t>(had_blocks > blocks ? had_blocks : blocks));
  const Exec& exec = held_instance<Exec>();
  Kokkos::parallel_for(kernel_label(blocks_label), TeamPolicy(exec, static_cast<int>(groups * blocks), Kokkos::AUTO),
                       BlockPass{value, count > 0 ? count : 0, blocks, partial});
  Kokkos::parallel_for(kernel_label(fold_label), RangePolicy(exec, 0, groups), FoldPass{partial, store, blocks});
}

}  // namespace tessera::layers
