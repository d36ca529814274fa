// The test binaries' crash report (tests/support/crash_report.hpp): a call through a null
// function pointer dies with one line that names the test and the caller's place, read
// from the return address (a debugger's backtrace stops at frame 0 there).
#include <gtest/gtest.h>

#include "tests/support/crash_report.hpp"

namespace {

using Function = void (*)();

[[gnu::noinline]] void call_through(Function f) {
  f();
  asm volatile("");  // keeps the call a call, not a jump: the return address stays on the stack
}

TEST(CrashReportDeathTest, NullCallNamesTheTestAndTheCaller) {
  GTEST_FLAG_SET(death_test_style, "fast");  // fork: the child must not start MPI again
  volatile Function null = nullptr;  // read at run time: the compiler cannot assume non-null
  EXPECT_DEATH(
      {
        tessera::testing::install_crash_report(0);
        call_through(null);
      },
      "\\[rank 0\\] Segmentation fault in CrashReportDeathTest\\.NullCallNamesTheTestAndTheCaller: fault "
      "address 0x0+, instruction 0x0+ \\(in no loaded object\\), called from 0x[0-9a-f]+ \\(.*distarray_geometry");
}

}  // namespace
