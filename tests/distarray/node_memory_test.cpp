// What a rank may allocate: MemAvailable, cgroup v1 and v2 limits (the tightest of the
// process's cgroup and its ancestors, usage subtracted) read from fake /proc and /sys
// trees; byte sizes as users write them; byte counts as messages print them; the process's
// resident memory, from a fake /proc/self/status and from the real one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "distarray/node_memory.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class FakeMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tessera-node-memory-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                         "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    write("proc/meminfo", "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  fs::path root_;
};

constexpr std::int64_t kMemAvailable = std::int64_t{20000000} * 1024;

TEST_F(FakeMachine, MemAvailableWithoutACgroupLimit) {
  write("proc/self/cgroup", "0::/user.slice\n");
  write("sys/fs/cgroup/user.slice/memory.max", "max\n");
  const auto share = host_memory_available(root_);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->bytes, kMemAvailable);
  EXPECT_EQ(share->source, "MemAvailable");
}

TEST_F(FakeMachine, CgroupV2LimitOfAnAncestorLessItsUsage) {
  write("proc/self/cgroup", "0::/jobs/job7/step0\n");
  write("sys/fs/cgroup/jobs/job7/step0/memory.max", "max\n");
  write("sys/fs/cgroup/jobs/job7/memory.max", "8589934592\n");  // 8 GiB for the job
  write("sys/fs/cgroup/jobs/job7/memory.current", "1073741824\n");
  const auto share = host_memory_available(root_);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->bytes, std::int64_t{7} << 30);
  EXPECT_NE(share->source.find("cgroup"), std::string::npos);
}

TEST_F(FakeMachine, CgroupV1LimitAtTheNamespaceRoot) {
  // Inside a container the process's cgroup path does not exist below the mount: the
  // mount point itself is the process's cgroup.
  write("proc/self/cgroup", "4:memory:/process_api/abc\n3:cpu,cpuacct:/\n");
  write("sys/fs/cgroup/memory/memory.limit_in_bytes", "4294967296\n");
  write("sys/fs/cgroup/memory/memory.usage_in_bytes", "294967296\n");
  const auto share = host_memory_available(root_);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->bytes, std::int64_t{4000000000});
}

TEST_F(FakeMachine, CgroupV1WithoutALimitIsIgnored) {
  write("proc/self/cgroup", "4:memory:/process_api/abc\n");
  write("sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", "9223372036854771712\n");
  write("sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes", "1155178496\n");
  EXPECT_EQ(host_memory_available(root_)->bytes, kMemAvailable);
}

TEST_F(FakeMachine, ALimitAboveMemAvailableDoesNotWin) {
  write("proc/self/cgroup", "0::/\n");
  write("sys/fs/cgroup/memory.max", "107374182400\n");  // 100 GiB on a 24 GB machine
  EXPECT_EQ(host_memory_available(root_)->bytes, kMemAvailable);
}

TEST_F(FakeMachine, NoMeminfoIsUnknown) {
  fs::remove(root_ / "proc/meminfo");
  EXPECT_FALSE(host_memory_available(root_).has_value());
}

TEST(NodeMemory, ThisMachineHasAFigure) {
  const auto share = host_memory_available();
  ASSERT_TRUE(share);
  EXPECT_GT(share->bytes, 0);
}

TEST(ByteSizes, AsUsersWriteThem) {
  EXPECT_EQ(parse_byte_size("1500000000", "--memory-limit"), 1500000000);
  EXPECT_EQ(parse_byte_size("512M", "--memory-limit"), std::int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("8G", "--memory-limit"), std::int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--memory-limit"), std::int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("2tb", "--memory-limit"), std::int64_t{2} << 40);
  EXPECT_EQ(parse_byte_size("1K", "--memory-limit"), 1024);
  for (const char* bad : {"", "lots", "8X", "-1G", "0", "1e30", "G"}) {
    SCOPED_TRACE(bad);
    try {
      parse_byte_size(bad, "--memory-limit");
      ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--memory-limit must be a size"), std::string::npos) << e.what();
    }
  }
}

TEST(ByteSizes, AsMessagesPrintThem) {
  EXPECT_EQ(format_bytes(900), "900 B");
  EXPECT_EQ(format_bytes(2048), "2.00 KiB");
  EXPECT_EQ(format_bytes(std::int64_t{312} << 20), "312 MiB");
  EXPECT_EQ(format_bytes(std::int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(28800000000), "26.8 GiB");
}

TEST_F(FakeMachine, ResidentMemoryNowAndPeak) {
  write("proc/self/status", "Name:\ttessera-train\nVmPeak:\t  900000 kB\nVmHWM:\t  420000 kB\nVmRSS:\t  410000 kB\n");
  const auto rss = resident_memory(root_);
  ASSERT_TRUE(rss);
  EXPECT_EQ(rss->now, std::int64_t{410000} * 1024);
  EXPECT_EQ(rss->peak, std::int64_t{420000} * 1024);
}

TEST_F(FakeMachine, ResidentMemoryUnknownWithoutBothLines) {
  write("proc/self/status", "Name:\ttessera-train\nVmRSS:\t  410000 kB\n");
  EXPECT_FALSE(resident_memory(root_));
  fs::remove(root_ / "proc/self/status");
  EXPECT_FALSE(resident_memory(root_));
}

TEST(ResidentMemory, ThisProcessPeakGrowsWithWhatItTouches) {
  const auto before = resident_memory();
  ASSERT_TRUE(before) << "no VmRSS / VmHWM in /proc/self/status";
  EXPECT_GT(before->now, 0);
  EXPECT_GE(before->peak, before->now);
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<char> touched(bytes, 1);  // written, so resident
  const auto after = resident_memory();
  ASSERT_TRUE(after);
  EXPECT_GE(after->peak, before->now + static_cast<std::int64_t>(bytes) / 2) << "64 MiB written, peak barely moved";
  EXPECT_EQ(touched[bytes - 1], 1);
}

}  // namespace
}  // namespace tessera
