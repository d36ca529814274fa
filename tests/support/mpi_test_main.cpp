// main() for every Tessera test binary. It starts one tessera::Runtime (MPI + Kokkos) for
// the whole run and makes the ranks agree: after each test the ranks exchange their
// verdicts, rank 0 names the ranks on which it failed, and the process exits non-zero on
// every rank if the test failed on any rank. Only rank 0 prints the usual progress; the
// other ranks print their failures, prefixed with their rank. A crash prints where it
// happened, and from where a jump to a bad address came (tests/support/crash_report.hpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "distarray/runtime.hpp"
#include "tests/support/crash_report.hpp"

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

class FailurePrinter : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", world_rank(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
};

class RankAgreement : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    const int failed_here = info.result()->Failed() ? 1 : 0;
    std::vector<int> failed(static_cast<size_t>(world_size()));
    MPI_Allgather(&failed_here, 1, MPI_INT, failed.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::string ranks;
    for (size_t r = 0; r < failed.size(); ++r)
      if (failed[r]) {
        if (!ranks.empty()) ranks += ',';
        ranks += std::to_string(r);
      }
    if (ranks.empty()) return;
    const std::string name = std::string(info.test_suite_name()) + "." + info.name();
    failures_.push_back(name);
    if (world_rank() == 0)
      std::printf("[ RANKS    ] %s failed on rank(s): %s\n", name.c_str(), ranks.c_str());
  }

  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::vector<std::string> failures_;
};

}  // namespace

int main(int argc, char** argv) {
  tessera::Runtime runtime(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  tessera::testing::install_crash_report(runtime.rank());  // after MPI's and Kokkos's own

  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (runtime.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  auto* agreement = new RankAgreement;
  listeners.Append(agreement);

  const int local_status = RUN_ALL_TESTS();
  const int any_failed = agreement->failures().empty() && local_status == 0 ? 0 : 1;
  int global_failed = 0;
  MPI_Allreduce(&any_failed, &global_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (global_failed && runtime.rank() == 0)
    std::printf("tessera: %zu test(s) failed on at least one of %d rank(s)\n",
                agreement->failures().size(), runtime.size());
  std::fflush(stdout);
  return runtime.finish_with(global_failed);
}
