// copy_: the one strided copy with dtype cast (round to nearest even into bf16/f16), used by
// contiguous(), clone(), to() and the ops' out= paths.
#include <cstring>
#include <exception>

#include "engine/core/profiler.h"
#include "engine/tensor/iterator.h"

namespace tb {

namespace {
template <typename D, typename S>
inline D cast(S s) {
  if constexpr (std::is_same_v<D, bool>) return static_cast<core::opmath_t<S>>(s) != 0;
  else return static_cast<D>(static_cast<core::opmath_t<S>>(s));
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src_in) {
  TB_CHECK(src_in.defined() && defined(), "copy_", "undefined tensor");
  profiler::OpScope prof("copy_", {{&sizes(), dtype()}, {&src_in.sizes(), src_in.dtype()}});  // (self, src)
  Tensor src = src_in;
  if (src.numel() > 0 && src.shares_storage(*this) && !src.is_same(*this)) src = src.clone();  // overlap
  if (impl()->autograd_meta && autograd_hooks().check_inplace) autograd_hooks().check_inplace(*this);
  // After the write, autograd (if linked) records it. See Note [Autograd hooks].
  struct Notify {
    Tensor& dst;
    const Tensor& src;
    ~Notify() {
      if ((dst.impl()->autograd_meta || src.impl()->autograd_meta) && autograd_hooks().on_copy &&
          !std::uncaught_exceptions())
        autograd_hooks().on_copy(dst, src);
    }
  } notify{*this, src_in};
  if (src.sizes() != sizes()) {
    TB_CHECK(core::broadcast_shapes(src.sizes(), sizes(), "copy_") == sizes(), "copy_", "source of shape ",
             core::to_string(src.sizes()), " cannot be broadcast to destination of shape ", core::to_string(sizes()));
    src = src.expand(sizes());
  }
  bump_version();
  StridedLoop loop({*this, src});
  if (dtype() == src.dtype() && loop.is_contiguous()) {
    // Parallel memcpy: one core does not saturate memory bandwidth.
    loop.for_each([&](char** p, const int64_t*, int64_t n) { std::memcpy(p[0], p[1], size_t(n) * itemsize()); });
    return *this;
  }
  core::dispatch(dtype(), [&]<typename D>() {
    core::dispatch(src.dtype(), [&]<typename S>() {
      loop.for_each([](char** p, const int64_t* st, int64_t n) {
        char* d = p[0];
        const char* s = p[1];
        if (st[0] == int64_t(sizeof(D)) && st[1] == int64_t(sizeof(S))) {
          // Rows contiguous on both sides (a narrowed or padded matrix, a permute that keeps the
          // last dim): a plain loop the compiler vectorises, or memcpy for the same dtype. The
          // strided loop below runs several times slower on such rows.
          if constexpr (std::is_same_v<D, S>) {
            std::memcpy(d, s, size_t(n) * sizeof(D));
          } else {
            D* dd = reinterpret_cast<D*>(d);
            const S* ss = reinterpret_cast<const S*>(s);
            for (int64_t i = 0; i < n; ++i) dd[i] = cast<D>(ss[i]);
          }
          return;
        }
        for (int64_t i = 0; i < n; ++i, d += st[0], s += st[1])
          *reinterpret_cast<D*>(d) = cast<D>(*reinterpret_cast<const S*>(s));
      });
    });
  });
  return *this;
}

}  // namespace tb
