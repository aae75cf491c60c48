// sluiced's --state-dir (src/sluiced/state_dir.h): the lock, atomic replacement, and a write that
// fails (a full disk, here a file size limit) keeping the last snapshot whole.
#include "sluiced/state_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using test::TempConfigDir;

TEST(StateDir, CreatesItsDirectoryAndReplacesTheSnapshot) {
  TempConfigDir tmp("state-dir");
  const std::string path = (tmp.path() / "state").string();
  auto dir = StateDir::Open(path);
  ASSERT_TRUE(dir.has_value()) << dir.error().message;
  auto none = (*dir)->ReadSnapshot();
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value()) << "no snapshot yet";
  ASSERT_TRUE((*dir)->WriteSnapshot("first"));
  ASSERT_TRUE((*dir)->WriteSnapshot("second"));
  EXPECT_EQ(**(*dir)->ReadSnapshot(), "second");
  EXPECT_FALSE(std::filesystem::exists(path + "/snapshot.tmp"));
}

TEST(StateDir, OneHolderAtATime) {
  TempConfigDir tmp("state-dir");
  const std::string path = (tmp.path() / "state").string();
  auto first = StateDir::Open(path);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  auto second = StateDir::Open(path);
  ASSERT_FALSE(second.has_value());
  EXPECT_NE(second.error().message.find("in use by another sluiced (pid " +
                                        std::to_string(getpid()) + ")"),
            std::string::npos)
      << second.error().message;
  first->reset();  // released with the first
  EXPECT_TRUE(StateDir::Open(path).has_value());
}

TEST(StateDir, AFailedWriteKeepsTheLastSnapshot) {
  TempConfigDir tmp("state-dir");
  auto dir = StateDir::Open((tmp.path() / "state").string());
  ASSERT_TRUE(dir.has_value());
  ASSERT_TRUE((*dir)->WriteSnapshot("the last good one"));
  // Files may not grow past 64 bytes now: as a full disk does, the write fails part way.
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Result<void> written = (*dir)->WriteSnapshot(std::string(4096, 'x'));
  setrlimit(RLIMIT_FSIZE, &before);
  signal(SIGXFSZ, SIG_DFL);
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message.find("the last snapshot is kept"), std::string::npos)
      << written.error().message;
  EXPECT_EQ(**(*dir)->ReadSnapshot(), "the last good one");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "state" / "snapshot.tmp"));
}

TEST(StateDir, ADamagedSnapshotIsSetAsideUnderItsTime) {
  TempConfigDir tmp("state-dir");
  auto dir = StateDir::Open((tmp.path() / "state").string());
  ASSERT_TRUE(dir.has_value());
  ASSERT_TRUE((*dir)->WriteSnapshot("one"));
  auto aside = (*dir)->SetAsideSnapshot();
  ASSERT_TRUE(aside.has_value()) << aside.error().message;
  ASSERT_TRUE((*dir)->WriteSnapshot("two"));
  auto again = (*dir)->SetAsideSnapshot();
  ASSERT_TRUE(again.has_value());
  EXPECT_NE(*aside, *again) << "the second never replaces the first";
  EXPECT_NE(aside->find("/snapshot.bad-"), std::string::npos) << *aside;
  EXPECT_TRUE(std::filesystem::exists(*aside));
  EXPECT_TRUE(std::filesystem::exists(*again));
  EXPECT_FALSE((*dir)->ReadSnapshot()->has_value());
}

TEST(StateDir, APathThatIsAFileIsRefused) {
  TempConfigDir tmp("state-dir");
  const std::string file = tmp.Write("plain", "x").string();
  auto dir = StateDir::Open(file);
  ASSERT_FALSE(dir.has_value());
  EXPECT_NE(dir.error().message.find("--state-dir " + file), std::string::npos);
}

}  // namespace
}  // namespace sluice::server
