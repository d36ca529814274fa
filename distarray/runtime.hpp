#pragma once
// tessera::Runtime: the one object a Tessera program creates first. It initializes MPI and
// Kokkos once, binds each rank to its GPU (CUDA builds) or gives it its share of the
// node's cores (CPU builds), and finalizes both in the right order when it goes away.

#include <mpi.h>

#include <chrono>
#include <string>

namespace tessera {

struct RuntimeOptions {
  bool verbose = false;  // print one configuration line on rank 0
};

// The facts Runtime decided, kept so tests and logs can state them.
struct RuntimeConfig {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;   // rank among the ranks on this node
  int local_size = 1;
  int threads = 1;      // host threads Kokkos runs with on this rank
  int device = -1;      // GPU this rank is bound to; -1 in CPU builds
  int devices_on_node = 0;
  bool threads_from_env = false;  // OMP_NUM_THREADS was set and honoured
};

class Runtime {
 public:
  Runtime(int& argc, char**& argv, RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeConfig& config() const { return config_; }
  int rank() const { return config_.world_rank; }
  int size() const { return config_.world_size; }
  MPI_Comm world() const { return MPI_COMM_WORLD; }

  // One human-readable line: version, backend, ranks, threads, device, MPI library.
  std::string describe() const;

  // True between construction and destruction of the (single) Runtime.
  static bool active();

  // Records how the program ends and returns it (`return runtime.finish_with(run(...));`).
  // The status is used only where MPI_Finalize must be abandoned past its deadline
  // (distarray/finalize_guard.hpp); until set it is 1, so an unset one never reads as success.
  int finish_with(int status) {
    exit_status_ = status;
    return status;
  }

 private:
  RuntimeConfig config_;
  bool owns_mpi_ = false;
  std::chrono::seconds finalize_timeout_{60};
  int exit_status_ = 1;
};

// Host threads for one rank: OMP_NUM_THREADS if set (and valid), else the CPUs this rank
// may run on divided among the ranks of its node. Exposed for tests.
int choose_thread_count(const char* omp_num_threads, int cpus_in_affinity_mask,
                        int cpus_on_node, int ranks_on_node, bool* from_env = nullptr);

}  // namespace tessera
