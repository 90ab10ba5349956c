// The benchmark runner: engine and LibTorch sides of each BenchCase timed by Google Benchmark in
// this process, one case at a time (register, run, clear) so progress and errors are per case.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <optional>

#include "harness/runner.h"

namespace tb::harness {
namespace {

// Google Benchmark parses its own --benchmark_* flags out of argv; ours must never reach it, so it
// gets a synthetic argv holding only a program name.
void init_google_benchmark() {
  static const bool done = [] {
    static char name[] = "trainbench";
    static char* argv[] = {name, nullptr};
    int argc = 1;
    benchmark::Initialize(&argc, argv);
    return true;
  }();
  (void)done;
}

struct Samples {
  std::vector<double> seconds;  // real time per iteration, one per repetition
  int64_t iterations = 0;       // iterations of the first repetition (Google Benchmark's choice)
  std::optional<std::string> error;
};

// Keeps per-repetition runs (aggregates are recomputed by us: median/min/max) and prints nothing;
// the progress line is ours.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      Samples& s = by_name_[r.run_name.function_name];
      if (r.error_occurred) s.error = r.error_message;
      else if (r.iterations > 0) {
        s.seconds.push_back(r.real_accumulated_time / static_cast<double>(r.iterations));
        if (!s.iterations) s.iterations = r.iterations;
      }
    }
  }
  const Samples& get(const std::string& name) { return by_name_[name]; }

 private:
  std::map<std::string, Samples> by_name_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One untimed call per side first: it surfaces a broken case as a clear error before Google
// Benchmark starts and warms caches, allocators and lazily initialised libraries (oneDNN and
// LibTorch both JIT or plan on first use).
std::optional<std::string> try_call(const std::function<void()>& fn, const char* side) {
  try {
    if (!fn) return std::string(side) + ": no function given";
    fn();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string(side) + ": exception: " + e.what();
  } catch (...) {
    return std::string(side) + ": exception of unknown type";
  }
}

// iterations: 0 lets Google Benchmark grow the count until --min-time is reached (the first
// repetition); later repetitions reuse that count instead of searching again.
void register_side(const std::string& name, const std::function<void()>* fn, const BenchOptions& opt,
                   int64_t iterations) {
  benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(name.c_str(),
                                                                   [fn](benchmark::State& st) {
                                                                     for (auto _ : st) {
                                                                       try {
                                                                         (*fn)();
                                                                       } catch (const std::exception& e) {
                                                                         st.SkipWithError(e.what());
                                                                         break;
                                                                       } catch (...) {
                                                                         st.SkipWithError("exception of unknown type");
                                                                         break;
                                                                       }
                                                                     }
                                                                   })
                                          ->Repetitions(1)
                                          ->UseRealTime();
  if (iterations > 0) b->Iterations(iterations);
  else b->MinTime(opt.min_time_s > 0 ? opt.min_time_s : 0.01);
}

Record bench_one(const PlannedBench& p, const BenchOptions& opt) {
  Record r;
  r.suite = p.suite;
  r.case_name = p.bench.name;
  r.kind = "benchmark";
  const BenchCase& b = p.bench;

  std::optional<std::string> err = try_call(b.engine, "engine");
  if (!err) err = try_call(b.reference, "reference");
  nlohmann::json measured = nlohmann::json::object();
  if (!err && b.measure) {
    try {
      measured = b.measure();
    } catch (const std::exception& e) {
      err = std::string("measure: ") + e.what();
    }
  }
  if (!err) {
    const std::string base = p.suite + "/" + b.name;
    const std::string eng_name = base + "/engine", ref_name = base + "/reference";
    // The sides take turns, one repetition each, in the order engine, LibTorch, LibTorch, engine,
    // ...: a burst of load from another process on this shared machine then falls on both sides
    // instead of on all of one side's repetitions, and neither side always runs first.
    CollectingReporter rep;
    for (int round = 0; round < std::max(1, opt.repetitions) && !err; ++round) {
      const bool engine_first = round % 2 == 0;
      const int64_t eng_iters = rep.get(eng_name).iterations, ref_iters = rep.get(ref_name).iterations;
      if (engine_first) {
        register_side(eng_name, &b.engine, opt, eng_iters);
        register_side(ref_name, &b.reference, opt, ref_iters);
      } else {
        register_side(ref_name, &b.reference, opt, ref_iters);
        register_side(eng_name, &b.engine, opt, eng_iters);
      }
      try {
        benchmark::RunSpecifiedBenchmarks(&rep);
      } catch (const std::exception& e) {
        err = std::string("benchmark run: exception: ") + e.what();
      }
      benchmark::ClearRegisteredBenchmarks();
      if (rep.get(eng_name).error || rep.get(ref_name).error) break;
    }
    const Samples& eng = rep.get(eng_name);
    const Samples& ref = rep.get(ref_name);
    if (!err && eng.error) err = "engine: " + *eng.error;
    if (!err && ref.error) err = "reference: " + *ref.error;
    if (!err && (eng.seconds.empty() || ref.seconds.empty())) err = "Google Benchmark reported no timings";
    if (!err) {
      nlohmann::json m = b.extra.is_object() ? b.extra : nlohmann::json::object();
      if (measured.is_object()) m.update(measured);
      const double em = median(eng.seconds), rm = median(ref.seconds);
      m["engine_median_s"] = em;
      m["engine_min_s"] = *std::min_element(eng.seconds.begin(), eng.seconds.end());
      m["engine_max_s"] = *std::max_element(eng.seconds.begin(), eng.seconds.end());
      m["reference_median_s"] = rm;
      m["reference_min_s"] = *std::min_element(ref.seconds.begin(), ref.seconds.end());
      m["reference_max_s"] = *std::max_element(ref.seconds.begin(), ref.seconds.end());
      m["speedup"] = em > 0 ? rm / em : 0.0;
      m["repetitions"] = static_cast<int>(std::min(eng.seconds.size(), ref.seconds.size()));
      m["threads"] = opt.threads;
      if (b.flops_per_call > 0) {
        m["gflops"] = b.flops_per_call / em / 1e9;
        m["reference_gflops"] = b.flops_per_call / rm / 1e9;
      }
      if (b.bytes_per_call > 0) {
        m["gbps"] = b.bytes_per_call / em / 1e9;
        m["reference_gbps"] = b.bytes_per_call / rm / 1e9;
      }
      r.metrics = std::move(m);
      // Every repetition's time, in the order run: `trainbench compare` bootstraps its confidence
      // intervals from them (docs/compare.md); a median alone cannot say how noisy it was.
      r.series = {{"engine_time_s", eng.seconds}, {"reference_time_s", ref.seconds}};
    }
  }
  if (err) {
    r.status = Status::Error;
    r.message = *err;
    r.metrics = nlohmann::json::object({{"threads", opt.threads}});
  }
  return r;
}

}  // namespace

std::vector<Record> run_benches(const std::vector<PlannedBench>& benches, const BenchOptions& opt, Progress* progress) {
  init_google_benchmark();
  std::vector<Record> out;
  out.reserve(benches.size());
  for (const PlannedBench& p : benches) {
    if (progress) progress->start(p.suite, p.bench.name);
    const auto t0 = std::chrono::steady_clock::now();
    Record r = bench_one(p, opt);
    r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (progress) progress->finish(r);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tb::harness
