// The deadline on MPI_Finalize (distarray/finalize_guard.hpp): a finalize that returns is
// waited for and nothing else happens; one that never returns ends the process after the
// deadline with the program's status and one line naming the rank; the deadline comes from
// TESSERA_FINALIZE_TIMEOUT, and anything but a whole number of seconds is refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "distarray/finalize_guard.hpp"

namespace {

using std::chrono::seconds;

TEST(FinalizeGuard, TimeoutComesFromTheEnvironment) {
  EXPECT_EQ(tessera::finalize_timeout(nullptr), seconds(60));
  EXPECT_EQ(tessera::finalize_timeout(""), seconds(60));
  EXPECT_EQ(tessera::finalize_timeout("0"), seconds(0));
  EXPECT_EQ(tessera::finalize_timeout("15"), seconds(15));
  for (const char* bad : {"abc", "-3", "1.5", " 5", "9999999999"}) {
    try {
      tessera::finalize_timeout(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("TESSERA_FINALIZE_TIMEOUT"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(FinalizeGuard, AFinalizeThatReturnsIsWaitedForAndNotCutShort) {
  const auto start = std::chrono::steady_clock::now();
  bool finished = false;
  tessera::run_with_deadline(
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        finished = true;
      },
      seconds(60), 0, 1);
  EXPECT_TRUE(finished);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30)) << "the guard held the return for its deadline";
}

TEST(FinalizeGuardDeathTest, AStuckFinalizeEndsTheProcessWithTheProgramsStatus) {
  GTEST_FLAG_SET(death_test_style, "fast");  // fork: the child must not start MPI again
  EXPECT_EXIT(tessera::run_with_deadline([] { std::this_thread::sleep_for(std::chrono::hours(1)); }, seconds(1), 3, 7),
              testing::ExitedWithCode(7), "tessera: rank 3: MPI_Finalize did not return within 1 s .*ending with status 7");
}

}  // namespace
