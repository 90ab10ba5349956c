// Shared plumbing of the elementwise family (private to engine/ops/elementwise.cpp and
// engine/ops/cpu/elementwise_*.cpp): where a result goes (fresh tensor, out=, in place), the
// broadcast-convert-loop drivers, scalar conversion and wrap-around integer arithmetic.
// Not a public header: ops include engine/ops/elementwise.h.
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/ops/cpu/loops.h"
#include "engine/ops/cpu/vec_math.h"
#include "engine/ops/elementwise.h"

namespace tb::ops::ew {

using core::opmath_t;

// Note [Result layouts]
// An elementwise result is laid out as PyTorch lays it out, since later .view and .stride calls
// (and layout-sensitive ops such as pad: Note [Channels-last by strides]) see it. TensorIterator
// first tries its fast setup, which applies only when every operand had the result's shape
// before broadcasting -- a Scalar argument PyTorch wraps into a 0-dim tensor (add(t, 2), t > 0,
// where(c, t, 0.0)) is an operand of another shape, so those ops never take it:
//   - every operand contiguous (size-1 dims may have any stride): contiguous;
//   - every operand channels-last contiguous (4-D): canonical channels-last strides;
//   - every operand dense, all with equal strides: those strides.
// Otherwise the result is dense with its dims in the order of the operands' strides
// (reorder_dimensions: empty_in_stride_order). So neg(t) of a t with odd size-1 strides gets
// clean strides while t * 0.5 keeps t's. pow(Scalar, t) allocates a contiguous result itself.
enum class Setup : uint8_t {
  Fast,        // same-shaped tensor operands only (scalars the kernel takes as arguments: clamp)
  Reorder,     // an operand broadcast, or a Scalar that PyTorch wraps into a 0-dim operand
  Contiguous,  // PyTorch allocates a contiguous result itself (pow(Scalar, Tensor))
};

// A fresh result of `shape` laid out as Note [Result layouts] says. `inputs`: the tensor operands
// as PyTorch's iterator sees them (before a conversion it does itself), broadcast to `shape`.
Tensor empty_like_inputs(const Shape& shape, DType dtype, std::initializer_list<Tensor> inputs, Setup setup);
// Same-shaped operands viewed with their dims reordered so that operand 0's run outermost-first
// in its storage order (plain aliases, no autograd views): a StridedLoop over them walks operand
// 0 -- a result laid out like a permuted input -- in memory order, and coalesces its dims.
std::vector<Tensor> in_storage_order(std::initializer_list<Tensor> operands);

// Where an op writes a result of (shape, rdt). Without out: a fresh tensor laid out by
// empty_like_inputs (inputs and setup as there). With out (out= or in place, where *out is
// self): out itself when its dtype is rdt and it does not partially overlap an input, else a temporary that result() casts into out. In place, the broadcast shape
// must be self's shape, as in PyTorch.
class Dest {
 public:
  Dest(Tensor* out, bool inplace, const Shape& shape, DType rdt, const char* op, std::initializer_list<Tensor> inputs,
       Setup setup);
  const Tensor& target() const { return target_; }
  Tensor result();

 private:
  Tensor* out_ = nullptr;
  Tensor target_;
  bool copy_back_ = false;
};

// The scalar as the compute type M (float for bf16/f16 tensors), not rounded to the tensor's
// dtype first: as LibTorch's mul and div (and their rounding modes) read a number operand.
template <typename M>
M scalar_to(const Scalar& s) {
  if constexpr (std::is_same_v<M, bool>) {
    return s.is_float() ? s.d != 0 : s.i != 0;
  } else if constexpr (std::is_floating_point_v<M>) {
    return static_cast<M>(s.d);
  } else {
    if (!s.is_float()) return static_cast<M>(s.i);
    // A float scalar never meets integer compute after promotion; saturate rather than UB.
    if (std::isnan(s.d)) return M(0);
    if (s.d <= double(std::numeric_limits<M>::min())) return std::numeric_limits<M>::min();
    if (s.d >= double(std::numeric_limits<M>::max())) return std::numeric_limits<M>::max();
    return static_cast<M>(s.d);
  }
}

// The scalar rounded to the tensor's dtype T, then as M: LibTorch's add, sub, remainder (and
// fmod) take a number operand as a tensor of the result dtype, so a bfloat16 tensor's 0.7 is
// 0.69921875 there (remainder(bf16(0.7), 0.7) is 0, not 0.699). The same as scalar_to for
// float32, float64 and the integers, whose T is M.
template <typename T, typename M>
M scalar_as(const Scalar& s) {
  return M(T(scalar_to<M>(s)));
}

template <typename T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integer add/sub/mul/neg wrap around (two's complement) like PyTorch's, without signed overflow UB.
template <typename M>
inline M wadd(M x, M y) {
  if constexpr (std::is_same_v<M, bool>) return x || y;
  else if constexpr (is_int_v<M>) return M(std::make_unsigned_t<M>(x) + std::make_unsigned_t<M>(y));
  else return x + y;
}
template <typename M>
inline M wsub(M x, M y) {
  if constexpr (is_int_v<M>) return M(std::make_unsigned_t<M>(x) - std::make_unsigned_t<M>(y));
  else return x - y;
}
template <typename M>
inline M wmul(M x, M y) {
  if constexpr (std::is_same_v<M, bool>) return x && y;
  else if constexpr (is_int_v<M>) return M(std::make_unsigned_t<M>(x) * std::make_unsigned_t<M>(y));
  else return x * y;
}
template <typename M>
inline M wneg(M x) {
  if constexpr (is_int_v<M>) return M(std::make_unsigned_t<M>(0) - std::make_unsigned_t<M>(x));
  else return -x;
}

// NaN-propagating max/min (the first NaN met wins), as torch.maximum/minimum.
template <typename M>
inline M max_nan(M x, M y) {
  return (x != x || x > y) ? x : y;
}
template <typename M>
inline M min_nan(M x, M y) {
  return (x != x || x < y) ? x : y;
}

// One tensor input: converts x to `cdt`, writes kernel(loop) into a result of `rdt` (loop
// operands: result, x). x is (any shape), any strides; `setup`: Fast, or Reorder where PyTorch
// wraps the op's Scalar into an operand (Note [Result layouts]).
template <typename K>
Tensor unary(const char* op, const Tensor& x, DType cdt, DType rdt, Tensor* out, bool inplace, Setup setup,
             K&& kernel) {
  TB_CHECK(x.defined(), op, "undefined input tensor");
  Tensor xc = x.to(cdt);
  Dest d(out, inplace, x.sizes(), rdt, op, {x}, setup);
  StridedLoop loop(in_storage_order({d.target(), xc}));
  kernel(loop);
  return d.result();
}

// Two inputs broadcast together and converted to `cdt` (loop operands: result, a, b).
template <typename K>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, DType cdt, DType rdt, Tensor* out, bool inplace,
              K&& kernel) {
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const Shape shape = core::broadcast_shapes(a.sizes(), b.sizes(), op);
  Tensor ac = a.to(cdt).expand(shape), bc = b.to(cdt).expand(shape);
  // The layout is PyTorch's for the operands as given, before any conversion to cdt.
  Dest d(out, inplace, shape, rdt, op,
         {a.dtype() == cdt ? ac : a.expand(shape), b.dtype() == cdt ? bc : b.expand(shape)},
         a.sizes() == b.sizes() ? Setup::Fast : Setup::Reorder);
  StridedLoop loop(in_storage_order({d.target(), ac, bc}));
  kernel(loop);
  return d.result();
}

// Integer division helpers; `zero` records a zero divisor so the caller can raise afterwards
// (LibTorch raises ZeroDivisionError; the kernel itself must not trap).
template <typename M>
inline M int_div_trunc(M x, M y, std::atomic<bool>& zero) {
  if (y == 0) {
    zero.store(true, std::memory_order_relaxed);
    return 0;
  }
  if (y == -1) return wneg(x);  // INT_MIN / -1 would trap
  return x / y;
}
template <typename M>
inline M int_div_floor(M x, M y, std::atomic<bool>& zero) {
  if (y == 0) {
    zero.store(true, std::memory_order_relaxed);
    return 0;
  }
  if (y == -1) return wneg(x);
  M q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) --q;
  return q;
}
template <typename M>
inline M int_remainder(M x, M y, std::atomic<bool>& zero) {
  if (y == 0) {
    zero.store(true, std::memory_order_relaxed);
    return 0;
  }
  if (y == -1) return 0;
  M r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
// Python's float %: fmod, moved to the divisor's sign.
template <typename M>
inline M float_remainder(M x, M y) {
  M r = std::fmod(x, y);
  if (r != 0 && ((y < 0) != (r < 0))) r += y;
  return r;
}
// Python's float //, as LibTorch computes it (div_floor_floating), given mod = fmod(x, y).
template <typename M>
inline M float_div_floor_mod(M x, M y, M mod) {
  if (y == 0) return x / y;
  M div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1;
  if (div == 0) return std::copysign(M(0), x / y);
  M fl = std::floor(div);
  if (div - fl > M(0.5)) fl += 1;
  return fl;
}
template <typename M>
inline M float_div_floor(M x, M y) {
  return float_div_floor_mod(x, y, std::fmod(x, y));
}
// Integer power by squaring, wrapping on overflow; negative exponents give 0, or +-1 for a base
// of +-1, as LibTorch's powi.
template <typename M>
inline M int_pow(M base, M e) {
  if constexpr (std::is_same_v<M, bool>) {
    return base || !e;
  } else {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? M(-1) : M(1);
      return 0;
    }
    M r = 1;
    while (e) {
      if (e & 1) r = wmul(r, base);
      base = wmul(base, base);
      e >>= 1;
    }
    return r;
  }
}

// Transcendental helpers of the activations, in the compute type M (float or double). The float
// versions are branch-free and always inlined so the contiguous loops vectorise (libm's erff/expf
// calls do not, and an out-of-line call stops the vectoriser too).

// e^z for z <= 0 (or NaN), the Gaussian factor of the erf family: cpu::exp_fast without its
// overflow and NaN selects (NaN propagates through the arithmetic; below -87 the result is 0, so
// that x e^{-x^2/2} is 0, not a subnormal, for large |x|), and 2^n read from the rounding
// constant's bits rather than by a float->int conversion. Fewer live registers in the
// vector loop: gelu's loop spilled with exp_fast inside.
[[gnu::always_inline]] inline float exp_nonpositive(float z) {
  // Rounds z log2 e to n: the constant's low mantissa bits then hold n + 127 (n in [-126, 0] for
  // z >= -87; below, the final select discards the result), which a shift by 23 moves straight
  // into the exponent field of 2^n.
  constexpr float kShift = 12582912.0f + 127.0f;  // 1.5 * 2^23 + the exponent bias
  const float shifted = z * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  // One-step reduction with ln 2 rounded to float: r is off by |n| 2e-9, a relative error of
  // e^z below |z| 3e-9, and the callers multiply e^z by a factor that is small where |z| is big.
  const float r = z - n * 0.693147180559945309f;
  // e^r = 1 + r + r^2 q(r), q of degree 3 fitted for least relative error on |r| <= ln2 / 2
  // (1.1e-7, below A&S's erf error; Cephes' degree-5 q is more than the erf can use).
  float p = 0.008312525227665901f;
  p = p * r + 0.041890114545822144f;
  p = p * r + 0.16667114198207855f;
  p = p * r + 0.499992311000824f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float res = p * std::bit_cast<float>(std::bit_cast<uint32_t>(shifted) << 23);
  return z < -87.0f ? 0.0f : res;
}

// The standard normal's Phi(x) and e^{-x^2/2} (phi(x) * sqrt(2 pi)), for gelu and its gradient.
// Phi(-|x|) = erfc(|x| / sqrt 2) / 2 by Abramowitz & Stegun 7.1.26 (|erf error| <= 1.5e-7), the
// formula LibTorch's Vectorized<float>::erf uses, with the 1/sqrt 2 and the 1/2 folded into its
// constants. Phi(x) = Phi(-|x|) for x < 0, else 1 - Phi(-|x|): one blend, no copysign, and no
// 1 + erf cancellation for negative x. NaN stays NaN; Phi(+inf) = 1, Phi(-inf) = 0.
struct NormalCdf {
  float cdf;
  float gauss;  // e^{-x^2/2}
};
[[gnu::always_inline]] inline NormalCdf normal_cdf(float x) {
  const float t = 1.0f / (float(0.3275911 * 0.70710678118654752440) * std::fabs(x) + 1.0f);
  float r = float(0.5 * 1.061405429);
  r = r * t + float(0.5 * -1.453152027);
  r = r * t + float(0.5 * 1.421413741);
  r = r * t + float(0.5 * -0.284496736);
  r = r * t + float(0.5 * 0.254829592);
  const float gauss = exp_nonpositive(-0.5f * x * x);
  const float tail = r * t * gauss;  // Phi(-|x|)
  return {x < 0.0f ? tail : 1.0f - tail, gauss};
}

// tanh for float, branch-free so loops vectorise (libm's tanhf does not): Cephes' odd polynomial
// below |x| = 0.625, else 1 - 2 / (e^{2|x|} + 1) with the sign put back; a few ulp. NaN stays NaN.
[[gnu::always_inline]] inline float tanh_fast(float v) {
  const float a = std::fabs(v);
  const float z = v * v;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * v + v;
  const float e = cpu::exp_fast(2.0f * a);
  const float large = std::copysign(1.0f - 2.0f / (e + 1.0f), v);
  return a < 0.625f ? small : large;
}
template <typename M>
inline M tanh_fast(M v) {
  return std::tanh(v);
}
// Note [gelu table]
// A bfloat16 or float16 tensor holds one of only 65536 values, so gelu (erf form) of one with at
// least kGeluTableMinNumel elements reads each result from a table of all 65536 (128 KiB of
// uint16, built once from the float path below, so bit for bit the same results): two loads and a
// store per element instead of the erf's ~25 vector operations. Below the threshold the float path
// runs: a cold table costs up to 2048 cache-line fills, small beside 64K elements' compute, not
// beside a few hundred. Only the forward: gelu_backward has two inputs.
inline constexpr int64_t kGeluTableMinNumel = 65536;

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
template <typename M>
[[gnu::always_inline]] inline M gelu_erf(M v) {
  if constexpr (std::is_same_v<M, float>) return v * normal_cdf(v).cdf;
  else return M(0.5) * v * (M(1) + std::erf(v * M(0.70710678118654752440)));
}
// The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <typename M>
[[gnu::always_inline]] inline M gelu_tanh(M v) {
  const M inner = M(0.79788456080286535588) * (v + M(0.044715) * v * v * v);
  return M(0.5) * v * (M(1) + tanh_fast(inner));
}

}  // namespace tb::ops::ew
