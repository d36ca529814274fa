// load_checkpoint: validate everything the load will touch, on every rank alike, before
// reading any value; then each rank reads the block its slots name.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "distarray/finite_check.hpp"
#include "models/checkpoint.hpp"
#include "models/checkpoint_layout.hpp"
#include "models/checkpoint_slots.hpp"
#include "models/rank_agreement.hpp"

namespace tessera::models {
namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

std::string existence_problem(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "checkpoint " + quoted(path) + " does not exist";
  if (std::filesystem::is_directory(path, ec)) return "checkpoint " + quoted(path) + " is a directory";
  return "";
}

// Empty when `dataset` exists with `shape` and `kind`.
std::string dataset_problem(const Hdf5File& file, const std::string& dataset, const Dims& shape, ElementKind kind,
                            const char* kind_name) {
  const std::string where = "checkpoint " + quoted(file.path());
  if (!file.has(dataset)) return where + " has no dataset '" + dataset + "'";
  const Dims stored = file.shape(dataset);
  if (stored != shape)
    return where + ": dataset '" + dataset + "' has shape " + dims_text(stored) + ", expected " + dims_text(shape);
  if (file.element_kind(dataset) != kind) return where + ": dataset '" + dataset + "' is not " + kind_name;
  return "";
}

std::string tensor_problem(const Hdf5File& file, const TensorSlot& slot) {
  return dataset_problem(file, slot.dataset, slot.shape, ElementKind::float32, "float32");
}

std::string int64_problem(const Hdf5File& file, const std::string& dataset) {
  return dataset_problem(file, dataset, {1}, ElementKind::int64, "a single int64");
}

std::string string_problem(const Hdf5File& file, const std::string& dataset) {
  return file.has(dataset) ? "" : "checkpoint " + quoted(file.path()) + " has no dataset '" + dataset + "'";
}

std::string format_problem(const Hdf5File& file) {
  if (!file.has(layout::format))
    return quoted(file.path()) + " is not a Tessera checkpoint: it has no " + layout::format;
  std::string format, error;
  record_failure(error, [&] { format = file.read_string(layout::format); });
  if (!error.empty()) return error;
  if (format != kCheckpointFormat)
    return "checkpoint " + quoted(file.path()) + " has format '" + format + "'; this build reads '" +
           kCheckpointFormat + "'";
  return "";
}

std::string meta_problem(const Hdf5File& file) {
  for (const char* dataset : {layout::step, layout::seed})
    if (auto problem = int64_problem(file, dataset); !problem.empty()) return problem;
  for (const char* dataset : {layout::model_spec, layout::rng_state, layout::optimizer, layout::optimizer_options})
    if (auto problem = string_problem(file, dataset); !problem.empty()) return problem;
  return "";
}

std::int64_t read_int64(const Hdf5File& file, const std::string& dataset) {
  std::int64_t value = 0;
  file.read_block<std::int64_t>(dataset, {0}, {1}, &value);
  return value;
}

// What the file holds of the metadata: a weights-only load asks for no more than
// /meta/format, so that a file written from PyTorch (docs/checkpoints.md) initializes a run.
CheckpointMeta read_meta(const Hdf5File& file) {
  CheckpointMeta meta;
  const auto read_number = [&](const char* dataset, std::int64_t& value) {
    if (file.has(dataset)) value = read_int64(file, dataset);
  };
  const auto read_text = [&](const char* dataset, std::string& value) {
    if (file.has(dataset)) value = file.read_string(dataset);
  };
  read_number(layout::step, meta.step);
  read_text(layout::model_spec, meta.model_spec);
  read_number(layout::seed, meta.seed);
  read_text(layout::rng_state, meta.rng_state);
  read_text(layout::optimizer, meta.optimizer);
  read_text(layout::optimizer_options, meta.optimizer_options);
  return meta;
}

std::string optimizer_problem(const std::string& path, const std::string& stored, const std::string& expected) {
  if (expected.empty() || stored == expected) return "";
  return "checkpoint " + quoted(path) + " holds " + (stored.empty() ? "no optimizer state" : "'" + stored + "' state") +
         ", this run's optimizer is '" + expected + "'";
}

// Reads this rank's block of a slot; refuses (throws) a NaN or infinite value in it, found
// in the host copy the read has just filled, and a negative variance or second moment
// (it would turn into a NaN at the first normalisation or update).
void read_tensor(const Hdf5File& file, const TensorSlot& slot) {
  const auto host = Kokkos::create_mirror_view(slot.values);
  file.read_block<float>(slot.dataset, slot.offset, slot.extent, host.data());
  const std::string source = "checkpoint " + quoted(file.path());
  if (const auto found = find_non_finite(host.data(), slot.offset, slot.extent))
    throw std::runtime_error(non_finite_message(source, slot.dataset, *found));
  if (slot.non_negative) {
    const float* const begin = host.data();
    const float* const end = begin + host.extent(0);
    const float* const negative = std::find_if(begin, end, [](float v) { return v < 0; });
    if (negative != end) {
      std::ostringstream value;
      value << *negative;  // shortest form: -0.25, not std::to_string's -0.250000
      const Dims index = block_element_index(static_cast<std::size_t>(negative - begin), slot.offset, slot.extent);
      throw std::runtime_error(source + ": " + element_text(slot.dataset, index) + " is " + value.str() +
                               " (a variance or second moment cannot be negative)");
    }
  }
  Kokkos::deep_copy(slot.values, host);
}

// A count of steps or updates below zero: the file was not written by a run.
std::string count_problem(const std::string& path, const std::string& dataset, std::int64_t value) {
  if (value >= 0) return "";
  return "checkpoint " + quoted(path) + ": " + dataset + " is " + std::to_string(value) +
         " (a count of steps cannot be negative)";
}

bool in_scope(const TensorSlot& slot, LoadScope scope) {
  return scope == LoadScope::everything || layout::is_param(slot.dataset);
}

}  // namespace

CheckpointMeta load_checkpoint(const std::string& path, const ProcessGrid& grid, const CheckpointContent& content,
                               LoadScope scope) {
  const MPI_Comm comm = grid.comm();
  check_content(content, comm, "cannot load checkpoint " + quoted(path));
  throw_if_any(comm, existence_problem(path));

  std::optional<Hdf5File> file;
  std::string error;
  record_failure(error, [&] { file.emplace(path, Hdf5File::Mode::read, comm); });
  throw_if_any(comm, error.empty() ? "" : "corrupt or truncated checkpoint " + quoted(path) + ": not a readable HDF5 file");

  throw_if_any(comm, format_problem(*file));
  throw_if_any(comm, scope == LoadScope::everything ? meta_problem(*file) : "");
  CheckpointMeta meta;
  record_failure(error, [&] { meta = read_meta(*file); });
  throw_if_any(comm, error);
  throw_if_any(comm, scope == LoadScope::everything ? count_problem(path, layout::step, meta.step) : "");

  std::string problem;
  if (scope == LoadScope::everything) problem = optimizer_problem(path, meta.optimizer, content.meta.optimizer);
  for (const TensorSlot& slot : content.tensors)
    if (problem.empty() && in_scope(slot, scope)) problem = tensor_problem(*file, slot);
  for (const CounterSlot& counter : content.counters)
    if (problem.empty() && scope == LoadScope::everything) problem = int64_problem(*file, counter.dataset);
  throw_if_any(comm, problem);

  for (const TensorSlot& slot : content.tensors)
    if (in_scope(slot, scope)) record_failure(error, [&] { read_tensor(*file, slot); });
  if (scope == LoadScope::everything)
    for (const CounterSlot& counter : content.counters)
      record_failure(error, [&] {
        *counter.value = read_int64(*file, counter.dataset);
        if (auto problem = count_problem(path, counter.dataset, *counter.value); !problem.empty())
          throw std::runtime_error(problem);
      });
  throw_if_any(comm, error);
  return meta;
}

}  // namespace tessera::models
