#include "models/auto_grid.hpp"

#include <exception>
#include <iomanip>
#include <sstream>

#include "distarray/hdf5_file.hpp"
#include "models/perf_model.hpp"

namespace tessera::models {
namespace {

int ranks_per_node(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  int most = local;  // every rank must see the same machine
  MPI_Allreduce(&local, &most, 1, MPI_INT, MPI_MAX, comm);
  return most;
}

std::string seconds(double s) {
  std::ostringstream out;
  out << std::setprecision(3) << s << " s";
  return out.str();
}

}  // namespace

AutoGrid choose_auto_grid(const std::string& model, const std::string& data, std::int64_t batch,
                          const layers::WindowedConfig& halo, const std::string& precision, MPI_Comm comm) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  AutoGrid choice;
  if (ranks == 1) return choice;
  const int per_node = ranks_per_node(comm);
  choice.dims = default_grid(ranks);
  try {
    Dims images;
    {
      const Hdf5File file(data, Hdf5File::Mode::read, comm);
      images = file.shape("/images");
    }
    if (images.size() != 4) throw std::invalid_argument("/images is not (N, C, H, W)");
    PerfModel perf(model, {batch, images[1], images[2], images[3]}, Machine::for_this_build(per_node));
    perf.set_overlap(halo.overlap == layers::Overlap::on);
    perf.set_precision(precision);
    const std::vector<StepPrediction> ranking = perf.ranking(ranks);
    if (ranking.empty()) throw std::invalid_argument("no grid of " + std::to_string(ranks) + " ranks fits the model");
    const StepPrediction& best = ranking.front();
    choice.dims = best.grid;
    std::ostringstream line;
    line << "grid auto: " << format_grid(best.grid) << ", the fastest of " << ranking.size()
         << " valid grids by the performance model (" << perf.machine().name << "): predicted "
         << seconds(best.total_s()) << " a step (compute " << seconds(best.compute_s) << ", halo "
         << seconds(best.halo_s) << ", allreduce " << seconds(best.allreduce_s);
    if (best.regrid_s > 0) line << ", regrid " << seconds(best.regrid_s);
    line << ")";
    if (ranking.size() > 1)
      line << "; next " << format_grid(ranking[1].grid) << " at " << seconds(ranking[1].total_s());
    choice.reason = line.str();
  } catch (const std::exception& e) {
    choice.reason = "grid auto: " + format_grid(choice.dims) + ", the default (the performance model could not run: " +
                    e.what() + ")";
  }
  return choice;
}

}  // namespace tessera::models
