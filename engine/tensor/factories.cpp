#include "engine/tensor/factories.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "engine/core/profiler.h"
#include "engine/memory/site.h"
#include "engine/tensor/iterator.h"

namespace tb {

namespace {
// `value` as a T, refusing what T cannot hold (torch's "value cannot be converted to type ...
// without overflow"): an out-of-range float -> int conversion is undefined behaviour in C++.
template <typename T>
T checked_value(const core::Scalar& value, DType dtype, const char* op) {
  using Op = core::opmath_t<T>;
  auto refuse = [&] {
    std::ostringstream os;
    os.precision(17);
    os << "value ";
    if (value.is_float()) os << value.d;
    else os << value.i;
    throw core::Error(op, os.str() + " cannot be converted to type " + core::name(dtype) + " without overflow");
  };
  if constexpr (std::is_same_v<T, bool>) {
    return value.is_float() ? value.d != 0 : value.i != 0;
  } else if constexpr (std::is_integral_v<T>) {
    using L = std::numeric_limits<T>;
    if (!value.is_float()) {
      const int64_t v = value.i;
      bool ok;
      // As c10::overflows: a negative integer may wrap into an unsigned type if its magnitude fits.
      if constexpr (std::is_unsigned_v<T>)
        ok = v >= 0 ? uint64_t(v) <= uint64_t(L::max()) : -uint64_t(v) <= uint64_t(L::max());
      else ok = v >= int64_t(L::min()) && v <= int64_t(L::max());
      if (!ok) refuse();
      return T(v);
    }
    // Truncation toward zero, as torch; both bounds are exact in double.
    const double t = std::trunc(value.d);
    if (!(t >= double(L::min()) && t < std::ldexp(1.0, L::digits))) refuse();
    return T(t);
  } else {
    // A finite value beyond T's range becomes inf (IEEE, no UB). torch refuses it in full and
    // fill_, but ops build results with these factories (a float16 loss sum of 70000 is inf).
    return value.is_float() ? T(Op(value.d)) : T(Op(value.i));
  }
}

// Writes `v` everywhere; no version bump (a fresh tensor has had no in-place write yet).
template <typename T>
void fill_with(Tensor& t, T v) {
  StridedLoop({t}).for_each([v](char** p, const int64_t* st, int64_t n) {
    if (st[0] == sizeof(T)) {
      T* d = reinterpret_cast<T*>(p[0]);
      for (int64_t i = 0; i < n; ++i) d[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * st[0]) = v;
    }
  });
}

void fill_values(Tensor& t, const core::Scalar& value, const char* op) {
  core::dispatch(t.dtype(), [&]<typename T>() { fill_with<T>(t, checked_value<T>(value, t.dtype(), op)); });
}
}  // namespace

Tensor& fill_(Tensor& t, double value) {
  // See Note [Autograd hooks]: a filled tensor's old history no longer matters.
  const bool tracked = t.impl()->autograd_meta && autograd_hooks().on_fill;
  if (tracked && autograd_hooks().check_inplace) autograd_hooks().check_inplace(t);
  const core::Scalar v = value;
  core::dispatch(t.dtype(), [&]<typename T>() {
    const T x = checked_value<T>(v, t.dtype(), "fill_");  // before the version bump: nothing changed
    t.bump_version();
    fill_with<T>(t, x);
  });
  if (tracked) autograd_hooks().on_fill(t);
  return t;
}

Tensor& zero_(Tensor& t) { return fill_(t, 0); }

Tensor full(const Shape& sizes, core::Scalar value, std::optional<DType> dtype) {
  memory::OpScope op("full", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("full");                   // and the call in a profile (zeros, ones: full)
  Tensor t = empty(sizes, dtype.value_or(value.dtype()));
  fill_values(t, value, "full");
  return t;
}
Tensor zeros(const Shape& sizes, DType dtype) { return full(sizes, 0, dtype); }
Tensor ones(const Shape& sizes, DType dtype) { return full(sizes, 1, dtype); }
Tensor scalar_tensor(double value, DType dtype) {
  Tensor t = empty({}, dtype);
  fill_values(t, value, "scalar_tensor");
  return t;
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype) {
  memory::OpScope op("eye", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("eye");                   // and the call in a profile
  const int64_t m = m_opt.value_or(n);
  TB_CHECK(n >= 0 && m >= 0, "eye", "n and m must be non-negative, got ", n, " and ", m);
  Tensor t = zeros({n, m}, dtype);
  core::dispatch(dtype, [&]<typename T>() {
    T* d = t.data_ptr<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) d[i * m + i] = T(1);
  });
  return t;
}

Tensor arange(core::Scalar start, core::Scalar end, core::Scalar step, std::optional<DType> dtype_opt) {
  memory::OpScope op("arange", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("arange");                   // and the call in a profile
  const DType dtype = dtype_opt.value_or(start.is_float() || end.is_float() || step.is_float() ? DType::Float32
                                                                                               : DType::Int64);
  TB_CHECK(dtype != DType::Bool, "arange", "not implemented for 'Bool'");
  const double ds = start.d, de = end.d, dstep = step.d;
  // As torch, the bounds are checked on the arguments as given, before any truncation.
  TB_CHECK(dstep != 0, "arange", "step must be nonzero");
  TB_CHECK(std::isfinite(ds) && std::isfinite(de), "arange", "unsupported range: ", ds, " -> ", de);
  TB_CHECK((dstep > 0 && de >= ds) || (dstep < 0 && de <= ds), "arange",
           "upper bound and lower bound inconsistent with step sign");
  int64_t n = 0;
  if (core::is_floating(dtype)) {
    const double size_d = std::ceil((de - ds) / dstep);
    TB_CHECK(size_d >= 0 && size_d < 9.2e18, "arange", "invalid size, possible overflow? (", ds, " to ", de, " by ",
             dstep, ")");
    n = int64_t(size_d);
    Tensor t = empty({n}, dtype);
    core::dispatch(dtype, [&]<typename T>() {
      T* d = t.data_ptr<T>();
      for (int64_t i = 0; i < n; ++i) d[i] = T(static_cast<core::opmath_t<T>>(ds + double(i) * dstep));
    });
    return t;
  }
  // Integer dtypes compute in int64 on truncated arguments (torch's accscalar_t). torch then
  // divides by the truncated step; where it truncates to 0 torch divides by zero (SIGFPE) or
  // returns repeated values, so that is refused here.
  const int64_t xs = checked_value<int64_t>(start, DType::Int64, "arange");
  const int64_t xe = checked_value<int64_t>(end, DType::Int64, "arange");
  const int64_t xstep = checked_value<int64_t>(step, DType::Int64, "arange");
  TB_CHECK(xstep != 0, "arange", "step ", dstep, " truncates to 0 for the integer dtype ", core::name(dtype),
           "; use a floating dtype or an integer step");
  using i128 = __int128;
  i128 size;
  if (dtype == DType::Int64) {
    const i128 sgn = xstep > 0 ? 1 : -1;
    const i128 num = i128(xe) - i128(xs) + i128(xstep) - sgn;
    size = num / i128(xstep);  // exact ceil((xe - xs) / xstep) for these signs
  } else {
    // torch sizes the other integer dtypes from the untruncated arguments.
    const double size_d = std::ceil((de - ds) / dstep);
    TB_CHECK(size_d >= 0 && size_d < 9.2e18, "arange", "invalid size, possible overflow? (", ds, " to ", de, " by ",
             dstep, ")");
    size = i128(size_d);
  }
  TB_CHECK(size >= 0 && size <= i128(INT64_MAX), "arange", "invalid size, possible overflow? (", ds, " to ", de, " by ",
           dstep, ")");
  n = int64_t(size);
  Tensor t = empty({n}, dtype);
  core::dispatch(dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      T* d = t.data_ptr<T>();
      // Wrapping (unsigned) arithmetic as torch's int64 accumulate; in range by construction.
      for (int64_t i = 0; i < n; ++i) d[i] = T(int64_t(uint64_t(xs) + uint64_t(i) * uint64_t(xstep)));
    }
  });
  return t;
}
Tensor arange(core::Scalar end, std::optional<DType> dtype) { return arange(0, end, 1, dtype); }

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  memory::OpScope op("linspace", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("linspace");                   // and the call in a profile
  TB_CHECK(steps >= 0, "linspace", "number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, dtype);
  core::dispatch_numeric(dtype, "linspace", [&]<typename T>() {
    // Like PyTorch: step and values are computed in T itself (rounding after each operation for
    // bf16/f16); the first half counts up from start, the second half down from end, so both
    // endpoints are exact.
    using Op = std::conditional_t<std::is_integral_v<T>, double, core::opmath_t<T>>;
    auto r = [](Op v) { return std::is_integral_v<T> ? v : static_cast<Op>(T(v)); };
    const Op s = r(Op(start)), e = r(Op(end));
    T* d = t.data_ptr<T>();
    if (steps == 1) {
      d[0] = T(s);
      return;
    }
    const Op step = r(r(e - s) / Op(steps - 1));
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) d[i] = i < half ? T(s + r(step * Op(i))) : T(e - r(step * Op(steps - i - 1)));
  });
  return t;
}

namespace {
// Fills a contiguous tensor from 4-word Philox blocks; element i uses block i/4 word i%4, so the
// values do not depend on the thread split.
template <typename Fn>
void fill_random(Tensor& t, core::Generator* gen, Fn make) {
  core::Generator& g = gen ? *gen : core::default_generator();
  const int64_t n = t.numel();
  const uint64_t base = g.reserve(uint64_t((n + 3) / 4) * 2);  // 2 blocks per 4 elements (doubles)
  core::dispatch(t.dtype(), [&]<typename T>() {
    T* d = t.data_ptr<T>();
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
    for (int64_t b = 0; b < (n + 3) / 4; ++b) {
      auto w0 = g.block(base + 2 * uint64_t(b)), w1 = g.block(base + 2 * uint64_t(b) + 1);
      for (int64_t k = 0; k < 4 && 4 * b + k < n; ++k) d[4 * b + k] = make.template operator()<T>(w0, w1, int(k));
    }
  });
}
}  // namespace

Tensor rand(const Shape& sizes, DType dtype, core::Generator* gen) {
  memory::OpScope op("rand", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("rand");                   // and the call in a profile
  TB_CHECK(core::is_floating(dtype), "rand", "expected a floating dtype, got ", core::name(dtype));
  Tensor t = empty(sizes, dtype);
  fill_random(t, gen, []<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
    if constexpr (std::is_same_v<T, double>) return core::Generator::to_unit_double(a[k], b[k]);
    else return T(core::Generator::to_unit_float(a[k]));
  });
  return t;
}

Tensor randn(const Shape& sizes, DType dtype, core::Generator* gen) {
  memory::OpScope op("randn", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("randn");                   // and the call in a profile
  TB_CHECK(core::is_floating(dtype), "randn", "expected a floating dtype, got ", core::name(dtype));
  Tensor t = empty(sizes, dtype);
  // Box-Muller on two uniforms per element (one from each block).
  fill_random(t, gen, []<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
    double u1 = 1.0 - core::Generator::to_unit_double(a[k], b[k]);  // (0, 1]
    double u2 = core::Generator::to_unit_double(b[(k + 1) & 3], a[(k + 2) & 3]);
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    if constexpr (std::is_same_v<T, double>) return z;
    else return T(float(z));
  });
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype, core::Generator* gen) {
  memory::OpScope op("randint", /*keep_outer=*/true);  // names the block in OOM reports
  profiler::OpScope prof("randint");                   // and the call in a profile
  TB_CHECK(high > low, "randint", "random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  TB_CHECK(dtype != DType::Bool || (low >= 0 && high <= 2), "randint", "range [", low, ", ", high,
           ") does not fit bool");
  Tensor t = empty(sizes, dtype);
  const uint64_t range = uint64_t(high - low);
  fill_random(t, gen,
              [low, range]<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
                uint64_t r = ((uint64_t(a[k]) << 32) | b[k]) % range;
                double v = double(low + int64_t(r));
                if constexpr (std::is_same_v<T, bool>) return v != 0;
                else return T(static_cast<core::opmath_t<T>>(v));
              });
  return t;
}

Tensor empty_like(const Tensor& t, std::optional<DType> dtype) { return empty(t.sizes(), dtype.value_or(t.dtype())); }
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype) { return zeros(t.sizes(), dtype.value_or(t.dtype())); }
Tensor ones_like(const Tensor& t, std::optional<DType> dtype) { return ones(t.sizes(), dtype.value_or(t.dtype())); }
Tensor full_like(const Tensor& t, double v, std::optional<DType> dtype) {
  return full(t.sizes(), v, dtype.value_or(t.dtype()));
}
Tensor rand_like(const Tensor& t, core::Generator* gen) { return rand(t.sizes(), t.dtype(), gen); }
Tensor randn_like(const Tensor& t, core::Generator* gen) { return randn(t.sizes(), t.dtype(), gen); }

Tensor from_vector(const std::vector<double>& values, DType dtype) {
  return from_vector(values, Shape{int64_t(values.size())}, dtype);
}

Tensor from_vector(const std::vector<double>& values, const Shape& sizes, DType dtype) {
  Tensor t = empty(sizes, dtype);
  TB_CHECK(int64_t(values.size()) == t.numel(), "from_vector", values.size(), " values do not fill shape ",
           core::to_string(sizes));
  core::dispatch(dtype, [&]<typename T>() {
    T* d = t.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i) d[i] = checked_value<T>(values[i], dtype, "from_vector");
  });
  return t;
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype, std::shared_ptr<void> keep) {
  for (int64_t s : strides)
    TB_CHECK(s >= 0, "from_blob", "negative strides are not supported: ", core::to_string(strides));
  core::checked_numel(sizes, "from_blob");
  const int64_t nbytes = core::checked_storage_nbytes(sizes, strides, 0, int64_t(core::itemsize(dtype)), "from_blob");
  auto storage = std::make_shared<Storage>(data, size_t(nbytes), std::move(keep));
  return make_tensor(std::move(storage), sizes, strides, 0, dtype, "from_blob");
}

}  // namespace tb
