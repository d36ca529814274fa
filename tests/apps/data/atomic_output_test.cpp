// AtomicOutput: the destination appears only on commit, an uncommitted conversion leaves
// neither a file nor a temporary behind and keeps the file that was there, and an
// unwritable destination is an error at construction (before any work).
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "data/atomic_output.hpp"
#include "sample_files.hpp"

namespace tessera::data {
namespace {

namespace fs = std::filesystem;

class AtomicOutputTest : public testing::Test {
 protected:
  std::string dir = samples::fresh_dir("atomic");
  std::string target = dir + "/out.h5";
  std::size_t files() const { return std::distance(fs::directory_iterator(dir), fs::directory_iterator()); }
};

TEST_F(AtomicOutputTest, CommitMovesTheTemporaryIntoPlace) {
  AtomicOutput out(target);
  EXPECT_TRUE(fs::exists(out.temporary()));
  EXPECT_FALSE(fs::exists(target));
  samples::write_plain(out.temporary(), {1, 2, 3});
  out.commit();
  EXPECT_EQ(samples::read_plain(target), (samples::Bytes{1, 2, 3}));
  EXPECT_EQ(files(), 1u) << "no temporary left";
}

TEST_F(AtomicOutputTest, NoCommitLeavesNothingBehind) {
  { AtomicOutput out(target); samples::write_plain(out.temporary(), {1}); }
  EXPECT_EQ(files(), 0u);
}

TEST_F(AtomicOutputTest, NoCommitKeepsTheExistingFile) {
  samples::write_plain(target, {9, 9});
  {
    AtomicOutput out(target);
    samples::write_plain(out.temporary(), {1});
  }
  EXPECT_EQ(samples::read_plain(target), (samples::Bytes{9, 9}));
  EXPECT_EQ(files(), 1u);
}

TEST_F(AtomicOutputTest, UnwritableDestinationsFailAtOnce) {
  // /dev/null is no directory, for root too, whose permission bits do not stop it.
  try {
    AtomicOutput out("/dev/null/out.h5");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/dev/null/out.h5'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AtomicOutput{dir}, std::runtime_error) << "a directory is no output file";
  EXPECT_THROW(AtomicOutput{dir + "/no/such/dir/out.h5"}, std::runtime_error);
}

}  // namespace
}  // namespace tessera::data
