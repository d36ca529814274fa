// The batched pack/unpack engine against a serial copy, with both traversals forced on the
// host (the cell traversal is what GPUs run), and the PackLayout wrappers that gather,
// scatter and redistribute use: offsets, round trips and clear errors.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "distarray/box_pack.hpp"
#include "distarray/segment_table.hpp"
#include "tests/support/host_cells.hpp"

namespace tessera {
namespace {

using Host = Kokkos::HostSpace;
using HostExec = Kokkos::DefaultHostExecutionSpace;
using Window = WindowView<double, Host>;
using Buffer = BufferView<double, Host>;

const Box kWindow{{-1, 0, -2, -1}, {2, 3, 6, 8}};

// Every cell of the window holds its flat index within it.
Window indexed_window() {
  const Shape4 s = kWindow.shape();
  Window w("window", s[0], s[1], s[2], s[3]);
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<double>(i);
  return w;
}

// A W column, an H strip, a corner, a one-cell box, an empty box and the whole window,
// back to back in one buffer.
std::vector<Box> mixed_boxes() {
  return {Box{{-1, 0, -2, 6}, {2, 3, 6, 8}}, Box{{0, 1, 3, -1}, {2, 3, 5, 8}},
          Box{{-1, 0, -2, -1}, {1, 3, 0, 1}}, Box{{1, 2, 5, 7}, {2, 3, 6, 8}},
          Box{{0, 0, 0, 0}, {0, 3, 3, 3}}, kWindow};
}

// What pack must produce: each box's cells in row-major order at its offset.
std::vector<double> serial_pack(const PackLayout& layout) {
  std::vector<double> out(static_cast<std::size_t>(layout.total));
  for (const auto& b : layout.boxes) {
    std::int64_t k = b.buffer_offset;
    testing::for_each_index(b.box, [&](const Index4& g) { out[static_cast<std::size_t>(k++)] = double(kWindow.linear(g)); });
  }
  return out;
}

template <Traversal traversal>
std::vector<double> pack_with(const PackLayout& layout) {
  const Window window = indexed_window();
  const SegmentTable<Host> table(kWindow, layout.boxes);
  Buffer buffer("buffer", static_cast<std::size_t>(layout.total));
  const double* const win = window.data();
  double* const buf = buffer.data();
  for_each_cell<HostExec, traversal>("test_pack", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) { buf[b] = win[x]; });
  HostExec().fence();
  return {buffer.data(), buffer.data() + buffer.size()};
}

TEST(SegmentTable, BothTraversalsMatchASerialCopy) {
  const PackLayout layout = PackLayout::end_to_end(mixed_boxes());
  const std::vector<double> expected = serial_pack(layout);
  EXPECT_EQ(pack_with<Traversal::planes>(layout), expected);
  EXPECT_EQ(pack_with<Traversal::cells>(layout), expected);
}

TEST(SegmentTable, UnpackInvertsPack) {
  const Box strip{{0, 1, 3, -1}, {2, 3, 5, 8}}, column{{-1, 0, -2, 6}, {2, 3, 3, 8}};
  const std::vector<BoxInBuffer> boxes = {{strip, 0}, {column, strip.size() + 24}};  // a gap in the buffer
  const SegmentTable<Host> table(kWindow, boxes);
  EXPECT_EQ(table.buffer_end, boxes[1].buffer_offset + column.size());
  const Window from = indexed_window();
  Buffer buffer("buffer", static_cast<std::size_t>(table.buffer_end));
  pack(table, from, buffer);
  const Window to("to", from.extent(0), from.extent(1), from.extent(2), from.extent(3));
  unpack(table, to, buffer);
  HostExec().fence();
  int wrong = 0;
  testing::for_each_index(kWindow, [&](const Index4& g) {
    const auto i = static_cast<std::size_t>(kWindow.linear(g));
    const bool in_a_box = strip.contains(g) || column.contains(g);
    wrong += to.data()[i] != (in_a_box ? from.data()[i] : 0.0);
  });
  EXPECT_EQ(wrong, 0);
}

TEST(SegmentTable, BoxOutsideTheWindowIsRejected) {
  EXPECT_THROW(SegmentTable<Host>(kWindow, {{Box{{0, 0, 0, 0}, {1, 1, 1, 9}}, 0}}), std::out_of_range);
}

// The PackLayout wrappers: the array's element (0,0,0,0) is the global cell kWindow.lo.
TEST(BoxPack, PackAndUnpackThroughALayoutRoundTrip) {
  const PackLayout layout = PackLayout::end_to_end(mixed_boxes());
  const Window from = indexed_window();
  Buffer buffer("buffer", static_cast<std::size_t>(layout.total));
  pack(from, kWindow.lo, layout, buffer);
  EXPECT_EQ(std::vector<double>(buffer.data(), buffer.data() + buffer.size()), serial_pack(layout));
  const Window to("to", from.extent(0), from.extent(1), from.extent(2), from.extent(3));
  unpack(buffer, layout, to, kWindow.lo);  // the last box is the whole window
  EXPECT_EQ(std::vector<double>(to.data(), to.data() + to.size()),
            std::vector<double>(from.data(), from.data() + from.size()));
}

TEST(BoxPack, MpiCountsFollowTheLayout) {
  const PackLayout layout = PackLayout::end_to_end({Box{{0, 0, 0, 0}, {1, 1, 2, 3}}, Box{}, Box{{0, 0, 0, 0}, {1, 2, 1, 1}}});
  EXPECT_EQ(layout.total, 8);
  const MpiCounts counts = mpi_counts(layout);
  EXPECT_EQ(counts.counts, (std::vector<int>{6, 0, 2}));
  EXPECT_EQ(counts.displs, (std::vector<int>{0, 6, 6}));
}

TEST(BoxPack, ClearErrors) {
  const Window window = indexed_window();
  const PackLayout layout = PackLayout::end_to_end({Box{{0, 0, 0, 0}, {1, 1, 2, 2}}});
  Buffer buffer("buffer", static_cast<std::size_t>(layout.total));
  // A strided subview is not one row-major allocation: the engine's flat indices would miss.
  const auto strided = Kokkos::subview(window, Kokkos::ALL, Kokkos::ALL, Kokkos::pair<int, int>(1, 5), Kokkos::ALL);
  EXPECT_THROW(pack(strided, Index4{-1, 0, -1, -1}, layout, buffer), std::invalid_argument);
  EXPECT_THROW(unpack(buffer, layout, strided, Index4{-1, 0, -1, -1}), std::invalid_argument);
  EXPECT_THROW(pack(window, Index4{1, 0, 0, 0}, layout, buffer), std::out_of_range);  // box outside
  Buffer small("small", 3);
  EXPECT_THROW(pack(window, kWindow.lo, layout, small), std::out_of_range);
}

}  // namespace
}  // namespace tessera
