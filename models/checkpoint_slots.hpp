#pragma once
// Checks of a CheckpointContent that need no file: every slot's shape, offset, extent and
// view agree, and every rank lists as many slots. Run first by save and load, so that a
// caller's mistake is one clear error rather than an out-of-bounds copy or a hang.

#include <mpi.h>

#include <cstdint>
#include <string>

#include "models/checkpoint.hpp"

namespace tessera::models {

std::int64_t element_count(const Dims& dims);

// Empty when the slot is consistent; otherwise what is wrong with it, naming the dataset.
std::string slot_problem(const TensorSlot& slot);

// Throws on every rank "<context>: <problem>" when any rank's content has a problem.
void check_content(const CheckpointContent& content, MPI_Comm comm, const std::string& context);

}  // namespace tessera::models
