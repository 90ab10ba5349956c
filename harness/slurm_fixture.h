// A Slurm cluster of our own for tests (issue 19): Debian's slurm-wlm with munge, written and
// started into a private folder, torn down with the object. One munged and one slurmctld on this
// machine, one slurmd per node: by default a single node, this machine; with a hosts fixture
// (harness/hosts.h) one slurmd inside each namespace host, reaching the controller on the bridge.
// Nothing of the machine's own Slurm or munge is read or touched: the config, munge key and
// socket, state, spool, pid and log files all live in the folder, ports are picked free, and
// srun/sinfo/scancel find the cluster through SLURM_CONF (env()). Needs root (slurmd starts ranks
// as any user) and the Debian packages slurmctld, slurmd, slurm-client and munge; without them
// `up` throws SlurmUnavailable, which tests turn into a skip.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/hosts.h"
#include "harness/launcher.h"

namespace tb::harness {

// Thrown by SlurmCluster::up when Slurm cannot run here (not installed, not root); what() says
// why. A cluster that was installed but failed to start is a std::runtime_error with its logs.
class SlurmUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Empty when the fixture can run here, else why not (missing programs, not root).
std::string slurm_unavailable_reason();

struct SlurmNode {
  std::string name;     // NodeName, and the hostname slurmd sees where it runs
  std::string address;  // NodeAddr: where slurmctld and srun reach its slurmd
  // Runs slurmd where the node is (a namespace host's agent); empty: this machine's namespaces.
  std::vector<std::string> exec_prefix;
};

struct SlurmOptions {
  std::vector<SlurmNode> nodes;                  // empty: one node, this machine (its hostname, 127.0.0.1)
  std::string controller_address = "127.0.0.1";  // where the nodes reach slurmctld
  int cpus_per_node = 4;                         // CPUs= of each node: the tasks it may hold at once
  std::chrono::seconds start_timeout{60};        // until every node is idle in sinfo
};

// A cluster over namespace hosts: one node per host (its name and address, slurmd started
// through its exec_prefix), slurmctld on this machine reached at the bridge's address.
SlurmOptions slurm_on_hosts(const HostsFixture& hosts);

class SlurmCluster {
 public:
  // Writes the folder, starts munged, slurmctld and the slurmds, waits until sinfo shows every
  // node idle. Throws SlurmUnavailable, or std::runtime_error (with the daemons' last log lines)
  // after tearing down what it started.
  static SlurmCluster up(const SlurmOptions& o);
  SlurmCluster(SlurmCluster&&) noexcept;
  SlurmCluster& operator=(SlurmCluster&&) noexcept;
  ~SlurmCluster();  // down()
  // Cancels every job, stops the daemons by the pids it started (SIGTERM, SIGKILL 5 s later),
  // kills whatever still carries this cluster's SLURM_CONF (slurmstepd, tasks of a bare srun) and
  // removes the folder. Idempotent.
  void down();

  const std::filesystem::path& dir() const;
  std::filesystem::path conf() const;  // <dir>/slurm.conf
  const std::vector<SlurmNode>& nodes() const;
  // SLURM_CONF=conf() (what srun, sinfo and scancel need to find the cluster) and
  // OMPI_MCA_mpi_yield_when_idle=1 (the nodes share this machine's cores).
  std::map<std::string, std::string> env() const;
  // Launch through srun on this cluster: spec.launcher = "srun", spec.nodes (0: leave it), env().
  void apply(LaunchSpec& spec, int nodes = 0) const;
  // The daemons it started (munged, slurmctld, slurmds) that are still alive.
  std::vector<int> daemon_pids() const;
  // Every live process carrying this cluster's SLURM_CONF in its environment (daemons, steps,
  // srun clients, tasks), the caller excluded. Empty after down().
  std::vector<int> processes() const;

 private:
  struct State;
  explicit SlurmCluster(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace tb::harness
