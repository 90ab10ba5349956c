#include "engine/autograd/autocast.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/autograd/grad_mode.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

namespace tb::autograd {

namespace {
thread_local bool enabled = false;
thread_local DType dtype = DType::BFloat16;

// A tensor's version as the caches compare it: the counter object and its value. A TensorImpl
// can be re-pointed at another tensor's counter (FSDP's NO_SHARD layer weights share their
// shard's), whose value may equal the old one's; the pair cannot.
struct Stamp {
  std::shared_ptr<VersionCounter> counter;
  uint64_t version = 0;
  static Stamp of(const Tensor& t) { return {t.impl()->version, t.version()}; }
  bool matches(const Tensor& t) const { return counter == t.impl()->version && version == t.version(); }
};

// Note [Autocast weight cache]: keyed by the weight's TensorImpl; the entry holds the weight
// itself (so the key cannot be reused by another tensor while cached) and its version at the cast.
struct CacheEntry {
  Tensor source, cast;
  Stamp stamp;
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

// Note [Autocast weight shadows]: process-wide (an optimizer may step on another thread than the
// forward's), keyed by the parameter's TensorImpl, held weakly.
struct Shadow {
  std::weak_ptr<TensorImpl> param;
  Tensor cast;  // bfloat16, the parameter's shape, contiguous; undefined until a step fills it
  Stamp stamp;
  bool valid = false;  // cast holds the parameter's rounding at `stamp`
  bool wanted = true;  // a forward cast the parameter since the last step wrote the shadow
};
std::mutex shadow_mu;
std::unordered_map<const TensorImpl*, Shadow> shadows;

// The entry of a live parameter (an entry whose parameter died, and whose address a new tensor
// may now have, is dropped), or nullptr. Under shadow_mu.
Shadow* live_shadow(const Tensor& param) {
  auto it = shadows.find(param.impl());
  if (it == shadows.end()) return nullptr;
  if (it->second.param.lock() != param.impl_ptr()) {
    shadows.erase(it);
    return nullptr;
  }
  return &it->second;
}

// The cast of t to bfloat16 from its shadow when one is valid at t's version: a new tensor on the
// shadow's storage, recorded as Tensor::to records it (the copy's backward node); else t.to(),
// registering t for a shadow.
Tensor cast_with_shadow(const Tensor& t) {
  {
    std::lock_guard<std::mutex> lock(shadow_mu);
    if (Shadow* s = live_shadow(t); s && s->valid && s->stamp.matches(t) && s->cast.sizes() == t.sizes()) {
      s->wanted = true;
      Tensor out = make_tensor(s->cast.storage(), t.sizes(), s->cast.strides(), 0, DType::BFloat16, "autocast_shadow");
      autograd_hooks().on_copy(out, t);
      return out;
    }
  }
  Tensor out = t.to(DType::BFloat16);
  if (t.is_contiguous()) {
    std::lock_guard<std::mutex> lock(shadow_mu);
    if (Shadow* s = live_shadow(t)) {
      s->wanted = true;
    } else {
      // A sweep of dead entries as the registry grows, so parameters made and dropped in a loop
      // do not pile up.
      if (shadows.size() >= 64 && (shadows.size() & (shadows.size() - 1)) == 0)
        std::erase_if(shadows, [](const auto& kv) { return kv.second.param.expired(); });
      shadows[t.impl()] = Shadow{t.impl_ptr(), Tensor(), {}, false};
    }
  }
  return out;
}

// LibTorch casts only eligible tensors: floating and not float64 (double math stays double).
Tensor cast_floating(const Tensor& t, DType to) {
  if (!enabled || !t.defined() || !core::is_floating(t.dtype()) || t.dtype() == DType::Float64 || t.dtype() == to)
    return t;
  if (!cacheable(t, to)) return t.to(to);
  auto it = cache.find(t.impl());
  if (it != cache.end() && it->second.stamp.matches(t) && it->second.cast.dtype() == to) return it->second.cast;
  Tensor out = to == DType::BFloat16 ? cast_with_shadow(t) : t.to(to);
  cache[t.impl()] = {t, out, Stamp::of(t)};
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

Tensor autocast_shadow_buffer(const Tensor& param) {
  if (!param.defined() || param.dtype() != DType::Float32 || !param.is_contiguous()) return Tensor();
  std::lock_guard<std::mutex> lock(shadow_mu);
  Shadow* s = live_shadow(param);
  if (!s) return Tensor();
  s->valid = false;
  if (!s->wanted) {  // no forward took the last shadow (float32 training now, or evaluation): stop
    s->cast = Tensor();
    return Tensor();
  }
  s->wanted = false;
  // Refilled in place only while the registry alone holds the buffer: a cast handed out earlier
  // (saved by a graph someone kept) must keep its values.
  const bool reuse = s->cast.defined() && s->cast.sizes() == param.sizes() && s->cast.impl_ptr().use_count() == 1 &&
                     s->cast.storage().use_count() == 1;
  if (!reuse) {
    memory::TagGuard tag(memory::Tag::Parameter);
    memory::OpScope site("autocast_shadow");  // names it in OOM reports and memory snapshots
    s->cast = empty(param.sizes(), DType::BFloat16);
  }
  return s->cast;
}

void autocast_shadow_written(const Tensor& param) {
  std::lock_guard<std::mutex> lock(shadow_mu);
  if (Shadow* s = live_shadow(param); s && s->cast.defined()) {
    s->stamp = Stamp::of(param);
    s->valid = true;
  }
}

void autocast_shadows_clear() {
  std::lock_guard<std::mutex> lock(shadow_mu);
  shadows.clear();
}

Tensor autocast_valid_shadow(const Tensor& param) {
  std::lock_guard<std::mutex> lock(shadow_mu);
  Shadow* s = live_shadow(param);
  return s && s->valid && s->stamp.matches(param) ? s->cast : Tensor();
}

size_t autocast_shadow_count() {
  std::lock_guard<std::mutex> lock(shadow_mu);
  return shadows.size();
}

}  // namespace tb::autograd
