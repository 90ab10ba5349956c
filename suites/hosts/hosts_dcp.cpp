// Note [A checkpoint loaded on another host count]
// The dcp suite saves and loads inside one launch. Here a distributed checkpoint outlives the job
// that wrote it, as on a cluster where a job restarts on other nodes: one launch at 2 hosts x 2
// ranks trains and saves under full_shard_w4 and hybrid_shard_2x2 (shards inside a host, replicas
// across the two), then separate launches on other fixtures, 1 host x 2 ranks and 2 hosts x 1 rank,
// load each checkpoint into a DDP model (dcp::check_loaded: the loaded model and AdamW state, gathered
// whole, bitwise what was saved; after kSteps more steps within the DDP tolerance of the saving
// job's run). The hosts are network namespaces over one filesystem, as a shared cluster filesystem
// would be: every rank of every host writes its files into the same checkpoint folder. What the
// saving job held whole (its state at the save, kSteps later, its losses) travels to the loading
// jobs in a safetensors file beside the checkpoint (rank 0 writes it).
#include <algorithm>
#include <filesystem>
#include <memory>

#include "engine/checkpoint/safetensors.h"
#include "engine/tensor/factories.h"
#include "harness/hosts.h"
#include "suites/dcp/dcp_util.h"
#include "suites/hosts/hosts_suite.h"
#include "suites/hosts/hosts_util.h"

namespace tb::suites {

namespace fs = std::filesystem;
using checkpoint::NamedTensors;

namespace {

// The saving job's layouts (world 4) and the loading jobs' (world 2).
const char* const kSavedLayouts[] = {"full_shard_w4", "hybrid_shard_2x2"};
constexpr const char* kLoadedLayout = "ddp_w2";
constexpr const char* kRootVar = "TRAINBENCH_HOSTS_DCP_DIR";

const dcp::Layout& layout_named(const std::string& name) {
  for (const dcp::Layout& l : dcp::layouts())
    if (l.name == name) return l;
  throw std::invalid_argument("hosts: no dcp layout named " + name);
}

// Where the launching case keeps the checkpoints (one folder per saved layout).
std::string checkpoint_root() {
  const char* root = std::getenv(kRootVar);
  check(root && *root, std::string(kRootVar) +
                           " is not set: these rank cases are launched by the hosts suite's dcp/saved_2x2/* cases");
  return root;
}

std::string expected_file(const std::string& dir) { return dir + ".expected.safetensors"; }

NamedTensors prefixed(const std::string& prefix, const NamedTensors& in) {
  NamedTensors out;
  for (const auto& [name, t] : in) out.emplace_back(prefix + name, t);
  return out;
}

void write_expected(const dcp::Saved& s) {
  NamedTensors all = prefixed("at_save/", s.at_save);
  for (auto& e : prefixed("after/", s.after)) all.push_back(std::move(e));
  all.emplace_back("losses", from_vector(s.losses, {int64_t(s.losses.size())}, DType::Float64));
  checkpoint::save_file(expected_file(s.dir), all);
}

dcp::Saved read_expected(const std::string& dir) {
  dcp::Saved s;
  s.dir = dir;
  for (auto& [name, t] : checkpoint::load_file(expected_file(dir)).tensors) {
    if (name.rfind("at_save/", 0) == 0) s.at_save.emplace_back(name.substr(8), t);
    else if (name.rfind("after/", 0) == 0) s.after.emplace_back(name.substr(6), t);
    else if (name == "losses") s.losses.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }
  check(!s.at_save.empty() && !s.after.empty() && int64_t(s.losses.size()) == dcp::kSteps,
        expected_file(dir) + " lacks the saving job's state or losses");
  return s;
}

harness::TestCase save_rank_case(const dcp::Layout& s) {
  return recorded_case(
      "hosts", "dcp_ranks/save/" + s.name,
      [s](harness::Record& rec) {
        const std::string dir = checkpoint_root() + "/" + s.name;
        auto g = dist::new_group("mpi");
        if (g->rank() == 0) {
          fs::remove_all(dir);
          fs::create_directories(dir);
        }
        g->barrier()->wait();
        const dcp::Saved out = dcp::train_and_save(s, g, dir);
        if (g->rank() == 0) write_expected(out);
        g->barrier()->wait();  // the loading jobs start after this job: both files are complete
        rec.metrics["saved_world"] = s.world;
        rec.metrics["tensors"] = out.at_save.size();
      },
      false);
}

harness::TestCase load_rank_case(const dcp::Layout& s, const dcp::Layout& l) {
  return recorded_case(
      "hosts", "dcp_ranks/load/" + s.name + "/to/" + l.name,
      [s, l](harness::Record& rec) {
        const dcp::Saved saved = read_expected(checkpoint_root() + "/" + s.name);
        dcp::check_loaded(s, saved, l, dist::new_group("mpi"), rec);
      },
      false);
}

// The checkpoints of the one saving job (2 hosts x 2 ranks), made by the first case that needs
// them and removed when the process ends.
struct SavedOnHosts {
  fs::path root = fresh_run_dir("dcp_checkpoints");
  std::string error;  // why the saving job failed; empty when it did not
  int cases = 0;
  SavedOnHosts() {
    try {
      harness::HostsFixture f = harness::HostsFixture::up({2, 2, "unshaped", false});
      const std::vector<harness::Record> recs = run_suite_on_hosts(f, "hosts", "^dcp_ranks/save/", false, 4,
                                                                   {{kRootVar, root.string()}});
      harness::Record summary;
      summarize_inner(summary, recs);
      cases = int(recs.size());
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  ~SavedOnHosts() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

harness::TestCase load_case(int hosts, int ranks_per_host) {
  const std::string layout = std::to_string(hosts) + "x" + std::to_string(ranks_per_host);
  return recorded_case(
      "hosts", "dcp/saved_2x2/loaded_" + layout,
      [hosts, ranks_per_host](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        static const SavedOnHosts saved;
        check(saved.error.empty(), "the saving job at 2 hosts x 2 ranks failed: " + saved.error);
        harness::HostsFixture f = harness::HostsFixture::up({hosts, ranks_per_host, "unshaped", false});
        const std::vector<harness::Record> recs = run_suite_on_hosts(f, "hosts", "^dcp_ranks/load/", false, 0,
                                                                     {{kRootVar, saved.root.string()}});
        double worst = 0;
        for (const harness::Record& r : recs)
          worst = std::max(worst, r.metrics.value("after_k_steps_worst_tolerance_ratio", 0.0));
        rec.metrics["after_k_steps_worst_tolerance_ratio"] = worst;
        summarize_inner(rec, recs);
        rec.metrics["saved_hosts"] = 2;
        rec.metrics["saved_ranks_per_host"] = 2;
        rec.metrics["saved_cases"] = saved.cases;
        rec.metrics["loaded_hosts"] = hosts;
        rec.metrics["loaded_ranks_per_host"] = ranks_per_host;
      },
      false);
}

}  // namespace

std::vector<harness::TestCase> hosts_dcp_tests() { return {load_case(1, 2), load_case(2, 1)}; }

std::vector<harness::TestCase> hosts_rank_tests(int world) {
  std::vector<harness::TestCase> out;
  for (const char* s : kSavedLayouts) {
    const dcp::Layout& saved = layout_named(s);
    if (world == saved.world) out.push_back(save_rank_case(saved));
    if (world == layout_named(kLoadedLayout).world) out.push_back(load_rank_case(saved, layout_named(kLoadedLayout)));
  }
  return out;
}

}  // namespace tb::suites
