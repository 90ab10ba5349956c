// Sequential, Random and Distributed samplers and the engine's shuffle. See sampler.h.
#include "engine/data/sampler.h"

#include <array>
#include <numeric>

#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace tb::data {

Sampler::~Sampler() = default;

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64-bit draws from consecutive Philox blocks (two per block).
class Draws {
 public:
  explicit Draws(uint64_t seed) : gen_(seed) {}
  uint64_t next() {
    if (pos_ == 2) {
      block_ = gen_.block(gen_.reserve(1));
      pos_ = 0;
    }
    const uint64_t v = (uint64_t(block_[2 * pos_]) << 32) | block_[2 * pos_ + 1];
    ++pos_;
    return v;
  }
  // Uniform in [0, bound), bound >= 1, without modulo bias (Lemire's multiply-and-reject).
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = (unsigned __int128)next() * bound;
    uint64_t low = uint64_t(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = (unsigned __int128)next() * bound;
        low = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }

 private:
  core::Generator gen_;
  std::array<uint32_t, 4> block_{};
  int pos_ = 2;
};

void check_n(const char* op, int64_t n) { TB_CHECK(n >= 0, op, "the number of examples must be >= 0, got ", n); }

}  // namespace

uint64_t shuffle_seed(uint64_t seed, int64_t epoch) { return seed ^ splitmix64(uint64_t(epoch)); }

std::vector<int64_t> permutation(int64_t n, uint64_t generator_seed) {
  check_n("permutation", n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t(0));
  Draws draws(generator_seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[draws.below(uint64_t(i) + 1)]);
  return p;
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) { check_n("SequentialSampler", n); }

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> v(static_cast<size_t>(n_));
  std::iota(v.begin(), v.end(), int64_t(0));
  return v;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) { check_n("RandomSampler", n); }

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const { return permutation(n_, shuffle_seed(seed_, epoch)); }

DistributedSampler::DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  check_n("DistributedSampler", n);
  TB_CHECK(num_replicas >= 1, "DistributedSampler", "num_replicas must be >= 1, got ", num_replicas);
  TB_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler", "Invalid rank ", rank,
           ", rank should be in the interval [0, ", num_replicas - 1, "]");
  // ceil((n - R) / R) == n / R when n % R != 0 (also for n < R, where it is 0).
  num_samples_ = (drop_last && n % num_replicas != 0) ? n / num_replicas : (n + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = permutation(n_, shuffle_seed(seed_, epoch));
  } else {
    order.resize(size_t(n_));
    std::iota(order.begin(), order.end(), int64_t(0));
  }
  const int64_t total = total_size();
  std::vector<int64_t> mine;
  mine.reserve(size_t(num_samples_));
  // Position p of the padded (or truncated) list is order[p % n]: padding repeats from the start.
  for (int64_t p = rank_; p < total; p += num_replicas_) mine.push_back(order[size_t(p % n_)]);
  return mine;
}

}  // namespace tb::data
