#include "suites/collectives/collectives_suite.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "engine/dist/flight_recorder.h"
#include "engine/dist/process_group.h"
#include "engine/tensor/factories.h"
#include "suites/compare.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

using dist::ProcessGroup;
using dist::ReduceOp;
using harness::Record;

constexpr const char* kSuite = "collectives";
const DType kDTypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64};
const ReduceOp kReduceOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product};

// One group per backend for all of its cases (groups are cheap, but Gloo's rendezvous is not),
// made by the first case that runs and dropped by the backend's last case. A backend that cannot
// start leaves its reason in `skip`.
struct Backend {
  std::string name;
  std::shared_ptr<ProcessGroup> pg;
  std::string skip;
  bool tried = false;
  ProcessGroup* get() {
    if (!tried) {
      tried = true;
      try {
        pg = dist::new_group(name);
      } catch (const dist::DistError& e) {
        if (name == "mpi") throw;  // the default backend must start
        skip = e.what();
      }
    }
    return pg.get();
  }
};
using BackendPtr = std::shared_ptr<Backend>;

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// double(float(u)) in a call the optimiser cannot see through: GCC 12.2 at -O3 with AVX2 (Debian
// bookworm's compiler, -march=native on a Zen 3) miscompiles this rounding when it is inlined.
// Its SLP vectorizer packs four neighbouring double(float(double(int64) * c)) into one vmulpd and
// stores the products without the vcvtpd2ps/vcvtps2pd pair (wrong code; -fno-tree-slp-vectorize
// or -O2 give the right values; docs/testing.md has a 20-line reproducer). expect_values's
// 5-element loop of mpi/wait_timeout/recv was unrolled into exactly that shape and compared the
// received floats with unrounded doubles; the rank that failed skipped the case's last barrier,
// which later deadlocked mpi/two_groups/w4.
[[gnu::noinline]] double round_to_float32(double u) { return double(float(u)); }

// Element i of rank `rank`'s input, exactly representable in `dtype`: floats uniform in [-1, 1)
// (bfloat16 rounded), integers in [-2^40, 2^40], or in [-3, 3] for products (no overflow).
double value(DType dtype, uint64_t seed, int rank, int64_t i, ReduceOp op) {
  const uint64_t h = mix(seed ^ mix(uint64_t(rank) * 0x100000001b3ull + uint64_t(i)));
  if (dtype == DType::Int64) {
    if (op == ReduceOp::Product) return double(int64_t(h % 7) - 3);
    return double(int64_t(h % ((uint64_t(1) << 41) + 1)) - (int64_t(1) << 40));
  }
  const double u = double(h >> 11) * 0x1.0p-53 * 2 - 1;
  if (dtype == DType::Float32) return round_to_float32(u);
  if (dtype == DType::BFloat16) return double(float(BFloat16(float(u))));
  return u;
}

Tensor make_tensor_of(DType dtype, int64_t n, uint64_t seed, int rank, ReduceOp op, int64_t first = 0) {
  Tensor t = empty({n}, dtype);
  core::dispatch(dtype, [&]<typename T>() {
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      const double v = value(dtype, seed, rank, first + i, op);
      if constexpr (std::is_same_v<T, int64_t>) p[i] = int64_t(v);
      else p[i] = T(static_cast<core::opmath_t<T>>(v));
    }
  });
  return t;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> out(t.numel());
  core::dispatch(t.dtype(), [&]<typename T>() {
    const T* p = static_cast<const T*>(t.data());
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = double(static_cast<core::opmath_t<T>>(p[i]));
  });
  return out;
}

// The reduction over ranks of element i of their inputs: integers exactly (avg truncates toward
// zero), floats in float64.
double reduce_expected(DType dtype, uint64_t seed, int world, int64_t i, ReduceOp op) {
  if (dtype == DType::Int64) {
    int64_t acc = int64_t(value(dtype, seed, 0, i, op));
    for (int r = 1; r < world; ++r) {
      const int64_t v = int64_t(value(dtype, seed, r, i, op));
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg: acc += v; break;
        case ReduceOp::Max: acc = std::max(acc, v); break;
        case ReduceOp::Min: acc = std::min(acc, v); break;
        case ReduceOp::Product: acc *= v; break;
      }
    }
    return double(op == ReduceOp::Avg ? acc / world : acc);
  }
  double acc = value(dtype, seed, 0, i, op);
  for (int r = 1; r < world; ++r) {
    const double v = value(dtype, seed, r, i, op);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: acc += v; break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Product: acc *= v; break;
    }
  }
  return op == ReduceOp::Avg ? acc / world : acc;
}

// Unit roundoff of a float dtype (0 for integers: exact).
double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 0x1.0p-24;
    case DType::Float64: return 0x1.0p-53;
    case DType::BFloat16: return 0x1.0p-8;
    default: return 0;
  }
}

// Tolerance of a W-rank reduction of inputs in [-1, 1]: each of the W-1 steps (and the final
// rounding) errs by at most u * |partial| <= u * W, in whatever order the backend reduces: W^2 u.
// Max and min pick one input, exactly; integers are exact.
double reduce_atol(DType dtype, ReduceOp op, int world) {
  if (op == ReduceOp::Max || op == ReduceOp::Min) return 0;
  return double(world) * world * unit_roundoff(dtype);
}

void set_tolerance(Record& rec, double atol) { rec.tolerances = {{"atol", atol}, {"rtol", 0.0}}; }

// got[i] vs want(i) within atol (suites/compare.h, read flat); records the largest error and throws
// CheckFailed on a mismatch.
template <typename Want>
void expect_values(Record& rec, const Tensor& got, int64_t n, Want want, double atol, const std::string& what) {
  check(got.numel() == n, what + ": " + std::to_string(got.numel()) + " elements, expected " + std::to_string(n));
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = want(i);
  const Diff d = compare_values(got, from_vector(w, DType::Float64), Tolerance{0, atol});
  rec.metrics["max_abs_err"] = d.nan ? -1.0 : d.max_abs;
  if (d.mismatches > 0) {
    const int64_t bad = d.first_index;
    std::ostringstream os;
    os.precision(17);
    os << what << ": element " << bad << " is " << to_doubles(got)[size_t(bad)] << ", expected " << w[size_t(bad)]
       << " (atol " << atol << ", max error " << (d.nan ? std::nan("") : d.max_abs) << ")";
    throw CheckFailed(os.str());
  }
}

uint64_t fnv1a(const Tensor& t) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(t.data());
  for (std::size_t i = 0; i < std::size_t(t.numel()) * t.itemsize(); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Every rank must hold the same bytes after an all_reduce (DDP relies on it): gathers a hash.
void expect_ranks_agree(ProcessGroup& pg, const Tensor& t) {
  Tensor mine = full({1}, 0, DType::Int64), all = empty({pg.size()}, DType::Int64);
  mine.data_ptr<int64_t>()[0] = int64_t(fnv1a(t));
  pg.all_gather(all, mine)->wait();
  for (int r = 0; r < pg.size(); ++r)
    check(all.data_ptr<int64_t>()[r] == mine.data_ptr<int64_t>()[0],
          "rank " + std::to_string(r) + "'s result differs bitwise from rank " + std::to_string(pg.rank()) + "'s");
}

std::string dname(DType t) { return core::name(t); }

// A case body that needs the backend's group; skips when the backend cannot start.
using Body = std::function<void(ProcessGroup&, Record&, uint64_t seed)>;
harness::TestCase group_case(const BackendPtr& be, const std::string& name, Body body) {
  return recorded_case(kSuite, name, [be, name, body](Record& rec) {
    ProcessGroup* pg = be->get();
    if (!pg) {
      rec.status = harness::Status::Skip;
      rec.message = be->skip;
      return;
    }
    rec.metrics["world"] = pg->size();
    body(*pg, rec, case_seed(name));
  });
}

// ---- the cases ----

void add_all_reduce(std::vector<harness::TestCase>& out, const BackendPtr& be) {
  for (ReduceOp op : kReduceOps)
    for (DType dt : kDTypes) {
      std::vector<int64_t> sizes{0, 1, 7, 1001, 65537};
      if (dt == DType::Float32 && (op == ReduceOp::Sum || op == ReduceOp::Avg)) sizes.push_back(1000003);
      for (int64_t n : sizes) {
        const std::string name = be->name + "/all_reduce/" + dist::reduce_op_name(op) + "/" + dname(dt) + "/n" +
                                 std::to_string(n);
        out.push_back(group_case(be, name, [op, dt, n](ProcessGroup& pg, Record& rec, uint64_t seed) {
          const int W = pg.size();
          Tensor t = make_tensor_of(dt, n, seed, pg.rank(), op);
          pg.all_reduce(t, op)->wait();
          const double atol = reduce_atol(dt, op, W);
          set_tolerance(rec, atol);
          rec.metrics["numel"] = double(n);
          expect_ranks_agree(pg, t);
          expect_values(
              rec, t, n, [&](int64_t i) { return reduce_expected(dt, seed, W, i, op); }, atol,
              "all_reduce " + std::string(dist::reduce_op_name(op)));
        }));
      }
    }
}

void add_broadcast(std::vector<harness::TestCase>& out, const BackendPtr& be, int world) {
  std::vector<int> roots{0};
  if (world > 1) roots.push_back(world - 1);
  for (int root : roots)
    for (DType dt : kDTypes)
      for (int64_t n : {0, 7, 1001}) {
        const std::string name = be->name + "/broadcast/root" + std::to_string(root) + "/" + dname(dt) + "/n" +
                                 std::to_string(n);
        out.push_back(group_case(be, name, [root, dt, n](ProcessGroup& pg, Record& rec, uint64_t seed) {
          Tensor t = make_tensor_of(dt, n, seed, pg.rank(), ReduceOp::Sum);  // non-roots: their own values, overwritten
          pg.broadcast(t, root)->wait();
          set_tolerance(rec, 0);
          expect_values(
              rec, t, n, [&](int64_t i) { return value(dt, seed, root, i, ReduceOp::Sum); }, 0, "broadcast");
        }));
      }
}

void add_all_gather(std::vector<harness::TestCase>& out, const BackendPtr& be) {
  for (bool list : {false, true})
    for (DType dt : kDTypes)
      for (int64_t n : {0, 1, 7, 1001}) {
        const std::string name = be->name + "/all_gather/" + (list ? "list" : "tensor") + "/" + dname(dt) + "/n" +
                                 std::to_string(n);
        out.push_back(group_case(be, name, [list, dt, n](ProcessGroup& pg, Record& rec, uint64_t seed) {
          const int W = pg.size();
          Tensor in = make_tensor_of(dt, n, seed, pg.rank(), ReduceOp::Sum);
          set_tolerance(rec, 0);
          const auto want = [&](int r) { return [&, r](int64_t i) { return value(dt, seed, r, i, ReduceOp::Sum); }; };
          if (!list) {
            Tensor o = full({int64_t(W) * n}, -7, dt);
            pg.all_gather(o, in)->wait();
            expect_values(
                rec, o, W * n,
                [&](int64_t i) {
                  return value(dt, seed, int(i / std::max<int64_t>(n, 1)), i % std::max<int64_t>(n, 1), ReduceOp::Sum);
                },
                0, "all_gather");
          } else {
            std::vector<Tensor> outs;
            for (int r = 0; r < W; ++r) outs.push_back(full({n}, -7, dt));
            pg.all_gather(outs, in)->wait();
            for (int r = 0; r < W; ++r)
              expect_values(rec, outs[r], n, want(r), 0, "all_gather output " + std::to_string(r));
          }
        }));
      }
}

void add_reduce_scatter(std::vector<harness::TestCase>& out, const BackendPtr& be) {
  std::vector<std::pair<ReduceOp, DType>> combos;
  for (DType dt : kDTypes) combos.push_back({ReduceOp::Sum, dt});
  for (ReduceOp op : {ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product})
    for (DType dt : {DType::Float32, DType::Int64}) combos.push_back({op, dt});
  for (bool list : {false, true})
    for (auto [op, dt] : combos)
      for (int64_t n : list ? std::vector<int64_t>{0, 7, 1001} : std::vector<int64_t>{0, 1, 7, 1001}) {
        // tensor: every chunk has n elements; list: chunk j has n + j (uneven, and empty for n = 0, j = 0).
        const std::string name = be->name + "/reduce_scatter/" + (list ? "list/" : "tensor/") +
                                 dist::reduce_op_name(op) + "/" + dname(dt) + "/n" + std::to_string(n);
        out.push_back(group_case(be, name, [list, op, dt, n](ProcessGroup& pg, Record& rec, uint64_t seed) {
          const int W = pg.size(), R = pg.rank();
          std::vector<int64_t> counts(W), offsets(W + 1, 0);
          for (int j = 0; j < W; ++j) {
            counts[j] = list ? n + j : n;
            offsets[j + 1] = offsets[j] + counts[j];
          }
          // Rank r's full input is elements [0, total) of its value stream; chunk j is [offsets[j], offsets[j+1]).
          Tensor o = full({counts[R]}, -7, dt);
          if (!list) {
            Tensor in = make_tensor_of(dt, offsets[W], seed, R, op);
            pg.reduce_scatter(o, in, op)->wait();
          } else {
            std::vector<Tensor> ins;
            for (int j = 0; j < W; ++j) ins.push_back(make_tensor_of(dt, counts[j], seed, R, op, offsets[j]));
            pg.reduce_scatter(o, ins, op)->wait();
          }
          const double atol = reduce_atol(dt, op, W);
          set_tolerance(rec, atol);
          expect_values(
              rec, o, counts[R], [&](int64_t i) { return reduce_expected(dt, seed, W, offsets[R] + i, op); }, atol,
              "reduce_scatter " + std::string(dist::reduce_op_name(op)));
        }));
      }
}

void add_send_recv(std::vector<harness::TestCase>& out, const BackendPtr& be) {
  for (DType dt : kDTypes)
    for (int64_t n : {0, 7, 100003}) {
      const std::string name = be->name + "/send_recv/ring/" + dname(dt) + "/n" + std::to_string(n);
      out.push_back(group_case(be, name, [dt, n](ProcessGroup& pg, Record& rec, uint64_t seed) {
        const int W = pg.size(), R = pg.rank();
        if (W < 2) {
          rec.status = harness::Status::Skip;
          rec.message = "send/recv needs two ranks";
          return;
        }
        // One group runs its calls in order, and a blocking send of a large message waits for the
        // matching recv: even ranks send first, odd ranks receive first, so the ring never closes
        // into a cycle of waiting sends.
        Tensor mine = make_tensor_of(dt, n, seed, R, ReduceOp::Sum), got = full({n}, -7, dt);
        const int next = (R + 1) % W, prev = (R + W - 1) % W;
        dist::WorkPtr a, b;
        if (R % 2 == 0) {
          a = pg.send(mine, next, 7);
          b = pg.recv(got, prev, 7);
        } else {
          b = pg.recv(got, prev, 7);
          a = pg.send(mine, next, 7);
        }
        a->wait();
        b->wait();
        set_tolerance(rec, 0);
        expect_values(
            rec, got, n, [&](int64_t i) { return value(dt, seed, prev, i, ReduceOp::Sum); }, 0,
            "recv from rank " + std::to_string(prev));
      }));
    }
}

void add_misc(std::vector<harness::TestCase>& out, const BackendPtr& be) {
  out.push_back(group_case(be, be->name + "/barrier", [](ProcessGroup& pg, Record& rec, uint64_t) {
    // Barriers complete on every rank, and the group still reduces correctly after them.
    for (int i = 0; i < 3; ++i) pg.barrier()->wait();
    Tensor t = full({1}, 1, DType::Int64);
    pg.all_reduce(t)->wait();
    check(t.data_ptr<int64_t>()[0] == pg.size(),
          "all_reduce after barriers gave " + std::to_string(t.data_ptr<int64_t>()[0]));
  }));

  // Work::wait with a timeout on a recv whose send comes late: the wait throws in about the
  // timeout, nothing hangs, and the recv completes once the send arrives.
  out.push_back(group_case(be, be->name + "/wait_timeout/recv", [](ProcessGroup& pg, Record& rec, uint64_t seed) {
    if (pg.size() < 2) {
      rec.status = harness::Status::Skip;
      rec.message = "a pending recv needs a second rank";
      return;
    }
    using namespace std::chrono;
    const int R = pg.rank();
    if (R == 0) {
      Tensor got = full({5}, -7.0);
      dist::WorkPtr w = pg.recv(got, 1, 99);
      const auto t0 = steady_clock::now();
      check(!w->wait_for(milliseconds(20)), "wait_for(20 ms) on a recv whose send comes 400 ms later returned true");
      bool threw = false;
      try {
        w->wait(milliseconds(50));
      } catch (const dist::DistError& e) {
        threw = true;
        const std::string m = e.what();
        check(m.find("recv") != std::string::npos && m.find("did not complete") != std::string::npos,
              "the timeout's message does not name the op: " + m);
      }
      const double waited = duration<double>(steady_clock::now() - t0).count();
      rec.metrics["timed_out_after_s"] = waited;
      check(threw, "wait(50 ms) on a pending recv did not throw");
      check(waited < 0.35, "the two waits took " + std::to_string(waited) + " s for 70 ms of timeouts");
      check(!w->is_completed(), "the recv completed before its send was posted");
      w->wait();
      expect_values(
          rec, got, 5, [&](int64_t i) { return value(DType::Float32, seed, 1, i, ReduceOp::Sum); }, 0, "the late recv");
    } else if (R == 1) {
      std::this_thread::sleep_for(milliseconds(400));
      Tensor mine = make_tensor_of(DType::Float32, 5, seed, 1, ReduceOp::Sum);
      pg.send(mine, 0, 99)->wait();
    }
    pg.barrier()->wait();
  }));

  // Bad arguments: a DistError naming the problem, and nothing issued (the next call's seq is
  // the one the bad call would have taken).
  struct Bad {
    std::string name, expect;
    std::function<void(ProcessGroup&)> call;
  };
  const std::vector<Bad> bads = {
      {"int32", "dtype int32",
       [](ProcessGroup& pg) {
         Tensor t = zeros({3}, DType::Int32);
         pg.all_reduce(t);
       }},
      {"non_contiguous", "not contiguous",
       [](ProcessGroup& pg) {
         Tensor t = zeros({4, 3}).t();
         pg.all_reduce(t);
       }},
      {"undefined", "undefined",
       [](ProcessGroup& pg) {
         Tensor t;
         pg.broadcast(t, 0);
       }},
      {"broadcast_root", "root",
       [](ProcessGroup& pg) {
         Tensor t = zeros({3});
         pg.broadcast(t, pg.size());
       }},
      {"all_gather_size", "needs",
       [](ProcessGroup& pg) {
         Tensor o = zeros({pg.size() * 3 + 1}), i = zeros({3});
         pg.all_gather(o, i);
       }},
      {"all_gather_dtype", "float64",
       [](ProcessGroup& pg) {
         Tensor o = zeros({pg.size() * 3}, DType::Float64), i = zeros({3});
         pg.all_gather(o, i);
       }},
      {"all_gather_list_count", "output tensors",
       [](ProcessGroup& pg) {
         std::vector<Tensor> o(pg.size() + 1, zeros({3}));
         Tensor i = zeros({3});
         pg.all_gather(o, i);
       }},
      {"reduce_scatter_size", "needs",
       [](ProcessGroup& pg) {
         Tensor o = zeros({2}), i = zeros({pg.size() * 2 + 1});
         pg.reduce_scatter(o, i);
       }},
      {"reduce_scatter_list_chunk", "this rank's chunk",
       [](ProcessGroup& pg) {
         std::vector<Tensor> ins(pg.size(), zeros({3}));
         Tensor o = zeros({2});
         pg.reduce_scatter(o, ins);
       }},
      {"send_self", "not another rank",
       [](ProcessGroup& pg) {
         Tensor t = zeros({3});
         pg.send(t, pg.rank());
       }},
      {"recv_negative_tag", "negative",
       [](ProcessGroup& pg) {
         Tensor t = zeros({3});
         pg.recv(t, (pg.rank() + 1) % pg.size(), -1);
       }},
  };
  for (const Bad& bad : bads) {
    out.push_back(group_case(be, be->name + "/bad_args/" + bad.name, [bad](ProcessGroup& pg, Record& rec, uint64_t) {
      const std::vector<dist::CallRecord> before = pg.recorder().entries();
      const uint64_t last = before.empty() ? 0 : before.back().seq;
      std::string msg;
      try {
        bad.call(pg);
      } catch (const dist::DistError& e) {
        msg = e.what();
      }
      check(!msg.empty(), "no DistError");
      check(msg.find(bad.expect) != std::string::npos, "the message does not say '" + bad.expect + "': " + msg);
      rec.message = msg;  // shown in the report: what a user sees
      // A real call must take seq last + 1: the bad one left no trace.
      dist::WorkPtr w = pg.barrier();
      w->wait();
      check(w->seq() == last + 1, "the bad call took a sequence number (next call got #" + std::to_string(w->seq()) +
                                      ", expected #" + std::to_string(last + 1) + ")");
    }));
  }

  // Two groups at once: collectives on different groups run concurrently, each in its own order.
  out.push_back(group_case(be, be->name + "/two_groups", [be](ProcessGroup& pg, Record& rec, uint64_t seed) {
    std::shared_ptr<ProcessGroup> other = dist::new_group(be->name);
    const int W = pg.size();
    Tensor a = make_tensor_of(DType::Float64, 1001, seed, pg.rank(), ReduceOp::Sum);
    Tensor b = make_tensor_of(DType::Int64, 1001, seed + 1, pg.rank(), ReduceOp::Sum);
    dist::WorkPtr wa = pg.all_reduce(a), wb = other->all_reduce(b);
    wb->wait();
    wa->wait();
    set_tolerance(rec, reduce_atol(DType::Float64, ReduceOp::Sum, W));
    expect_values(
        rec, a, 1001, [&](int64_t i) { return reduce_expected(DType::Float64, seed, W, i, ReduceOp::Sum); },
        reduce_atol(DType::Float64, ReduceOp::Sum, W), "all_reduce on the first group");
    expect_values(
        rec, b, 1001, [&](int64_t i) { return reduce_expected(DType::Int64, seed + 1, W, i, ReduceOp::Sum); }, 0,
        "all_reduce on the second group");
  }));

  // Destroying a group with calls still queued waits for them (they complete, nothing hangs).
  out.push_back(group_case(be, be->name + "/destroy_with_pending", [be](ProcessGroup& pg, Record& rec, uint64_t seed) {
    const int W = pg.size();
    std::vector<Tensor> ts;
    {
      std::shared_ptr<ProcessGroup> g = dist::new_group(be->name);
      for (int k = 0; k < 4; ++k) {
        ts.push_back(make_tensor_of(DType::Float32, 4099, seed + k, pg.rank(), ReduceOp::Sum));
        g->all_reduce(ts.back());  // never waited on
      }
    }
    const double atol = reduce_atol(DType::Float32, ReduceOp::Sum, W);
    set_tolerance(rec, atol);
    for (int k = 0; k < 4; ++k)
      expect_values(
          rec, ts[k], 4099, [&](int64_t i) { return reduce_expected(DType::Float32, seed + k, W, i, ReduceOp::Sum); },
          atol, "all_reduce #" + std::to_string(k + 1) + " issued before the group was destroyed");
  }));

  // A call nobody waits on still runs (the worker takes it: Note [Collective worker]), both after
  // synchronous calls (the worker's poll) and in a burst (woken by the second issue).
  out.push_back(group_case(be, be->name + "/async_progress", [](ProcessGroup& pg, Record& rec, uint64_t seed) {
    using namespace std::chrono;
    const int W = pg.size();
    for (int k = 0; k < 3; ++k) pg.barrier()->wait();  // synchronous calls first, run inline
    const auto poll_done = [](const std::vector<dist::WorkPtr>& ws, milliseconds limit) {
      const auto t0 = steady_clock::now();
      while (steady_clock::now() - t0 < limit) {
        bool all = true;
        for (const auto& w : ws) all = all && w->is_completed();
        if (all) return duration<double>(steady_clock::now() - t0).count();
        std::this_thread::sleep_for(microseconds(200));
      }
      return -1.0;
    };
    Tensor lone = make_tensor_of(DType::Float32, 1001, seed, pg.rank(), ReduceOp::Sum);
    const double lone_s = poll_done({pg.all_reduce(lone)}, milliseconds(2000));
    std::vector<Tensor> burst;
    std::vector<dist::WorkPtr> ws;
    for (int k = 0; k < 4; ++k) {
      burst.push_back(make_tensor_of(DType::Float32, 4099, seed + 1 + k, pg.rank(), ReduceOp::Sum));
      ws.push_back(pg.all_reduce(burst.back()));
    }
    const double burst_s = poll_done(ws, milliseconds(2000));
    for (const auto& w : ws) w->wait();  // (rethrows a failure)
    rec.metrics["lone_call_done_s"] = lone_s;
    rec.metrics["burst_done_s"] = burst_s;
    check(lone_s >= 0, "an all_reduce nobody waited on did not complete within 2 s");
    check(burst_s >= 0, "a burst of 4 all_reduces nobody waited on did not complete within 2 s");
    const double atol = reduce_atol(DType::Float32, ReduceOp::Sum, W);
    set_tolerance(rec, atol);
    expect_values(
        rec, lone, 1001, [&](int64_t i) { return reduce_expected(DType::Float32, seed, W, i, ReduceOp::Sum); }, atol,
        "the lone all_reduce");
    for (int k = 0; k < 4; ++k)
      expect_values(
          rec, burst[k], 4099,
          [&](int64_t i) { return reduce_expected(DType::Float32, seed + 1 + k, W, i, ReduceOp::Sum); }, atol,
          "all_reduce " + std::to_string(k) + " of the burst");
  }));

  // The flight recorder holds what was issued (op, shapes, dtype, times, state).
  out.push_back(group_case(be, be->name + "/flight_recorder", [](ProcessGroup& pg, Record& rec, uint64_t) {
    Tensor t = zeros({3, 5}, DType::Float64);
    dist::WorkPtr w = pg.all_reduce(t, ReduceOp::Max);
    w->wait();
    std::optional<dist::CallRecord> r = pg.recorder().get(w->seq());
    check(r.has_value(), "the recorder lost the last call");
    check(r->op == "all_reduce" && r->detail == "max" && r->dtype == DType::Float64,
          "recorded " + r->op + " " + r->detail);
    check(r->shapes.size() == 1 && r->shapes[0] == core::Shape{3, 5}, "recorded the wrong shape");
    check(r->state == dist::CallState::Completed, std::string("state ") + dist::call_state_name(r->state));
    check(r->enqueued <= r->started && r->started <= r->ended, "times out of order");
    const nlohmann::json j = pg.recorder().to_json();
    check(j["entries"].back()["seq"] == w->seq() && j["backend"] == pg.backend(), "the JSON dump disagrees");
  }));

  // The backend's last case drops its group (the next backend starts from a clean slate).
  out.push_back(group_case(be, be->name + "/shutdown", [be](ProcessGroup& pg, Record& rec, uint64_t) {
    pg.barrier()->wait();
    be->pg.reset();
  }));
}

}  // namespace

std::vector<harness::TestCase> collective_rank_tests(int world) {
  std::vector<harness::TestCase> out;
  for (const char* name : {"mpi", "gloo", "nccl"}) {
    auto be = std::make_shared<Backend>();
    be->name = name;
    add_all_reduce(out, be);
    add_broadcast(out, be, world);
    add_all_gather(out, be);
    add_reduce_scatter(out, be);
    add_send_recv(out, be);
    add_misc(out, be);
  }
  return out;
}

int watchdog_demo_main(const std::string& backend, int skip_rank, int seq) {
  dist::Options opt;
  opt.timeout = std::chrono::seconds(3);  // TRAINBENCH_DIST_TIMEOUT overrides
  std::shared_ptr<ProcessGroup> pg = dist::new_group(backend, opt);
  const int R = pg->rank();
  const auto timeout = pg->options().timeout;
  for (int i = 1; i <= seq + 2; ++i) {
    if (R == skip_rank && i == seq) {
      std::fprintf(stderr, "trainbench: watchdog demo: rank %d leaves out all_reduce #%d and sleeps\n", R, seq);
      std::fflush(stderr);
      std::this_thread::sleep_for(timeout + std::chrono::seconds(5));
      std::fprintf(stderr, "trainbench: watchdog demo: rank %d was not ended by the others' watchdogs\n", R);
      std::fflush(stderr);
      std::_Exit(4);
    }
    Tensor t = full({1024}, 1.0);
    pg->all_reduce(t)->wait();
  }
  return 0;
}

}  // namespace tb::suites
