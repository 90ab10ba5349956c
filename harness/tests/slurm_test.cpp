// The Slurm fixture (harness/slurm_fixture.h) and launches through srun (Note [Ranks under srun]
// in harness/launcher.cpp): the srun command line, a one-node cluster running `srun -n 2`, the
// launcher's per-rank output, timeout and orphan sweep under srun, and (with the trainbench
// executable) collectives and DDP equivalence cases launched by `--launcher srun`. Every cluster
// is torn down by its destructor, and each test checks that no daemon, step or task is left.
// Skipped with the fixture's reason where Slurm is not installed or we are not root.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/tests/scratch_dir.h"
#include "harness/hosts.h"
#include "harness/launcher.h"
#include "harness/slurm_fixture.h"
#include "harness/subprocess.h"

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// 0700 (mkdtemp's) is no bar: srun's tasks run as root, as this test does (the fixture needs it).
tb::testing::ScratchDir fresh_dir(const std::string& name) {
  return tb::testing::ScratchDir("tb_slurm_test_" + name + "_");
}

// The cluster's daemons, steps and tasks are gone, and so is its folder.
void expect_gone(const SlurmCluster& c, const std::vector<int>& daemons, const fs::path& dir) {
  EXPECT_TRUE(c.processes().empty()) << "processes of the cluster left after down()";
  for (int pid : daemons) {
    const fs::path proc = fs::path("/proc") / std::to_string(pid);
    EXPECT_FALSE(fs::exists(proc)) << "daemon " << pid << " still exists";
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

bool is_daemon_or_child(const std::vector<int>& daemons, int pid) {
  const auto daemon = [&](int p) { return std::find(daemons.begin(), daemons.end(), p) != daemons.end(); };
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), {});
  const std::size_t close = stat.rfind(')');
  const int ppid = close == std::string::npos ? 0 : std::atoi(stat.c_str() + close + 4);
  return daemon(pid) || daemon(ppid);
}

#define SKIP_WITHOUT_SLURM()                                                                   \
  do {                                                                                         \
    if (const std::string why = slurm_unavailable_reason(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)

TEST(SlurmLaunch, SrunCommandLine) {
  LaunchSpec spec;
  spec.ranks = 4;
  spec.launcher = "srun";
  spec.nodes = 2;
  spec.run_dir = "/tmp/some/run-7";
  spec.argv = {"prog", "--x"};
  const std::string mpi = std::getenv("SLURM_MPI_TYPE") ? "" : " --mpi=pmix";
  EXPECT_EQ(joined(launch_command(spec)),
            "srun -n 4 -N 2 --ntasks-per-node=2 --label --kill-on-bad-exit=1 --export=ALL --input=none "
            "--job-name=trainbench-run-7" +
                mpi + " prog --x");
  spec.ranks = 1;  // a world smaller than the nodes: one node per rank at most
  EXPECT_EQ(launch_command(spec)[3], "-N");
  EXPECT_EQ(launch_command(spec)[4], "1");
  spec.nodes = 0;
  ::unsetenv("TRAINBENCH_LAUNCH_NODES");
  EXPECT_EQ(launch_command(spec)[3], "--label");  // Slurm places the ranks
  spec.launcher.clear();
  ::setenv("TRAINBENCH_LAUNCHER", "srun", 1);
  EXPECT_EQ(launch_command(spec).front(), "srun");
  ::setenv("TRAINBENCH_LAUNCHER", "mpiexec", 1);
  EXPECT_THROW(launch_command(spec), std::invalid_argument);
  ::unsetenv("TRAINBENCH_LAUNCHER");
  EXPECT_EQ(launch_command(spec).front(), "mpirun");
  spec.launcher = "srun";
  spec.hostfile = "hosts.txt";  // mpirun's; Slurm places srun's ranks
  EXPECT_THROW(launch_command(spec), std::invalid_argument);
  spec.hostfile.clear();
  spec.mpirun_args = {"--mca", "btl", "self"};
  EXPECT_THROW(launch_command(spec), std::invalid_argument);
}

TEST(SlurmCluster, OneNodeRunsSrunAndLeavesNothing) {
  SKIP_WITHOUT_SLURM();
  SlurmCluster c = SlurmCluster::up({});
  const fs::path dir = c.dir();
  ASSERT_EQ(c.nodes().size(), 1u);
  const std::vector<int> daemons = c.daemon_pids();
  EXPECT_EQ(daemons.size(), 3u);  // munged, slurmctld, slurmd
  SubprocessSpec s;
  s.argv = {"srun", "-n", "2", "--label", "sh", "-c", "echo $SLURM_PROCID/$SLURM_NTASKS on $(hostname)"};
  for (const auto& [k, v] : c.env()) s.env[k] = v;
  s.timeout = std::chrono::seconds(60);
  s.output = SubprocessSpec::Output::Merge;
  const SubprocessResult r = run_subprocess(s);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.out;
  const std::string host = c.nodes()[0].name;
  EXPECT_NE(r.out.find("0: 0/2 on " + host), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1: 1/2 on " + host), std::string::npos) << r.out;
  c.down();
  expect_gone(c, daemons, dir);
}

TEST(SlurmCluster, LauncherSplitsRanksTimesOutAndLeavesNoOrphan) {
  SKIP_WITHOUT_SLURM();
  const tb::testing::ScratchDir run = fresh_dir("launch");  // removed after the cluster is down
  SlurmCluster c = SlurmCluster::up({});
  const std::vector<int> daemons = c.daemon_pids();
  const fs::path dir = c.dir();
  {
    LaunchSpec spec;
    spec.ranks = 2;
    spec.run_dir = run / "ok";
    spec.timeout = std::chrono::seconds(60);
    spec.argv = {"sh", "-c", "echo rank $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID; echo second line"};
    c.apply(spec, 1);
    const LaunchResult res = launch(spec);
    ASSERT_TRUE(res.ok()) << res.diagnosis();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(res.rank_output[std::size_t(r)],
                "rank " + std::to_string(r) + " of 2 local " + std::to_string(r) + "\nsecond line\n");
      std::ifstream log(spec.run_dir / ("rank" + std::to_string(r) + ".log"));
      std::stringstream text;
      text << log.rdbuf();
      EXPECT_EQ(text.str(), res.rank_output[std::size_t(r)]);
    }
    EXPECT_EQ(res.orphans, 0);
  }
  {
    // A step that never ends: the outer timeout reads the ranks' stacks (they run on this host),
    // then srun and the ranks are killed, and the job is cancelled.
    LaunchSpec spec;
    spec.ranks = 2;
    spec.run_dir = run / "hang";
    spec.timeout = std::chrono::seconds(3);
    spec.argv = {"sleep", "300"};
    c.apply(spec);
    const auto t0 = std::chrono::steady_clock::now();
    const LaunchResult res = launch(spec);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(res.timed_out) << res.diagnosis();
    EXPECT_LT(took, 3 + 20.0);
    ASSERT_EQ(res.stacks.size(), 2u);
    for (const std::string& st : res.stacks) EXPECT_NE(st.find("(sleep)"), std::string::npos) << st;
    EXPECT_EQ(res.orphans, 0);
    EXPECT_TRUE(processes_in_run(spec.run_dir).empty());
    // Nothing of the step is left beside the daemons and their helpers (slurmctld's
    // slurmscriptd): slurmstepd ends once its tasks are gone.
    std::vector<int> left;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
         std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
      left.clear();
      for (int pid : c.processes())
        if (!is_daemon_or_child(daemons, pid)) left.push_back(pid);
      if (left.empty()) break;
    }
    EXPECT_TRUE(left.empty()) << left.size() << " step processes left, first pid " << left.front();
  }
  c.down();
  expect_gone(c, daemons, dir);
}

// A cluster over 2 namespace hosts (harness/hosts.h), one slurmd in each: `srun -N 2 -n 4` puts
// ranks 0-1 on the first host and 2-3 on the second, each seeing its host's name.
TEST(SlurmHosts, TwoHostsRunSrunN2n4) {
  SKIP_WITHOUT_SLURM();
  if (const std::string why = hosts_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const tb::testing::ScratchDir run = fresh_dir("hosts");  // removed after the cluster and hosts are down
  HostsFixture hosts = HostsFixture::up({2, 2, "unshaped", false});
  SlurmCluster c = SlurmCluster::up(slurm_on_hosts(hosts));  // down before the hosts
  const std::vector<int> daemons = c.daemon_pids();
  EXPECT_EQ(daemons.size(), 4u);  // munged, slurmctld, one slurmd per host
  const fs::path dir = c.dir();
  LaunchSpec spec;
  spec.ranks = 4;
  spec.run_dir = run;
  spec.timeout = std::chrono::seconds(60);
  spec.argv = {"sh", "-c", "echo rank $SLURM_PROCID of $SLURM_NTASKS on $(hostname) nodes $SLURM_STEP_NUM_NODES"};
  c.apply(spec, 2);
  const LaunchResult res = launch(spec);
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(res.rank_output[std::size_t(r)],
              "rank " + std::to_string(r) + " of 4 on " + hosts.hosts()[std::size_t(r / 2)].name + " nodes 2\n");
  EXPECT_EQ(res.orphans, 0);
  c.down();
  expect_gone(c, daemons, dir);
}

#ifdef TB_TRAINBENCH
// Open MPI's UCX PML on any transport and device UCX finds (by default it selects itself only on
// InfiniBand transports of mlx* devices, else gives way to ob1): the two-host srun test's MPI.
const std::map<std::string, std::string> kMpiOverUcx = {{"OMPI_MCA_pml", "ucx"},
                                                        {"OMPI_MCA_pml_ucx_tls", "any"},
                                                        {"OMPI_MCA_pml_ucx_devices", "any"}};

// `trainbench test --launcher srun --nodes N` on the cluster: the collectives and DDP equivalence
// at world 4 on the backends named, every record passing.
// `backends`: a regex alternative of backend names ("mpi|gloo").
void expect_suites_pass_under_srun(const SlurmCluster& c, const std::map<std::string, std::string>& env,
                                   const std::string& backends, int expected) {
  const tb::testing::ScratchDir out = fresh_dir("suites");
  SubprocessSpec s;
  s.argv = {TB_TRAINBENCH,
            "test",
            "--suite",
            "collectives",
            "--suite",
            "ddp",
            "--filter",
            "^(" + backends + ")/(all_reduce/sum|all_gather/tensor|reduce_scatter/tensor/sum)/float32/n1001/w4|^(" +
                backends + ")/equivalence/mlp/float64/w4",
            "--launcher",
            "srun",
            "--nodes",
            std::to_string(c.nodes().size()),
            "--launch-timeout",
            "240",
            "--json",
            (out / "r.json").string()};
  for (const auto& [k, v] : env) s.env[k] = v;
  for (const auto& [k, v] : c.env()) s.env[k] = v;
  s.timeout = std::chrono::seconds(300);
  s.output = SubprocessSpec::Output::Merge;
  const SubprocessResult r = run_subprocess(s);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.out;
  std::ifstream f(out / "r.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  int passed = 0;
  for (const auto& rec : j.at("records")) {
    EXPECT_EQ(rec.at("status"), "pass") << rec.dump();
    passed += rec.at("status") == "pass";
    EXPECT_EQ(rec.at("metrics").at("world").get<double>(), 4) << rec.dump();
  }
  EXPECT_EQ(passed, expected) << r.out;  // 3 collectives + 1 DDP equivalence per backend
  EXPECT_NE(j.at("run").dump().find("srun -n <world>"), std::string::npos) << j.at("run").dump();
}

TEST(SlurmSuites, CollectivesAndDdpUnderSrun) {
  SKIP_WITHOUT_SLURM();
  SlurmCluster c = SlurmCluster::up({});
  const std::vector<int> daemons = c.daemon_pids();
  const fs::path dir = c.dir();
  expect_suites_pass_under_srun(c, {}, "mpi|gloo", 8);
  c.down();
  expect_gone(c, daemons, dir);
}

// The same across 2 namespace hosts x 2 ranks: Gloo on each host's eth0, and MPI through Open
// MPI's UCX PML (shared memory inside a host, TCP on eth0 between them). Not its default ob1 PML:
// Debian's Open MPI 4.1.4 with ob1, launched by srun across namespace hosts, crashed rank 0
// inside MPI_Init in 8 of about 140 runs here (and once in CI): a TCP fragment reached it during
// MPI_Init's modex wait and ob1's TCP transport called a handler not yet registered (a null call
// under ompi_mpi_init -> opal_progress -> mca_btl_tcp). With the PML named UCX, ob1 is never
// opened; docs/distributed.md "Known issue: Open MPI's ob1 under srun across the namespace hosts".
TEST(SlurmSuites, CollectivesAndDdpAcrossTwoHosts) {
  SKIP_WITHOUT_SLURM();
  if (const std::string why = hosts_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  HostsFixture hosts = HostsFixture::up({2, 2, "unshaped", false});
  SlurmCluster c = SlurmCluster::up(slurm_on_hosts(hosts));
  const std::vector<int> daemons = c.daemon_pids();
  const fs::path dir = c.dir();
  std::map<std::string, std::string> env = hosts.launch_env();
  for (const auto& [k, v] : kMpiOverUcx) env[k] = v;
  expect_suites_pass_under_srun(c, env, "mpi|gloo", 8);
  c.down();
  expect_gone(c, daemons, dir);
}
#endif

}  // namespace
}  // namespace tb::harness
