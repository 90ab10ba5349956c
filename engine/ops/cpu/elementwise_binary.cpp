// Elementwise family, part 2: binary arithmetic with broadcasting and PyTorch's type promotion:
// add/sub (with alpha), mul, div (true, "trunc", "floor"), remainder (Python's sign rule), pow,
// maximum/minimum. Tensor-scalar forms run as unary loops with the scalar held in the compute
// type (float for bf16/f16), which is both what LibTorch does and faster than a broadcast tensor;
// add, sub and remainder round it to the tensor's dtype first, as LibTorch's do (ew::scalar_as).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "engine/ops/cpu/elementwise_detail.h"
#include "engine/ops/cpu/vec_math_sleef.h"
#include "engine/ops/elementwise.h"

namespace tb::ops {

namespace {

using core::opmath_t;
using ew::wadd;
using ew::wmul;
using ew::wneg;
using ew::wsub;

bool is_one(const Scalar& s) { return s.is_float() ? s.d == 1 : s.i == 1; }

void check_alpha(DType rt, const Scalar& alpha, const char* op) {
  TB_CHECK(!(alpha.is_float() && !core::is_floating(rt)), op,
           "for integral input tensors, argument alpha must not be a floating point number");
  TB_CHECK(!(alpha.is_bool() && rt != DType::Bool), op, "boolean alpha only supported for boolean results");
}

constexpr const char* kSubBool =
    "subtraction, the `-` operator, with a bool tensor is not supported; use the `^` or `logical_xor()` operator "
    "instead";

// ---- add / sub ----
// a, b: broadcastable, any strides. out = a + alpha * b (negate: a - alpha * b).
Tensor add_tt(const char* op, const Tensor& a, const Tensor& b, const Scalar& alpha, bool negate, Tensor* out,
              bool inplace) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  if (negate) TB_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool, op, kSubBool);
  const DType rt = result_type(a, b);
  check_alpha(rt, alpha, op);
  return ew::binary(op, a, b, rt, rt, out, inplace, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      M al = ew::scalar_to<M>(alpha);
      if constexpr (!std::is_same_v<M, bool>) {
        if (negate) al = wneg(al);
      }
      if (is_one(alpha) && !negate) cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return wadd(x, y); });
      else if (is_one(alpha)) cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return wsub(x, y); });
      else cpu::cpu_kernel<T, T, T>(loop, [al](M x, M y) -> M { return wadd(x, wmul(al, y)); });
    });
  });
}

Tensor add_ts(const char* op, const Tensor& a, const Scalar& b, const Scalar& alpha, bool negate, Tensor* out,
              bool inplace) {
  const BareKernel bare(op, {&a, out});
  TB_CHECK(a.defined(), op, "undefined input tensor");
  if (negate) TB_CHECK(a.dtype() != DType::Bool && !b.is_bool(), op, kSubBool);
  const DType rt = result_type(a, b);
  check_alpha(rt, alpha, op);
  return ew::unary(op, a, rt, rt, out, inplace, ew::Setup::Reorder, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      // LibTorch's: b rounded to T, times alpha, rounded to T again (ew::scalar_as).
      const M c = M(T(wmul(ew::scalar_to<M>(alpha), ew::scalar_as<T, M>(b))));
      if constexpr (std::is_same_v<M, bool>) cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return x || c; });
      else if (negate) cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return wsub(x, c); });
      else cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return wadd(x, c); });
    });
  });
}

// ---- mul ----
Tensor mul_tt(const char* op, const Tensor& a, const Tensor& b, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  return ew::binary(op, a, b, rt, rt, out, inplace, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return wmul(x, y); });
    });
  });
}

Tensor mul_ts(const char* op, const Tensor& a, const Scalar& b, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, out});
  TB_CHECK(a.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  return ew::unary(op, a, rt, rt, out, inplace, ew::Setup::Reorder, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      const M c = ew::scalar_to<M>(b);
      cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return wmul(x, c); });
    });
  });
}

// x = fmod(x, y), exact, a run of m <= kVecChunk at a time: the vector fmod (float32 on AVX-512:
// Note [fmod of float on AVX-512]; else SLEEF's, Note [Vector math from SLEEF]). SLEEF's fmod
// (3.5.1 here, and the SLEEF inside LibTorch) returns NaN for a subnormal divisor
// (torch.remainder(7.5, 3e-39) is nan, where the answer is 7.6e-40) and wherever the quotient
// overflows (fmod(2^64, 2^-64) in float, 2^1024 and past in double); those lanes take libm's
// fmod, exact too. (|y| max / 4 is inf for |y| >= 4, where no quotient can overflow.)
template <typename M>
void exact_fmod_run(M* x, const M* y, int64_t m) {
  constexpr M kMin = std::numeric_limits<M>::min(), kQuarterMax = std::numeric_limits<M>::max() / 4;
  auto by_libm = [](M a, M b) {
    return (int(std::fabs(b) < kMin) & int(b != 0)) | int(std::fabs(a) > std::fabs(b) * kQuarterMax);
  };
  int any = 0;  // `&`, `|`, `|=` on ints: no branch, so the scan vectorises
  for (int64_t i = 0; i < m; ++i) any |= by_libm(x[i], y[i]);
  alignas(64) M orig[cpu::kVecChunk];
  if (any) std::copy(x, x + m, orig);
  cpu::vec_math_run2<cpu::VecFn2::Fmod>(x, y, m);
  if (any)
    for (int64_t i = 0; i < m; ++i)
      if (by_libm(orig[i], y[i])) x[i] = std::fmod(orig[i], y[i]);
}

// Python's float %: the fmod moved to the divisor's sign, as ew::float_remainder and LibTorch's
// vector kernel.
template <typename M>
void float_remainder_run(M* x, const M* y, int64_t m) {
  exact_fmod_run(x, y, m);
  for (int64_t i = 0; i < m; ++i)
    if (x[i] != 0 && ((y[i] < 0) != (x[i] < 0))) x[i] += y[i];
}

// Python's float //, as ew::float_div_floor, with the fmod computed a run at a time.
template <typename M>
void float_div_floor_run(M* x, const M* y, int64_t m) {
  alignas(64) M mod[cpu::kVecChunk];
  std::copy(x, x + m, mod);
  exact_fmod_run(mod, y, m);
  for (int64_t i = 0; i < m; ++i) x[i] = ew::float_div_floor_mod(x[i], y[i], mod[i]);
}

// ---- div ----
enum class Round { None, Trunc, Floor };

Round parse_round(const std::optional<std::string>& mode, const char* op) {
  if (!mode) return Round::None;
  if (*mode == "trunc") return Round::Trunc;
  if (*mode == "floor") return Round::Floor;
  throw Error(op, "expected rounding_mode to be one of None, 'trunc', or 'floor' but found '" + *mode + "'");
}

// True division computes in floating point (integers -> float32); rounded division keeps the
// common dtype and refuses bool.
DType div_compute_dtype(DType common, Round r, const char* op) {
  if (r == Round::None) return to_float_dtype(common);
  TB_CHECK(common != DType::Bool, op, "rounded division is not implemented for dtype bool");
  return common;
}

constexpr const char* kZeroDiv = "ZeroDivisionError: integer division by zero";

// f(x, y, zero) with M the compute type; zero is set on an integer zero divisor. round_q: for
// bf16/f16 tensor divisors the quotient is rounded to T before truncation, as LibTorch's
// Vectorized<BFloat16> division does (2.999 -> 3 in bf16 truncates to 3); with a scalar divisor
// LibTorch divides in float and truncates directly.
template <typename T, typename M>
auto div_fn(Round r, bool round_q) {
  return [r, round_q](M x, M y, std::atomic<bool>& zero) -> M {
    if constexpr (std::is_floating_point_v<M>) {
      if (r == Round::Trunc) return std::trunc(round_q ? M(T(x / y)) : x / y);
      if (r == Round::Floor) return ew::float_div_floor(x, y);
      return x / y;
    } else {
      return r == Round::Floor ? ew::int_div_floor(x, y, zero) : ew::int_div_trunc(x, y, zero);
    }
  };
}

// a / c with a scalar divisor c, computing in cdt (the result dtype).
Tensor div_scalar(const char* op, const Tensor& a, const Scalar& c_in, DType cdt, Round r, Tensor* out, bool inplace) {
  TB_CHECK(core::is_floating(cdt) || ew::scalar_to<int64_t>(c_in) != 0, op, kZeroDiv);
  return ew::unary(op, a, cdt, cdt, out, inplace, ew::Setup::Reorder, [&](const StridedLoop& loop) {
    core::dispatch(cdt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (!std::is_same_v<T, bool>) {
        const M c = ew::scalar_to<M>(c_in);
        if (r == Round::None) {
          if constexpr (std::is_floating_point_v<M>) cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return x / c; });
        } else if constexpr (std::is_floating_point_v<M>) {
          if (r == Round::Floor) {  // the fmod a run at a time (float_div_floor_run)
            cpu::vec_scalar_kernel<T>(loop, c, [](M* x, const M* y, int64_t m) { float_div_floor_run(x, y, m); });
          } else {
            auto f = div_fn<T, M>(r, false);
            std::atomic<bool> zero{false};
            cpu::cpu_kernel<T, T>(loop, [&f, &zero, c](M x) -> M { return f(x, c, zero); });
          }
        } else {
          auto f = div_fn<T, M>(r, false);
          std::atomic<bool> zero{false};  // c != 0 was checked above
          cpu::cpu_kernel<T, T>(loop, [&f, &zero, c](M x) -> M { return f(x, c, zero); });
        }
      }
    });
  });
}

Tensor div_tt(const char* op, const Tensor& a, const Tensor& b, const std::optional<std::string>& mode, Tensor* out,
              bool inplace) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const Round r = parse_round(mode, op);
  const DType cdt = div_compute_dtype(result_type(a, b), r, op);
  // A one-element divisor of a bf16/f16 division is read as a float scalar, as LibTorch does.
  if (core::is_reduced_float(cdt) && b.numel() == 1 && core::broadcast_shapes(a.sizes(), b.sizes(), op) == a.sizes())
    return div_scalar(op, a, Scalar(b.item_double()), cdt, r, out, inplace);
  std::atomic<bool> zero{false};
  Tensor res = ew::binary(op, a, b, cdt, cdt, out, inplace, [&](const StridedLoop& loop) {
    core::dispatch(cdt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (!std::is_same_v<T, bool>) {
        if (r == Round::None) {
          if constexpr (std::is_floating_point_v<M>)
            cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return x / y; });
        } else if (std::is_floating_point_v<M> && r == Round::Floor) {
          if constexpr (std::is_floating_point_v<M>)  // the fmod a run at a time
            cpu::vec_buffer_kernel2<T>(loop, [](M* x, const M* y, int64_t m) { float_div_floor_run(x, y, m); });
        } else {
          auto f = div_fn<T, M>(r, true);
          cpu::cpu_kernel<T, T, T>(loop, [&f, &zero](M x, M y) -> M { return f(x, y, zero); });
        }
      }
    });
  });
  TB_CHECK(!zero.load(), op, kZeroDiv);
  return res;
}

Tensor div_ts(const char* op, const Tensor& a, const Scalar& b, const std::optional<std::string>& mode, Tensor* out,
              bool inplace) {
  const BareKernel bare(op, {&a, out});
  TB_CHECK(a.defined(), op, "undefined input tensor");
  const Round r = parse_round(mode, op);
  return div_scalar(op, a, b, div_compute_dtype(result_type(a, b), r, op), r, out, inplace);
}

// ---- remainder ----
Tensor remainder_tt(const char* op, const Tensor& a, const Tensor& b, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  TB_CHECK(rt != DType::Bool, op, "not implemented for dtype bool");
  std::atomic<bool> zero{false};
  Tensor res = ew::binary(op, a, b, rt, rt, out, inplace, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (std::is_floating_point_v<M>)
        cpu::vec_buffer_kernel2<T>(loop, [](M* x, const M* y, int64_t m) { float_remainder_run(x, y, m); });
      else if constexpr (ew::is_int_v<M>)
        cpu::cpu_kernel<T, T, T>(loop, [&zero](M x, M y) -> M { return ew::int_remainder(x, y, zero); });
    });
  });
  TB_CHECK(!zero.load(), op, kZeroDiv);
  return res;
}

Tensor remainder_ts(const char* op, const Tensor& a, const Scalar& b, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, out});
  TB_CHECK(a.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  TB_CHECK(rt != DType::Bool, op, "not implemented for dtype bool");
  TB_CHECK(core::is_floating(rt) || ew::scalar_to<int64_t>(b) != 0, op, kZeroDiv);
  return ew::unary(op, a, rt, rt, out, inplace, ew::Setup::Reorder, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      const M c = ew::scalar_as<T, M>(b);
      std::atomic<bool> zero{false};
      if constexpr (std::is_floating_point_v<M>)
        cpu::vec_scalar_kernel<T>(loop, c, [](M* x, const M* y, int64_t m) { float_remainder_run(x, y, m); });
      else if constexpr (ew::is_int_v<M>)
        cpu::cpu_kernel<T, T>(loop, [c, &zero](M x) -> M { return ew::int_remainder(x, c, zero); });
    });
  });
}

// ---- pow ----
constexpr const char* kPowBool = "not implemented for dtype bool";

Tensor pow_tt(const char* op, const Tensor& a, const Tensor& b, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  TB_CHECK(rt != DType::Bool, op, kPowBool);
  return ew::binary(op, a, b, rt, rt, out, inplace, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (std::is_floating_point_v<M>)  // Note [Vector math from SLEEF]
        cpu::vec_buffer_kernel2<T>(
            loop, [](M* x, const M* y, int64_t m) { cpu::vec_math_run2<cpu::VecFn2::Pow>(x, y, m); },
            [](M* out, const M* x, const M* y, int64_t n) {
              return cpu::vec_math_map2<cpu::VecFn2::Pow>(out, x, y, n);
            });
      else if constexpr (ew::is_int_v<M>)
        cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return ew::int_pow(x, y); });
    });
  });
}

Tensor pow_ts(const char* op, const Tensor& a, const Scalar& e, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&a, out});
  TB_CHECK(a.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, e);
  TB_CHECK(rt != DType::Bool, op, kPowBool);
  TB_CHECK(core::is_floating(rt) || e.is_float() || e.i >= 0, op,
           "integers to negative integer powers are not allowed");
  return ew::unary(op, a, rt, rt, out, inplace, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      const M c = ew::scalar_to<M>(e);
      if constexpr (std::is_floating_point_v<M>) {
        // The exponents LibTorch rewrites as multiplications / roots (same rounding).
        if (c == M(2)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return x * x; });
        else if (c == M(3)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return x * x * x; });
        else if (c == M(0.5)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return std::sqrt(x); });
        else if (c == M(-0.5)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return M(1) / std::sqrt(x); });
        else if (c == M(-1)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return M(1) / x; });
        else if (c == M(-2)) cpu::cpu_kernel<T, T>(loop, [](M x) -> M { return M(1) / (x * x); });
        else
          cpu::vec_scalar_kernel<T>(
              loop, c, [](M* x, const M* y, int64_t m) { cpu::vec_math_run2<cpu::VecFn2::Pow>(x, y, m); },
              [c](M* out, const M* x, int64_t n) { return cpu::vec_math_map2_scalar<cpu::VecFn2::Pow>(out, x, c, n); });
      } else if constexpr (ew::is_int_v<M>) {
        cpu::cpu_kernel<T, T>(loop, [c](M x) -> M { return ew::int_pow(x, c); });
      }
    });
  });
}

// ---- maximum / minimum ----

// Note [maximum and minimum runs]
// Through cpu_kernel's contiguous loop, GCC 12 compiled max_nan's select with a 64-byte store of
// b's register to the stack and a reload of the output pointer in every vector iteration, which
// left maximum/minimum of (4096, 1024) float32 at 0.75-0.8x LibTorch's time where sub, with the
// same setup and allocation, ran at 1.05x. A contiguous float or double run now goes through
// minmax_run, a plain loop, which compiles to two loads, two compares, a
// mask or, a blend and the store; strided runs and the other dtypes keep cpu_kernel. The select
// is max_nan/min_nan's, so values (the first NaN met wins) are unchanged.
// No __restrict__: maximum_out may write over an input (GCC checks the overlap and vectorises).
template <bool IsMax, typename T>
[[gnu::noinline]] void minmax_run(T* o, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = IsMax ? ew::max_nan(a[i], b[i]) : ew::min_nan(a[i], b[i]);
}

template <bool IsMax, typename T>
void minmax_kernel(const StridedLoop& loop) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    constexpr int64_t sz = int64_t(sizeof(T));
    loop.for_each([numel = loop.numel()](char** data, const int64_t* st, int64_t n) {
      if (st[0] == sz && st[1] == sz && st[2] == sz) {
        T* o = reinterpret_cast<T*>(data[0]);
        const T *a = reinterpret_cast<const T*>(data[1]), *b = reinterpret_cast<const T*>(data[2]);
        if constexpr (std::is_same_v<T, float>) {
          if (cpu::kHaveStreamingStore && cpu::stream_float_result(n * sz, numel * 3 * sz)) {
            // As cpu_kernel's float results (Note [Streaming float stores]).
            cpu::stream_float_run(o, n,
                                  [&](float* dst, int64_t c, int64_t m) { minmax_run<IsMax>(dst, a + c, b + c, m); });
            return;
          }
        }
        minmax_run<IsMax>(o, a, b, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const T x = *reinterpret_cast<const T*>(data[1] + i * st[1]);
        const T y = *reinterpret_cast<const T*>(data[2] + i * st[2]);
        *reinterpret_cast<T*>(data[0] + i * st[0]) = IsMax ? ew::max_nan(x, y) : ew::min_nan(x, y);
      }
    });
  } else {
    cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M { return IsMax ? ew::max_nan(x, y) : ew::min_nan(x, y); });
  }
}

Tensor minmax_tt(const char* op, const Tensor& a, const Tensor& b, bool is_max, Tensor* out) {
  const BareKernel bare(op, {&a, &b, out});
  TB_CHECK(a.defined() && b.defined(), op, "undefined input tensor");
  const DType rt = result_type(a, b);
  return ew::binary(op, a, b, rt, rt, out, false, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      if (is_max) minmax_kernel<true, T>(loop);
      else minmax_kernel<false, T>(loop);
    });
  });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return add_tt("add", a, b, alpha, false, nullptr, false);
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add_ts("add", a, b, alpha, false, nullptr, false);
}
Tensor& add_(Tensor& self, const Tensor& b, const Scalar& alpha) {
  add_tt("add_", self, b, alpha, false, &self, true);
  return self;
}
Tensor& add_(Tensor& self, const Scalar& b, const Scalar& alpha) {
  add_ts("add_", self, b, alpha, false, &self, true);
  return self;
}
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  add_tt("add_out", a, b, alpha, false, &out, false);
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return add_tt("sub", a, b, alpha, true, nullptr, false);
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add_ts("sub", a, b, alpha, true, nullptr, false);
}
Tensor& sub_(Tensor& self, const Tensor& b, const Scalar& alpha) {
  add_tt("sub_", self, b, alpha, true, &self, true);
  return self;
}
Tensor& sub_(Tensor& self, const Scalar& b, const Scalar& alpha) {
  add_ts("sub_", self, b, alpha, true, &self, true);
  return self;
}
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  add_tt("sub_out", a, b, alpha, true, &out, false);
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) { return mul_tt("mul", a, b, nullptr, false); }
Tensor mul(const Tensor& a, const Scalar& b) { return mul_ts("mul", a, b, nullptr, false); }
Tensor& mul_(Tensor& self, const Tensor& b) {
  mul_tt("mul_", self, b, &self, true);
  return self;
}
Tensor& mul_(Tensor& self, const Scalar& b) {
  mul_ts("mul_", self, b, &self, true);
  return self;
}
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b) {
  mul_tt("mul_out", a, b, &out, false);
  return out;
}

Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& m) {
  return div_tt("div", a, b, m, nullptr, false);
}
Tensor div(const Tensor& a, const Scalar& b, const std::optional<std::string>& m) {
  return div_ts("div", a, b, m, nullptr, false);
}
Tensor& div_(Tensor& self, const Tensor& b, const std::optional<std::string>& m) {
  div_tt("div_", self, b, m, &self, true);
  return self;
}
Tensor& div_(Tensor& self, const Scalar& b, const std::optional<std::string>& m) {
  div_ts("div_", self, b, m, &self, true);
  return self;
}
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b, const std::optional<std::string>& m) {
  div_tt("div_out", a, b, m, &out, false);
  return out;
}

Tensor remainder(const Tensor& a, const Tensor& b) { return remainder_tt("remainder", a, b, nullptr, false); }
Tensor remainder(const Tensor& a, const Scalar& b) { return remainder_ts("remainder", a, b, nullptr, false); }
Tensor& remainder_(Tensor& self, const Tensor& b) {
  remainder_tt("remainder_", self, b, &self, true);
  return self;
}
Tensor& remainder_(Tensor& self, const Scalar& b) {
  remainder_ts("remainder_", self, b, &self, true);
  return self;
}
Tensor& remainder_out(Tensor& out, const Tensor& a, const Tensor& b) {
  remainder_tt("remainder_out", a, b, &out, false);
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) { return pow_tt("pow", a, b, nullptr, false); }
Tensor pow(const Tensor& a, const Scalar& b) { return pow_ts("pow", a, b, nullptr, false); }
Tensor& pow_(Tensor& self, const Tensor& b) {
  pow_tt("pow_", self, b, &self, true);
  return self;
}
Tensor& pow_(Tensor& self, const Scalar& b) {
  pow_ts("pow_", self, b, &self, true);
  return self;
}
Tensor& pow_out(Tensor& out, const Tensor& a, const Tensor& b) {
  pow_tt("pow_out", a, b, &out, false);
  return out;
}

// base ** exponent with a scalar base: the result type is result_type(exponent, base).
Tensor pow(const Scalar& base, const Tensor& e) {
  const BareKernel bare("pow", {&e});
  const char* op = "pow";
  TB_CHECK(e.defined(), op, "undefined input tensor");
  const DType rt = result_type(e, base);
  TB_CHECK(rt != DType::Bool, op, kPowBool);
  return ew::unary(op, e, rt, rt, nullptr, false, ew::Setup::Contiguous, [&](const StridedLoop& loop) {
    core::dispatch(rt, [&]<typename T>() {
      using M = opmath_t<T>;
      const M c = ew::scalar_to<M>(base);
      if constexpr (std::is_floating_point_v<M>) cpu::cpu_kernel<T, T>(loop, [c](M y) -> M { return std::pow(c, y); });
      else if constexpr (ew::is_int_v<M>) cpu::cpu_kernel<T, T>(loop, [c](M y) -> M { return ew::int_pow(c, y); });
    });
  });
}

Tensor maximum(const Tensor& a, const Tensor& b) { return minmax_tt("maximum", a, b, true, nullptr); }
Tensor& maximum_out(Tensor& out, const Tensor& a, const Tensor& b) {
  minmax_tt("maximum_out", a, b, true, &out);
  return out;
}
Tensor minimum(const Tensor& a, const Tensor& b) { return minmax_tt("minimum", a, b, false, nullptr); }
Tensor& minimum_out(Tensor& out, const Tensor& a, const Tensor& b) {
  minmax_tt("minimum_out", a, b, false, &out);
  return out;
}

}  // namespace tb::ops
