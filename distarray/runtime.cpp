#include "distarray/runtime.hpp"

#include <Kokkos_Core.hpp>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "distarray/cuda_launch_check.hpp"
#include "distarray/finalize_guard.hpp"
#include "distarray/mpi_progress.hpp"
#include "tessera_config.hpp"
#if TESSERA_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace tessera {
namespace {

bool g_active = false;

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("tessera: ") + what + " failed");
}

int cpus_in_affinity_mask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

int gpus_on_node() {
#if TESSERA_ENABLE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
#else
  return 0;
#endif
}

void initialize_kokkos(int threads, int device) {
#if KOKKOS_VERSION >= 40000
  Kokkos::InitializationSettings settings;
  settings.set_num_threads(threads);
  if (device >= 0) settings.set_device_id(device);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments args;
  args.num_threads = threads;
  args.device_id = device;
  args.disable_warnings = true;
  Kokkos::initialize(args);
#endif
}

}  // namespace

int choose_thread_count(const char* omp_num_threads, int cpus_in_mask, int cpus_on_node,
                        int ranks_on_node, bool* from_env) {
  if (from_env) *from_env = false;
  if (omp_num_threads && *omp_num_threads) {
    char* end = nullptr;
    long n = std::strtol(omp_num_threads, &end, 10);
    if (end != omp_num_threads && *end == '\0' && n > 0 && n < 100000) {
      if (from_env) *from_env = true;
      return static_cast<int>(n);
    }
  }
  if (ranks_on_node < 1) ranks_on_node = 1;
  // A launcher that pinned this rank (srun --cpus-per-task, mpiexec -bind-to) already gave
  // it its share; otherwise every rank sees the whole node and takes an equal part.
  if (cpus_in_mask > 0 && cpus_on_node > 0 && cpus_in_mask < cpus_on_node) return cpus_in_mask;
  int cpus = cpus_on_node > 0 ? cpus_on_node : cpus_in_mask;
  return cpus / ranks_on_node > 0 ? cpus / ranks_on_node : 1;
}

Runtime::Runtime(int& argc, char**& argv, RuntimeOptions options) {
  if (g_active) throw std::logic_error("tessera: a Runtime already exists in this process");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // MULTIPLE lets the progress thread (distarray/mpi_progress.hpp) move messages while
    // the rank computes; with less, messages move inside wait() only.
    check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &config_.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &config_.world_size);
  try {
    finalize_timeout_ = finalize_timeout(std::getenv("TESSERA_FINALIZE_TIMEOUT"));
  } catch (...) {
    if (owns_mpi_) MPI_Finalize();
    throw;
  }

  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, config_.world_rank,
                                MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  MPI_Comm_rank(node, &config_.local_rank);
  MPI_Comm_size(node, &config_.local_size);
  MPI_Comm_free(&node);

  config_.devices_on_node = gpus_on_node();
  if (TESSERA_ENABLE_CUDA) {
    if (config_.devices_on_node == 0) {
      if (owns_mpi_) MPI_Finalize();
      throw std::runtime_error("tessera: this is a CUDA build but no GPU is visible on this node");
    }
    // Ranks beyond the GPU count share devices round-robin; the halo transport factory
    // sees that and avoids NCCL, which refuses two ranks on one GPU.
    config_.device = config_.local_rank % config_.devices_on_node;
  }
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  config_.threads = choose_thread_count(std::getenv("OMP_NUM_THREADS"), cpus_in_affinity_mask(),
                                        hw, config_.local_size, &config_.threads_from_env);
  initialize_kokkos(config_.threads, config_.device);
  install_cuda_launch_checks();
  g_active = true;

  if (options.verbose && config_.world_rank == 0) std::printf("%s\n", describe().c_str());
}

Runtime::~Runtime() {
  // Every Kokkos View must be gone before Kokkos::finalize, and Kokkos (which may hold
  // MPI-registered memory) must go before MPI.
  Kokkos::finalize();
  MpiProgress::shutdown();
  g_active = false;
  if (owns_mpi_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) run_with_deadline([] { MPI_Finalize(); }, finalize_timeout_, config_.world_rank, exit_status_);
  }
}

bool Runtime::active() { return g_active; }

std::string Runtime::describe() const {
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi(mpi_version, static_cast<size_t>(len));
  if (auto cut = mpi.find_first_of("\n\r"); cut != std::string::npos) mpi.resize(cut);

  std::ostringstream out;
  out << "tessera " << TESSERA_VERSION_STRING << " [" << TESSERA_BACKEND_NAME << "]"
      << " ranks=" << config_.world_size << " per-node=" << config_.local_size
      << " threads/rank=" << config_.threads << (config_.threads_from_env ? " (OMP_NUM_THREADS)" : "")
      << " device=" << (config_.device >= 0 ? std::to_string(config_.device) : std::string("host"))
      << " kokkos=" << KOKKOS_VERSION / 10000 << "." << KOKKOS_VERSION / 100 % 100 << "."
      << KOKKOS_VERSION % 100 << " (" << Kokkos::DefaultExecutionSpace::name() << ")"
      << " mpi=\"" << mpi << "\""
      << " mpi-progress=" << (MpiProgress::enabled() ? "thread" : "off (MPI below MPI_THREAD_MULTIPLE, or TESSERA_MPI_PROGRESS=off)");
  return out.str();
}

}  // namespace tessera
