// The DataLoader's worker threads (Note [DataLoader workers]): what they share with the consumer
// and with each other -- the dataset, the caching allocator, tensors' reference counts, the batch
// window -- under the conditions that race: consumers on several threads, a consumer that stops
// early, a worker that fails. Written to be run under ThreadSanitizer (ci/tsan); the expected
// values are computed by hand from the dataset's definition, never by the engine.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/dataloader.h"
#include "engine/tensor/factories.h"

namespace tb::data {
namespace {

using namespace std::chrono_literals;

// Example i: input float32 [i, i, i, i], target int64 i; each get() takes `delay` so that workers
// overlap, and throws at `fail_at`. Counts the gets in progress and in total.
class CountingDataset : public Dataset {
 public:
  CountingDataset(int64_t n, std::chrono::microseconds delay, int64_t fail_at = -1)
      : n_(n), delay_(delay), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    check_index("CountingDataset", i, n_);
    ++active_;
    ++total_;
    std::this_thread::sleep_for(delay_);
    Example e{full({4}, double(i), DType::Float32), full({}, double(i), DType::Int64)};
    --active_;
    if (i == fail_at_) throw core::Error("CountingDataset", "no example " + std::to_string(i));
    return e;
  }
  int active() const { return active_.load(); }
  int total() const { return total_.load(); }

 private:
  int64_t n_;
  std::chrono::microseconds delay_;
  int64_t fail_at_;
  mutable std::atomic<int> active_{0}, total_{0};
};

// Breaking out of the loop destroys the iteration while workers are inside get(): it must stop
// and join them, so nothing touches the dataset afterwards.
TEST(DataLoaderWorkers, EarlyBreakJoinsWorkersMidBatch) {
  auto ds = std::make_shared<CountingDataset>(200, 300us);
  for (int64_t workers : {1, 2, 4}) {
    DataLoader loader(ds, {.batch_size = 5, .num_workers = workers, .prefetch_batches = 3});
    for (int round = 0; round < 3; ++round) {
      int64_t seen = 0;
      for (const Batch& b : loader) {
        EXPECT_EQ(b.target.data_ptr<int64_t>()[0], 5 * seen);
        if (++seen == 2) break;
      }
      EXPECT_EQ(ds->active(), 0) << workers << " workers";
      const int total = ds->total();
      std::this_thread::sleep_for(5ms);
      EXPECT_EQ(ds->total(), total) << "a worker ran after its iteration ended";
    }
  }
}

// Several consumers, each with its own loader and workers, draw from one dataset whose examples
// are views of two shared tensors: the views' reference counts, the allocator and the collate
// run on many threads at once. Batch k of a sequential loader with batch size 4 holds rows
// 4k..4k+3, so its input sums to 4 * (4k + 4k+1 + 4k+2 + 4k+3) = 64k + 24.
TEST(DataLoaderWorkers, ConsumersOnSeveralThreadsShareOneDataset) {
  constexpr int64_t kRows = 64;
  Tensor inputs = empty({kRows, 4}, DType::Float32), targets = empty({kRows}, DType::Int64);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < 4; ++j) inputs.data_ptr<float>()[4 * i + j] = float(i);
    targets.data_ptr<int64_t>()[i] = i;
  }
  auto ds = std::make_shared<TensorDataset>(inputs, targets);
  constexpr int kConsumers = 3;
  std::vector<int> wrong(kConsumers, 0), batches(kConsumers, 0);
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c)
    consumers.emplace_back([&, c] {
      DataLoader loader(ds, {.batch_size = 4, .num_workers = 2});
      for (int epoch = 0; epoch < 2; ++epoch) {
        loader.set_epoch(epoch);
        int64_t k = 0;
        for (const Batch& b : loader) {
          const float* x = b.input.data_ptr<float>();
          double sum = 0;
          for (int64_t i = 0; i < b.input.numel(); ++i) sum += x[i];
          if (sum != double(64 * k + 24) || b.target.data_ptr<int64_t>()[3] != 4 * k + 3) ++wrong[c];
          ++k;
          ++batches[c];
        }
      }
    });
  for (std::thread& t : consumers) t.join();
  EXPECT_EQ(wrong, std::vector<int>(kConsumers, 0));
  EXPECT_EQ(batches, std::vector<int>(kConsumers, 2 * kRows / 4));
}

// A worker's failure is handed to the consumer at its batch, and the other workers stop: once
// the consumer has the error, no get() is in progress.
TEST(DataLoaderWorkers, FailureReachesTheConsumerAndStopsTheOthers) {
  auto ds = std::make_shared<CountingDataset>(100, 200us, /*fail_at=*/22);
  DataLoader loader(ds, {.batch_size = 4, .num_workers = 4, .prefetch_batches = 4});
  int64_t delivered = 0;
  std::string message;
  try {
    for (const Batch& b : loader) {
      (void)b;
      ++delivered;
    }
  } catch (const core::Error& e) {
    message = e.what();
  }
  EXPECT_EQ(delivered, 5);  // batches 0..4 (rows 0..19); index 22 is in batch 5
  EXPECT_NE(message.find("batch 5 of epoch 0"), std::string::npos) << message;
  EXPECT_NE(message.find("no example 22"), std::string::npos) << message;
  EXPECT_EQ(ds->active(), 0);
}

}  // namespace
}  // namespace tb::data
