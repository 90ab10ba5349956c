// Samplers: the order in which a DataLoader visits dataset indices, one list per epoch.
// Sequential, Random (a deterministic shuffle per (seed, epoch)) and Distributed (PyTorch's
// DistributedSampler partition, with the engine's shuffle). Not here: batching (dataloader.h).
//
// Note [Sampler determinism]
// indices(epoch) is a pure function of the sampler's construction arguments and `epoch`, so
// every rank, every worker and a resumed run compute the same order without shared state.
// The shuffle is Fisher-Yates driven by the counter-based core::Generator seeded with
// shuffle_seed(seed, epoch); it is NOT torch.randperm's permutation (only the partition logic
// of DistributedSampler follows PyTorch exactly).
#pragma once
#include <cstdint>
#include <vector>

namespace tb::data {

class Sampler {
 public:
  virtual ~Sampler();
  // Number of indices one epoch yields.
  virtual int64_t size() const = 0;
  // The epoch's indices, in order. Thread-safe (const, no state). See Note [Sampler determinism].
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;

  // PyTorch's set_epoch: the epoch indices() uses. DataLoader::set_epoch forwards here.
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  std::vector<int64_t> indices() const { return indices(epoch_); }

 private:
  int64_t epoch_ = 0;
};

// 0, 1, ..., n-1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;

 private:
  int64_t n_;
};

// A permutation of 0..n-1, fixed by (seed, epoch) and different across epochs.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0);
  int64_t size() const override { return n_; }
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;

 private:
  int64_t n_;
  uint64_t seed_;
};

// PyTorch's torch.utils.data.DistributedSampler partition, index for index:
//   num_samples = drop_last && n % R != 0 ? ceil((n - R) / R) : ceil(n / R);  total = num_samples * R
//   order = shuffle ? permutation(seed, epoch) : 0..n-1
//   !drop_last: pad order to `total` by repeating it from the start (as many times as needed)
//    drop_last: truncate order to `total`
//   rank r gets order[r], order[r + R], order[r + 2R], ...  (num_samples indices)
// The permutation is the engine's (Note [Sampler determinism]); all ranks compute the same one.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  int64_t size() const override { return num_samples_; }  // per rank
  std::vector<int64_t> indices(int64_t epoch) const override;
  using Sampler::indices;
  int64_t total_size() const { return num_samples_ * num_replicas_; }
  int64_t num_replicas() const { return num_replicas_; }
  int64_t rank() const { return rank_; }

 private:
  int64_t n_, num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
};

// The generator seed of the shuffle for (seed, epoch): seed ^ splitmix64(epoch).
uint64_t shuffle_seed(uint64_t seed, int64_t epoch);
// A uniformly random permutation of 0..n-1 (Fisher-Yates, unbiased bounded draws) from
// core::Generator(generator_seed). The one shuffle every sampler uses.
std::vector<int64_t> permutation(int64_t n, uint64_t generator_seed);

}  // namespace tb::data
