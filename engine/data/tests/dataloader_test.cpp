// DataLoader, samplers and collate (engine/data); the Fashion-MNIST reader's tests, which
// cross-check with numpy, stay in suites/data/fashion_mnist_test.cpp. References are independent
// of the engine code under test: PyTorch's DistributedSampler algorithm re-implemented literally
// (and hand-computed partitions checked against the pinned torch once).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "engine/data/collate.h"
#include "engine/data/dataloader.h"
#include "engine/data/dataset.h"
#include "engine/core/tests/error_of.h"
#include "engine/data/sampler.h"
#include "engine/tensor/factories.h"

namespace tb::data {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_contains;

// ---------------------------------------------------------------- helpers

// Example i: input (3) float64 [i, 2i, -i], target 0-dim int64 i. Optionally throws at one index
// and sleeps a little (varying by index) so workers finish out of order.
class ProbeDataset : public Dataset {
 public:
  explicit ProbeDataset(int64_t n, int64_t fail_at = -1, int delay_us = 0)
      : n_(n), fail_at_(fail_at), delay_us_(delay_us) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    check_index("ProbeDataset::get", i, n_);
    gets_.fetch_add(1);
    if (i == fail_at_) throw core::Error("ProbeDataset", "boom at index " + std::to_string(i));
    if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(((i * 7919) % 5) * delay_us_));
    return {from_vector({double(i), 2.0 * i, -double(i)}, {3}, DType::Float64), scalar_tensor(double(i), DType::Int64)};
  }
  int64_t gets() const { return gets_.load(); }

 private:
  int64_t n_, fail_at_;
  int delay_us_;
  mutable std::atomic<int64_t> gets_{0};
};

std::vector<int64_t> targets_of(const Batch& b) {
  const Tensor t = b.target.contiguous();
  const int64_t* p = t.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + t.numel());
}

// Bitwise equality of two (possibly undefined) tensors: same shape, dtype and bytes.
::testing::AssertionResult same_tensor(const Tensor& a, const Tensor& b, const char* what) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << what << ": defined differs";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << what << ": " << core::to_string(a.sizes()) << " vs "
                                         << core::to_string(b.sizes());
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.data(), cb.data(), size_t(ca.numel()) * ca.itemsize()) != 0)
    return ::testing::AssertionFailure() << what << ": values differ";
  return ::testing::AssertionSuccess();
}

std::vector<Batch> collect(DataLoader& loader) {
  std::vector<Batch> out;
  for (const Batch& b : loader) out.push_back(b);
  return out;
}

void expect_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(same_tensor(a[k].input, b[k].input, "input")) << "batch " << k;
    EXPECT_TRUE(same_tensor(a[k].target, b[k].target, "target")) << "batch " << k;
    EXPECT_TRUE(same_tensor(a[k].mask, b[k].mask, "mask")) << "batch " << k;
  }
}

// ---------------------------------------------------------------- TensorDataset, batching

TEST(TensorDataset, RowsAndErrors) {
  Tensor x = arange(0, 12, 1, DType::Float32).view({4, 3});
  Tensor y = arange(0, 4, 1, DType::Int64);
  TensorDataset ds(x, y);
  EXPECT_EQ(ds.size(), 4);
  Example e = ds.get(2);
  ASSERT_EQ(e.input.sizes(), Shape({3}));
  EXPECT_EQ(e.input.contiguous().data_ptr<float>()[0], 6.0f);
  EXPECT_EQ(e.target.item<int64_t>(), 2);
  expect_contains(error_of([&] { ds.get(4); }), {"out of range"});
  expect_contains(error_of([&] { ds.get(-1); }), {"out of range"});
  expect_contains(error_of([&] { TensorDataset(x, arange(0, 5, 1, DType::Int64)); }), {"disagree"});
  EXPECT_FALSE(TensorDataset(x).get(0).target.defined());
}

struct BatchingCase {
  int64_t n, batch;
  bool drop_last;
};

class Batching : public ::testing::TestWithParam<BatchingCase> {};

TEST_P(Batching, SizesAndSequentialOrder) {
  const auto [n, bs, drop] = GetParam();
  auto ds = std::make_shared<ProbeDataset>(n);
  DataLoader loader(ds, {.batch_size = bs, .drop_last = drop});
  const int64_t expected_batches = drop ? n / bs : (n + bs - 1) / bs;  // PyTorch's len(DataLoader)
  EXPECT_EQ(loader.size(), expected_batches);
  std::vector<Batch> batches = collect(loader);
  ASSERT_EQ(int64_t(batches.size()), expected_batches);
  int64_t next = 0;
  for (int64_t k = 0; k < expected_batches; ++k) {
    const int64_t want = std::min(bs, n - k * bs);
    ASSERT_EQ(batches[size_t(k)].input.sizes(), Shape({want, 3}));
    ASSERT_EQ(batches[size_t(k)].target.sizes(), Shape({want}));
    EXPECT_FALSE(batches[size_t(k)].mask.defined());
    for (int64_t t : targets_of(batches[size_t(k)])) EXPECT_EQ(t, next++);
    const Tensor in = batches[size_t(k)].input.contiguous();
    for (int64_t r = 0; r < want; ++r) EXPECT_EQ(in.data_ptr<double>()[r * 3 + 2], -double(k * bs + r));
  }
  EXPECT_EQ(next, drop ? (n / bs) * bs : n);
}

INSTANTIATE_TEST_SUITE_P(Data, Batching,
                         ::testing::Values(BatchingCase{10, 4, false}, BatchingCase{10, 4, true},
                                           BatchingCase{8, 4, false}, BatchingCase{8, 4, true},
                                           BatchingCase{3, 5, false}, BatchingCase{3, 5, true},
                                           BatchingCase{0, 2, false}, BatchingCase{1, 1, false}),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.n) + "_b" + std::to_string(info.param.batch) +
                                  (info.param.drop_last ? "_drop" : "_keep");
                         });

TEST(DataLoader, BadOptions) {
  auto ds = std::make_shared<ProbeDataset>(4);
  expect_contains(error_of([&] { DataLoader(ds, {.batch_size = 0}); }), {"batch_size"});
  expect_contains(error_of([&] { DataLoader(ds, {.num_workers = -1}); }), {"num_workers"});
  expect_contains(error_of([&] { DataLoader(ds, {.prefetch_batches = 0}); }), {"prefetch_batches"});
  expect_contains(error_of([&] { DataLoader(nullptr, {}); }), {"null"});
  expect_contains(error_of([&] { DataLoader(ds, std::make_shared<SequentialSampler>(4), {.shuffle = true}); }),
                  {"mutually exclusive"});
}

// ---------------------------------------------------------------- RandomSampler

bool is_permutation_of_iota(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != int64_t(i)) return false;
  return true;
}

TEST(RandomSampler, DeterministicPermutationPerSeedAndEpoch) {
  RandomSampler a(100, 7), b(100, 7), c(100, 8);
  for (int64_t e = 0; e < 4; ++e) {
    const auto ia = a.indices(e);
    EXPECT_EQ(int64_t(ia.size()), 100);
    EXPECT_TRUE(is_permutation_of_iota(ia));
    EXPECT_EQ(ia, b.indices(e)) << "same (seed, epoch) must give the same order";
    EXPECT_NE(ia, c.indices(e)) << "another seed should give another order";
    EXPECT_NE(ia, a.indices(e + 1)) << "epochs should differ";
    std::vector<int64_t> iota(100);
    std::iota(iota.begin(), iota.end(), int64_t(0));
    EXPECT_NE(ia, iota);
  }
  a.set_epoch(3);
  EXPECT_EQ(a.indices(), b.indices(3));
  EXPECT_TRUE(RandomSampler(0, 1).indices(0).empty());
  EXPECT_EQ(RandomSampler(1, 1).indices(5), std::vector<int64_t>{0});
}

// Every element lands in every position with probability 1/n: a chi-squared test on the n x n
// table of counts over many epochs (threshold far beyond the 99.99th percentile, so a correct
// shuffle does not flake, while an off-by-one Fisher-Yates (never leaving an element in place)
// or a modulo-biased draw fails by orders of magnitude).
TEST(RandomSampler, UniformPositions) {
  const int64_t n = 5, epochs = 40000;
  RandomSampler s(n, 123);
  std::vector<double> count(size_t(n * n), 0.0);
  for (int64_t e = 0; e < epochs; ++e) {
    const auto idx = s.indices(e);
    for (int64_t p = 0; p < n; ++p) count[size_t(p * n + idx[size_t(p)])] += 1;
  }
  const double expected = double(epochs) / n;
  double chi2 = 0;
  for (double c : count) chi2 += (c - expected) * (c - expected) / expected;
  // (n-1)^2 = 16 degrees of freedom: mean 16, P(chi2 > 60) < 1e-6.
  EXPECT_LT(chi2, 60.0);
}

TEST(DataLoader, ShuffledOrderFollowsSamplerAndEpoch) {
  const int64_t n = 37;
  auto ds = std::make_shared<ProbeDataset>(n);
  DataLoader loader(ds, {.batch_size = 5, .shuffle = true, .seed = 42});
  std::vector<std::vector<int64_t>> seen;
  for (int64_t e = 0; e < 3; ++e) {
    loader.set_epoch(e);
    std::vector<int64_t> order;
    for (const Batch& b : loader)
      for (int64_t t : targets_of(b)) order.push_back(t);
    EXPECT_EQ(order, RandomSampler(n, 42).indices(e));
    EXPECT_TRUE(is_permutation_of_iota(order));
    seen.push_back(order);
  }
  EXPECT_NE(seen[0], seen[1]);
  loader.set_epoch(1);
  std::vector<int64_t> again;
  for (const Batch& b : loader)
    for (int64_t t : targets_of(b)) again.push_back(t);
  EXPECT_EQ(again, seen[1]);
}

// ---------------------------------------------------------------- DistributedSampler

// torch/utils/data/distributed.py, line for line (floating-point ceil as Python's math.ceil).
std::vector<int64_t> pytorch_partition(std::vector<int64_t> indices, int64_t R, int64_t rank, bool drop_last) {
  const int64_t len = int64_t(indices.size());
  int64_t num_samples;
  if (drop_last && len % R != 0) num_samples = int64_t(std::ceil(double(len - R) / double(R)));
  else num_samples = int64_t(std::ceil(double(len) / double(R)));
  const int64_t total_size = num_samples * R;
  if (!drop_last) {
    const int64_t padding_size = total_size - len;
    if (padding_size <= len) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding_size);
    } else {
      const int64_t reps = int64_t(std::ceil(double(padding_size) / double(len)));
      std::vector<int64_t> repeated;
      for (int64_t r = 0; r < reps; ++r) repeated.insert(repeated.end(), indices.begin(), indices.begin() + len);
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding_size);
    }
  } else {
    indices.resize(size_t(total_size));
  }
  EXPECT_EQ(int64_t(indices.size()), total_size);
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < total_size; i += R) mine.push_back(indices[size_t(i)]);
  EXPECT_EQ(int64_t(mine.size()), num_samples);
  return mine;
}

// Values printed by the pinned torch (2.11): list(DistributedSampler(range(n), R, r, shuffle=False,
// drop_last=d)) for every rank r; also derivable by hand from the formula above.
TEST(DistributedSampler, HandComputedNoShuffle) {
  using V = std::vector<std::vector<int64_t>>;
  const std::vector<std::tuple<int64_t, int64_t, bool, V>> cases = {
      {10, 4, false, {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}},
      {10, 4, true, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
      {2, 5, false, {{0}, {1}, {0}, {1}, {0}}},
      {2, 5, true, {{}, {}, {}, {}, {}}},
      {7, 3, false, {{0, 3, 6}, {1, 4, 0}, {2, 5, 1}}},
      {7, 3, true, {{0, 3}, {1, 4}, {2, 5}}},
  };
  for (const auto& [n, R, drop, want] : cases)
    for (int64_t r = 0; r < R; ++r) {
      DistributedSampler s(n, R, r, /*shuffle=*/false, 0, drop);
      EXPECT_EQ(s.indices(0), want[size_t(r)]) << "n=" << n << " R=" << R << " rank=" << r << " drop_last=" << drop;
      EXPECT_EQ(s.size(), int64_t(want[size_t(r)].size()));
    }
}

struct DistCase {
  int64_t n, replicas;
  bool drop_last;
};

class Distributed : public ::testing::TestWithParam<DistCase> {};

TEST_P(Distributed, PartitionMatchesPyTorchAlgorithm) {
  const auto [n, R, drop] = GetParam();
  for (bool shuffle : {false, true})
    for (int64_t epoch : {0, 1, 5}) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t(0));
      if (shuffle) order = permutation(n, shuffle_seed(/*seed=*/9, epoch));  // the engine's shuffle
      std::multiset<int64_t> all;
      for (int64_t r = 0; r < R; ++r) {
        DistributedSampler s(n, R, r, shuffle, 9, drop);
        s.set_epoch(epoch);
        const auto mine = s.indices();
        EXPECT_EQ(mine, pytorch_partition(order, R, r, drop))
            << "rank " << r << " shuffle " << shuffle << " epoch " << epoch;
        EXPECT_EQ(s.size(), int64_t(mine.size()));
        all.insert(mine.begin(), mine.end());
      }
      // Partition properties: every rank the same count; without drop_last every index is
      // covered and none repeats more than ceil(R / n) + 1 times; with drop_last no repeats.
      if (!drop) {
        for (int64_t i = 0; i < n; ++i) EXPECT_GE(all.count(i), 1u) << i;
      } else {
        for (int64_t i = 0; i < n; ++i) EXPECT_LE(all.count(i), 1u) << i;
        EXPECT_EQ(int64_t(all.size()), (n / R) * R);
      }
    }
  if (shuffle_seed(9, 0) == shuffle_seed(9, 1)) ADD_FAILURE() << "epochs must reseed the shuffle";
}

INSTANTIATE_TEST_SUITE_P(Data, Distributed, ::testing::ValuesIn([] {
                           std::vector<DistCase> v;
                           for (int64_t n : {0, 1, 2, 5, 10, 11, 12, 13, 100})
                             for (int64_t R : {1, 2, 3, 4, 7})
                               for (bool d : {false, true}) v.push_back({n, R, d});
                           return v;
                         }()),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.n) + "_R" + std::to_string(info.param.replicas) +
                                  (info.param.drop_last ? "_drop" : "_pad");
                         });

TEST(DistributedSampler, Errors) {
  expect_contains(error_of([] { DistributedSampler(10, 4, 4); }), {"Invalid rank 4"});
  expect_contains(error_of([] { DistributedSampler(10, 4, -1); }), {"Invalid rank"});
  expect_contains(error_of([] { DistributedSampler(10, 0, 0); }), {"num_replicas"});
  expect_contains(error_of([] { DistributedSampler(-1, 2, 0); }), {">= 0"});
}

// Ranks' loaders together see the whole dataset, each batch drawn from that rank's indices.
TEST(DataLoader, WithDistributedSampler) {
  const int64_t n = 23, R = 3;
  auto ds = std::make_shared<ProbeDataset>(n);
  std::multiset<int64_t> all;
  for (int64_t r = 0; r < R; ++r) {
    auto s = std::make_shared<DistributedSampler>(n, R, r, true, 5);
    DataLoader loader(ds, s, {.batch_size = 4, .num_workers = 2});
    loader.set_epoch(2);
    EXPECT_EQ(s->epoch(), 2);
    std::vector<int64_t> got;
    for (const Batch& b : loader)
      for (int64_t t : targets_of(b)) got.push_back(t);
    EXPECT_EQ(got, s->indices(2));
    EXPECT_EQ(loader.size(), (s->size() + 3) / 4);
    all.insert(got.begin(), got.end());
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_GE(all.count(i), 1u);
  EXPECT_EQ(int64_t(all.size()), 24);  // 8 per rank: one index padded
}

// ---------------------------------------------------------------- workers

struct WorkerCase {
  int64_t workers, prefetch;
  bool shuffle, drop_last;
};

class Workers : public ::testing::TestWithParam<WorkerCase> {};

TEST_P(Workers, SameBatchesAsSingleThreaded) {
  const auto [workers, prefetch, shuffle, drop] = GetParam();
  auto ds = std::make_shared<ProbeDataset>(103, -1, /*delay_us=*/40);  // out-of-order completion
  DataLoader::Options base{.batch_size = 8, .shuffle = shuffle, .seed = 3, .drop_last = drop};
  DataLoader serial(ds, base);
  DataLoader::Options par = base;
  par.num_workers = workers;
  par.prefetch_batches = prefetch;
  DataLoader parallel(ds, par);
  for (int64_t e = 0; e < 2; ++e) {
    serial.set_epoch(e);
    parallel.set_epoch(e);
    expect_same_batches(collect(serial), collect(parallel));
  }
}

INSTANTIATE_TEST_SUITE_P(Data, Workers,
                         ::testing::Values(WorkerCase{1, 1, false, false}, WorkerCase{2, 2, true, false},
                                           WorkerCase{3, 1, true, true}, WorkerCase{4, 8, true, false},
                                           WorkerCase{5, 2, false, true}),
                         [](const auto& info) {
                           return "w" + std::to_string(info.param.workers) + "_p" +
                                  std::to_string(info.param.prefetch) + (info.param.shuffle ? "_shuffle" : "_seq") +
                                  (info.param.drop_last ? "_drop" : "");
                         });

TEST(Workers, PadCollateSameAsSingleThreaded) {
  // Variable-length sequences: example i has length i % 6, tokens 100 + i.
  class Seqs : public Dataset {
   public:
    int64_t size() const override { return 30; }
    Example get(int64_t i) const override {
      check_index("Seqs", i, 30);
      const int64_t len = i % 6;
      return {full({len}, double(100 + i), DType::Int64), full({len}, double(i), DType::Int64)};
    }
  };
  auto ds = std::make_shared<Seqs>();
  DataLoader a(ds, {.batch_size = 4, .shuffle = true}, pad_collate_fn(-1, -100));
  DataLoader b(ds, {.batch_size = 4, .shuffle = true, .num_workers = 3}, pad_collate_fn(-1, -100));
  const auto ba = collect(a);
  expect_same_batches(ba, collect(b));
  ASSERT_FALSE(ba.empty());
  EXPECT_TRUE(ba[0].mask.defined());
}

// The window: with the consumer holding batch 0 and not advancing, workers build at most
// max(prefetch_batches, num_workers) further batches.
TEST(Workers, PrefetchIsBounded) {
  const int64_t bs = 2;
  for (auto [workers, prefetch] : {std::pair<int64_t, int64_t>{2, 3}, {3, 1}, {1, 1}}) {
    auto ds = std::make_shared<ProbeDataset>(200);
    DataLoader loader(ds, {.batch_size = bs, .num_workers = workers, .prefetch_batches = prefetch});
    auto it = loader.begin();
    // Wait (up to 10 s on a loaded machine) for the workers to get ahead, then give them time
    // to overshoot if the window leaked.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ds->gets() < 2 * bs && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GE(ds->gets(), 2 * bs) << "workers should prefetch ahead";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t window = std::max(prefetch, workers);
    EXPECT_LE(ds->gets(), (1 + window) * bs) << "workers " << workers << " prefetch " << prefetch;
    ++it;  // frees a slot
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_LE(ds->gets(), (2 + window) * bs);
  }
}

class WorkerErrors : public ::testing::TestWithParam<int64_t> {};

TEST_P(WorkerErrors, ExceptionReachesConsumerInOrder) {
  const int64_t workers = GetParam();
  auto ds = std::make_shared<ProbeDataset>(50, /*fail_at=*/37, /*delay_us=*/20);
  DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
  std::vector<int64_t> delivered;
  std::string message;
  try {
    for (const Batch& b : loader) delivered.push_back(targets_of(b)[0]);
  } catch (const core::Error& e) {
    message = e.what();
  }
  // Index 37 sits in batch 9 (36..39): batches 0..8 arrive first, in order, then the error.
  ASSERT_EQ(delivered.size(), 9u) << message;
  for (size_t k = 0; k < delivered.size(); ++k) EXPECT_EQ(delivered[k], int64_t(4 * k));
  expect_contains(message, {"boom at index 37", "batch 9 of epoch 0"});
  // The loader is reusable after a failed iteration (a new iteration fails the same way).
  expect_contains(error_of([&] {
                    for (const Batch& b : loader) (void)b;
                  }),
                  {"boom at index 37"});
}

TEST_P(WorkerErrors, ErrorInFirstBatchAndBadCollate) {
  const int64_t workers = GetParam();
  auto ds = std::make_shared<ProbeDataset>(10, /*fail_at=*/0);
  DataLoader loader(ds, {.batch_size = 3, .num_workers = workers});
  expect_contains(error_of([&] { loader.begin(); }), {"boom at index 0"});
  // A dataset whose inputs change shape: stack_collate's message travels to the consumer.
  class Ragged : public Dataset {
   public:
    int64_t size() const override { return 6; }
    Example get(int64_t i) const override { return {zeros({1 + i % 2}), {}}; }
  };
  DataLoader ragged(std::make_shared<Ragged>(), {.batch_size = 2, .num_workers = workers});
  expect_contains(error_of([&] { collect(ragged); }), {"example 1 has input shape [2] but example 0 has [1]"});
}

INSTANTIATE_TEST_SUITE_P(Data, WorkerErrors, ::testing::Values(0, 1, 3),
                         [](const auto& info) { return "w" + std::to_string(info.param); });

TEST(Workers, EarlyBreakJoinsWorkers) {
  for (int64_t workers : {1, 4}) {
    auto ds = std::make_shared<ProbeDataset>(2000, -1, /*delay_us=*/50);
    DataLoader loader(ds, {.batch_size = 16, .num_workers = workers, .prefetch_batches = 4});
    const auto t0 = std::chrono::steady_clock::now();
    int64_t taken = 0;
    for (const Batch& b : loader) {
      (void)b;
      if (++taken == 2) break;
    }
    { auto it = loader.begin(); }  // abandoned right after it started
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(taken, 2);
    EXPECT_LT(s, 5.0) << "breaking out must not wait for the whole epoch";
    EXPECT_LT(ds->gets(), 2000);
  }
}

// ---------------------------------------------------------------- resume

class Resume : public ::testing::TestWithParam<int64_t> {};

TEST_P(Resume, SkipBatchesEqualsUninterrupted) {
  const int64_t workers = GetParam();
  auto ds = std::make_shared<ProbeDataset>(45);
  DataLoader::Options opt{.batch_size = 4, .shuffle = true, .seed = 11, .drop_last = true, .num_workers = workers};
  DataLoader full_run(ds, opt);
  full_run.set_epoch(3);
  const auto all = collect(full_run);
  ASSERT_EQ(int64_t(all.size()), full_run.size());
  for (int64_t k : {int64_t(0), int64_t(1), int64_t(5), full_run.size() - 1, full_run.size()}) {
    auto fresh = std::make_shared<ProbeDataset>(45);
    DataLoader resumed(fresh, opt);  // a new process: same options, then the saved position
    resumed.set_epoch(3);
    resumed.skip_batches(k);
    const auto tail = collect(resumed);
    expect_same_batches(std::vector<Batch>(all.begin() + k, all.end()), tail);
    if (workers == 0) {
      EXPECT_EQ(fresh->gets(), (full_run.size() - k) * 4) << "skipped batches must not be loaded";
    }
    // One-shot: the next iteration is the full epoch again.
    EXPECT_EQ(int64_t(collect(resumed).size()), full_run.size());
  }
  expect_contains(error_of([&] { full_run.skip_batches(full_run.size() + 1); }), {"cannot skip"});
  expect_contains(error_of([&] { full_run.skip_batches(-1); }), {"cannot skip"});
}

INSTANTIATE_TEST_SUITE_P(Data, Resume, ::testing::Values(0, 2),
                         [](const auto& info) { return "w" + std::to_string(info.param); });

// ---------------------------------------------------------------- collate

TEST(Collate, StackShapesAndErrors) {
  std::vector<Example> ex;
  for (int i = 0; i < 3; ++i) ex.push_back({full({2, 2}, double(i)), scalar_tensor(i, DType::Int64)});
  Example b = stack_collate(ex);
  EXPECT_EQ(b.input.sizes(), Shape({3, 2, 2}));
  EXPECT_EQ(b.target.sizes(), Shape({3}));
  EXPECT_EQ(b.input.contiguous().data_ptr<float>()[8], 2.0f);
  ex[2].input = zeros({2, 3});
  expect_contains(error_of([&] { stack_collate(ex); }), {"example 2 has input shape [2, 3] but example 0 has [2, 2]"});
  ex[2].input = zeros({2, 2}, DType::Float64);
  expect_contains(error_of([&] { stack_collate(ex); }), {"dtype"});
  ex[2].input = zeros({2, 2});
  ex[1].target = Tensor();
  expect_contains(error_of([&] { stack_collate(ex); }), {"example 1 has no target"});
  expect_contains(error_of([] { stack_collate({}); }), {"empty"});
}

TEST(Collate, PadShapesMaskAndValues) {
  // Lengths 3, 0, 5, 1: Tmax = 5.
  const std::vector<int64_t> lens = {3, 0, 5, 1};
  std::vector<Example> ex;
  for (size_t b = 0; b < lens.size(); ++b) {
    std::vector<double> tok, tgt;
    for (int64_t t = 0; t < lens[b]; ++t) {
      tok.push_back(double(10 * b + t + 1));
      tgt.push_back(double(t));
    }
    ex.push_back({from_vector(tok, {lens[b]}, DType::Int64), from_vector(tgt, {lens[b]}, DType::Int64)});
  }
  PaddedBatch p = pad_collate(ex, /*pad_value=*/7);
  ASSERT_EQ(p.input.sizes(), Shape({4, 5}));
  ASSERT_EQ(p.target.sizes(), Shape({4, 5}));
  ASSERT_EQ(p.mask.sizes(), Shape({4, 5}));
  EXPECT_EQ(p.input.dtype(), DType::Int64);
  EXPECT_EQ(p.mask.dtype(), DType::Bool);
  const int64_t* in = p.input.data_ptr<int64_t>();
  const int64_t* tg = p.target.data_ptr<int64_t>();
  const bool* m = p.mask.data_ptr<bool>();
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t t = 0; t < 5; ++t) {
      const bool real = t < lens[b];
      const size_t i = b * 5 + size_t(t);
      EXPECT_EQ(m[i], real) << b << "," << t;
      EXPECT_EQ(in[i], real ? int64_t(10 * b + t + 1) : 7) << b << "," << t;
      EXPECT_EQ(tg[i], real ? t : -100) << b << "," << t;  // PyTorch's ignore_index default
    }
  // Float sequences with one label per sequence; a custom target pad.
  std::vector<Example> cls = {{from_vector({1, 2}), scalar_tensor(4, DType::Int64)},
                              {from_vector({3}, {1}), scalar_tensor(6, DType::Int64)}};
  PaddedBatch q = pad_collate(cls, -0.5, -1);
  EXPECT_EQ(q.input.dtype(), DType::Float32);
  EXPECT_EQ(q.input.contiguous().data_ptr<float>()[3], -0.5f);
  EXPECT_EQ(q.target.sizes(), Shape({2}));
  EXPECT_EQ(q.target.data_ptr<int64_t>()[1], 6);
  // Errors.
  expect_contains(error_of([] { pad_collate({{zeros({2, 2}), {}}}); }), {"1-D"});
  expect_contains(error_of([] { pad_collate({{zeros({3}), zeros({2}, DType::Int64)}}); }), {"input's length 3"});
  expect_contains(error_of([] { pad_collate({}); }), {"empty"});
}

}  // namespace
}  // namespace tb::data
