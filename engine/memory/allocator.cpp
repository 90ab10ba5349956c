#include "engine/memory/allocator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <shared_mutex>
#include <sstream>

#include "engine/core/env.h"
#include "engine/memory/limit.h"
#include "engine/memory/oom.h"
#include "engine/memory/site.h"
#include "engine/memory/snapshot.h"
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

// The history ring's largest capacity (64 bytes an event: 640 MB).
constexpr int64_t kMaxHistory = 10'000'000;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

// Note [Allocator state outside the header]
// A CpuCachingAllocator's state is an AllocatorState found by the allocator's address (the
// constructor registers it, the destructor drops it; the CPU allocator is found without a lookup),
// not the private members allocator.h declares, which are unused. allocator.h is included by
// almost every file of the project: changing it rebuilds all of them (hours on the shared 2-core
// machines), so the state that issue 18 added (sites, history, fault injection) lives here, and
// the functions that reach it are in oom.h and snapshot.h. The header's members go when it next
// changes for another reason. Everything in a state is guarded by its mu.
struct AllocatorState {
  struct Block {
    size_t size;
    size_t requested;
    Tag tag;
    Site site;
    int64_t time_us;  // 0 unless history was on
  };
  mutable std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;  // rounded size -> cached blocks
  std::unordered_map<void*, Block> live;
  Stats stats;
  int64_t limit = 0;
  int64_t fail_countdown = 0;  // requests until the injected failure; 0 = off
  bool release_cache = true;
  std::string snapshot_dir;
  // The history ring: `ring` grows to `ring_cap`, then `ring_next` is the oldest entry.
  std::vector<Event> ring;
  size_t ring_cap = 0;
  size_t ring_next = 0;
  int64_t recorded = 0;
  int64_t num_ooms = 0;  // requests refused (counted nowhere else)

  bool recording() const { return ring_cap > 0; }
  void record(Action a, uintptr_t address, size_t size, size_t requested, Tag tag, Site site) {
    if (!recording()) return;
    Event e{now_us(), a, address, int64_t(size), int64_t(requested), tag, site};
    if (ring.size() < ring_cap) ring.push_back(e);
    else {
      ring[ring_next] = e;
      ring_next = (ring_next + 1) % ring_cap;
    }
    ++recorded;
  }
  std::vector<Event> events() const {  // oldest first
    std::vector<Event> out;
    out.reserve(ring.size());
    for (size_t i = 0; i < ring.size(); ++i) out.push_back(ring[(ring_next + i) % ring.size()]);
    return out;
  }
  void free_cached() {
    for (auto& [size, blocks] : free) {
      for (void* p : blocks) {
        record(Action::SegmentFree, reinterpret_cast<uintptr_t>(p), size, size, Tag::Other, Site{});
        std::free(p);
        stats.reserved_bytes -= int64_t(size);
      }
      blocks.clear();
    }
  }
  int64_t largest_free_block() const {
    int64_t m = 0;
    for (const auto& [size, blocks] : free)
      if (!blocks.empty()) m = std::max(m, int64_t(size));
    return m;
  }
  // The report for a refused request, from the state now; counts it and records the event.
  std::shared_ptr<OomReport> refuse(const char* reason, size_t nbytes, size_t size, Tag tag, Site site) {
    auto r = std::make_shared<OomReport>();
    r->reason = reason;
    r->requested = nbytes;
    r->block = int64_t(size);
    r->tag = tag;
    r->site = site;
    r->limit = limit;
    r->allocated = stats.allocated_bytes;
    r->reserved = stats.reserved_bytes;
    r->cached_free = stats.reserved_bytes - stats.allocated_bytes;
    r->largest_free_block = largest_free_block();
    r->allocated_by_tag = stats.allocated_by_tag;
    std::vector<OomReport::LiveBlock> blocks;
    blocks.reserve(live.size());
    for (const auto& [p, b] : live) blocks.push_back({int64_t(b.size), b.tag, b.site});
    const size_t n = std::min<size_t>(5, blocks.size());
    std::partial_sort(blocks.begin(), blocks.begin() + ptrdiff_t(n), blocks.end(),
                      [](const auto& a, const auto& b) { return a.size > b.size; });
    blocks.resize(n);
    r->largest_live = std::move(blocks);
    ++num_ooms;
    record(Action::Oom, 0, size, nbytes, tag, site);
    return r;
  }
};

namespace {
// Note [Allocator state outside the header]: every allocator's state by address; the CPU
// allocator's also in g_cpu / g_cpu_state, read without the registry's lock.
std::shared_mutex g_registry_mu;
auto* g_registry = new std::unordered_map<const CpuCachingAllocator*, std::unique_ptr<AllocatorState>>();
std::atomic<const CpuCachingAllocator*> g_cpu{nullptr};
std::atomic<AllocatorState*> g_cpu_state{nullptr};

AllocatorState& state_of(const CpuCachingAllocator& a) {
  if (&a == g_cpu.load(std::memory_order_acquire)) return *g_cpu_state.load(std::memory_order_relaxed);
  std::shared_lock<std::shared_mutex> lock(g_registry_mu);
  return *g_registry->at(&a);
}
}  // namespace

CpuCachingAllocator::CpuCachingAllocator() {
  auto st = std::make_unique<AllocatorState>();
  if (auto v = core::env_string("TRAINBENCH_MEMORY_LIMIT"))
    st->limit = parse_memory_limit("TRAINBENCH_MEMORY_LIMIT", *v);
  st->fail_countdown = core::env_int64("TRAINBENCH_MEMORY_FAIL_AT", 0, 0);
  st->ring_cap = size_t(core::env_int64("TRAINBENCH_MEMORY_HISTORY", 0, 0, kMaxHistory));
  st->snapshot_dir = core::env_or("TRAINBENCH_MEMORY_SNAPSHOT_DIR");
  st->release_cache = core::env_bool("TRAINBENCH_MEMORY_RELEASE_CACHE", true);
  std::unique_lock<std::shared_mutex> lock(g_registry_mu);
  g_registry->emplace(this, std::move(st));
}

CpuCachingAllocator::~CpuCachingAllocator() {
  std::unique_ptr<AllocatorState> st;
  {
    std::unique_lock<std::shared_mutex> lock(g_registry_mu);
    auto it = g_registry->find(this);
    st = std::move(it->second);
    g_registry->erase(it);
  }
  std::lock_guard<std::mutex> lock(st->mu);
  st->free_cached();
}

DataPtr CpuCachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return DataPtr(nullptr, DataDeleter{this});
  const Tag tag = g_tag;
  const Site site = detail::t_site;
  AllocatorState& m = state_of(*this);
  std::shared_ptr<OomReport> refused;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    // Too large is checked before any arithmetic on the size (it could wrap when rounded).
    const size_t size = nbytes > kMaxAllocation ? 0 : round_size(nbytes);
    if (size == 0) refused = m.refuse("too_large", nbytes, 0, tag, site);
    else if (m.fail_countdown > 0 && --m.fail_countdown == 0) refused = m.refuse("fail_at", nbytes, size, tag, site);
    else if (auto it = m.free.find(size); it != m.free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      ++m.stats.num_cache_hits;
    } else {
      // size <= kMaxAllocation and reserved <= limit's scale, so neither side can overflow.
      if (m.limit > 0 && int64_t(size) > m.limit - m.stats.reserved_bytes && m.release_cache) m.free_cached();
      if (m.limit > 0 && int64_t(size) > m.limit - m.stats.reserved_bytes) {
        refused = m.refuse("limit", nbytes, size, tag, site);
      } else if (!(p = system_alloc(size))) {
        refused = m.refuse("system", nbytes, size, tag, site);
      } else {
        m.stats.reserved_bytes += int64_t(size);
        ++m.stats.num_system_allocs;
        m.record(Action::SegmentAlloc, reinterpret_cast<uintptr_t>(p), size, size, Tag::Other, Site{});
      }
    }
    if (!refused) {
      m.live.emplace(p, AllocatorState::Block{size, nbytes, tag, site, m.recording() ? now_us() : 0});
      ++m.stats.num_allocs;
      m.stats.allocated_bytes += int64_t(size);
      m.stats.allocated_by_tag[int(tag)] += int64_t(size);
      m.stats.peak_allocated_bytes = std::max(m.stats.peak_allocated_bytes, m.stats.allocated_bytes);
      if (this == g_cpu.load(std::memory_order_relaxed)) note_peaks(m.stats);
      m.stats.peak_reserved_bytes = std::max(m.stats.peak_reserved_bytes, m.stats.reserved_bytes);
      m.record(Action::Alloc, reinterpret_cast<uintptr_t>(p), size, nbytes, tag, site);
      return DataPtr(p, DataDeleter{this});
    }
  }
  // Outside the lock: the snapshot takes it again, and writing a file may be slow.
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    dir = m.snapshot_dir;
  }
  if (!dir.empty()) {
    try {
      refused->snapshot_path = write_snapshot(dir, memory::snapshot(*this), "oom", refused.get());
    } catch (const std::exception& e) {
      refused->snapshot_path = std::string("(not written: ") + e.what() + ")";
    }
  }
  throw OomError(std::move(refused));
}

void CpuCachingAllocator::release(void* p) {
  AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.live.find(p);
  if (it == m.live.end()) return;  // not ours: nothing to do (never happens through DataPtr)
  const AllocatorState::Block& b = it->second;
  m.stats.allocated_bytes -= int64_t(b.size);
  m.stats.allocated_by_tag[int(b.tag)] -= int64_t(b.size);
  m.free[b.size].push_back(p);
  m.record(Action::Free, reinterpret_cast<uintptr_t>(p), b.size, b.requested, b.tag, b.site);
  m.live.erase(it);
}

void CpuCachingAllocator::retag(void* p, Tag tag) {
  if (!p) return;
  AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.live.find(p);
  if (it == m.live.end() || it->second.tag == tag) return;
  const int64_t size = int64_t(it->second.size);
  m.stats.allocated_by_tag[int(it->second.tag)] -= size;
  m.stats.allocated_by_tag[int(tag)] += size;
  it->second.tag = tag;
  if (this == g_cpu.load(std::memory_order_relaxed)) note_peaks(m.stats);
}

Stats CpuCachingAllocator::stats() const {
  const AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  return m.stats;
}

void CpuCachingAllocator::reset_peak() {
  AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  m.stats.peak_allocated_bytes = m.stats.allocated_bytes;
  m.stats.peak_reserved_bytes = m.stats.reserved_bytes;
}

void CpuCachingAllocator::empty_cache() {
  AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  m.free_cached();
}

void CpuCachingAllocator::set_limit(int64_t bytes) {
  TB_CHECK(bytes >= 0, "set_limit", "the memory limit must be >= 0 bytes (0 = no cap), got ", bytes);
  AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  m.limit = bytes;
}

int64_t CpuCachingAllocator::limit() const {
  const AllocatorState& m = state_of(*this);
  std::lock_guard<std::mutex> lock(m.mu);
  return m.limit;
}

// ---- oom.h and snapshot.h: the state issue 18 added (Note [Allocator state outside the header]) ----

void set_release_cache(CpuCachingAllocator& a, bool on) {
  AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  m.release_cache = on;
}

void set_fail_at(CpuCachingAllocator& a, int64_t k) {
  TB_CHECK(k >= 0, "set_fail_at", "k counts allocation requests from now (1 = the next one, 0 = off), got ", k);
  AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  m.fail_countdown = k;
}

int64_t fail_at(const CpuCachingAllocator& a) {
  const AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  return m.fail_countdown;
}

int64_t num_ooms(const CpuCachingAllocator& a) {
  const AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  return m.num_ooms;
}

void set_oom_snapshot_dir(CpuCachingAllocator& a, std::string dir) {
  AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  m.snapshot_dir = std::move(dir);
}

void record_history(CpuCachingAllocator& a, size_t max_entries) {
  TB_CHECK(max_entries <= size_t(kMaxHistory), "record_history", "at most ", kMaxHistory, " entries, got ",
           max_entries);
  AllocatorState& m = state_of(a);
  std::lock_guard<std::mutex> lock(m.mu);
  std::vector<Event> kept = m.events();
  if (kept.size() > max_entries) kept.erase(kept.begin(), kept.end() - ptrdiff_t(max_entries));
  m.recorded = int64_t(kept.size());
  m.ring = std::move(kept);
  m.ring_cap = max_entries;
  m.ring_next = 0;
}

Snapshot snapshot(const CpuCachingAllocator& a) {
  Snapshot s;
  {
    const AllocatorState& m = state_of(a);
    std::lock_guard<std::mutex> lock(m.mu);
    s.time_us = now_us();
    s.stats = m.stats;
    s.num_ooms = m.num_ooms;
    s.limit = m.limit;
    s.live.reserve(m.live.size());
    for (const auto& [p, b] : m.live)
      s.live.push_back(
          {reinterpret_cast<uintptr_t>(p), int64_t(b.size), int64_t(b.requested), b.tag, b.site, b.time_us});
    for (const auto& [size, blocks] : m.free)
      for (void* p : blocks) s.cached.push_back({reinterpret_cast<uintptr_t>(p), int64_t(size)});
    s.events = m.events();
    s.max_entries = m.ring_cap;
    s.dropped_events = m.recorded - int64_t(m.ring.size());
  }
  std::sort(s.live.begin(), s.live.end(),
            [](const auto& a, const auto& b) { return a.size != b.size ? a.size > b.size : a.address < b.address; });
  std::sort(s.cached.begin(), s.cached.end(),
            [](const auto& a, const auto& b) { return a.size != b.size ? a.size > b.size : a.address < b.address; });
  return s;
}

OomError::OomError(std::shared_ptr<const OomReport> report)
    : OutOfMemoryError(format_oom(*report), report->requested), report_(std::move(report)) {}

const OomReport* oom_report(const OutOfMemoryError& e) {
  const auto* o = dynamic_cast<const OomError*>(&e);
  return o ? &o->report() : nullptr;
}

CpuCachingAllocator& cpu_allocator() {
  static CpuCachingAllocator* a = [] {
    auto* made = new CpuCachingAllocator();  // leaked: outlives static tensors
    g_cpu_state.store(&state_of(*made), std::memory_order_relaxed);
    g_cpu.store(made, std::memory_order_release);  // after the state: state_of reads it without a lock
    return made;
  }();
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
