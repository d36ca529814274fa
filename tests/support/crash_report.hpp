#pragma once
// install_crash_report(rank): on SIGSEGV, SIGBUS, SIGILL or SIGFPE a test binary prints one
// line naming the rank, the running test, the faulting instruction and — when the program
// jumped to an address outside every loaded object (a call through a null or stale
// function pointer) — the caller, read from the return address the call left on the stack.
// Debuggers stop at frame 0 in that case (the first GPU run's crash: "jump to address 0");
// the caller is what finds it. Then the default action runs (core dump, non-zero exit).
// Only async-signal-safe calls in the handler, except gtest's current-test lookup, which
// reads a pointer.

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace tessera::testing {
namespace crash_detail {

inline int crash_rank = -1;

inline void put(const char* s) { (void)!write(2, s, std::strlen(s)); }

inline void put_hex(std::uintptr_t v) {
  char digits[2 + 16 + 1] = "0x";
  for (int i = 0; i < 16; ++i) digits[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
  digits[18] = '\0';
  put(digits);
}

inline void put_int(int v) {
  char text[16];
  int n = 0;
  unsigned u = v < 0 ? 0u - unsigned(v) : unsigned(v);
  do text[n++] = char('0' + u % 10); while ((u /= 10) && n < 15);
  if (v < 0) put("-");
  while (n > 0) (void)!write(2, &text[--n], 1);
}

// "address (object!symbol+offset)", or "address (in no loaded object)".
inline void put_place(std::uintptr_t address) {
  put_hex(address);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(address), &info) == 0 || info.dli_fname == nullptr) {
    put(" (in no loaded object)");
    return;
  }
  put(" (");
  put(info.dli_fname);
  if (info.dli_sname) {
    put("!");
    put(info.dli_sname);
    put("+");
    put_hex(address - reinterpret_cast<std::uintptr_t>(info.dli_saddr));
  } else {
    put("+");
    put_hex(address - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
  }
  put(")");
}

inline void on_crash(int signal, siginfo_t* info, void* context) {
  put("[rank ");
  put_int(crash_rank);
  put("] ");
  put(strsignal(signal));
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test) {
    put(" in ");
    put(test->test_suite_name());
    put(".");
    put(test->name());
  }
  put(": fault address ");
  put_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  const auto pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  const auto sp = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  put(", instruction ");
  put_place(pc);
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(pc), &where) == 0 && sp != 0 && sp % sizeof(void*) == 0) {
    // A call to a bad address pushed its return address and faulted fetching the target.
    put(", called from ");
    put_place(*reinterpret_cast<const std::uintptr_t*>(sp) - 1);
  }
#else
  (void)context;
#endif
  put("\n");
}

}  // namespace crash_detail

inline void install_crash_report(int rank) {
  crash_detail::crash_rank = rank;
  struct sigaction action {};
  action.sa_sigaction = crash_detail::on_crash;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND;  // the default action follows the report
  sigemptyset(&action.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) sigaction(s, &action, nullptr);
}

}  // namespace tessera::testing
