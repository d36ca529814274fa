#pragma once
// Shared by the checkpoint tests: a scratch directory every rank agrees on, tensor slots
// whose values are a known function of their global index (so any grid can check what
// any other grid saved), and checks on error messages.

#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "distarray/distribution.hpp"
#include "models/checkpoint.hpp"
#include "tests/support/grid_cases.hpp"
#include "tests/support/error_message.hpp"

namespace tessera::testing {

// A fresh directory under /tmp, the same on every rank, removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string made;
    if (world_rank() == 0) {
      char name[] = "/tmp/tessera_checkpoint_XXXXXX";
      made = ::mkdtemp(name) ? name : "";
    }
    int length = static_cast<int>(made.size());
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    made.resize(static_cast<std::size_t>(length));
    MPI_Bcast(made.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = made;
  }
  ~ScratchDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    std::error_code ec;
    if (world_rank() == 0 && !path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // The names in the directory, sorted: a failed save must leave no temporary behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The value of element `index` (row-major over the global shape) of the tensor tagged
// `tag`: distinct for every tensor and element, and exact in float32.
inline float expected_value(int tag, std::int64_t index) {
  return static_cast<float>(tag * 4096 + index) + 0.5f;
}

// Calls f(local, global) for every element of the block, both row-major flat indices.
template <class F>
void for_each_element(const Dims& shape, const Dims& offset, const Dims& extent, F f) {
  std::int64_t count = 1;
  for (auto e : extent) count *= e;
  for (std::int64_t local = 0; local < count; ++local) {
    std::int64_t rest = local, global = 0, stride = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      global += (offset[d] + rest % extent[d]) * stride;
      rest /= extent[d];
      stride *= shape[d];
    }
    f(local, global);
  }
}

inline models::TensorSlot replicated_slot(const std::string& dataset, const Dims& shape) {
  std::int64_t count = 1;
  for (auto e : shape) count *= e;
  return {dataset, shape, Dims(shape.size(), 0), shape, layers::Sharing::replicated,
          layers::Parameter<float>::View(dataset, static_cast<std::size_t>(count))};
}

// A (h, w, k) tensor tiled like the grid's spatial tiles: this rank's rows and columns
// of the output, all of k (a locally connected layer's untied weights, say).
inline models::TensorSlot tiled_slot(const std::string& dataset, const ProcessGrid& grid, const Dims& shape) {
  const Block rows = balanced_block(shape[0], grid.dims()[1], grid.coord()[1]);
  const Block cols = balanced_block(shape[1], grid.dims()[2], grid.coord()[2]);
  const Dims offset{rows.begin, cols.begin, 0}, extent{rows.end - rows.begin, cols.end - cols.begin, shape[2]};
  return {dataset, shape, offset, extent, layers::Sharing::tiled,
          layers::Parameter<float>::View(dataset, static_cast<std::size_t>(extent[0] * extent[1] * extent[2]))};
}

inline void fill_expected(const models::TensorSlot& slot, int tag) {
  auto host = Kokkos::create_mirror_view(slot.values);
  for_each_element(slot.shape, slot.offset, slot.extent,
                   [&](std::int64_t local, std::int64_t global) { host(local) = expected_value(tag, global); });
  Kokkos::deep_copy(slot.values, host);
}

inline void fill_constant(const models::TensorSlot& slot, float value) { Kokkos::deep_copy(slot.values, value); }

// Elements of this rank's slice that differ from expected_value(tag, ...).
inline std::int64_t count_unexpected(const models::TensorSlot& slot, int tag) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot.values);
  std::int64_t wrong = 0;
  for_each_element(slot.shape, slot.offset, slot.extent, [&](std::int64_t local, std::int64_t global) {
    if (host(local) != expected_value(tag, global)) ++wrong;
  });
  return wrong;
}

inline std::int64_t count_not_equal(const models::TensorSlot& slot, float value) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot.values);
  std::int64_t differing = 0;
  for (std::size_t i = 0; i < host.extent(0); ++i) differing += host(i) != value;
  return differing;
}

// Slot i holds the values tagged i.
inline void fill_expected(const models::CheckpointContent& content) {
  for (std::size_t i = 0; i < content.tensors.size(); ++i) fill_expected(content.tensors[i], static_cast<int>(i));
}

// The slots (by dataset name) whose slice on this rank is not what fill_expected wrote.
inline std::vector<std::string> unexpected_slots(const models::CheckpointContent& content) {
  std::vector<std::string> wrong;
  for (std::size_t i = 0; i < content.tensors.size(); ++i)
    if (count_unexpected(content.tensors[i], static_cast<int>(i)) != 0) wrong.push_back(content.tensors[i].dataset);
  return wrong;
}

// The message of the std::runtime_error that `action` throws; empty if it throws none.
template <class Action>
std::string error_of(Action&& action) {
  return tessera::testing::error_message<std::runtime_error>(action);
}

// A one-line message containing every one of `parts`.
inline ::testing::AssertionResult is_error_with(const std::string& message, const std::vector<std::string>& parts) {
  if (message.empty()) return ::testing::AssertionFailure() << "no error was thrown";
  if (message.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "not one line: " << message;
  for (const std::string& part : parts)
    if (message.find(part) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << message << "' does not mention '" << part << "'";
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::testing
