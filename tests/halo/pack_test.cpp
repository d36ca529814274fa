// Batched pack/unpack kernels against a serial copy, with both traversals forced on the
// host (the cell traversal is what GPUs run), and the disjoint grouping used by accumulate.
#include <gtest/gtest.h>

#include <vector>

#include "halo/pack.hpp"
#include "halo_test_support.hpp"

namespace tessera::halo {
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
std::vector<BoxInBuffer> mixed_boxes() {
  const std::vector<Box> boxes = {Box{{-1, 0, -2, 6}, {2, 3, 6, 8}}, Box{{0, 1, 3, -1}, {2, 3, 5, 8}},
                                  Box{{-1, 0, -2, -1}, {1, 3, 0, 1}}, Box{{1, 2, 5, 7}, {2, 3, 6, 8}},
                                  Box{{0, 0, 0, 0}, {0, 3, 3, 3}}, kWindow};
  std::vector<BoxInBuffer> placed;
  std::int64_t offset = 0;
  for (const Box& b : boxes) {
    placed.push_back({b, offset});
    offset += b.size();
  }
  return placed;
}

std::int64_t cells_of(const std::vector<BoxInBuffer>& boxes) {
  std::int64_t n = 0;
  for (const auto& b : boxes) n += b.box.size();
  return n;
}

// What pack must produce: each box's cells in row-major order at its offset.
std::vector<double> serial_pack(const std::vector<BoxInBuffer>& boxes) {
  std::vector<double> out(static_cast<std::size_t>(cells_of(boxes)));
  for (const auto& b : boxes) {
    std::int64_t k = b.buffer_offset;
    testing::for_each_index(b.box, [&](const Index4& g) { out[static_cast<std::size_t>(k++)] = double(kWindow.linear(g)); });
  }
  return out;
}

template <Traversal traversal>
std::vector<double> pack_with(const std::vector<BoxInBuffer>& boxes) {
  const Window window = indexed_window();
  const SegmentTable<Host> table(kWindow, boxes);
  Buffer buffer("buffer", static_cast<std::size_t>(cells_of(boxes)));
  const double* const win = window.data();
  double* const buf = buffer.data();
  for_each_cell<HostExec, traversal>("test_pack", table, KOKKOS_LAMBDA(std::int64_t x, std::int64_t b) { buf[b] = win[x]; });
  HostExec().fence();
  return {buffer.data(), buffer.data() + buffer.size()};
}

TEST(Pack, BothTraversalsMatchASerialCopy) {
  const auto boxes = mixed_boxes();
  const std::vector<double> expected = serial_pack(boxes);
  EXPECT_EQ(pack_with<Traversal::planes>(boxes), expected);
  EXPECT_EQ(pack_with<Traversal::cells>(boxes), expected);
}

TEST(Pack, UnpackInvertsPack) {
  const Box strip{{0, 1, 3, -1}, {2, 3, 5, 8}}, column{{-1, 0, -2, 6}, {2, 3, 3, 8}};
  const std::vector<BoxInBuffer> boxes = {{strip, 0}, {column, strip.size() + 24}};  // a gap in the buffer
  const SegmentTable<Host> table(kWindow, boxes);
  const Window from = indexed_window();
  Buffer buffer("buffer", static_cast<std::size_t>(boxes[1].buffer_offset + column.size()));
  pack(table, from, buffer);
  const Window to("to", from.extent(0), from.extent(1), from.extent(2), from.extent(3));
  unpack(table, to, buffer);
  int wrong = 0;
  testing::for_each_index(kWindow, [&](const Index4& g) {
    const auto i = static_cast<std::size_t>(kWindow.linear(g));
    const bool in_a_box = strip.contains(g) || column.contains(g);
    wrong += to.data()[i] != (in_a_box ? from.data()[i] : 0.0);
  });
  EXPECT_EQ(wrong, 0);
}

TEST(Pack, OverlappingBoxesGoToDifferentGroupsInOrder) {
  const Box a{{0, 0, 0, 0}, {1, 1, 2, 2}}, b{{0, 0, 1, 1}, {1, 1, 3, 3}}, c{{0, 0, 5, 5}, {1, 1, 6, 6}},
      d{{0, 0, 1, 0}, {1, 1, 2, 1}};
  const auto groups = disjoint_groups({{a, 0}, {b, 4}, {c, 8}, {d, 9}});
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(groups[0][0].box, a);
  EXPECT_EQ(groups[0][1].box, c);
  ASSERT_EQ(groups[1].size(), 2u);
  EXPECT_EQ(groups[1][0].box, b);
  EXPECT_EQ(groups[1][1].box, d);
}

TEST(Pack, BoxOutsideTheWindowIsRejected) {
  EXPECT_THROW(SegmentTable<Host>(kWindow, {{Box{{0, 0, 0, 0}, {1, 1, 1, 9}}, 0}}), std::out_of_range);
}

}  // namespace
}  // namespace tessera::halo
