#include "engine/memory/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "engine/core/env.h"
#include "engine/memory/tag_peaks.h"

#include <sys/mman.h>

namespace tb::memory {

namespace {

// tag_peaks.h: updated under the allocator's lock wherever allocated_by_tag changes upwards.
TagPeaks g_peaks;
std::mutex g_peaks_mu;  // taken inside the allocator's lock, never around it
void note_peaks(const Stats& s) {
  std::lock_guard<std::mutex> lock(g_peaks_mu);
  for (int t = 0; t < kNumTags; ++t)
    g_peaks.by_tag[size_t(t)] = std::max(g_peaks.by_tag[size_t(t)], s.allocated_by_tag[size_t(t)]);
  const int64_t model = s.allocated_by_tag[size_t(Tag::Parameter)] + s.allocated_by_tag[size_t(Tag::Gradient)] +
                        s.allocated_by_tag[size_t(Tag::OptimizerState)];
  g_peaks.model_state = std::max(g_peaks.model_state, model);
}
thread_local Tag g_tag = Tag::Other;

// Note [Memory tags]
// Each live block is counted under one tag, so the sum over tags is always allocated_bytes.
// The tag comes from the allocating thread's TagGuard, or is moved later by retag (under the
// same lock, so bytes move between tags exactly). Who sets what:
//   parameter        nn::Module::register_parameter and Module::to retag the parameter's storage
//   gradient         autograd's backward runs under a gradient guard; AccumulateGrad retags a
//                    buffer it adopts as .grad (and allocates fresh .grad under the guard)
//   optimizer_state  each optimizer's step() and load_state_dict() run under the guard
//   activation       a differentiable op's forward kernel (autograd::kernel) and a Module's
//                    forward, while grad mode is on: the outputs and anything saved for backward
//   communication    DDP's buckets
//   other            everything else (inputs, no-grad work, buffers such as running stats)
// An enclosing guard with a tag other than `other` wins over these defaults (keep_outer).

// Size classes: small requests round to powers of two (min 64 B); larger ones to 4 KiB pages
// beyond 4 KiB, so a repeated shape always hits the same bucket.
constexpr size_t kHugePage = size_t(2) << 20;

size_t round_size(size_t n) {
  if (n <= 64) return 64;
  if (n <= 4096) return std::bit_ceil(n);
  if (n >= kHugePage) return (n + kHugePage - 1) & ~(kHugePage - 1);
  return (n + 4095) & ~size_t(4095);
}

// Blocks of 2 MiB and more are 2 MiB aligned and advised as transparent huge pages: on these
// virtual machines a TLB miss walks two page tables, and streaming kernels over 4 KiB pages
// measured at half the bandwidth (sum over 64 MiB: 1.7 ms vs 0.87 ms in LibTorch with
// THP_MEM_ALLOC_ENABLE=1). Where THP is off, madvise fails harmlessly.
void* system_alloc(size_t size) {
  if (size < kHugePage) return std::aligned_alloc(64, size);
  void* p = std::aligned_alloc(kHugePage, size);
  if (p) madvise(p, size, MADV_HUGEPAGE);
  return p;
}
}  // namespace

const char* tag_name(Tag t) {
  switch (t) {
    case Tag::Other: return "other";
    case Tag::Parameter: return "parameter";
    case Tag::Gradient: return "gradient";
    case Tag::OptimizerState: return "optimizer_state";
    case Tag::Activation: return "activation";
    case Tag::Communication: return "communication";
  }
  return "invalid";
}

TagGuard::TagGuard(Tag t, bool keep_outer) : prev_(g_tag) {
  if (!keep_outer || g_tag == Tag::Other) g_tag = t;
}
TagGuard::~TagGuard() { g_tag = prev_; }
Tag TagGuard::current() { return g_tag; }

void DataDeleter::operator()(void* p) const {
  if (p && owner) owner->release(p);
}

size_t block_size(size_t nbytes) {
  TB_CHECK(nbytes <= kMaxAllocation, "block_size", nbytes, " bytes is larger than any block (", kMaxAllocation, ")");
  return nbytes == 0 ? 0 : round_size(nbytes);
}

std::string format_bytes(int64_t n) {
  std::ostringstream os;
  os.precision(3);
  if (n >= (int64_t(1) << 30)) os << double(n) / double(int64_t(1) << 30) << " GiB";
  else if (n >= (1 << 20)) os << double(n) / double(1 << 20) << " MiB";
  else if (n >= (1 << 10)) os << double(n) / double(1 << 10) << " KiB";
  else os << n << " B";
  return os.str();
}

CpuCachingAllocator::CpuCachingAllocator() { limit_ = core::env_bytes("TRAINBENCH_MEMORY_LIMIT", 0); }

CpuCachingAllocator::~CpuCachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  free_cached_locked();
}

DataPtr CpuCachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return DataPtr(nullptr, DataDeleter{this});
  if (nbytes > kMaxAllocation)
    throw OutOfMemoryError("out of memory: tried to allocate " + std::to_string(nbytes) +
                               " bytes, more than any allocation can hold (2^63 - 2 MiB); the size was "
                               "computed wrongly or the tensor is far too large",
                           nbytes);
  const size_t size = round_size(nbytes);
  const Tag tag = g_tag;
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++stats_.num_cache_hits;
  } else {
    // size <= kMaxAllocation and reserved <= limit's scale, so neither side can overflow.
    if (limit_ > 0 && int64_t(size) > limit_ - stats_.reserved_bytes) free_cached_locked();
    if (limit_ > 0 && int64_t(size) > limit_ - stats_.reserved_bytes) {
      std::ostringstream os;
      os << "out of memory: tried to allocate " << format_bytes(int64_t(nbytes)) << " (tag " << tag_name(tag)
         << ") with " << format_bytes(stats_.allocated_bytes) << " held by live tensors under a limit of "
         << format_bytes(limit_) << " (TRAINBENCH_MEMORY_LIMIT). Held by tag:";
      for (int t = 0; t < kNumTags; ++t)
        if (stats_.allocated_by_tag[t] > 0)
          os << " " << tag_name(Tag(t)) << "=" << format_bytes(stats_.allocated_by_tag[t]);
      std::vector<Block> blocks;
      for (auto& [ptr, b] : live_) blocks.push_back(b);
      std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.size > b.size; });
      os << ". Largest live blocks:";
      for (size_t i = 0; i < std::min<size_t>(5, blocks.size()); ++i)
        os << " " << format_bytes(int64_t(blocks[i].size)) << " (" << tag_name(blocks[i].tag) << ")";
      os << ". Reduce the batch size or raise the limit.";
      throw OutOfMemoryError(os.str(), nbytes);
    }
    p = system_alloc(size);
    if (!p) throw OutOfMemoryError("out of memory: the system refused " + format_bytes(int64_t(size)), nbytes);
    stats_.reserved_bytes += int64_t(size);
    ++stats_.num_system_allocs;
  }
  live_.emplace(p, Block{size, tag});
  ++stats_.num_allocs;
  stats_.allocated_bytes += int64_t(size);
  stats_.allocated_by_tag[int(tag)] += int64_t(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  if (this == &cpu_allocator()) note_peaks(stats_);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return DataPtr(p, DataDeleter{this});
}

void CpuCachingAllocator::release(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: nothing to do (never happens through DataPtr)
  stats_.allocated_bytes -= int64_t(it->second.size);
  stats_.allocated_by_tag[int(it->second.tag)] -= int64_t(it->second.size);
  free_[it->second.size].push_back(p);
  live_.erase(it);
}

void CpuCachingAllocator::retag(void* p, Tag tag) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end() || it->second.tag == tag) return;
  const int64_t size = int64_t(it->second.size);
  stats_.allocated_by_tag[int(it->second.tag)] -= size;
  stats_.allocated_by_tag[int(tag)] += size;
  it->second.tag = tag;
  if (this == &cpu_allocator()) note_peaks(stats_);
}

void CpuCachingAllocator::free_cached_locked() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      std::free(p);
      stats_.reserved_bytes -= int64_t(size);
    }
    blocks.clear();
  }
}

Stats CpuCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CpuCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CpuCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  free_cached_locked();
}

void CpuCachingAllocator::set_limit(int64_t bytes) {
  TB_CHECK(bytes >= 0, "set_limit", "the memory limit must be >= 0 bytes (0 = no cap), got ", bytes);
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

int64_t CpuCachingAllocator::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

CpuCachingAllocator& cpu_allocator() {
  static CpuCachingAllocator* a = new CpuCachingAllocator();  // leaked: outlives static tensors
  return *a;
}

TagPeaks tag_peaks() {
  std::lock_guard<std::mutex> lock(g_peaks_mu);
  return g_peaks;
}

void reset_tag_peaks() {
  const Stats now = cpu_allocator().stats();
  {
    std::lock_guard<std::mutex> lock(g_peaks_mu);
    g_peaks = TagPeaks{};
  }
  note_peaks(now);
}

}  // namespace tb::memory
