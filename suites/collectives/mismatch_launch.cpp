// Note [Mismatch and dead-rank checks]
// Launches of their own, like the watchdog check (watchdog_launch.cpp):
//   - mismatch/<backend>/<check>/w<W>: every rank runs the same list of collectives, in each of
//     which one rank (case i: rank i % W) passes another op, dtype, element count, reduction or
//     root. Every rank must get a DistError naming the collective's number and both sides'
//     arguments (ranks that agree grouped), then a correct all_reduce must still give the right
//     sum (the group stays in step), and every rank must reach the end with no sign of heap
//     corruption. One launch covers every collective and mismatch class for a backend, world
//     and check mode (Options::Check: "auto" is the progress board on one host, "exchange" the
//     all-reduce used when ranks span hosts). Then rank 0 sends to rank 1 with another element
//     count and another dtype: rank 1's recv must refuse naming both sides, rank 0's send complete.
//   - dead_rank/<backend>/<how>/<check>/w3: rank 1 ends before all_reduce #3 (std::exit(0) with
//     its group alive, or SIGKILL); the survivors must name rank 1 and all_reduce #3, write their
//     flight recorder dumps and end long before the timeout.
// In both, no rank may outlive the job (each leaves its pid in the run dir).
// The expected texts are written out here by hand from the fingerprint format (watchdog.h), not
// produced by the engine's own formatting code.
#include "suites/collectives/watchdog_launch.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/dist/process_group.h"
#include "engine/dist/watchdog.h"
#include "engine/tensor/factories.h"
#include "harness/launcher.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace fs = std::filesystem;
using dist::ProcessGroup;
using dist::ReduceOp;

namespace {

struct MismatchCase {
  std::string name;
  int deviant = 0;
  std::function<void(ProcessGroup&, bool deviant)> call;  // issues and waits for the collective
  std::string normal, odd;                                // each side's arguments, as diagnosed
};

std::string elems(int64_t n) { return std::to_string(n) + " elements"; }

std::vector<MismatchCase> mismatch_cases(int W) {
  constexpr int64_t n = 4096, m = 4093, g = 1024;  // g: per-rank chunk of all_gather / reduce_scatter
  const std::string rs_total = elems(W * g);
  std::vector<MismatchCase> cs;
  const auto add = [&](std::string name, std::function<void(ProcessGroup&, bool)> call, std::string normal,
                       std::string odd) {
    const int d = int(cs.size()) % W;
    cs.push_back({std::move(name), d, std::move(call), std::move(normal), std::move(odd)});
  };
  const auto ar = [](int64_t k, DType dt, ReduceOp op) {
    return [=](ProcessGroup& pg) {
      Tensor t = full({k}, 1.0, dt);
      pg.all_reduce(t, op)->wait();
    };
  };
  const auto bc = [](int64_t k, DType dt, int root) {
    return [=](ProcessGroup& pg) {
      Tensor t = full({k}, 2.0, dt);
      pg.broadcast(t, root)->wait();
    };
  };
  const auto ag = [](int64_t k, DType dt) {
    return [=](ProcessGroup& pg) {
      Tensor in = full({k}, 3.0, dt), out = empty({k * pg.size()}, dt);
      pg.all_gather(out, in)->wait();
    };
  };
  const auto rs = [](int64_t k, DType dt, ReduceOp op) {
    return [=](ProcessGroup& pg) {
      Tensor in = full({k * pg.size()}, 1.0, dt), out = empty({k}, dt);
      pg.reduce_scatter(out, in, op)->wait();
    };
  };
  const auto either = [](auto a, auto b) { return [=](ProcessGroup& pg, bool dev) { dev ? b(pg) : a(pg); }; };
  const std::string f32 = "float32, ", f64 = "float64, ", i64 = "int64, ";
  add("all_reduce/count", either(ar(n, DType::Float32, ReduceOp::Sum), ar(m, DType::Float32, ReduceOp::Sum)),
      "all_reduce (" + f32 + elems(n) + ", sum)", "all_reduce (" + f32 + elems(m) + ", sum)");
  add("all_reduce/dtype", either(ar(n, DType::Float32, ReduceOp::Sum), ar(n, DType::Float64, ReduceOp::Sum)),
      "all_reduce (" + f32 + elems(n) + ", sum)", "all_reduce (" + f64 + elems(n) + ", sum)");
  add("all_reduce/reduction", either(ar(n, DType::Float32, ReduceOp::Sum), ar(n, DType::Float32, ReduceOp::Max)),
      "all_reduce (" + f32 + elems(n) + ", sum)", "all_reduce (" + f32 + elems(n) + ", max)");
  add("all_reduce/op", either(ar(n, DType::Float32, ReduceOp::Sum), bc(n, DType::Float32, 0)),
      "all_reduce (" + f32 + elems(n) + ", sum)", "broadcast (" + f32 + elems(n) + ", root 0)");
  add("broadcast/count", either(bc(n, DType::Float32, 0), bc(m, DType::Float32, 0)),
      "broadcast (" + f32 + elems(n) + ", root 0)", "broadcast (" + f32 + elems(m) + ", root 0)");
  add("broadcast/dtype", either(bc(n, DType::Float32, 0), bc(n, DType::Int64, 0)),
      "broadcast (" + f32 + elems(n) + ", root 0)", "broadcast (" + i64 + elems(n) + ", root 0)");
  add("broadcast/root", either(bc(n, DType::Float32, 0), bc(n, DType::Float32, 1)),
      "broadcast (" + f32 + elems(n) + ", root 0)", "broadcast (" + f32 + elems(n) + ", root 1)");
  add("broadcast/op", either(bc(g, DType::Float32, 0), ag(g, DType::Float32)),
      "broadcast (" + f32 + elems(g) + ", root 0)", "all_gather (" + f32 + elems(g) + ")");
  add("all_gather/count", either(ag(g, DType::Float32), ag(g - 3, DType::Float32)),
      "all_gather (" + f32 + elems(g) + ")", "all_gather (" + f32 + elems(g - 3) + ")");
  add("all_gather/dtype", either(ag(g, DType::Float32), ag(g, DType::BFloat16)), "all_gather (" + f32 + elems(g) + ")",
      "all_gather (bfloat16, " + elems(g) + ")");
  add("all_gather/op", either(ag(g, DType::Float32), rs(g, DType::Float32, ReduceOp::Sum)),
      "all_gather (" + f32 + elems(g) + ")", "reduce_scatter (" + f32 + rs_total + ", sum)");
  add("reduce_scatter/count", either(rs(g, DType::Float32, ReduceOp::Sum), rs(g - 1, DType::Float32, ReduceOp::Sum)),
      "reduce_scatter (" + f32 + rs_total + ", sum)", "reduce_scatter (" + f32 + elems(W * (g - 1)) + ", sum)");
  add("reduce_scatter/dtype", either(rs(g, DType::Float32, ReduceOp::Sum), rs(g, DType::Float64, ReduceOp::Sum)),
      "reduce_scatter (" + f32 + rs_total + ", sum)", "reduce_scatter (" + f64 + rs_total + ", sum)");
  add("reduce_scatter/reduction", either(rs(g, DType::Float32, ReduceOp::Sum), rs(g, DType::Float32, ReduceOp::Min)),
      "reduce_scatter (" + f32 + rs_total + ", sum)", "reduce_scatter (" + f32 + rs_total + ", min)");
  add("reduce_scatter/op", either(rs(g, DType::Float32, ReduceOp::Sum), ar(W * g, DType::Float32, ReduceOp::Sum)),
      "reduce_scatter (" + f32 + rs_total + ", sum)", "all_reduce (" + f32 + rs_total + ", sum)");
  add("barrier/op", either([](ProcessGroup& pg) { pg.barrier()->wait(); }, ar(n, DType::Float32, ReduceOp::Sum)),
      "barrier", "all_reduce (" + f32 + elems(n) + ", sum)");
  return cs;
}

// Send/recv pairs from rank 0 to rank 1 whose sides disagree (run after the collective cases):
// the receiver must refuse, naming both sides (Note [Gloo send/recv header], [MPI send/recv
// header]); the sender completes.
struct P2PCase {
  std::string name;
  DType send_dtype;
  int64_t send_n;
  DType recv_dtype;
  int64_t recv_n;
  std::string recv_side, send_side;
};
std::vector<P2PCase> p2p_cases() {
  return {{"send_recv/count", DType::Float32, 7, DType::Float32, 5, "recv (float32, 5 elements, peer 0)",
           "send (float32, 7 elements, peer 1)"},
          {"send_recv/dtype", DType::Float64, 8, DType::Float32, 8, "recv (float32, 8 elements, peer 0)",
           "send (float64, 8 elements, peer 1)"}};
}

// Case i's mismatched call is collective #2i+1 (each is followed by one checking all_reduce).
uint64_t case_seq(std::size_t i) { return 2 * i + 1; }

// "collective #N differs between ranks: ranks 0, 2: <normal>; rank 1: <odd>", written from the
// case alone: the groups in the order of their lowest rank.
std::string expected_diagnosis(const MismatchCase& c, std::size_t i, int W) {
  std::string others;
  int count = 0;
  for (int r = 0; r < W; ++r)
    if (r != c.deviant) others += (count++ ? ", " : "") + std::to_string(r);
  const std::string normal = (count == 1 ? "rank " : "ranks ") + others + ": " + c.normal;
  const std::string odd = "rank " + std::to_string(c.deviant) + ": " + c.odd;
  const bool odd_first = c.deviant == 0;
  return "collective #" + std::to_string(case_seq(i)) + " differs between ranks: " + (odd_first ? odd : normal) + "; " +
         (odd_first ? normal : odd) + ".";
}

const char* const kCorruption[] = {"corruption", "Segmentation fault", "malloc(",     "free():",   "double free",
                                   "Aborted",    "terminate called",   "core dumped", "signal 11", "signal 6"};

// Each demo rank leaves its pid in the run dir, so the check can tell that none outlived the job.
void write_pid(int rank) {
  const char* dir = std::getenv("TRAINBENCH_DIST_DIR");
  std::ofstream(std::string(dir ? dir : ".") + "/demo_rank" + std::to_string(rank) + ".pid") << ::getpid() << "\n";
}

// No rank of the launch is still running (an orphan left behind by mpirun).
void check_no_orphans(const fs::path& run_dir, int world) {
  for (int r = 0; r < world; ++r) {
    std::ifstream in(run_dir / ("demo_rank" + std::to_string(r) + ".pid"));
    long pid = 0;
    if (!(in >> pid)) continue;  // killed before it wrote it
    bool gone = false;
    for (int i = 0; i < 50 && !gone; ++i) {  // mpirun may still be reaping
      gone = !dist::process_alive(pid);
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    check(gone,
          "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") is still running after the job ended");
  }
}

fs::path fresh_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("tb_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

int mismatch_demo_main(const std::string& backend) {
  dist::Options opt;
  opt.timeout = std::chrono::seconds(60);
  std::shared_ptr<ProcessGroup> pg = dist::new_group(backend, opt);
  const int W = pg->size(), R = pg->rank();
  write_pid(R);
  const std::vector<MismatchCase> cs = mismatch_cases(W);
  int bad = 0;
  // Results go to a file of this rank's: mpirun --tag-output garbles stdout that a read of its
  // (4 KiB) buffer cuts mid-line, and these lines are long.
  const char* dir = std::getenv("TRAINBENCH_DIST_DIR");
  std::FILE* log = std::fopen((std::string(dir ? dir : ".") + "/mismatch_rank" + std::to_string(R) + ".txt").c_str(),
                              "w");
  if (!log) {
    std::fprintf(stderr, "mismatch demo: cannot write its results file\n");
    return 2;
  }
  for (std::size_t i = 0; i < cs.size(); ++i) {
    try {
      cs[i].call(*pg, R == cs[i].deviant);
      std::fprintf(log, "MISMATCH-MISSED %s: the call returned\n", cs[i].name.c_str());
      ++bad;
    } catch (const dist::DistError& e) {
      std::fprintf(log, "MISMATCH %s: %s\n", cs[i].name.c_str(), e.what());
    }
    // The group is still in step: a correct all_reduce after the refused one sums right.
    Tensor x = full({3}, double(R + 1), DType::Int64);
    pg->all_reduce(x)->wait();
    const int64_t want = int64_t(W) * (W + 1) / 2;
    for (int k = 0; k < 3; ++k)
      if (x.data_ptr<int64_t>()[k] != want) {
        std::fprintf(log, "MISMATCH-VERIFY %s: the all_reduce after it gave %lld, not %lld\n", cs[i].name.c_str(),
                     static_cast<long long>(x.data_ptr<int64_t>()[k]), static_cast<long long>(want));
        ++bad;
        break;
      }
    std::fflush(log);
  }
  for (const P2PCase& c : p2p_cases()) {
    if (R == 0) {
      pg->send(full({c.send_n}, 1.0, c.send_dtype), 1, 7)->wait();
      std::fprintf(log, "P2P-SENT %s\n", c.name.c_str());
    } else if (R == 1) {
      Tensor t = full({c.recv_n}, -1.0, c.recv_dtype);
      try {
        pg->recv(t, 0, 7)->wait();
        std::fprintf(log, "MISMATCH-MISSED %s: the recv returned\n", c.name.c_str());
        ++bad;
      } catch (const dist::DistError& e) {
        std::fprintf(log, "MISMATCH %s: %s\n", c.name.c_str(), e.what());
      }
    }
    Tensor x = full({1}, 1.0, DType::Int64);
    pg->all_reduce(x)->wait();
    if (x.data_ptr<int64_t>()[0] != W) {
      std::fprintf(log, "MISMATCH-VERIFY %s: the all_reduce after it gave %lld\n", c.name.c_str(),
                   static_cast<long long>(x.data_ptr<int64_t>()[0]));
      ++bad;
    }
    std::fflush(log);
  }
  pg.reset();
  std::fprintf(log, "MISMATCH-DONE rank %d, %d problems\n", R, bad);
  std::fclose(log);
  std::printf("mismatch demo: rank %d done, %d problems\n", R, bad);
  return bad ? 1 : 0;
}

int dead_rank_demo_main(const std::string& backend, const std::string& how, int victim, int seq) {
  dist::Options opt;
  opt.timeout = std::chrono::seconds(60);  // TRAINBENCH_DIST_TIMEOUT overrides
  std::shared_ptr<ProcessGroup> pg = dist::new_group(backend, opt);
  const int R = pg->rank();
  write_pid(R);
  for (int i = 1; i <= seq + 2; ++i) {
    if (R == victim && i == seq) {
      std::fprintf(stderr, "trainbench: dead-rank demo: rank %d ends (%s) before all_reduce #%d\n", R, how.c_str(),
                   seq);
      std::fflush(stderr);
      if (how == "kill") ::raise(SIGKILL);
      std::exit(0);  // the group is never destroyed
    }
    Tensor t = full({1024}, 1.0);
    pg->all_reduce(t)->wait();
  }
  std::fprintf(stderr, "trainbench: dead-rank demo: rank %d finished although rank %d ended\n", R, victim);
  return 5;
}

int sigterm_demo_main(const std::string& backend, const std::string& phase) {
  std::shared_ptr<ProcessGroup> pg = dist::new_group(backend);
  Tensor t = full({4}, 1.0);
  pg->all_reduce(t)->wait();
  if (phase == "gone") pg.reset();
  write_pid(0);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  std::fprintf(stderr, "sigterm demo: still alive after 60 s\n");
  return 6;
}

// A SIGTERM (the launcher's timeout, a user's kill) must still end a rank whose group is alive and
// has no dead peer, and one whose groups are all gone (the watchdog's handler is then uninstalled).
std::vector<harness::TestCase> sigterm_tests() {
  std::vector<harness::TestCase> out;
  for (const std::string phase : {"alive", "gone"}) {
    out.push_back(recorded_case(
        "collectives", "sigterm/mpi/group_" + phase + "/w1",
        [phase](harness::Record& rec) {
          harness::LaunchSpec spec;
          spec.ranks = 1;
          spec.run_dir = fresh_dir("sigterm_" + phase);
          spec.timeout = std::chrono::seconds(120);
          spec.env["TRAINBENCH_WATCHDOG_DEMO"] = "sigterm:mpi:" + phase;
          spec.argv = {harness::self_exe(), "list"};
          harness::LaunchResult res;
          std::thread runner([&] { res = harness::launch(spec); });
          long pid = 0;
          for (int i = 0; i < 600 && pid == 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::ifstream in(spec.run_dir / "demo_rank0.pid");
            in >> pid;
          }
          const auto t0 = std::chrono::steady_clock::now();
          if (pid > 0) ::kill(pid_t(pid), SIGTERM);
          runner.join();
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          rec.metrics["seconds_after_sigterm"] = s;
          const std::string all = res.diagnosis(20);
          check(pid > 0, "the rank never wrote its pid: " + all);
          check(!res.timed_out && s < 30, "the rank outlived SIGTERM by " + std::to_string(s) + " s: " + all);
          check(res.exit_code != 0, "the job exited 0: " + all);
          check(all.find("still alive") == std::string::npos && all.find("watchdog:") == std::string::npos,
                "unexpected output: " + all);
          check_no_orphans(spec.run_dir, 1);
          fs::remove_all(spec.run_dir);
        },
        /*with_seed=*/false));
  }
  return out;
}

// Ranks told a place by the environment that MPI_COMM_WORLD contradicts (here every rank told
// TRAINBENCH_RANK=0 of 2, as a caller's own variable once reached every rank) must all stop at
// group creation with the reason, well before the launch timeout: one rank alone threw and the
// other waited in the group's first collective for 30 minutes.
std::vector<harness::TestCase> place_tests() {
  std::vector<harness::TestCase> out;
  out.push_back(recorded_case(
      "collectives", "place/mpi/env_disagrees/w2",
      [](harness::Record& rec) {
        harness::LaunchSpec spec;
        spec.ranks = 2;
        spec.run_dir = fresh_dir("place_env");
        spec.timeout = std::chrono::seconds(120);
        spec.env["TRAINBENCH_RANK"] = "0";  // named in the spec: passed to every rank on purpose
        spec.env["TRAINBENCH_WORLD_SIZE"] = "2";
        spec.env["TRAINBENCH_DIST_TIMEOUT"] = "300";
        spec.argv = {harness::self_exe(),
                     "rank",
                     "--suite",
                     "collectives",
                     "--world",
                     "2",
                     "--out",
                     spec.run_dir.string(),
                     "--filter",
                     "^mpi/all_reduce/sum/float32/n7/w2$"};
        const auto t0 = std::chrono::steady_clock::now();
        const harness::LaunchResult res = harness::launch(spec);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rec.metrics["seconds"] = s;
        const std::string all = res.diagnosis(20) + "\n" + res.rank_output[0] + "\n" + res.rank_output[1];
        check(!res.timed_out && s < 60, "the ranks took " + std::to_string(s) + " s to stop: " + all);
        check(res.rank_output[1].find("says rank 0 of 2 but MPI_COMM_WORLD has rank 1") != std::string::npos,
              "rank 1 does not name the disagreement: " + all);
        check(res.rank_output[0].find("other rank(s) disagrees with MPI_COMM_WORLD") != std::string::npos,
              "rank 0 does not say another rank disagreed: " + all);
        fs::remove_all(spec.run_dir);
      },
      /*with_seed=*/false));
  return out;
}

std::vector<harness::TestCase> mismatch_tests() {
  std::vector<harness::TestCase> out;
  struct Launch {
    std::string backend, check;
    int world;
  };
  std::vector<Launch> launches;
  for (const std::string backend : {"mpi", "gloo"}) {
    for (int world : {2, 3, 4}) launches.push_back({backend, "auto", world});
    launches.push_back({backend, "exchange", 3});  // the path of ranks on several hosts
  }
  for (const Launch& l : launches) {
    const std::string name = "mismatch/" + l.backend + "/" + l.check + "/w" + std::to_string(l.world);
    out.push_back(recorded_case(
        "collectives", name,
        [l](harness::Record& rec) {
          harness::LaunchSpec spec;
          spec.ranks = l.world;
          spec.run_dir = fresh_dir("mismatch_" + l.backend + "_" + l.check + "_w" + std::to_string(l.world));
          spec.timeout = std::chrono::seconds(180);
          spec.env["TRAINBENCH_WATCHDOG_DEMO"] = "mismatch:" + l.backend;
          spec.env["TRAINBENCH_DIST_CHECK"] = l.check;
          spec.argv = {harness::self_exe(), "list"};
          const harness::LaunchResult res = harness::launch(spec);
          rec.metrics["launch_seconds"] = res.seconds;
          const std::string all = res.diagnosis(60);
          if (l.backend == "gloo" && all.find("backend gloo not built") != std::string::npos) {
            rec.status = harness::Status::Skip;
            rec.message = "gloo backend not built";
            return;
          }
          check(!res.timed_out, "the ranks hung until the launch deadline: " + all);
          std::string everything = res.launcher_output;
          for (const std::string& o : res.rank_output) everything += o;
          for (const char* bad : kCorruption)
            check(everything.find(bad) == std::string::npos, std::string("a rank's output says '") + bad + "': " + all);
          check(res.exit_code == 0, "the job exited " + std::to_string(res.exit_code) + ": " + all);
          const std::vector<MismatchCase> cs = mismatch_cases(l.world);
          std::vector<std::string> results(std::size_t(l.world));
          for (int r = 0; r < l.world; ++r) {
            std::ifstream in(spec.run_dir / ("mismatch_rank" + std::to_string(r) + ".txt"));
            std::stringstream ss;
            ss << in.rdbuf();
            results[std::size_t(r)] = ss.str();
          }
          for (int r = 0; r < l.world; ++r) {
            const std::string& o = results[std::size_t(r)];
            check(o.find("MISMATCH-DONE rank " + std::to_string(r) + ", 0 problems") != std::string::npos,
                  "rank " + std::to_string(r) + " did not finish cleanly: " + o);
            for (std::size_t i = 0; i < cs.size(); ++i) {
              const std::string tag = "MISMATCH " + cs[i].name + ": ";
              const auto at = o.find(tag);
              check(at != std::string::npos,
                    "rank " + std::to_string(r) + " got no error for " + cs[i].name + ": " + o);
              const std::string line = o.substr(at, o.find('\n', at) - at);
              const std::string want = expected_diagnosis(cs[i], i, l.world);
              check(line.find(want) != std::string::npos, "rank " + std::to_string(r) + "'s error for " + cs[i].name +
                                                              " is\n  " + line + "\nexpected it to say\n  " + want);
            }
          }
          for (const P2PCase& c : p2p_cases()) {
            check(results[0].find("P2P-SENT " + c.name) != std::string::npos,
                  "rank 0's send of " + c.name + " did not complete: " + results[0]);
            const std::string& o = results[1];
            const auto at = o.find("MISMATCH " + c.name + ": ");
            check(at != std::string::npos, "rank 1 got no error for " + c.name + ": " + o);
            const std::string line = o.substr(at, o.find('\n', at) - at);
            const std::string want = "rank 1's " + c.recv_side + " tag 7 does not match rank 0's " + c.send_side;
            check(line.find(want) != std::string::npos,
                  "rank 1's error for " + c.name + " is\n  " + line + "\nexpected it to say\n  " + want);
          }
          check_no_orphans(spec.run_dir, l.world);
          rec.metrics["cases_per_rank"] = double(cs.size());
          fs::remove_all(spec.run_dir);
        },
        /*with_seed=*/false));
  }
  return out;
}

std::vector<harness::TestCase> dead_rank_tests() {
  std::vector<harness::TestCase> out;
  struct Launch {
    std::string backend, how, check;
  };
  std::vector<Launch> launches;
  for (const std::string backend : {"mpi", "gloo"})
    for (const std::string how : {"exit", "kill"})
      for (const std::string chk : {"auto", "exchange"}) launches.push_back({backend, how, chk});
  for (const Launch& l : launches) {
    const std::string name = "dead_rank/" + l.backend + "/" + l.how + "/" + l.check + "/w3";
    out.push_back(recorded_case(
        "collectives", name,
        [l](harness::Record& rec) {
          constexpr int kWorld = 3, kVictim = 1, kSeq = 3;
          constexpr double kTimeout = 60;
          harness::LaunchSpec spec;
          spec.ranks = kWorld;
          spec.run_dir = fresh_dir("dead_" + l.backend + "_" + l.how + "_" + l.check);
          spec.timeout = std::chrono::seconds(240);
          spec.env["TRAINBENCH_WATCHDOG_DEMO"] = "dead:" + l.backend + ":" + l.how + ":" + std::to_string(kVictim) +
                                                 ":" + std::to_string(kSeq);
          spec.env["TRAINBENCH_DIST_TIMEOUT"] = "60";
          spec.env["TRAINBENCH_DIST_CHECK"] = l.check;
          spec.argv = {harness::self_exe(), "list"};
          const harness::LaunchResult res = harness::launch(spec);
          rec.metrics["launch_seconds"] = res.seconds;
          const std::string all = res.diagnosis(40);
          if (l.backend == "gloo" && all.find("backend gloo not built") != std::string::npos) {
            rec.status = harness::Status::Skip;
            rec.message = "gloo backend not built";
            return;
          }
          check(!res.timed_out, "the ranks hung until the launch deadline: " + all);
          check(res.exit_code != 0, "the job exited 0 although rank 1 ended: " + all);
          // Well below the collective timeout: the survivors noticed the death, not a hang.
          check(res.seconds < kTimeout, "the launch took " + std::to_string(res.seconds) + " s: " + all);
          check_no_orphans(spec.run_dir, kWorld);
          const std::string who = "rank " + std::to_string(kVictim) + " (pid ";
          const std::string coll = "all_reduce #" + std::to_string(kSeq) + " ";
          for (int r = 0; r < kWorld; ++r) {
            if (r == kVictim) continue;
            const std::string& o = res.rank_output[std::size_t(r)];
            check(o.find("did not complete in ") == std::string::npos,  // the timeout's wording
                  "rank " + std::to_string(r) + " waited for the timeout: " + o);
            check(o.find("trainbench: watchdog: rank " + std::to_string(r) + ": " + who) != std::string::npos &&
                      o.find(coll) != std::string::npos &&
                      o.find("(its last collective: #" + std::to_string(kSeq - 1)) != std::string::npos,
                  "survivor rank " + std::to_string(r) + " does not name rank " + std::to_string(kVictim) + " and " +
                      coll + ": " + o);
            const fs::path dump = spec.run_dir / ("flight_recorder_rank" + std::to_string(r) + ".json");
            std::ifstream in(dump);
            check(bool(in), "survivor rank " + std::to_string(r) + " wrote no dump " + dump.string() + ": " + all);
            const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
            check(!j.is_discarded() && j.contains("diagnosis") &&
                      j["diagnosis"].get<std::string>().find(who) != std::string::npos,
                  "the dump " + dump.string() + " lacks the diagnosis");
          }
          fs::remove_all(spec.run_dir);
        },
        /*with_seed=*/false));
  }
  return out;
}

}  // namespace tb::suites
