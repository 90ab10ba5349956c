// dist::world_from_env, the one reader of the launchers' environment: one precedence per fact
// (docs/env.md), strict integers, and the errors for half-set or inconsistent variables.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/dist/process_group.h"

namespace {

// Every variable world_from_env reads, cleared for each test and restored after it.
const char* const kVars[] = {"TRAINBENCH_RANK",
                             "TRAINBENCH_WORLD_SIZE",
                             "TRAINBENCH_LOCAL_RANK",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_LOCALID",
                             "RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "MPI_LOCALNRANKS",
                             "LOCAL_WORLD_SIZE",
                             "SLURM_STEP_NUM_NODES",
                             "PMIX_NAMESPACE",
                             "OMPI_MCA_ess_base_jobid",
                             "SLURM_JOB_ID",
                             "SLURM_STEP_ID",
                             "TORCHELASTIC_RUN_ID",
                             "TB_TEST_RUN_ID"};

class WorldFromEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(WorldFromEnv, NoLauncherIsOneProcess) {
  const tb::dist::WorldInfo w = tb::dist::world_from_env();
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.local_size, 0);
  EXPECT_EQ(w.nodes, 0);
  EXPECT_EQ(w.job_id, "");
  EXPECT_EQ(tb::dist::launch_id_from_env("TB_TEST_RUN_ID"), "local");
}

TEST_F(WorldFromEnv, OwnVariablesBeatOpenMpiWhichBeatsSlurmWhichBeatsTorchrun) {
  set("RANK", "3"), set("WORLD_SIZE", "8"), set("LOCAL_RANK", "1");
  EXPECT_EQ(tb::dist::world_from_env().rank, 3);
  EXPECT_EQ(tb::dist::world_from_env().local_rank, 1);
  set("SLURM_PROCID", "2"), set("SLURM_NTASKS", "4");
  EXPECT_EQ(tb::dist::world_from_env().rank, 2);
  EXPECT_EQ(tb::dist::world_from_env().local_rank, 0);  // Slurm's local id unset: 0
  set("OMPI_COMM_WORLD_RANK", "1"), set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(tb::dist::world_from_env().size, 2);
  set("TRAINBENCH_RANK", "0"), set("TRAINBENCH_WORLD_SIZE", "1");
  const tb::dist::WorldInfo w = tb::dist::world_from_env();
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.source, "TRAINBENCH_RANK/TRAINBENCH_WORLD_SIZE");
}

TEST_F(WorldFromEnv, HalfSetOrInconsistentIsAnError) {
  set("OMPI_COMM_WORLD_RANK", "1");
  EXPECT_THROW(tb::dist::world_from_env(), tb::core::Error);
  set("OMPI_COMM_WORLD_SIZE", "1");  // rank 1 of 1
  EXPECT_THROW(tb::dist::world_from_env(), tb::core::Error);
  set("OMPI_COMM_WORLD_SIZE", "2x");  // not strictly an integer
  EXPECT_THROW(tb::dist::world_from_env(), tb::core::Error);
}

TEST_F(WorldFromEnv, LocalSizeHostsAndJobIdInTheirOrder) {
  set("LOCAL_WORLD_SIZE", "4");
  EXPECT_EQ(tb::dist::world_from_env().local_size, 4);
  set("MPI_LOCALNRANKS", "3");
  EXPECT_EQ(tb::dist::world_from_env().local_size, 3);
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  EXPECT_EQ(tb::dist::world_from_env().local_size, 2);
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "0");  // a host holds at least one rank
  EXPECT_THROW(tb::dist::world_from_env(), tb::core::Error);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");

  set("SLURM_STEP_NUM_NODES", "2");
  EXPECT_EQ(tb::dist::world_from_env().nodes, 2);

  set("TORCHELASTIC_RUN_ID", "none");  // torchrun's word for "no id"
  EXPECT_EQ(tb::dist::world_from_env().job_id, "");
  set("TORCHELASTIC_RUN_ID", "tr7");
  EXPECT_EQ(tb::dist::world_from_env().job_id, "tr7");
  set("SLURM_JOB_ID", "42");
  EXPECT_EQ(tb::dist::world_from_env().job_id, "slurm-42.0");
  set("SLURM_STEP_ID", "5");
  EXPECT_EQ(tb::dist::world_from_env().job_id, "slurm-42.5");
  set("OMPI_MCA_ess_base_jobid", "1234");
  EXPECT_EQ(tb::dist::world_from_env().job_id, "1234");
  set("PMIX_NAMESPACE", "prterun-host-1@1");
  EXPECT_EQ(tb::dist::world_from_env().job_id, "prterun-host-1@1");
  EXPECT_EQ(tb::dist::launch_id_from_env("TB_TEST_RUN_ID"), "prterun-host-1@1");
  set("TB_TEST_RUN_ID", "mine");
  EXPECT_EQ(tb::dist::launch_id_from_env("TB_TEST_RUN_ID"), "mine");
}

}  // namespace
