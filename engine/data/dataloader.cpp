// DataLoader and its per-iteration state, Run: the order, the batch window and the workers.
// See Note [DataLoader workers] in dataloader.h.
#include "engine/data/dataloader.h"

#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "engine/core/profiler.h"

namespace tb::data {

class DataLoader::Run {
 public:
  Run(std::shared_ptr<const Dataset> dataset, const Collate& collate, std::vector<int64_t> order, int64_t batch_size,
      int64_t num_batches, int64_t start, int64_t epoch, int64_t num_workers, int64_t prefetch)
      : dataset_(std::move(dataset)),
        collate_(collate),
        order_(std::move(order)),
        batch_size_(batch_size),
        num_batches_(num_batches),
        epoch_(epoch),
        cur_(start),
        base_(start),
        next_claim_(start) {
    if (num_workers > 0 && start < num_batches) {
      window_ = std::max(prefetch, num_workers);
      slots_.resize(size_t(window_));
      const int64_t nthreads = std::min(num_workers, num_batches - start);  // no idle threads
      try {
        for (int64_t w = 0; w < nthreads; ++w) threads_.emplace_back([this] { worker_loop(); });
      } catch (...) {
        shutdown();
        throw;
      }
    }
    try {
      fetch();
    } catch (...) {
      shutdown();  // the destructor does not run when a constructor throws
      throw;
    }
  }
  ~Run() { shutdown(); }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  bool done() const { return cur_ >= num_batches_; }
  int64_t index() const { return cur_; }
  const Batch& current() const {
    TB_CHECK(!done(), "DataLoader::Iterator", "dereferencing an iterator past the last batch");
    return current_;
  }
  void advance() {
    TB_CHECK(!done(), "DataLoader::Iterator", "incrementing an iterator past the last batch");
    ++cur_;
    fetch();
  }

 private:
  struct Slot {
    bool ready = false;
    Batch batch;
    std::exception_ptr error;
  };

  // Batch k: examples order[k*B, min((k+1)*B, n)) through the collate. Any failure becomes a
  // core::Error naming the batch, so both modes report the same message.
  Batch build(int64_t k) const {
    profiler::Scope prof("dataloader.build", profiler::Category::Data);  // on the thread that builds it
    try {
      const int64_t lo = k * batch_size_;
      const int64_t hi = std::min<int64_t>(lo + batch_size_, int64_t(order_.size()));
      std::vector<Example> examples;
      examples.reserve(size_t(hi - lo));
      for (int64_t i = lo; i < hi; ++i) examples.push_back(dataset_->get(order_[size_t(i)]));
      return collate_(examples);
    } catch (const std::exception& e) {
      throw core::Error("DataLoader", core::detail::concat("batch ", k, " of epoch ", epoch_, ": ", e.what()));
    } catch (...) {
      throw core::Error("DataLoader", core::detail::concat("batch ", k, " of epoch ", epoch_,
                                                           ": a non-standard exception was thrown"));
    }
  }

  // Makes batch cur_ current (building it, or waiting for the worker that builds it).
  void fetch() {
    profiler::Scope prof("dataloader.next", profiler::Category::Data);  // what the consumer waits
    current_ = Batch();
    if (done()) return;
    if (threads_.empty()) {
      try {
        current_ = build(cur_);
      } catch (...) {
        cur_ = num_batches_;  // the iteration ends at the failure
        throw;
      }
      return;
    }
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lk(mu_);
      Slot& s = slots_[size_t(cur_ % window_)];
      // Cannot wait forever: every batch below the first failure is claimed, and claims stop
      // only at a failure (at or after cur_) or at shutdown (not while we are waiting).
      ready_.wait(lk, [&] { return s.ready; });
      current_ = std::move(s.batch);
      error = s.error;
      s = Slot();
      base_ = cur_ + 1;
    }
    work_.notify_all();
    if (error) {
      cur_ = num_batches_;
      std::rethrow_exception(error);
    }
  }

  void worker_loop() {
    omp_set_num_threads(1);  // W workers x all cores of OpenMP each would oversubscribe
    profiler::set_thread_name("dataloader worker");
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      work_.wait(lk, [&] { return stop_ || failed_ || next_claim_ >= num_batches_ || next_claim_ < base_ + window_; });
      if (stop_ || failed_ || next_claim_ >= num_batches_) return;
      const int64_t k = next_claim_++;
      lk.unlock();
      Slot result;
      try {
        result.batch = build(k);
      } catch (...) {
        result.error = std::current_exception();
      }
      result.ready = true;
      lk.lock();
      if (result.error) failed_ = true;
      slots_[size_t(k % window_)] = std::move(result);
      ready_.notify_all();
    }
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    work_.notify_all();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  std::shared_ptr<const Dataset> dataset_;
  Collate collate_;
  std::vector<int64_t> order_;
  int64_t batch_size_, num_batches_, epoch_;
  int64_t cur_;  // the batch current_ holds (consumer thread only)
  Batch current_;

  std::mutex mu_;
  std::condition_variable work_;   // workers wait for room in the window
  std::condition_variable ready_;  // the consumer waits for its slot
  std::vector<Slot> slots_;        // batch k lives in slots_[k % window_]
  int64_t window_ = 1;
  int64_t base_;        // first batch the consumer has not taken
  int64_t next_claim_;  // next batch a worker will build
  bool stop_ = false, failed_ = false;
  std::vector<std::thread> threads_;
};

// ---- DataLoader ----

namespace {
void check_options(const DataLoader::Options& o) {
  TB_CHECK(o.batch_size >= 1, "DataLoader", "batch_size must be >= 1, got ", o.batch_size);
  TB_CHECK(o.num_workers >= 0, "DataLoader", "num_workers must be >= 0, got ", o.num_workers);
  TB_CHECK(o.prefetch_batches >= 1, "DataLoader", "prefetch_batches must be >= 1, got ", o.prefetch_batches);
}
}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, Options options, Collate collate)
    : dataset_(std::move(dataset)), options_(options), collate_(std::move(collate)) {
  TB_CHECK(dataset_ != nullptr, "DataLoader", "dataset is null");
  check_options(options_);
  const int64_t n = dataset_->size();
  if (options_.shuffle) sampler_ = std::make_shared<RandomSampler>(n, options_.seed);
  else sampler_ = std::make_shared<SequentialSampler>(n);
  if (!collate_) collate_ = stack_collate_fn();
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler, Options options,
                       Collate collate)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(options), collate_(std::move(collate)) {
  TB_CHECK(dataset_ != nullptr, "DataLoader", "dataset is null");
  TB_CHECK(sampler_ != nullptr, "DataLoader", "sampler is null");
  TB_CHECK(!options_.shuffle, "DataLoader",
           "sampler option is mutually exclusive with shuffle: the sampler decides the order (e.g. "
           "DistributedSampler(n, replicas, rank, /*shuffle=*/true)); set Options::shuffle = false");
  check_options(options_);
  if (!collate_) collate_ = stack_collate_fn();
}

void DataLoader::set_epoch(int64_t epoch) { sampler_->set_epoch(epoch); }

int64_t DataLoader::size() const {
  const int64_t n = sampler_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::skip_batches(int64_t n) {
  TB_CHECK(n >= 0 && n <= size(), "DataLoader::skip_batches", "cannot skip ", n, " batches of an epoch of ", size(),
           " (valid: 0..", size(), ")");
  skip_ = n;
}

DataLoader::Iterator DataLoader::begin() {
  const int64_t start = skip_;
  skip_ = 0;
  const int64_t epoch = sampler_->epoch();
  std::vector<int64_t> order = sampler_->indices(epoch);
  TB_CHECK(int64_t(order.size()) == sampler_->size(), "DataLoader", "the sampler yielded ", order.size(),
           " indices but says size() is ", sampler_->size());
  // drop_last: the partial tail is never visited, so the order needs no trimming.
  return Iterator(std::make_shared<Run>(dataset_, collate_, std::move(order), options_.batch_size, size(), start, epoch,
                                        options_.num_workers, options_.prefetch_batches));
}

// ---- Iterator ----

const Batch& DataLoader::Iterator::operator*() const {
  TB_CHECK(run_ != nullptr, "DataLoader::Iterator", "dereferencing the end iterator");
  return run_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TB_CHECK(run_ != nullptr, "DataLoader::Iterator", "incrementing the end iterator");
  run_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(const Iterator& o) const {
  const bool a_done = !run_ || run_->done(), b_done = !o.run_ || o.run_->done();
  if (a_done || b_done) return a_done == b_done;
  return run_ == o.run_;
}

int64_t DataLoader::Iterator::batch_index() const {
  TB_CHECK(run_ != nullptr, "DataLoader::Iterator", "the end iterator has no batch index");
  return run_->index();
}

}  // namespace tb::data
