// StridedLoop: walks N same-shaped operands (inputs already expanded to the output's shape) in
// row-major order of operand 0, coalescing dims that are contiguous in every operand, and splits
// the walk across OpenMP threads. The callback sees a run of `n` elements of the innermost dim:
//   f(char** data /* one pointer per operand */, const int64_t* strides /* bytes */, int64_t n)
// Ops build their kernels on this (engine/ops/cpu/loops.h); copy.cpp uses it for casts.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb {

// Below this many elements a loop runs on one thread (thread start-up costs more than it saves).
inline constexpr int64_t kParallelGrain = 32768;
int num_threads();            // threads the engine's parallel loops use
void set_num_threads(int n);  // like torch.set_num_threads
// Caps num_threads() on the calling thread while it lives (e.g. a background checkpoint writer
// that must not take the cores training runs on); other threads keep theirs.
class ThreadLimit {
 public:
  explicit ThreadLimit(int n);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int previous_;
};

class StridedLoop {
 public:
  static constexpr int kMaxOperands = 8;
  explicit StridedLoop(std::span<const Tensor> operands);
  StridedLoop(std::initializer_list<Tensor> operands)
      : StridedLoop(std::span<const Tensor>(operands.begin(), operands.size())) {}

  int64_t numel() const { return numel_; }
  int noperands() const { return n_; }
  // True when every operand is one dense run (after coalescing): kernels may use flat pointers.
  bool is_contiguous() const;
  char* base(int i) const { return base_[i]; }

  template <typename F>
  void for_each(F&& f, int64_t grain = kParallelGrain) const {
    if (numel_ == 0) return;
    int nt = num_threads();
    if (nt <= 1 || numel_ < grain) {
      run_range(0, numel_, f);
      return;
    }
    const int64_t chunks = std::min<int64_t>(nt, (numel_ + grain - 1) / grain);
#pragma omp parallel for num_threads(chunks) schedule(static, 1)
    for (int64_t c = 0; c < chunks; ++c) {
      // Split at multiples of 64 elements so threads never share a cache line of output.
      int64_t per = ((numel_ + chunks - 1) / chunks + 63) & ~int64_t(63);
      int64_t b = std::min(numel_, c * per), e = std::min(numel_, b + per);
      if (b < e) run_range(b, e, f);
    }
  }

 private:
  template <typename F>
  void run_range(int64_t begin, int64_t end, F& f) const {
    const int nd = int(shape_.size());
    std::array<char*, kMaxOperands> ptr;
    std::array<int64_t, kMaxOperands> inner{};
    if (nd == 0) {
      for (int i = 0; i < n_; ++i) ptr[i] = base_[i];
      f(ptr.data(), inner.data(), int64_t(1));
      return;
    }
    std::vector<int64_t> idx(nd);
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; --d) {
      idx[d] = rem % shape_[d];
      rem /= shape_[d];
    }
    for (int i = 0; i < n_; ++i) {
      ptr[i] = base_[i];
      for (int d = 0; d < nd; ++d) ptr[i] += idx[d] * strides_[d][i];
      inner[i] = strides_[nd - 1][i];
    }
    while (begin < end) {
      const int64_t cnt = std::min(shape_[nd - 1] - idx[nd - 1], end - begin);
      f(ptr.data(), inner.data(), cnt);
      begin += cnt;
      idx[nd - 1] += cnt;
      for (int i = 0; i < n_; ++i) ptr[i] += cnt * inner[i];
      for (int d = nd - 1; d > 0 && idx[d] == shape_[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
        for (int i = 0; i < n_; ++i) ptr[i] += strides_[d - 1][i] - shape_[d] * strides_[d][i];
      }
    }
  }

  int n_ = 0;
  int64_t numel_ = 0;
  Shape shape_;                                             // coalesced
  std::vector<std::array<int64_t, kMaxOperands>> strides_;  // [dim][operand], bytes
  std::array<char*, kMaxOperands> base_{};
  std::array<int64_t, kMaxOperands> itemsize_{};
};

}  // namespace tb
