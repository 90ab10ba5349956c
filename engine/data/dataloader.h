// DataLoader: batches of a Dataset in a Sampler's order, built on the calling thread or by
// worker threads ahead of the consumer, with the same batches in the same order either way.
// Not here: the order itself (sampler.h) or how examples become a batch (collate.h).
//
// Use:
//   DataLoader loader(dataset, {.batch_size = 64, .shuffle = true, .seed = 1, .num_workers = 2});
//   for (int64_t e = 0; e < epochs; ++e) { loader.set_epoch(e); for (const Batch& b : loader) ...; }
// Resume at (epoch e, batch k): loader.set_epoch(e); loader.skip_batches(k); then iterate: the
// batches are exactly batches k, k+1, ... of an uninterrupted epoch e (the skipped ones are
// never loaded).
//
// Note [DataLoader workers]
// Batch k of an epoch is a pure function of (sampler order for the epoch, k), so workers may
// build batches in any order; the consumer takes them strictly in order k = start, start+1, ...
// Workers claim the next unclaimed batch, but only within a window of
// max(prefetch_batches, num_workers) batches ahead of the consumer: at most that many batches
// are ready or being built at once. A worker's exception is stored in its batch's slot and
// rethrown (as core::Error "DataLoader: batch k of epoch e: <message>") when the consumer reaches
// that batch, exactly where num_workers = 0 would have thrown. Destroying the last iterator of
// an iteration (e.g. `break` out of the range-for) stops and joins its workers. Workers run
// OpenMP regions single-threaded (as PyTorch's workers set torch.set_num_threads(1)).
#pragma once
#include <cstdint>
#include <iterator>
#include <memory>

#include "engine/data/collate.h"
#include "engine/data/dataset.h"
#include "engine/data/sampler.h"

namespace tb::data {

class DataLoader {
 public:
  struct Options {
    int64_t batch_size = 1;
    bool shuffle = false;  // RandomSampler(n, seed) instead of SequentialSampler(n)
    uint64_t seed = 0;
    bool drop_last = false;        // drop the last batch when it would be smaller than batch_size
    int64_t num_workers = 0;       // 0: batches are built on the consuming thread
    int64_t prefetch_batches = 2;  // see Note [DataLoader workers] for the window it sets
  };

  // collate: empty means stack_collate_fn(). It must be thread-safe when num_workers > 0.
  DataLoader(std::shared_ptr<const Dataset> dataset, Options options, Collate collate = {});
  // An explicit sampler (e.g. DistributedSampler); options.shuffle must be false (the sampler
  // decides the order), as in PyTorch.
  DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<Sampler> sampler, Options options,
             Collate collate = {});

  // The epoch the next iteration uses (forwarded to the sampler).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return sampler_->epoch(); }
  // Batches per epoch: ceil(samples / batch_size), or floor with drop_last.
  int64_t size() const;
  // The next begin() starts at batch n of the epoch (0 <= n <= size()); applies to that one
  // iteration only.
  void skip_batches(int64_t n);

  const Options& options() const { return options_; }
  const Sampler& sampler() const { return *sampler_; }
  const Dataset& dataset() const { return *dataset_; }

  class Run;  // one iteration's state (and workers); dataloader.cpp
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;  // the end
    explicit Iterator(std::shared_ptr<Run> run) : run_(std::move(run)) {}
    const Batch& operator*() const;
    const Batch* operator->() const { return &**this; }
    Iterator& operator++();
    // Equal when both are exhausted (or the same live iteration).
    bool operator==(const Iterator& o) const;
    bool operator!=(const Iterator& o) const { return !(*this == o); }
    // Index within the epoch of the batch *this refers to.
    int64_t batch_index() const;

   private:
    std::shared_ptr<Run> run_;
  };

  // Starts an iteration over the current epoch (computes the order, starts the workers, and
  // builds/waits for the first batch: an error in it is thrown here).
  Iterator begin();
  Iterator end() { return Iterator(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<Sampler> sampler_;
  Options options_;
  Collate collate_;
  int64_t skip_ = 0;
};

}  // namespace tb::data
