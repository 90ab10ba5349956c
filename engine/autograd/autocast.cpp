#include "engine/autograd/autocast.h"

#include <unordered_map>

#include "engine/autograd/grad_mode.h"

namespace tb::autograd {

namespace {
thread_local bool enabled = false;
thread_local DType dtype = DType::BFloat16;

// Note [Autocast weight cache]: keyed by the weight's TensorImpl; the entry holds the weight
// itself (so the key cannot be reused by another tensor while cached) and its version at the cast.
struct CacheEntry {
  Tensor source, cast;
  uint64_t version;
};
thread_local std::unordered_map<const TensorImpl*, CacheEntry> cache;
thread_local int cache_users = 0;  // live AutocastGuards and AutocastCacheScopes

void release_cache_user() {
  if (--cache_users == 0) cache.clear();
}

// As LibTorch's can_try_cache: float32 leaves that require grad, cast to the lower precision.
bool cacheable(const Tensor& t, DType to) {
  return to == dtype && t.dtype() == DType::Float32 && grad_mode_enabled() && t.requires_grad() && t.is_leaf();
}

// LibTorch casts only eligible tensors: floating and not float64 (double math stays double).
Tensor cast_floating(const Tensor& t, DType to) {
  if (!enabled || !t.defined() || !core::is_floating(t.dtype()) || t.dtype() == DType::Float64 || t.dtype() == to)
    return t;
  if (!cacheable(t, to)) return t.to(to);
  auto it = cache.find(t.impl());
  if (it != cache.end() && it->second.version == t.version() && it->second.cast.dtype() == to) return it->second.cast;
  Tensor out = t.to(to);
  cache[t.impl()] = {t, out, t.version()};
  return out;
}
}  // namespace

bool autocast_enabled() { return enabled; }
DType autocast_dtype() { return dtype; }

AutocastGuard::AutocastGuard(bool on, DType d) : prev_enabled_(enabled), prev_dtype_(dtype) {
  TB_CHECK(d == DType::BFloat16 || d == DType::Float16, "autocast", "CPU autocast supports bfloat16 and float16, not ",
           core::name(d));
  enabled = on;
  dtype = d;
  ++cache_users;
}

AutocastGuard::~AutocastGuard() {
  enabled = prev_enabled_;
  dtype = prev_dtype_;
  release_cache_user();
}

AutocastCacheScope::AutocastCacheScope() { ++cache_users; }
AutocastCacheScope::~AutocastCacheScope() { release_cache_user(); }

size_t autocast_cache_size() { return cache.size(); }

Tensor autocast_lower(const Tensor& t) { return cast_floating(t, dtype); }
Tensor autocast_fp32(const Tensor& t) { return cast_floating(t, DType::Float32); }

}  // namespace tb::autograd
