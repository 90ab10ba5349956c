// The Python peers of the `comm`, `ddp`, `fsdp` and `dcp` suites: PyTorch's Gloo backend, PyTorch
// DDP, PyTorch FSDP2 and torch.distributed.checkpoint on Gloo, run by the parent after each world size (Suite::peer). Each script starts its own ranks
// (torchrun) and prints one JSON record per line; this file runs it under a timeout and turns
// the lines into Records. See comm_bench.h.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/env.h"
#include "harness/project_python.h"
#include "harness/runner.h"
#include "harness/subprocess.h"
#include "suites/comm/comm_bench.h"
#include "suites/dcp/dcp_bench.h"
#include "suites/ddp/ddp_suite.h"
#include "suites/fsdp/fsdp_bench.h"

namespace tb::suites {

namespace {

namespace fs = std::filesystem;

// Note [Peer timeouts] (reference/dist/torch_launch.py has the Python half)
// The script runs in a process group of its own and dies with us (PR_SET_PDEATHSIG); torchrun
// and its workers die with the script. Past the timeout the group gets SIGTERM, 5 s later
// SIGKILL (harness/subprocess.h), so a peer that hangs costs at most timeout + 5 s and leaves
// nothing behind. The script's own --timeout is shorter, so normally it stops its ranks itself
// and says why.
harness::SubprocessResult run_with_timeout(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  harness::SubprocessSpec spec;
  spec.argv = argv;
  spec.timeout = timeout;
  spec.grace = std::chrono::seconds(5);
  spec.die_with_parent = true;
  try {
    return harness::run_subprocess(spec);
  } catch (const std::runtime_error& e) {  // no pipe or no fork
    throw std::runtime_error(std::string("peer: ") + e.what());
  }
}

std::string tail_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

harness::Record missing_record(const std::string& suite, const std::string& name, harness::Status status,
                               const std::string& message) {
  harness::Record r;
  r.suite = suite;
  r.case_name = name;
  r.kind = "benchmark";
  r.status = status;
  r.message = message;
  return r;
}

// Runs `script` with `args`, returns its records plus one record per expected case it did not
// produce (skip without the project's Python, error with the diagnosis otherwise).
std::vector<harness::Record> run_peer(const std::string& suite, const std::string& script, int world,
                                      std::vector<std::string> args, const std::vector<std::string>& expected) {
  const std::optional<harness::ProjectPython> py = harness::project_python();
  const std::string python = py ? py->path : "";
  std::vector<harness::Record> out;
  if (script.empty()) {
    for (const std::string& name : expected)
      out.push_back(missing_record(suite, name, harness::Status::Error,
                                   "torch-gloo peer: cannot find its script under reference/dist of the source tree "
                                   "(Note [Finding the peer scripts]); set TRAINBENCH_SOURCE_DIR"));
    return out;
  }
  if (python.empty() || access(python.c_str(), X_OK) != 0) {
    const std::string found = py ? py->source + " gives " + python + ", not an executable" : "none configured";
    const std::string why = "torch-gloo peer: no project Python (" + found +
                            "; run ci/bootstrap), PyTorch's figures not measured";
    for (const std::string& name : expected) out.push_back(missing_record(suite, name, harness::Status::Skip, why));
    return out;
  }
  const std::string threads = std::to_string(core::env_int64("TRAINBENCH_RANK_THREADS", 1, 1, 1024));
  const long timeout_s = long(core::env_int64("TRAINBENCH_PEER_TIMEOUT", 1800, 1, 7 * 86400));
  const long script_timeout = std::max(10L, timeout_s - 15);  // the script stops first, with a reason
  std::vector<std::string> argv = {python,      script,  "--world",   std::to_string(world),
                                   "--threads", threads, "--timeout", std::to_string(script_timeout)};
  argv.insert(argv.end(), args.begin(), args.end());
  const harness::SubprocessResult run = run_with_timeout(argv, std::chrono::seconds(std::max(20L, timeout_s)));

  std::set<std::string> seen;
  std::istringstream lines(run.out);
  std::string stray;  // stdout lines that are not records (shown in a diagnosis)
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("case")) {
      harness::Record r = harness::record_from_json(j, "benchmark");
      if (r.suite.empty()) r.suite = suite;
      seen.insert(r.case_name);
      out.push_back(std::move(r));
    } else if (!line.empty()) {
      stray += line + "\n";
    }
  }
  const bool ok = run.ok();
  std::string diagnosis;
  if (!ok) {
    std::ostringstream d;
    d << fs::path(script).filename().string() << " --world " << world << " ";
    if (run.timed_out)
      d << "timed out after " << timeout_s << " s (TRAINBENCH_PEER_TIMEOUT); its process group was killed";
    else d << "exited with status " << run.status_code() << " after " << run.seconds << " s";
    d << "; last lines:\n" << tail_lines(stray + run.err, 25);
    diagnosis = d.str();
  }
  bool first = true;
  for (const std::string& name : expected) {
    if (seen.count(name)) continue;
    std::string msg = ok ? "the peer finished without producing this case" : diagnosis;
    if (!first && !ok)
      msg = "not measured: the torch-gloo peer failed (see the first missing case of w" + std::to_string(world) + ")";
    out.push_back(missing_record(suite, name, harness::Status::Error, msg));
    first = false;
  }
  if (!ok && first) std::cerr << "trainbench: warning: " << diagnosis;  // every case there, yet it failed
  return out;
}

// Note [Finding the peer scripts]
// The scripts live in the source tree (reference/dist). __FILE__ is not enough to find it: with
// ccache's base_dir (CCACHE_BASEDIR, as ci/ and the README build) it is relative to the build
// folder. So: TRAINBENCH_SOURCE_DIR, then TB_SOURCE_DIR if the build defines it, then an
// absolute __FILE__, then every folder above the running program and above the current one
// (build folders sit inside the tree).
std::string script_path(const std::string& name) {
  const fs::path rel = fs::path("reference") / "dist" / name;
  std::vector<fs::path> roots;
  if (const char* d = std::getenv("TRAINBENCH_SOURCE_DIR"); d && *d) roots.emplace_back(d);
#ifdef TB_SOURCE_DIR
  roots.emplace_back(TB_SOURCE_DIR);
#endif
  if (const fs::path f(__FILE__); f.is_absolute()) roots.push_back(f.parent_path().parent_path().parent_path());
  std::error_code ec;
  for (fs::path start : {fs::read_symlink("/proc/self/exe", ec).parent_path(), fs::current_path(ec)})
    for (fs::path p = start; !p.empty(); p = p.parent_path()) {
      roots.push_back(p);
      if (p == p.root_path()) break;
    }
  for (const fs::path& root : roots)
    if (fs::is_regular_file(root / rel, ec)) return (root / rel).lexically_normal().string();
  return "";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The records of `recs` that `wanted` selects (the comm peer sweeps the cross product of its ops
// and sizes, which may hold cases the filter left out).
std::vector<harness::Record> keep_wanted(std::vector<harness::Record> recs, const harness::CaseFilter& wanted) {
  std::erase_if(recs, [&](const harness::Record& r) { return !wanted(r.case_name); });
  return recs;
}

}  // namespace

std::vector<harness::Record> comm_peer(int world, const harness::CaseFilter& wanted) {
  const CommSweep sweep = comm_sweep_from_env();
  std::vector<std::string> expected;
  std::set<std::string> ops;
  std::set<int64_t> sizes;
  for (const std::string& op : sweep.ops)
    for (int64_t b : sweep.sizes)
      if (std::string name = comm_case_name(op, b, world, "torch-gloo"); wanted(name)) {
        expected.push_back(std::move(name));
        ops.insert(op);
        sizes.insert(b);
      }
  if (expected.empty()) return {};
  std::vector<std::string> op_args, size_args;
  for (const std::string& op : sweep.ops)  // the sweep's order
    if (ops.count(op)) op_args.push_back(op);
  for (int64_t b : sizes) size_args.push_back(std::to_string(b));
  std::ostringstream target;
  target << sweep.target_s;
  return keep_wanted(run_peer("comm", script_path("torch_comm_bench.py"), world,
                              {"--sizes", join(size_args), "--ops", join(op_args), "--target-s", target.str()},
                              expected),
                     wanted);
}

std::vector<harness::Record> ddp_peer(int world, const harness::CaseFilter& wanted) {
  // TRAINBENCH_DDP_MODELS (default mlp,gpt) and TRAINBENCH_DDP_BENCH_S (seconds of timed steps
  // per model, default 2, as for the engine's ddp benchmarks) choose what the PyTorch side measures.
  std::vector<std::string> expected, models;
  std::istringstream in(core::env_string("TRAINBENCH_DDP_MODELS").value_or("mlp,gpt"));
  for (std::string m; std::getline(in, m, ',');)
    if (std::string name = "ddp/" + m + "/w" + std::to_string(world) + "/torch-gloo"; !m.empty() && wanted(name)) {
      expected.push_back(std::move(name));
      models.push_back(m);
    }
  if (expected.empty()) return {};
  std::vector<std::string> args = {"--models", join(models), "--target-s",
                                   std::to_string(core::env_double("TRAINBENCH_DDP_BENCH_S", 2.0, 0, 3600))};
  if (ddp_bench_bucket_view()) args.push_back("--gradient-as-bucket-view");  // as the engine's side
  args.insert(args.end(), {"--adamw", ddp_bench_torch_adamw()});
  return run_peer("ddp", script_path("torch_ddp_bench.py"), world, args, expected);
}

std::vector<harness::Record> fsdp_peer(int world, const harness::CaseFilter& wanted) {
  // The same models (TRAINBENCH_FSDP_MODELS) and seconds of timed steps (TRAINBENCH_FSDP_BENCH_S)
  // as the engine's fsdp benchmarks; one torchrun per world for every wanted (model, strategy).
  std::vector<std::string> expected, models, strategies;
  std::set<std::string> ms, ss;
  for (const std::string& m : fsdp_bench_models())
    for (const std::string& s : fsdp_bench_strategies(world))
      if (std::string name = "fsdp/" + m + "/" + s + "/w" + std::to_string(world) + "/torch"; wanted(name)) {
        expected.push_back(std::move(name));
        if (ms.insert(m).second) models.push_back(m);
        if (ss.insert(s).second) strategies.push_back(s);
      }
  if (expected.empty()) return {};
  std::vector<std::string> args = {
      "--models",       join(models), "--strategies",
      join(strategies), "--target-s", std::to_string(core::env_double("TRAINBENCH_FSDP_BENCH_S", 2.0, 0, 3600))};
  return keep_wanted(run_peer("fsdp", script_path("torch_fsdp_bench.py"), world, args, expected), wanted);
}

std::vector<harness::Record> dcp_peer(int world, const harness::CaseFilter& wanted) {
  // The same state (dcp_bench_spec), handed over as a JSON file of names and shapes.
  std::vector<std::string> expected, models;
  for (const std::string& m : dcp_bench_models())
    if (std::string name = "dcp/" + m + "/w" + std::to_string(world) + "/torch"; world <= 2 && wanted(name)) {
      expected.push_back(std::move(name));
      models.push_back(m);
    }
  if (expected.empty()) return {};
  nlohmann::json spec = nlohmann::json::object();
  for (const std::string& m : models) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& [name, shape] : dcp_bench_spec(m)) tensors.push_back({{"name", name}, {"shape", shape}});
    spec[m] = std::move(tensors);
  }
  std::error_code ec;
  const fs::path file = fs::temp_directory_path(ec) /
                        ("tb_dcp_spec_" + std::to_string(getpid()) + "_w" + std::to_string(world) + ".json");
  {
    std::ofstream out(file);
    out << spec.dump();
    if (!out) throw std::runtime_error("dcp peer: cannot write " + file.string());
  }
  std::vector<harness::Record> recs = run_peer("dcp", script_path("torch_dcp_bench.py"), world,
                                               {"--spec", file.string(), "--models", join(models)}, expected);
  fs::remove(file, ec);
  return recs;
}

}  // namespace tb::suites
