// A counter-based generator (Philox 4x32-10): a (seed, offset) pair fully determines the stream,
// so a random op is reproducible from its seed, at any thread count, and can be split across
// threads by offset without shared state.
#pragma once
#include <array>
#include <cstdint>

namespace tb::core {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  // Reserve `n` blocks of 4 32-bit outputs; returns the first block's counter.
  uint64_t reserve(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }

  // Four independent 32-bit outputs for counter `ctr`.
  std::array<uint32_t, 4> block(uint64_t ctr) const {
    uint32_t c[4] = {uint32_t(ctr), uint32_t(ctr >> 32), 0, 0};
    uint32_t k[2] = {uint32_t(seed_), uint32_t(seed_ >> 32)};
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
      uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k[0], n2 = uint32_t(p0 >> 32) ^ c[3] ^ k[1];
      c[1] = uint32_t(p1);
      c[3] = uint32_t(p0);
      c[0] = n0;
      c[2] = n2;
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    return {c[0], c[1], c[2], c[3]};
  }
  static float to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
  static double to_unit_double(uint32_t hi, uint32_t lo) {
    return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide default generator (seeded by manual_seed, like torch.manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace tb::core
