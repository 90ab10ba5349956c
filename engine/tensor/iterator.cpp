#include "engine/tensor/iterator.h"

#include <algorithm>
#include <omp.h>

namespace tb {

namespace {
int g_threads = 0;               // 0: not set, use OpenMP's default
thread_local int t_threads = 0;  // this thread's limit (ThreadLimit); 0: none
}  // namespace

int num_threads() {
  const int all = g_threads > 0 ? g_threads : omp_get_max_threads();
  return t_threads > 0 ? std::min(t_threads, all) : all;
}

ThreadLimit::ThreadLimit(int n) : previous_(t_threads) {
  TB_CHECK(n >= 1, "ThreadLimit", "thread count must be >= 1, got ", n);
  t_threads = n;
}
ThreadLimit::~ThreadLimit() { t_threads = previous_; }

void set_num_threads(int n) {
  TB_CHECK(n >= 1, "set_num_threads", "thread count must be >= 1, got ", n);
  g_threads = n;
  omp_set_num_threads(n);
}

StridedLoop::StridedLoop(std::span<const Tensor> operands) : n_(int(operands.size())) {
  TB_CHECK(n_ >= 1 && n_ <= kMaxOperands, "StridedLoop", "between 1 and ", kMaxOperands, " operands, got ", n_);
  const Shape& sizes = operands[0].sizes();
  for (int i = 0; i < n_; ++i) {
    TB_CHECK(operands[i].sizes() == sizes, "StridedLoop", "operand ", i, " has shape ",
             core::to_string(operands[i].sizes()), ", expected ", core::to_string(sizes));
    base_[i] = static_cast<char*>(operands[i].data());
  }
  numel_ = operands[0].numel();
  if (numel_ == 0) return;  // nothing to walk; huge sizes beside a 0 must not reach the stride products
  // Keep dims of size > 1, outermost first, then merge neighbours contiguous in every operand.
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    std::array<int64_t, kMaxOperands> st{};
    for (int i = 0; i < n_; ++i) st[i] = operands[i].strides()[d] * int64_t(operands[i].itemsize());
    if (!shape_.empty()) {
      bool merge = true;
      for (int i = 0; i < n_; ++i) merge &= strides_.back()[i] == st[i] * sizes[d];
      if (merge) {
        shape_.back() *= sizes[d];
        strides_.back() = st;
        continue;
      }
    }
    shape_.push_back(sizes[d]);
    strides_.push_back(st);
  }
  if (shape_.empty() && numel_ == 1) {
    shape_.push_back(1);
    strides_.push_back({});
    for (int i = 0; i < n_; ++i) strides_.back()[i] = int64_t(operands[i].itemsize());
  }
  if (numel_ == 0) shape_.assign(1, 0), strides_.assign(1, {});
  for (int i = 0; i < n_; ++i) itemsize_[i] = int64_t(operands[i].itemsize());
}

bool StridedLoop::is_contiguous() const {
  if (shape_.size() != 1) return false;
  for (int i = 0; i < n_; ++i)
    if (strides_[0][i] != itemsize_[i]) return false;
  return true;
}

}  // namespace tb
