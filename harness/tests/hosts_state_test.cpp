// The hosts fixture's state folder read as hostile input (Note [Hostile state] in harness/hosts.cpp):
// TRAINBENCH_HOSTS_DIR is an environment value and the reaper runs as root, so it must touch only
// folders named like fixtures, only objects such a fixture makes, and only files it writes.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "harness/hosts.h"
#include "harness/tests/cli_run.h"

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// An owner that is gone: a pid far above pid_max with a start time no process has.
constexpr const char* kDeadOwner = "999999999 0\n";

class HostsState : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tb_hosts_state_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    ::setenv("TRAINBENCH_HOSTS_DIR", root_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("TRAINBENCH_HOSTS_DIR");
    fs::remove_all(root_);
  }
  // A folder last written two hours ago (the reaper takes a folder without an owner file for a
  // claim that died once it is a minute old).
  fs::path old_folder(const std::string& name) {
    const fs::path d = root_ / name;
    fs::create_directories(d);
    write(d / "notes.txt", "not the fixture's\n");
    fs::last_write_time(d, fs::file_time_type::clock::now() - std::chrono::hours(2));
    return d;
  }
  fs::path root_;
};

TEST_F(HostsState, FoldersThatAreNotFixtureIdsAreNeverRemoved) {
  for (const char* name : {"photos", "2019", "007", "-1", "1e3"}) old_folder(name);
  std::ostringstream log;
  EXPECT_EQ(reap_fixtures(true, &log), 0) << log.str();
  for (const char* name : {"photos", "2019", "007", "-1", "1e3"})
    EXPECT_TRUE(fs::exists(root_ / name / "notes.txt")) << name << " was touched: " << log.str();
  EXPECT_TRUE(list_fixtures().empty());
}

TEST_F(HostsState, ADeadFixtureWithForeignObjectsAndFilesKeepsThem) {
  // Fixture 5's made file names objects no fixture 5 makes: the machine's loopback, another
  // fixture's host, a pid file path outside the folder. None may be acted on.
  const fs::path d = root_ / "5";
  fs::create_directories(d);
  write(d / "owner", kDeadOwner);
  write(d / "made", "link lo\nbridge eth0\nnetns tb6h1\nlink tb5h1x\ndelay_line ../../x\nqueue_rule tb5h0\n");
  write(d / "notes.txt", "a user's file\n");
  std::ostringstream log;
  reap_fixtures(false, &log);
  EXPECT_TRUE(fs::exists("/sys/class/net/lo"));
  for (const char* bad :
       {"'link lo'", "'bridge eth0'", "'netns tb6h1'", "'link tb5h1x'", "'delay_line ../../x'", "'queue_rule tb5h0'"})
    EXPECT_NE(log.str().find(bad), std::string::npos) << bad << " not reported as ignored: " << log.str();
  // Its own files go; the foreign one keeps the folder.
  EXPECT_TRUE(fs::exists(d / "notes.txt"));
  EXPECT_FALSE(fs::exists(d / "owner"));
  EXPECT_FALSE(fs::exists(d / "made"));
  EXPECT_NE(log.str().find("holds files no fixture writes (notes.txt)"), std::string::npos) << log.str();
}

TEST_F(HostsState, StateFilesThatAreNotRegularFilesReadAsEmpty) {
  // An owner file that is a FIFO would block a plain read for ever; a made file linked to
  // /dev/zero would never end. Both read as empty: the folder is a claim without an owner file
  // (left alone while young) and lists nothing.
  const fs::path d = root_ / "7";
  fs::create_directories(d);
  ASSERT_EQ(::mkfifo((d / "owner").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", d / "made");
  std::ostringstream log;
  EXPECT_EQ(reap_fixtures(false, &log), 0) << log.str();
  const std::vector<FixtureRecord> fx = list_fixtures();
  ASSERT_EQ(fx.size(), 1u);
  EXPECT_EQ(fx[0].id, 7);
  EXPECT_EQ(fx[0].owner_pid, 0);
  EXPECT_TRUE(fx[0].hosts.empty());
}

TEST_F(HostsState, ADeadFixtureOfItsOwnFilesIsRemoved) {
  const fs::path d = root_ / "12";
  fs::create_directories(d);
  write(d / "owner", kDeadOwner);
  write(d / "made", "bridge tb12br\nnetns tb12h1\nlink tb12h1\n");  // objects already gone
  for (const char* f : {"info", "hosts", "hostfile", "agent", "measured", "delay_line.tb12h1.pid",
                        "delay_line.tb12h1.stats", "delay_line.tb12h1.log"})
    write(d / f, "");
  std::ostringstream log;
  EXPECT_EQ(reap_fixtures(false, &log), 1);
  EXPECT_FALSE(fs::exists(d)) << log.str();
  EXPECT_EQ(log.str().find("ignored"), std::string::npos) << log.str();
}

// "PID STARTTIME" of this process, as a fixture's owner file holds it.
std::string this_process_as_owner() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  std::istringstream is(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && is >> field; ++i) {
  }
  return std::to_string(::getpid()) + " " + field + "\n";
}

TEST_F(HostsState, AFixtureStillBeingMadeIsLeftToItsMaker) {
  // `hosts up` owns its fixture until every object is made, and only then marks it persistent:
  // a `hosts down` meanwhile must neither tear it down under the maker nor forget it.
  const fs::path d = root_ / "4";
  fs::create_directories(d);
  write(d / "owner", this_process_as_owner());
  write(d / "made", "bridge tb4br\n");
  std::ostringstream log;
  int failed = 0;
  EXPECT_EQ(reap_fixtures(true, &log, &failed), 0) << log.str();
  EXPECT_EQ(failed, 0);
  EXPECT_TRUE(fs::exists(d / "made")) << log.str();
  EXPECT_NE(log.str().find("being made"), std::string::npos) << log.str();
  const std::vector<FixtureRecord> fx = list_fixtures();
  ASSERT_EQ(fx.size(), 1u);
  EXPECT_EQ(fx[0].owner_pid, int(::getpid()));
  // Made: persistent, and then `down` takes it.
  write(d / "owner", "persistent\n");
  EXPECT_EQ(reap_fixtures(false, &log), 0) << log.str();
  EXPECT_EQ(reap_fixtures(true, &log), 1) << log.str();
  EXPECT_FALSE(fs::exists(d)) << log.str();
}

TEST_F(HostsState, AnEmptyClaimIsStaleAtOnce) {
  // A claim writes its owner file under the root lock: an empty folder is a claimer killed in
  // between, not one still at work, and need not wait a minute.
  fs::create_directories(root_ / "9");
  std::ostringstream log;
  EXPECT_EQ(reap_fixtures(false, &log), 1) << log.str();
  EXPECT_FALSE(fs::exists(root_ / "9"));
  EXPECT_TRUE(list_fixtures().empty());
}

TEST_F(HostsState, DownWithIdsRemovesOnlyThose) {
  // Two fixtures `hosts up` made (persistent; their objects already gone) and one whose owner died.
  for (const char* id : {"3", "5"}) {
    fs::create_directories(root_ / id);
    write(root_ / id / "owner", "persistent\n");
  }
  fs::create_directories(root_ / "8");
  write(root_ / "8" / "owner", kDeadOwner);
  const std::vector<int> only = {5};
  std::ostringstream log;
  EXPECT_EQ(reap_fixtures(true, &log, nullptr, &only), 2) << log.str();  // 5, and 8 (dead owner)
  EXPECT_TRUE(fs::exists(root_ / "3" / "owner")) << log.str();
  EXPECT_FALSE(fs::exists(root_ / "5")) << log.str();
  EXPECT_FALSE(fs::exists(root_ / "8")) << log.str();

  // From the command line: an id that is not up is a usage error that removes nothing.
  const testing::CliRun typo = testing::run({"hosts", "down", "4"});
  EXPECT_EQ(typo.code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find("no fixture 4 (up: 3;"), std::string::npos) << typo.err;
  EXPECT_TRUE(fs::exists(root_ / "3" / "owner"));
  const testing::CliRun down = testing::run({"hosts", "down", "3"});
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_FALSE(fs::exists(root_ / "3"));
}

TEST_F(HostsState, DownOfAFixtureStillBeingMadeFails) {
  // Asked for by id, a fixture its maker still owns stays, and the command says so (exit 1).
  fs::create_directories(root_ / "6");
  write(root_ / "6" / "owner", this_process_as_owner());
  const testing::CliRun r = testing::run({"hosts", "down", "6"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("being made"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("fixture 6 not removed"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(root_ / "6" / "owner"));
}

}  // namespace
}  // namespace tb::harness
