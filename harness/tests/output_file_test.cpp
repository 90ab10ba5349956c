// output_file_test: Note [Output files] (harness/output_file.h) on every kind of path a user can
// name with --json: new and existing regular files, symlinks (to files, dangling, looping),
// devices, FIFOs, this process's own descriptors, directories and sockets.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/output_file.h"
#include "harness/runner.h"

namespace th = tb::harness;
namespace fs = std::filesystem;

namespace {

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tb_output_file_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static mode_t lmode(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode;
  }
  // Names in the test's folder: the atomic path must leave no temporary behind.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static std::string error_of(const fs::path& p) {
    try {
      th::write_output_file(p, "x");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

// Reads a FIFO on a thread until its writer closes it. Opened (non-blocking) before the write, so
// the writer's open() finds a reader; gives up after 10 s without data, so a writer that replaced
// the FIFO instead of writing into it fails the test rather than hanging it.
class FifoReader {
 public:
  explicit FifoReader(const fs::path& fifo) : fd_(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK)) {
    thread_ = std::thread([this] {
      char buf[65536];
      for (;;) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0) return;  // no writer ever came
        const ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) data_.append(buf, std::size_t(n));
        else if (n == 0 || errno != EAGAIN) return;  // the writer closed
      }
    });
  }
  std::string join() {
    thread_.join();
    ::close(fd_);
    return data_;
  }

 private:
  int fd_;
  std::string data_;
  std::thread thread_;
};

TEST_F(OutputFile, NewAndExistingRegularFilesAreReplacedAtomically) {
  const fs::path f = dir_ / "sub" / "deeper" / "result.json";
  th::write_output_file(f, "first\n");
  EXPECT_EQ(slurp(f), "first\n");
  ::chmod(f.c_str(), 0640);
  struct stat before {};
  ::stat(f.c_str(), &before);
  th::write_output_file(f, "second, longer\n");
  EXPECT_EQ(slurp(f), "second, longer\n");
  struct stat after {};
  ::stat(f.c_str(), &after);
  EXPECT_NE(before.st_ino, after.st_ino);   // renamed over, not rewritten in place
  EXPECT_EQ(after.st_mode & 07777, 0640u);  // permission bits kept
  for (const auto& e : fs::directory_iterator(f.parent_path())) EXPECT_EQ(e.path().filename(), "result.json");
  EXPECT_TRUE(th::is_plain_output_path(f));
  EXPECT_TRUE(th::is_plain_output_path(dir_ / "new.json"));
}

TEST_F(OutputFile, DevNullStaysACharacterDevice) {
  ASSERT_TRUE(S_ISCHR(lmode("/dev/null")));
  EXPECT_NO_THROW(th::check_output_path("/dev/null"));
  th::write_result("/dev/null", nlohmann::json{{"records", nlohmann::json::array()}});
  th::write_output_file("/dev/null", std::string(1 << 20, 'x'));
  EXPECT_TRUE(S_ISCHR(lmode("/dev/null")));
  EXPECT_FALSE(fs::exists("/dev/null.tmp." + std::to_string(::getpid())));
  EXPECT_FALSE(th::is_plain_output_path("/dev/null"));
}

TEST_F(OutputFile, FifoReceivesTheJsonInPlace) {
  const fs::path fifo = dir_ / "results.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  FifoReader reader(fifo);
  // Larger than a pipe's buffer, so the writer has to wait for the reader.
  nlohmann::json doc = {{"schema", th::kSchemaId}, {"pad", std::string(200000, 'p')}};
  th::write_result(fifo, doc);
  const std::string got = reader.join();
  ASSERT_FALSE(got.empty()) << "nothing came through the FIFO";
  EXPECT_EQ(nlohmann::json::parse(got), doc);
  EXPECT_TRUE(S_ISFIFO(lmode(fifo)));
  EXPECT_EQ(names(), std::vector<std::string>{"results.fifo"});
  // Through a symlink, the same.
  const fs::path link = dir_ / "link.fifo";
  fs::create_symlink(fifo, link);
  FifoReader reader2(fifo);
  th::write_output_file(link, "via the link\n");
  EXPECT_EQ(reader2.join(), "via the link\n");
  EXPECT_TRUE(S_ISLNK(lmode(link)));
}

// Decision: a symlink is written through to its target, atomically when that is a regular file,
// and stays a link (what open(), the shell's `>` and torch.save do; replacing the link with a
// file would silently detach whatever it pointed at).
TEST_F(OutputFile, SymlinkIsWrittenThroughAndKept) {
  fs::create_directories(dir_ / "real");
  const fs::path target = dir_ / "real" / "result.json";
  th::write_output_file(target, "old\n");
  ::chmod(target.c_str(), 0600);
  const fs::path link = dir_ / "latest.json";
  fs::create_symlink("real/result.json", link);  // relative, resolved from the link's folder
  const fs::path link2 = dir_ / "chain.json";
  fs::create_symlink(link, link2);  // a chain of two
  th::write_output_file(link2, "new\n");
  EXPECT_TRUE(S_ISLNK(lmode(link)));
  EXPECT_TRUE(S_ISLNK(lmode(link2)));
  EXPECT_EQ(slurp(target), "new\n");
  EXPECT_EQ(lmode(target) & 07777, 0600u);
  EXPECT_EQ(names(), (std::vector<std::string>{"chain.json", "latest.json", "real"}));
  for (const auto& e : fs::directory_iterator(dir_ / "real")) EXPECT_EQ(e.path().filename(), "result.json");

  // A dangling link creates its target, as open(O_CREAT) does.
  const fs::path dangling = dir_ / "dangling.json";
  fs::create_symlink(dir_ / "made" / "by_link.json", dangling);
  th::write_output_file(dangling, "created\n");
  EXPECT_TRUE(S_ISLNK(lmode(dangling)));
  EXPECT_EQ(slurp(dir_ / "made" / "by_link.json"), "created\n");

  // A link to /dev/null writes the device in place and leaves both alone.
  const fs::path to_null = dir_ / "null.json";
  fs::create_symlink("/dev/null", to_null);
  th::write_output_file(to_null, "discarded\n");
  EXPECT_TRUE(S_ISLNK(lmode(to_null)));
  EXPECT_TRUE(S_ISCHR(lmode("/dev/null")));
}

TEST_F(OutputFile, DirectorySocketAndLoopAreClearErrors) {
  std::string e = error_of(dir_);
  EXPECT_NE(e.find(dir_.string()), std::string::npos) << e;
  EXPECT_NE(e.find("is a directory"), std::string::npos) << e;
  EXPECT_THROW(th::check_output_path(dir_), std::runtime_error);

  const fs::path loop_a = dir_ / "a", loop_b = dir_ / "b";
  fs::create_symlink(loop_b, loop_a);
  fs::create_symlink(loop_a, loop_b);
  e = error_of(loop_a);
  EXPECT_NE(e.find("symbolic links"), std::string::npos) << e;

  const fs::path sock = dir_ / "s.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  e = error_of(sock);
  ::close(fd);
  EXPECT_NE(e.find("is a socket"), std::string::npos) << e;

  const fs::path file = dir_ / "plain";
  th::write_output_file(file, "x");
  e = error_of(file / "under_a_file.json");
  EXPECT_NE(e.find("is a file"), std::string::npos) << e;
  EXPECT_THROW(th::check_output_path(file / "under_a_file.json"), std::runtime_error);
  EXPECT_EQ(slurp(file), "x");
}

// /dev/stdout redirected to a file: the JSON lands after what was printed before it, in the same
// file (reopening the path would start again at offset 0 and overwrite the earlier lines).
TEST_F(OutputFile, DevStdoutIsThisProcesssDescriptor) {
  const fs::path log = dir_ / "stdout.txt";
  for (const char* name : {"/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      std::cout << "before\n";
      int rc = 0;
      try {
        th::write_output_file(name, "{\"json\": 1}\n");
      } catch (...) {
        rc = 3;
      }
      std::cout << "after\n" << std::flush;
      ::_exit(rc);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name;
    EXPECT_EQ(slurp(log), "before\n{\"json\": 1}\nafter\n") << name;
  }
}

}  // namespace
