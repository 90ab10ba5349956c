#include "engine/tensor/factories.h"

#include <cmath>

#include "engine/tensor/iterator.h"

namespace tb {

namespace {
// Writes `value` everywhere; no version bump (a fresh tensor has had no in-place write yet).
void fill_values(Tensor& t, double value) {
  core::dispatch(t.dtype(), [&]<typename T>() {
    const T v = std::is_same_v<T, bool> ? T(value != 0) : T(static_cast<core::opmath_t<T>>(value));
    StridedLoop({t}).for_each([v](char** p, const int64_t* st, int64_t n) {
      if (st[0] == sizeof(T)) {
        T* d = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * st[0]) = v;
      }
    });
  });
}
}  // namespace

Tensor& fill_(Tensor& t, double value) {
  // See Note [Autograd hooks]: a filled tensor's old history no longer matters.
  const bool tracked = t.impl()->autograd_meta && autograd_hooks().on_fill;
  if (tracked && autograd_hooks().check_inplace) autograd_hooks().check_inplace(t);
  t.bump_version();
  fill_values(t, value);
  if (tracked) autograd_hooks().on_fill(t);
  return t;
}

Tensor& zero_(Tensor& t) { return fill_(t, 0); }

Tensor full(const Shape& sizes, double value, DType dtype) {
  Tensor t = empty(sizes, dtype);
  fill_values(t, value);
  return t;
}
Tensor zeros(const Shape& sizes, DType dtype) { return full(sizes, 0, dtype); }
Tensor ones(const Shape& sizes, DType dtype) { return full(sizes, 1, dtype); }
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype) {
  const int64_t m = m_opt.value_or(n);
  TB_CHECK(n >= 0 && m >= 0, "eye", "n and m must be non-negative, got ", n, " and ", m);
  Tensor t = zeros({n, m}, dtype);
  core::dispatch(dtype, [&]<typename T>() {
    T* d = t.data_ptr<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) d[i * m + i] = T(1);
  });
  return t;
}

Tensor arange(double start, double end, double step, DType dtype) {
  TB_CHECK(step != 0, "arange", "step must be nonzero");
  TB_CHECK(std::isfinite(start) && std::isfinite(end), "arange", "unsupported range: ", start, " -> ", end);
  TB_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange",
           "upper bound and larger bound inconsistent with step sign");
  const int64_t n = int64_t(std::ceil((end - start) / step));
  Tensor t = empty({n}, dtype);
  core::dispatch(dtype, [&]<typename T>() {
    T* d = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) d[i] = T(static_cast<core::opmath_t<T>>(start + double(i) * step));
  });
  return t;
}
Tensor arange(double end, DType dtype) { return arange(0, end, 1, dtype); }

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
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
    for (int64_t i = 0; i < steps; ++i)
      d[i] = i < half ? T(s + r(step * Op(i))) : T(e - r(step * Op(steps - i - 1)));
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
  TB_CHECK(core::is_floating(dtype), "rand", "expected a floating dtype, got ", core::name(dtype));
  Tensor t = empty(sizes, dtype);
  fill_random(t, gen, []<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
    if constexpr (std::is_same_v<T, double>) return core::Generator::to_unit_double(a[k], b[k]);
    else return T(core::Generator::to_unit_float(a[k]));
  });
  return t;
}

Tensor randn(const Shape& sizes, DType dtype, core::Generator* gen) {
  TB_CHECK(core::is_floating(dtype), "randn", "expected a floating dtype, got ", core::name(dtype));
  Tensor t = empty(sizes, dtype);
  // Box-Muller on two uniforms per element (one from each block).
  fill_random(t, gen, []<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
    double u1 = 1.0 - core::Generator::to_unit_double(a[k], b[k]);             // (0, 1]
    double u2 = core::Generator::to_unit_double(b[(k + 1) & 3], a[(k + 2) & 3]);
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    if constexpr (std::is_same_v<T, double>) return z;
    else return T(float(z));
  });
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype, core::Generator* gen) {
  TB_CHECK(high > low, "randint", "random_ expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  TB_CHECK(dtype != DType::Bool || (low >= 0 && high <= 2), "randint", "range [", low, ", ", high, ") does not fit bool");
  Tensor t = empty(sizes, dtype);
  const uint64_t range = uint64_t(high - low);
  fill_random(t, gen, [low, range]<typename T>(const std::array<uint32_t, 4>& a, const std::array<uint32_t, 4>& b, int k) {
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
Tensor full_like(const Tensor& t, double v, std::optional<DType> dtype) { return full(t.sizes(), v, dtype.value_or(t.dtype())); }
Tensor rand_like(const Tensor& t, core::Generator* gen) { return rand(t.sizes(), t.dtype(), gen); }
Tensor randn_like(const Tensor& t, core::Generator* gen) { return randn(t.sizes(), t.dtype(), gen); }

Tensor from_vector(const std::vector<double>& values, const Shape& sizes_in, DType dtype) {
  Shape sizes = sizes_in.empty() && values.size() != 1 ? Shape{int64_t(values.size())} : sizes_in;
  Tensor t = empty(sizes, dtype);
  TB_CHECK(int64_t(values.size()) == t.numel(), "from_vector", values.size(), " values do not fill shape ",
           core::to_string(sizes));
  core::dispatch(dtype, [&]<typename T>() {
    T* d = t.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i)
      d[i] = std::is_same_v<T, bool> ? T(values[i] != 0) : T(static_cast<core::opmath_t<T>>(values[i]));
  });
  return t;
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype, std::shared_ptr<void> keep) {
  const int64_t r = reach(sizes, strides, 0);
  auto storage = std::make_shared<Storage>(data, size_t(r) * core::itemsize(dtype), std::move(keep));
  return make_tensor(std::move(storage), sizes, strides, 0, dtype, "from_blob");
}

}  // namespace tb
