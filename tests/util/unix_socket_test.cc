// The Unix socket files of the listeners (util/unix_socket.h), against the kernel: who listens
// is asked with connect(), modes and groups read back with stat().
#include "util/unix_socket.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace sluice::util {
namespace {

namespace fs = std::filesystem;

class UnixSocketTest : public ::testing::Test {
 protected:
  UnixSocketTest() {
    char name[] = "/tmp/sluice-us-XXXXXX";
    EXPECT_NE(mkdtemp(name), nullptr);
    dir_ = name;
    path_ = (dir_ / "s.sock").string();
  }
  ~UnixSocketTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // 0 when a connect() to `path` succeeds, else its errno.
  static int ConnectError(const std::string& path) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    const int err = rc == 0 ? 0 : errno;
    close(fd);
    return err;
  }

  static struct stat Stat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
    return st;
  }

  size_t Entries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(UnixSocketTest, ListensWithTheModeAskedForAndLeavesNothingElseBehind) {
  for (const mode_t mode : {mode_t{0600}, mode_t{0660}, mode_t{0666}}) {
    auto bound = ListenUnixSocket(path_, {.mode = mode, .group = {}});
    ASSERT_TRUE(bound.has_value()) << bound.error();
    EXPECT_EQ(Stat(path_).st_mode & 07777, mode);
    EXPECT_TRUE(S_ISSOCK(Stat(path_).st_mode));
    EXPECT_EQ(ConnectError(path_), 0);
    EXPECT_EQ(Entries(), 1u) << "the private directory it was made in is gone";
    close(bound->fd);
    bound->file.Remove();
    EXPECT_FALSE(fs::exists(path_));
  }
}

TEST_F(UnixSocketTest, TheGroupIsApplied) {
  // root may give any group: one other than its own shows the chown; others, their own.
  const group* g = geteuid() == 0 ? getgrnam("nogroup") : nullptr;
  if (g == nullptr) g = getgrgid(getegid());
  ASSERT_NE(g, nullptr);
  const gid_t gid = g->gr_gid;
  auto bound = ListenUnixSocket(path_, {.mode = 0660, .group = g->gr_name});
  ASSERT_TRUE(bound.has_value()) << bound.error();
  EXPECT_EQ(Stat(path_).st_gid, gid);
  close(bound->fd);

  auto unknown = ListenUnixSocket(dir_ / "x.sock", {.mode = 0660, .group = "no-such-group-xq"});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("no group named no-such-group-xq"), std::string::npos);
}

TEST_F(UnixSocketTest, ALiveSocketIsNeverTakenAndAStaleOneIsReplaced) {
  auto first = ListenUnixSocket(path_, {});
  ASSERT_TRUE(first.has_value()) << first.error();
  const ino_t first_inode = Stat(path_).st_ino;
  auto second = ListenUnixSocket(path_, {});
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error(),
            "cannot listen on unix:" + path_ + ": another server is listening on " + path_);
  EXPECT_EQ(Stat(path_).st_ino, first_inode);
  EXPECT_EQ(ConnectError(path_), 0) << "the first still answers";

  // The first stops and removes its file; a server killed on the spot leaves one behind, on
  // which a connect() is refused: made here by binding without listening.
  close(first->fd);
  first->file.Remove();
  ASSERT_FALSE(fs::exists(path_));
  const int dead = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  ASSERT_EQ(bind(dead, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  close(dead);
  const ino_t dead_inode = Stat(path_).st_ino;
  ASSERT_EQ(ConnectError(path_), ECONNREFUSED);
  auto third = ListenUnixSocket(path_, {});
  ASSERT_TRUE(third.has_value()) << third.error();
  EXPECT_NE(Stat(path_).st_ino, dead_inode);
  EXPECT_EQ(ConnectError(path_), 0);
  close(third->fd);
}

TEST_F(UnixSocketTest, APathThatIsNotASocketIsKept) {
  std::ofstream(path_) << "data";
  auto bound = ListenUnixSocket(path_, {});
  ASSERT_FALSE(bound.has_value());
  EXPECT_NE(bound.error().find("exists and is not a socket"), std::string::npos) << bound.error();
  EXPECT_TRUE(fs::is_regular_file(path_));
  EXPECT_FALSE(ListenUnixSocket("relative.sock", {}).has_value());
  EXPECT_FALSE(ListenUnixSocket("/tmp/" + std::string(120, 'x'), {}).has_value());
}

// A server that stops removes its file only if the path still names its socket: another server
// that replaced it (after finding it stale) keeps its own.
TEST_F(UnixSocketTest, RemovesOnlyItsOwnFile) {
  {
    auto bound = ListenUnixSocket(path_, {});
    ASSERT_TRUE(bound.has_value()) << bound.error();
    close(bound->fd);
  }  // destroyed: removed
  EXPECT_FALSE(fs::exists(path_));

  auto old = ListenUnixSocket(path_, {});
  ASSERT_TRUE(old.has_value());
  close(old->fd);
  auto replacement = ListenUnixSocket(path_, {});  // old's socket is stale now
  ASSERT_TRUE(replacement.has_value()) << replacement.error();
  old->file.Remove();
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_EQ(ConnectError(path_), 0);
  close(replacement->fd);
}

TEST(SocketMode, ParsesOctalPermissions) {
  EXPECT_EQ(*ParseSocketMode("0660"), 0660u);
  EXPECT_EQ(*ParseSocketMode("600"), 0600u);
  EXPECT_EQ(*ParseSocketMode("0777"), 0777u);
  for (const char* bad : {"", "0888", "66a", "01777", "12345", "-660"}) {
    EXPECT_FALSE(ParseSocketMode(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice::util
