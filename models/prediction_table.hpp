#pragma once
// prediction_table: the performance model's (models/perf_model.hpp) view of a model on a
// rank count as text — every valid grid, fastest first, with its predicted step split into
// compute, exposed halo, gradient allreduce and regrid, and the step time per layout (the
// layers that run on each grid, in run order: a stage split shows as two or more) — for
// tessera-train --predict (docs/performance.md).

#include <string>
#include <vector>

#include "models/perf_model.hpp"

namespace tessera::models {

// Consecutive layers of a prediction on one grid: (grid, seconds of compute + halo + regrid).
std::vector<std::pair<GridDims, double>> layout_times(const StepPrediction& p);

// Throws std::invalid_argument (PerfModel::best's message) when no grid of `ranks` is valid.
std::string prediction_table(const PerfModel& perf, int ranks);

}  // namespace tessera::models
