#include "models/prediction_table.hpp"

#include <cstdio>
#include <sstream>

namespace tessera::models {

std::vector<std::pair<GridDims, double>> layout_times(const StepPrediction& p) {
  std::vector<std::pair<GridDims, double>> out;
  for (const LayerPrediction& l : p.layers) {
    const double s = l.compute_s + l.halo_s + l.regrid_s;
    // A head after a split layout belongs to that layout's stage.
    if (!out.empty() && (out.back().first == l.grid || l.on_head)) out.back().second += s;
    else out.emplace_back(l.grid, s);
  }
  return out;
}

std::string prediction_table(const PerfModel& perf, int ranks) {
  const std::vector<StepPrediction> ranking = perf.ranking(ranks);
  if (ranking.empty()) perf.best(ranks);  // throws, naming why
  std::ostringstream out;
  out << "performance model (" << perf.machine().name << "), " << perf.size() << " layers, input "
      << perf.shape(0)[N] << "x" << perf.shape(0)[C] << "x" << perf.shape(0)[H] << "x" << perf.shape(0)[W] << ", "
      << ranks << " ranks; seconds per step:\n";
  out << "| grid | step | compute | halo | allreduce | regrid | per layout (compute + halo + regrid) |\n"
         "|---|---:|---:|---:|---:|---:|---|\n";
  char cell[64];
  const auto s = [&](double v) {
    std::snprintf(cell, sizeof cell, "%.3g", v);
    return std::string(cell);
  };
  for (const StepPrediction& p : ranking) {
    std::string layouts;
    for (const auto& [grid, t] : layout_times(p)) layouts += (layouts.empty() ? "" : ", ") + format_grid(grid) + " " + s(t);
    out << "| " << format_grid(p.grid) << " | " << s(p.total_s()) << " | " << s(p.compute_s) << " | " << s(p.halo_s)
        << " | " << s(p.allreduce_s) << " | " << s(p.regrid_s) << " | " << layouts << " |\n";
  }
  return out.str();
}

}  // namespace tessera::models
