// See peak_bench.h. A case runs 5 repetitions of TRAINBENCH_PEAK_SECONDS (default 0.3) each; in a
// repetition every thread calls its kernel until the time is up and times itself, and the total
// rate is the sum of the threads' rates. Records give the median and the largest total over the
// repetitions (on a shared machine the largest is the better estimate of the peak).
#include "suites/peak/peak_bench.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <sstream>
#include <thread>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "suites/peak/peak_kernels.h"

namespace tb::suites {
namespace {

using Clock = std::chrono::steady_clock;
using namespace peak;

constexpr int kRepetitions = 5;

double seconds_per_repetition() { return core::env_double("TRAINBENCH_PEAK_SECONDS", 0.3, 1e-3, 60.0); }

// One thread's repetition: checked calls made, bytes or FLOPs done, its own time, and the first
// mismatch (empty when every call's output was right).
struct ThreadRun {
  int64_t calls = 0;
  double seconds = 0;
  std::string error;
};

// A thread's unit of work: one checked call; returns the mismatch, empty when the output is right.
using Call = std::function<std::string()>;

// Starts `threads` threads together (make(i) builds thread i's call before the start), each
// calling until `seconds` have passed (at least once).
std::vector<ThreadRun> run_threads(int threads, double seconds, const std::function<Call(int)>& make) {
  std::vector<ThreadRun> runs(threads);
  std::latch ready(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      Call call = make(i);
      ready.arrive_and_wait();
      const auto t0 = Clock::now();
      double elapsed = 0;
      do {
        std::string err = call();
        ++runs[i].calls;
        if (!err.empty() && runs[i].error.empty()) runs[i].error = std::move(err);
        elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (elapsed < seconds);
      runs[i].seconds = elapsed;
    });
  for (std::thread& t : pool) t.join();
  return runs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// `where(i)` names output element i ("chain 3 lane 7").
std::string first_mismatch(const float* got, const float* want, size_t n,
                           const std::function<std::string(size_t)>& where) {
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      std::ostringstream os;
      os << where(i) << ": got " << got[i] << ", expected " << want[i]
         << " (the scalar-computed result for the same inputs): the kernel dropped or misplaced work";
      return os.str();
    }
  return "";
}

uint16_t bf16_of_small_int(int v) {  // exact: small integers need 8 mantissa bits at most
  const float f = float(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t(bits >> 16);
}
float float_of_bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A record without figures: a skip (the reason) or a failure (the wrong work).
harness::Record without_figures(int threads, harness::Status status, const std::string& message) {
  harness::Record r;
  r.kind = "benchmark";
  r.status = status;
  r.message = message;
  r.metrics = {{"threads", threads}};
  return r;
}
std::string chain_lane(size_t i) { return "chain " + std::to_string(i / 16) + " lane " + std::to_string(i % 16); }
std::string tile_row_column(size_t i) {
  return "C tile " + std::to_string(i / 256) + " row " + std::to_string(i / 16 % 16) + " column " +
         std::to_string(i % 16);
}

harness::Record skipped(int threads, const std::string& why) {
  return without_figures(threads, harness::Status::Skip, why);
}

// A compute probe: `instructions` per call, `flops` per instruction, make(i) thread i's call.
harness::Record compute_case(int threads, double flops_per_instruction, int64_t instructions_per_call,
                             const std::function<Call(int)>& make) {
  const double seconds = seconds_per_repetition();
  std::vector<double> total, per_thread[2];
  per_thread[0].reserve(kRepetitions), per_thread[1].reserve(kRepetitions);
  int64_t calls = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const std::vector<ThreadRun> runs = run_threads(threads, seconds, make);
    double sum = 0;
    for (int i = 0; i < threads; ++i) {
      if (!runs[i].error.empty())
        return without_figures(threads, harness::Status::Fail, "thread " + std::to_string(i) + ": " + runs[i].error);
      const double rate = double(runs[i].calls * instructions_per_call) / runs[i].seconds;
      sum += rate;
      if (i < 2) per_thread[i].push_back(rate);
      calls += runs[i].calls;
    }
    total.push_back(sum);
  }
  const double ips = median(total);
  harness::Record r;
  r.kind = "benchmark";
  r.metrics = {{"threads", threads},
               {"gflops", ips * flops_per_instruction / 1e9},
               {"gflops_max", *std::max_element(total.begin(), total.end()) * flops_per_instruction / 1e9},
               {"gflops_per_thread", ips * flops_per_instruction / 1e9 / threads},
               {"instructions_per_s", ips},
               {"flops_per_instruction", flops_per_instruction},
               {"checked_calls", calls},
               {"repetitions", kRepetitions},
               {"seconds_per_repetition", seconds}};
  for (int i = 0; i < std::min(threads, 2); ++i)
    r.metrics["gflops_thread" + std::to_string(i)] = median(per_thread[i]) * flops_per_instruction / 1e9;
  return r;
}

using Chains = std::array<std::array<float, 16>, kChains>;

// The register-chain probes (fp32 FMA, bf16 dot): kChains instructions per round, every call's
// accumulators compared with `want`.
template <class Data>
harness::Record chains_case(int threads, double flops_per_instruction, int64_t rounds, std::shared_ptr<const Data> d,
                            std::shared_ptr<const Chains> want,
                            void (*kernel)(const Data&, int64_t, float (&)[kChains][16])) {
  return compute_case(threads, flops_per_instruction, rounds * kChains, [=](int) -> Call {
    return [=] {
      alignas(64) float out[kChains][16];
      kernel(*d, rounds, out);
      return first_mismatch(&out[0][0], &(*want)[0][0], kChains * 16, chain_lane);
    };
  });
}

// fma(acc, a, b) with a in [0.990, 0.999] and b in [0.5, 1.5]: the chains converge towards
// b / (1 - a) without denormals; std::fmaf rounds once, as the instruction does, so the scalar
// loop gives the same bits.
harness::Record fma_case(int threads) {
  if (std::string why = fma_unsupported(); !why.empty()) return skipped(threads, why);
  constexpr int64_t Rounds = 8192;
  auto d = std::make_shared<FmaData>();
  for (int l = 0; l < 16; ++l) d->a[l] = 0.999f - 0.0006f * float(l % 16), d->b[l] = 0.5f + float(l) / 16;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) d->acc0[c][l] = float(c) + 0.125f * float(l);
  auto want = std::make_shared<Chains>();
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) {
      float v = d->acc0[c][l];
      for (int64_t r = 0; r < Rounds; ++r) v = std::fmaf(v, d->a[l], d->b[l]);
      (*want)[c][l] = v;
    }
  return chains_case<FmaData>(threads, 2.0 * 16, Rounds, d, want, fma_kernel);
}

// Small integers in bf16: every sum stays an integer below 2^24, so exact in any order, and the
// expectation is acc0 + rounds * (a[2l] b[2l] + a[2l+1] b[2l+1]) from the same bf16 bits.
harness::Record bf16_dot_case(int threads) {
  if (std::string why = bf16_dot_unsupported(); !why.empty()) return skipped(threads, why);
  constexpr int64_t Rounds = 8192;
  auto d = std::make_shared<Bf16DotData>();
  for (int k = 0; k < 32; ++k) d->a[k] = bf16_of_small_int(1 + k % 3), d->b[k] = bf16_of_small_int(1 + (k / 3) % 2);
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) d->acc0[c][l] = float(16 * c + l);
  auto want = std::make_shared<Chains>();
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) {
      const double step = double(float_of_bf16(d->a[2 * l])) * float_of_bf16(d->b[2 * l]) +
                          double(float_of_bf16(d->a[2 * l + 1])) * float_of_bf16(d->b[2 * l + 1]);
      (*want)[c][l] = float(d->acc0[c][l] + double(Rounds) * step);
    }
  return chains_case<Bf16DotData>(threads, 2.0 * 32, Rounds, d, want, bf16_dot_kernel);
}

// As bf16_dot: small integers, so C = C0 + rounds * (A x B) exactly.
harness::Record amx_case(int threads) {
  if (std::string why = amx_unsupported(); !why.empty()) return skipped(threads, why);
  constexpr int64_t Rounds = 2048;
  auto d = std::make_shared<AmxData>();
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 32; ++k) d->a[m][k] = bf16_of_small_int(1 + (m + k) % 3);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 32; ++j) d->b[k][j] = bf16_of_small_int(1 + (k * 5 + j) % 2);
  for (int t = 0; t < kAmxTiles; ++t)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) d->c0[t][m][n] = float(100 * t + 16 * m + n);
  auto want = std::make_shared<std::array<float, kAmxTiles * 256>>();
  for (int t = 0; t < kAmxTiles; ++t)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double step = 0;
        for (int k = 0; k < 16; ++k)
          for (int j = 0; j < 2; ++j)
            step += double(float_of_bf16(d->a[m][2 * k + j])) * float_of_bf16(d->b[k][2 * n + j]);
        (*want)[t * 256 + m * 16 + n] = float(d->c0[t][m][n] + double(Rounds) * step);
      }
  return compute_case(threads, 16.0 * 16 * 32 * 2, Rounds * kAmxTiles, [d, want](int) -> Call {
    return [d, want] {
      alignas(64) float out[kAmxTiles][16][16];
      amx_kernel(*d, Rounds, out);
      return first_mismatch(&out[0][0][0], want->data(), kAmxTiles * 256, tile_row_column);
    };
  });
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;
Buffer make_buffer(size_t n) {
  auto* p = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  TB_CHECK(p, "peak/stream", "cannot allocate ", n * sizeof(float), " bytes");
  return Buffer(p);
}

// Four independent SSE sums (any x86-64 has SSE): enough loads in flight to reach DRAM's rate.
float read_sum(const float* x, size_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n; i += 16) {
    s0 = _mm_add_ps(s0, _mm_load_ps(x + i));
    s1 = _mm_add_ps(s1, _mm_load_ps(x + i + 4));
    s2 = _mm_add_ps(s2, _mm_load_ps(x + i + 8));
    s3 = _mm_add_ps(s3, _mm_load_ps(x + i + 12));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

void add(const float* __restrict x, const float* __restrict y, float* __restrict z, size_t n) {
  for (size_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

// 64M floats per array (256 MiB; far beyond any cache). x is 1 at every 8th element, 0 elsewhere,
// so every partial sum is an exact integer; y = (i % 3) / 4, so z = x + y is exact too.
harness::Record stream_case(int threads) {
  constexpr size_t N = size_t(64) << 20;
  const double seconds = seconds_per_repetition();
  Buffer x = make_buffer(N), y = make_buffer(N), z = make_buffer(N);
  for (size_t i = 0; i < N; ++i) x[i] = i % 8 == 0 ? 1.0f : 0.0f, y[i] = 0.25f * float(i % 3), z[i] = 0;
  const size_t slice = N / size_t(threads);  // a multiple of 16 for 1 and 2 threads
  std::vector<double> add_gbps, sum_gbps;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const auto adds = run_threads(threads, seconds, [&](int i) -> Call {
      return [&, i] {
        add(x.get() + i * slice, y.get() + i * slice, z.get() + i * slice, slice);
        return std::string();
      };
    });
    const auto sums = run_threads(threads, seconds, [&](int i) -> Call {
      return [&, i] {
        const size_t lo = i * slice, want = (lo + slice + 7) / 8 - (lo + 7) / 8;
        const float got = read_sum(x.get() + lo, slice);
        return got == float(want) ? std::string()
                                  : "read-only sum of slice " + std::to_string(i) + " is " + std::to_string(got) +
                                        ", expected " + std::to_string(want);
      };
    });
    double a = 0, s = 0;
    for (int i = 0; i < threads; ++i) {
      if (!sums[i].error.empty()) return without_figures(threads, harness::Status::Fail, sums[i].error);
      a += double(adds[i].calls) * double(slice) * 12 / adds[i].seconds;
      s += double(sums[i].calls) * double(slice) * 4 / sums[i].seconds;
    }
    add_gbps.push_back(a / 1e9), sum_gbps.push_back(s / 1e9);
  }
  for (size_t i = 0; i < N; ++i)
    if (z[i] != x[i] + y[i])
      return without_figures(threads, harness::Status::Fail, "z = x + y is wrong at element " + std::to_string(i));
  harness::Record r;
  r.kind = "benchmark";
  r.metrics = {{"threads", threads},
               {"gbps", median(add_gbps)},
               {"gbps_max", *std::max_element(add_gbps.begin(), add_gbps.end())},
               {"read_gbps", median(sum_gbps)},
               {"read_gbps_max", *std::max_element(sum_gbps.begin(), sum_gbps.end())},
               {"elements", int64_t(N)},
               {"repetitions", kRepetitions},
               {"seconds_per_repetition", seconds}};
  return r;
}

}  // namespace

std::vector<harness::TestCase> peak_benches() {
  std::vector<harness::TestCase> out;
  const std::pair<const char*, harness::Record (*)(int)> probes[] = {{"fp32_fma", fma_case},
                                                                     {"bf16_dot", bf16_dot_case},
                                                                     {"amx_bf16", amx_case},
                                                                     {"stream", stream_case}};
  for (const auto& [name, fn] : probes)
    for (int t : {1, 2})
      out.push_back({std::string("peak/") + name + "/t" + std::to_string(t), [fn, t] { return fn(t); }});
  return out;
}

}  // namespace tb::suites
