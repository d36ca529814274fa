// save_checkpoint: one collective write per dataset into a temporary file, renamed over
// the destination only when every rank has succeeded.
#include <optional>
#include <vector>

#include "distarray/finite_check.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_layout.hpp"
#include "models/checkpoint_slots.hpp"
#include "models/rank_agreement.hpp"

namespace tessera::models {
namespace {

// One copy of every element reaches the file: rank 0's for a replicated tensor, the
// sample-0 replica's slices for a tiled one.
bool writes(const TensorSlot& slot, const ProcessGrid& grid) {
  return slot.sharing == layers::Sharing::replicated ? grid.rank() == 0 : grid.coord()[0] == 0;
}

// The writers' blocks must add up to the whole tensor, or the file would hold never-written
// elements that a resume reads back as if they were values.
std::string coverage_problem(const CheckpointContent& content, const ProcessGrid& grid) {
  std::vector<long long> written;
  for (const TensorSlot& slot : content.tensors)
    written.push_back(writes(slot, grid) ? element_count(slot.extent) : 0);
  MPI_Allreduce(MPI_IN_PLACE, written.data(), static_cast<int>(written.size()), MPI_LONG_LONG, MPI_SUM, grid.comm());
  for (std::size_t i = 0; i < written.size(); ++i) {
    const TensorSlot& slot = content.tensors[i];
    if (written[i] != element_count(slot.shape))
      return "the slices of '" + slot.dataset + "' on sample coordinate 0 hold " + std::to_string(written[i]) +
             " of its " + std::to_string(element_count(slot.shape)) + " elements";
  }
  return "";
}

// A checkpoint is what a run resumes from, and loading refuses NaN and infinities: one
// holding them would replace a good file by one that cannot be used. This rank's first
// such value among the slices it writes, or "".
std::string non_finite_value(const std::string& context, const CheckpointContent& content, const ProcessGrid& grid) {
  for (const TensorSlot& slot : content.tensors) {
    if (!writes(slot, grid)) continue;
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot.values);
    if (const std::optional<NonFinite> found = find_non_finite(host.data(), slot.offset, slot.extent))
      return non_finite_message(context, slot.dataset, *found);
  }
  return "";
}

void write_tensor(Hdf5File& file, const TensorSlot& slot, bool writer) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slot.values);
  const Dims nothing(slot.shape.size(), 0);
  file.write_block<float>(slot.dataset, slot.shape, slot.offset, writer ? slot.extent : nothing, host.data());
}

void write_int64(Hdf5File& file, const std::string& dataset, std::int64_t value, bool writer) {
  file.write_block<std::int64_t>(dataset, {1}, {0}, {writer ? 1 : 0}, &value);
}

// Creating a dataset is collective and its string type's size must match on every rank,
// so every rank writes rank 0's text.
void write_text(Hdf5File& file, const std::string& dataset, const std::string& value) {
  file.write_string(dataset, broadcast_string(file.comm(), value));
}

void write_meta(Hdf5File& file, const CheckpointMeta& meta, bool root) {
  write_text(file, layout::format, kCheckpointFormat);
  write_int64(file, layout::step, meta.step, root);
  write_text(file, layout::model_spec, meta.model_spec);
  write_int64(file, layout::seed, meta.seed, root);
  write_text(file, layout::rng_state, meta.rng_state);
  write_text(file, layout::optimizer, meta.optimizer);
  write_text(file, layout::optimizer_options, meta.optimizer_options);
}

// This rank's first failure writing `file`, or empty. Every rank goes through every
// collective write even after a failure, so that none is left waiting.
std::string write_file(const std::string& file_path, const ProcessGrid& grid, const CheckpointContent& content) {
  std::string error;
  std::optional<Hdf5File> file;
  record_failure(error, [&] { file.emplace(file_path, Hdf5File::Mode::create, grid.comm()); });
  if (!agreed_error(grid.comm(), error).empty()) return error.empty() ? "another rank could not create it" : error;

  const bool root = grid.rank() == 0;
  record_failure(error, [&] { write_meta(*file, content.meta, root); });
  for (const TensorSlot& slot : content.tensors)
    record_failure(error, [&] { write_tensor(*file, slot, writes(slot, grid)); });
  for (const CounterSlot& counter : content.counters)
    record_failure(error, [&] { write_int64(*file, counter.dataset, *counter.value, root); });
  record_failure(error, [&] { file->close(); });
  return error;
}

}  // namespace

void save_checkpoint(const std::string& path, const ProcessGrid& grid, const CheckpointContent& content) {
  const MPI_Comm comm = grid.comm();
  const std::string context = "cannot save checkpoint '" + path + "'";
  check_content(content, comm, context);
  const std::string coverage = coverage_problem(content, grid);
  throw_if_any(comm, coverage.empty() ? "" : context + ": " + coverage);
  throw_if_any(comm, non_finite_value(context, content, grid));
  check_writable(path, comm);

  const std::string temporary = agreed_temporary_name(path, comm);
  const std::string error = agreed_error(comm, write_file(temporary, grid, content));
  if (!error.empty()) {
    discard_temporary(temporary, comm);
    throw std::runtime_error(context + ": " + error);
  }
  commit_temporary(temporary, path, comm);
}

}  // namespace tessera::models
