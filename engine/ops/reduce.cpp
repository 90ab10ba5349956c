// Reductions (see reduce.h). Every op brings its input to a contiguous (O, R, I) view (reduced
// dims in the middle; a copy only when the input is not contiguous or the reduced dims are not
// adjacent), runs the pairwise kernel of cpu/reduce_kernel.h into an accumulator-typed result,
// then casts that to the output dtype.
#include "engine/ops/reduce.h"

#include <bit>
#include <cmath>
#include <limits>

#include "engine/ops/cpu/reduce_kernel.h"

namespace tb::ops {

namespace {

using cpu::is_nan;
using cpu::load;

// A contiguous x seen as (O, R, I), and the result's shape.
struct Plan {
  Tensor x;
  int64_t O = 1, R = 1, I = 1;
  Shape out_shape;
};

// Which dims are reduced: `dims` wrapped and checked for repeats; empty means all.
std::vector<bool> dim_mask(const Tensor& x, const DimList& dims, const char* op) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(size_t(std::max<int64_t>(nd, 1)), dims.empty());
  if (dims.empty()) return mask;
  std::vector<bool> seen(mask.size(), false);
  for (int64_t d : dims) {
    const int64_t w = core::wrap_dim(d, nd, op);
    TB_CHECK(!seen[size_t(w)], op, "dim ", w, " appears multiple times in the list of dims");
    seen[size_t(w)] = true;
    mask[size_t(w)] = true;
  }
  return mask;
}

Plan make_plan(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Plan p;
  const int64_t nd = x.dim();
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[size_t(d)]) p.out_shape.push_back(x.size(d));
    else if (keepdim) p.out_shape.push_back(1);
  }
  // Reduced dims (ignoring size-1 dims) must form one block for the (O, R, I) view to be free.
  int state = 0;  // 0: outer kept dims, 1: reduced block, 2: inner kept dims
  bool adjacent = true;
  for (int64_t d = 0; d < nd; ++d) {
    if (x.size(d) == 1) continue;
    if (mask[size_t(d)]) {
      if (state == 2) adjacent = false;
      state = 1;
    } else if (state == 1) {
      state = 2;
    }
  }
  if (adjacent) {
    p.x = x.contiguous();
    state = 0;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t s = x.size(d);
      if (s == 1) continue;
      if (mask[size_t(d)]) state = 1, p.R *= s;
      else if (state == 0) p.O *= s;
      else p.I *= s;
    }
  } else {
    Shape perm;
    for (int64_t d = 0; d < nd; ++d)
      if (!mask[size_t(d)]) perm.push_back(d), p.O *= x.size(d);
    for (int64_t d = 0; d < nd; ++d)
      if (mask[size_t(d)]) perm.push_back(d), p.R *= x.size(d);
    p.x = x.permute(perm).contiguous();
  }
  if (x.numel() == 0) {  // a zero-size dim: sizes above may have skipped it
    p.O = p.R = p.I = 1;
    for (int64_t d = 0; d < nd; ++d) (mask[size_t(d)] ? p.R : p.O) *= x.size(d);
  }
  return p;
}

// Runs Op over the plan into a fresh tensor of the accumulator's dtype (shape out_shape).
template <bool kCentered, typename Acc, typename T, typename Op>
Tensor run(const Plan& p, const Op& op, const Tensor& center = {}) {
  Tensor res = empty(p.out_shape, core::dtype_of<Acc>);
  cpu::reduce_oi<kCentered, Acc>(p.x.data_ptr<T>(), p.O, p.R, p.I, kCentered ? center.data_ptr<Acc>() : nullptr,
                                 res.data_ptr<Acc>(), op);
  return res;
}

Tensor cast(const Tensor& t, DType dt) { return t.dtype() == dt ? t : t.to(dt); }

// ---- the ops: accumulator algebra ----
template <typename Acc>
struct SumOp {
  Acc init() const { return Acc(0); }
  cpu::vfloat vinit() const { return cpu::vfloat{}; }  // used when Acc is float (cpu::vector_leaf)
  cpu::vfloat vstep(cpu::vfloat a, cpu::vfloat v) const { return a + v; }
  cpu::vfloat vmerge(cpu::vfloat a, cpu::vfloat b) const { return a + b; }
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const { return a + v; }  // used below AVX-512
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return a + b; }
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    return a + Acc(load(v));
  }
  Acc merge(Acc a, Acc b) const { return a + b; }
  Acc finish(Acc a, Acc, int64_t) const { return a; }
};
template <typename Acc>
struct MeanOp : SumOp<Acc> {
  Acc finish(Acc a, Acc, int64_t n) const { return a / Acc(n); }
};
template <typename Acc>
struct ProdOp {
  Acc init() const { return Acc(1); }
  // Whole vectors as sum's (cpu::vector_leaf): a product's order is as free as a sum's, and
  // LibTorch's float prod also multiplies lanes of vectors (one element at a time was 1.5x slower).
  cpu::vfloat vinit() const { return cpu::vfloat{} + 1.0f; }
  cpu::vfloat vstep(cpu::vfloat a, cpu::vfloat v) const { return a * v; }
  cpu::vfloat vmerge(cpu::vfloat a, cpu::vfloat b) const { return a * b; }
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const { return a * v; }  // used below AVX-512
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return a * b; }
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    return a * Acc(load(v));
  }
  Acc merge(Acc a, Acc b) const { return a * b; }
  Acc finish(Acc a, Acc, int64_t) const { return a; }
};
// max (kMax) or min; NaN propagates.
template <typename Acc, bool kMax>
struct ExtremeOp {
  static constexpr bool kSelectMax = kMax, kSelectAbs = false;  // cpu::SelectOp (float leaves)
  Acc init() const {
    if constexpr (std::is_same_v<Acc, bool>) return !kMax;
    else if constexpr (std::is_floating_point_v<Acc>) return kMax ? -INFINITY : INFINITY;
    else return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  Acc merge(Acc a, Acc v) const {
    const bool better = kMax ? v > a : v < a;
    return (better | is_nan(v)) ? v : a;  // `|`, not `||`: no branch, so the lanes vectorise
  }
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    return merge(a, Acc(load(v)));
  }
  Acc finish(Acc a, Acc, int64_t) const { return a; }
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const {   // cpu::HalfVectorOp
    return ((kMax ? v > a : v < a) | (v != v)) ? v : a;  // NaN propagates, lane by lane
  }
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return hstep(a, b); }  // this class's hstep
};
template <bool kAll>
struct LogicalOp {
  bool init() const { return kAll; }
  template <typename T>
  bool step(bool a, T v, bool) const {
    return kAll ? (a && load(v) != 0) : (a || load(v) != 0);
  }
  bool merge(bool a, bool b) const { return kAll ? (a && b) : (a || b); }
  bool finish(bool a, bool, int64_t) const { return a; }
};
// The 1- and 2-norms: sum |x| or sum x^2 on whole vectors as sum's (cpu::vector_leaf), then the
// root. As PNormOp's scalar step they ran one element at a time (norm over the rows of a (4096,
// 1024) float32 tensor: 0.6x LibTorch on Zen 4).
template <typename Acc, int kP>
struct LowNormOp : SumOp<Acc> {
  static_assert(kP == 1 || kP == 2);
  static cpu::vfloat term(cpu::vfloat v) {
    if constexpr (kP == 2) return v * v;
    using vbits = int32_t __attribute__((vector_size(64)));
    return std::bit_cast<cpu::vfloat>(std::bit_cast<vbits>(v) & 0x7FFFFFFF);  // |v|, NaN stays NaN
  }
  static cpu::vhalf term(cpu::vhalf v) {
    if constexpr (kP == 2) return v * v;
    using vbits = int32_t __attribute__((vector_size(32)));
    return std::bit_cast<cpu::vhalf>(std::bit_cast<vbits>(v) & 0x7FFFFFFF);
  }
  cpu::vfloat vstep(cpu::vfloat a, cpu::vfloat v) const { return a + term(v); }
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const { return a + term(v); }
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    const Acc x = Acc(load(v));
    return kP == 1 ? a + std::abs(x) : a + x * x;
  }
  Acc finish(Acc a, Acc, int64_t) const { return kP == 1 ? a : std::sqrt(a); }
};
// |x|^p sums for the other p (1 and 2 take LowNormOp).
template <typename Acc>
struct PNormOp {
  double p;
  Acc init() const { return Acc(0); }
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    const Acc x = std::abs(Acc(load(v)));
    if (p == 0) return a + Acc(x != 0);
    return a + std::pow(x, Acc(p));
  }
  Acc merge(Acc a, Acc b) const { return a + b; }
  Acc finish(Acc a, Acc, int64_t) const {
    if (p == 0) return a;
    return std::pow(a, Acc(1 / p));
  }
};
template <typename Acc, bool kMax>
struct AbsExtremeOp : ExtremeOp<Acc, kMax> {
  static constexpr bool kSelectAbs = true;
  template <typename T>
  Acc step(Acc a, T v, Acc) const {
    return this->merge(a, std::abs(Acc(load(v))));
  }
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const {
    using vbits = int32_t __attribute__((vector_size(32)));
    const vbits mag = std::bit_cast<vbits>(v) & 0x7FFFFFFF;  // |v|, NaN stays NaN
    return ExtremeOp<Acc, kMax>::hstep(a, std::bit_cast<cpu::vhalf>(mag));
  }
};
// First pass of var (Note [var's two centers]): the mean as c + sum(x - c) / n, c the slice's
// first element. Exact for a constant slice, whose variance is then exactly 0 as LibTorch's
// Welford mean gives.
struct ShiftedMeanOp : SumOp<double> {
  template <typename T>
  double step(double a, T v, double c) const {
    return a + (double(load(v)) - c);
  }
  double finish(double a, double c, int64_t n) const { return c + a / double(n); }
};
// Second pass of var: sum of squared deviations from the center (the mean).
struct SqDevOp : SumOp<double> {
  double correction;
  template <typename T>
  double step(double a, T v, double c) const {
    const double d = double(load(v)) - c;
    return a + d * d;
  }
  double finish(double a, double, int64_t n) const { return a / std::max(0.0, double(n) - correction); }
};
// Second pass of logsumexp: sum of exp(x - max), finished as log(sum) + max.
// For bf16/f16 (R = the input type) it rounds where LibTorch's composite logsumexp does: x - max,
// exp, the sum and the log are each tensors of the input dtype there.
template <typename Acc, typename R = Acc>
struct ExpSumOp : SumOp<Acc> {
  static Acc rnd(Acc v) { return Acc(static_cast<R>(v)); }
  template <typename T>
  Acc step(Acc a, T v, Acc c) const {
    return a + rnd(cpu::exp_fast(rnd(Acc(load(v)) - c)));
  }
  Acc finish(Acc a, Acc c, int64_t) const { return rnd(std::log(rnd(a))) + c; }
};

// Sum-like reductions into the output dtype: Op<sum_acc_t<T>> over x cast to `compute` dtype.
template <template <typename> class Op>
Tensor sum_like(const Tensor& x, const DimList& dims, bool keepdim, DType compute, DType out_dt, const char* op) {
  Tensor xin = cast(x, compute);
  Plan p = make_plan(xin, dim_mask(xin, dims, op), keepdim);
  Tensor res = core::dispatch(compute, [&]<typename T>() {
    using Acc = cpu::sum_acc_t<T>;
    return run<false, Acc, T>(p, Op<Acc>{});
  });
  return cast(res, out_dt);
}

DType sum_dtype(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return core::is_floating(x.dtype()) ? x.dtype() : DType::Int64;
}

template <bool kMax>
Tensor extreme_all(const Tensor& x, const DimList& dims, bool keepdim, const char* op) {
  const BareKernel bare(op, {&x});
  const std::vector<bool> mask = dim_mask(x, dims, op);
  for (int64_t d = 0; d < x.dim(); ++d)
    TB_CHECK(!mask[size_t(d)] || x.size(d) != 0, op, "Expected reduction dim ", d, " to have non-zero size");
  TB_CHECK(x.numel() != 0 || x.dim() == 0 || !dims.empty(), op,
           "Expected reduction dim to be specified for input.numel() == 0");
  Plan p = make_plan(x, mask, keepdim);
  return core::dispatch(x.dtype(), [&]<typename T>() {
    using Acc = core::opmath_t<T>;
    return cast(run<false, Acc, T>(p, ExtremeOp<Acc, kMax>{}), x.dtype());
  });
}

// Values and first indices of the max (kMax) or min along R of a contiguous (O, R, I) x.
template <bool kMax>
std::tuple<Tensor, Tensor> arg_reduce(const Plan& p, DType dt, bool want_values) {
  Tensor idx = empty(p.out_shape, DType::Int64);
  Tensor val = want_values ? empty(p.out_shape, dt) : Tensor();
  core::dispatch(dt, [&]<typename T>() {
    using V = core::opmath_t<T>;
    const T* x = p.x.data_ptr<T>();
    int64_t* ip = idx.data_ptr<int64_t>();
    T* vp = want_values ? val.data_ptr<T>() : nullptr;
    const int64_t O = p.O, R = p.R, I = p.I;
    auto better = [](V v, V best) { return (kMax ? v > best : v < best) || (is_nan(v) && !is_nan(best)); };
    const bool par = num_threads() > 1 && O * R * I >= kParallelGrain;
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      std::vector<V> best(static_cast<size_t>(I));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < O; ++o) {
        const T* xo = x + o * R * I;
        int64_t* io = ip + o * I;
        if (I == 1) {
          // Along the last dim: the extreme by the vectorised reduction (NaN propagating), then
          // the first element equal to it (or the first NaN): the element the scan below picks,
          // without its loop-carried select per element (2.4 ns an element, 4x LibTorch's).
          const V m = cpu::reduce_run<false, V>(xo, R, ExtremeOp<V, kMax>{}.init(), ExtremeOp<V, kMax>{});
          int64_t at = 0;
          if (is_nan(m))
            while (!is_nan(V(load(xo[at])))) ++at;
          else
            while (V(load(xo[at])) != m) ++at;
          io[0] = at;
          if (vp) vp[o] = xo[at];
          continue;
        }
        for (int64_t i = 0; i < I; ++i) best[size_t(i)] = load(xo[i]), io[i] = 0;
        for (int64_t r = 1; r < R; ++r) {
          const T* row = xo + r * I;
          for (int64_t i = 0; i < I; ++i) {
            const V v = load(row[i]);
            if (better(v, best[size_t(i)])) best[size_t(i)] = v, io[i] = r;
          }
        }
        if (vp)
          for (int64_t i = 0; i < I; ++i) vp[o * I + i] = static_cast<T>(best[size_t(i)]);
      }
    }
  });
  return {val, idx};
}

template <bool kMax>
std::tuple<Tensor, Tensor> extreme_dim(const Tensor& x, int64_t dim, bool keepdim, const char* op, bool want_values) {
  const int64_t d = core::wrap_dim(dim, x.dim(), op);
  TB_CHECK(x.dim() == 0 || x.size(d) != 0, op, "Expected reduction dim ", d, " to have non-zero size");
  if (!want_values) TB_CHECK(x.dtype() != DType::Bool, op, "not implemented for 'Bool'");
  Plan p = make_plan(x, dim_mask(x, {d}, op), keepdim);
  return arg_reduce<kMax>(p, x.dtype(), want_values);
}

template <bool kMax>
Tensor arg_all(const Tensor& x, std::optional<int64_t> dim, bool keepdim, const char* op) {
  if (dim) return std::get<1>(extreme_dim<kMax>(x, *dim, keepdim, op, false));
  TB_CHECK(x.dtype() != DType::Bool, op, "not implemented for 'Bool'");
  TB_CHECK(x.numel() != 0, op, "Expected reduction dim to be specified for input.numel() == 0");
  Plan p;
  p.x = x.contiguous();
  p.R = x.numel();
  if (keepdim) p.out_shape.assign(size_t(x.dim()), 1);
  return std::get<1>(arg_reduce<kMax>(p, x.dtype(), false));
}

void check_floating(const Tensor& x, const char* op, const char* what) {
  TB_CHECK(core::is_floating(x.dtype()), op, what, ", got ", core::name(x.dtype()));
}

}  // namespace

namespace {
// out= of a reduction: out takes the result's shape (resized in place, as in PyTorch) and,
// through copy_, is cast to its own dtype.
Tensor& write_out(Tensor& out, const Tensor& r, const char* op) {
  prepare_out(&out, r.sizes(), r.dtype(), op);
  out.copy_(r);
  return out;
}
}  // namespace

// ---- sum, mean, prod ----
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  const BareKernel bare("sum", {&x});
  const DType out_dt = sum_dtype(x, dtype);
  return sum_like<SumOp>(x, dims, keepdim, dtype ? *dtype : x.dtype(), out_dt, "sum");
}
Tensor sum(const Tensor& x, std::optional<DType> dtype) { return sum(x, DimList{}, false, dtype); }
Tensor& sum_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  const BareKernel bare("sum_out", {&out, &x});
  return write_out(out, sum(x, dims, keepdim, dtype), "sum");
}

Tensor mean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  const BareKernel bare("mean", {&x});
  const DType dt = dtype ? *dtype : x.dtype();
  TB_CHECK(core::is_floating(dt), "mean",
           "could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ",
           core::name(dt));
  return sum_like<MeanOp>(x, dims, keepdim, dt, dt, "mean");
}
Tensor mean(const Tensor& x, std::optional<DType> dtype) { return mean(x, DimList{}, false, dtype); }
Tensor& mean_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  const BareKernel bare("mean_out", {&out, &x});
  return write_out(out, mean(x, dims, keepdim, dtype), "mean");
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  const BareKernel bare("prod", {&x});
  return sum_like<ProdOp>(x, {dim}, keepdim, dtype ? *dtype : x.dtype(), sum_dtype(x, dtype), "prod");
}
Tensor prod(const Tensor& x, std::optional<DType> dtype) {
  const BareKernel bare("prod", {&x});
  return sum_like<ProdOp>(x, {}, false, dtype ? *dtype : x.dtype(), sum_dtype(x, dtype), "prod");
}

// ---- max, min, argmax, argmin ----
Tensor max(const Tensor& x) { return extreme_all<true>(x, {}, false, "max"); }
Tensor min(const Tensor& x) { return extreme_all<false>(x, {}, false, "min"); }
Tensor amax(const Tensor& x, const DimList& dims, bool keepdim) { return extreme_all<true>(x, dims, keepdim, "amax"); }
Tensor amin(const Tensor& x, const DimList& dims, bool keepdim) { return extreme_all<false>(x, dims, keepdim, "amin"); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  const BareKernel bare("max", {&x});
  return extreme_dim<true>(x, dim, keepdim, "max", true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  const BareKernel bare("min", {&x});
  return extreme_dim<false>(x, dim, keepdim, "min", true);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_all<true>(x, dim, keepdim, "argmax");
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_all<false>(x, dim, keepdim, "argmin");
}

// ---- var, std: two passes in double (mean, then squared deviations), as LibTorch's CPU kernel ----
// Note [var's two centers]
// LibTorch's CPU var/std centers the squared deviations in one of two ways, and for a constant
// input the choice decides whether the variance is exactly 0 (a later `var > 0` or std's
// gradient tells them apart). A reduction to one element of a float32/float64 input
// (std_var_all_cpu) centers on x.mean() in x's own dtype: sum / n, which for a constant input
// can miss the value by an ulp, leaving a variance of ~1e-33 (float64) or ~1e-13 (float32). Every
// other reduction runs Welford, whose running mean stays exact for a constant slice: here the
// shifted mean c + sum(x - c) / n, c the slice's first element. Both sum the squared deviations
// in double. The whole-input mean is ops::mean's, whose sum orders its terms as LibTorch's does
// only for short inputs: measured on this AVX2 machine with constants 0.1 and -7.3, a constant
// input's `var > 0` agrees with LibTorch's for every float32 length tried (3 to 1000) but 127,
// and for float64 up to 8 elements, then by chance (9, 17, 18, 31, 33, 100, 127-129 disagree);
// opfuzz found 18 float32 copies of -0.693 that disagree too.
// Returns the variance in double, before the one rounding to x's dtype (std takes its square
// root first).
Tensor var_in_double(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  Plan p = make_plan(x, dim_mask(x, dims, "var"), keepdim);
  const bool whole = core::checked_numel(p.out_shape, "var") == 1 && x.numel() > 0 &&
                     (x.dtype() == DType::Float32 || x.dtype() == DType::Float64);
  return core::dispatch_floating(x.dtype(), "var", [&]<typename T>() {
    Tensor mu;
    if (whole) {
      mu = full(p.out_shape, mean(x).item_double(), DType::Float64);
    } else if (p.R == 0) {
      mu = run<false, double, T>(p, MeanOp<double>{});
    } else {
      Tensor first = empty(p.out_shape, DType::Float64);  // x[o, 0, i] of the (O, R, I) view
      const T* xp = p.x.data_ptr<T>();
      double* fp = first.data_ptr<double>();
      for (int64_t o = 0; o < p.O; ++o)
        for (int64_t i = 0; i < p.I; ++i) fp[o * p.I + i] = double(load(xp[o * p.R * p.I + i]));
      mu = run<true, double, T>(p, ShiftedMeanOp{}, first);
    }
    return run<true, double, T>(p, SqDevOp{{}, correction}, mu);
  });
}

Tensor var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  const BareKernel bare("var", {&x});
  check_floating(x, "var", "std and var only support floating point and complex dtypes");
  return cast(var_in_double(x, dims, correction, keepdim), x.dtype());
}
Tensor std(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  const BareKernel bare("std", {&x});
  check_floating(x, "std", "std and var only support floating point and complex dtypes");
  Tensor v = var_in_double(x, dims, correction, keepdim);  // sqrt before the one rounding to x's dtype
  double* pv = v.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) pv[i] = std::sqrt(pv[i]);
  return cast(v, x.dtype());
}

// ---- norm ----
Tensor norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  const BareKernel bare("norm", {&x});
  check_floating(x, "norm", "linalg.vector_norm: Expected a floating point or complex tensor as input");
  const std::vector<bool> mask = dim_mask(x, dims, "norm");
  if (std::isinf(p)) {
    for (int64_t d = 0; d < x.dim(); ++d)
      TB_CHECK(!mask[size_t(d)] || x.size(d) != 0, "norm", "cannot compute the ", p, " norm on dimension ", d,
               " because it is empty");
    TB_CHECK(x.numel() != 0 || !dims.empty(), "norm", "cannot compute the ", p, " norm on an empty tensor");
  }
  Plan pl = make_plan(x, mask, keepdim);
  Tensor res = core::dispatch_floating(x.dtype(), "norm", [&]<typename T>() {
    using Acc = core::opmath_t<T>;
    if (std::isinf(p))
      return p > 0 ? run<false, Acc, T>(pl, AbsExtremeOp<Acc, true>{})
                   : run<false, Acc, T>(pl, AbsExtremeOp<Acc, false>{});
    if (p == 2) return run<false, Acc, T>(pl, LowNormOp<Acc, 2>{});
    if (p == 1) return run<false, Acc, T>(pl, LowNormOp<Acc, 1>{});
    return run<false, Acc, T>(pl, PNormOp<Acc>{p});
  });
  return cast(res, x.dtype());
}

// ---- logsumexp: max, then log(sum(exp(x - max))) + max (max replaced by 0 where infinite) ----
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim) {
  const BareKernel bare("logsumexp", {&x});
  TB_CHECK(!dims.empty() || x.dim() == 0, "logsumexp", "expected at least one dim to reduce");
  Tensor xf = cast(x, to_float_dtype(x.dtype()));
  Plan p = make_plan(xf, dim_mask(xf, dims, "logsumexp"), keepdim);
  Tensor res = core::dispatch_floating(xf.dtype(), "logsumexp", [&]<typename T>() {
    using Acc = core::opmath_t<T>;
    Tensor m = p.R == 0 ? zeros(p.out_shape, core::dtype_of<Acc>) : run<false, Acc, T>(p, ExtremeOp<Acc, true>{});
    Acc* pm = m.data_ptr<Acc>();
    for (int64_t i = 0; i < m.numel(); ++i)
      if (std::isinf(pm[i])) pm[i] = 0;
    return run<true, Acc, T>(p, ExpSumOp<Acc, T>{}, m);
  });
  return cast(res, xf.dtype());
}

// ---- all, any ----
Tensor all(const Tensor& x) {
  return run<false, bool, bool>(make_plan(x.to(DType::Bool), dim_mask(x, {}, "all"), false), LogicalOp<true>{});
}
Tensor any(const Tensor& x) {
  return run<false, bool, bool>(make_plan(x.to(DType::Bool), dim_mask(x, {}, "any"), false), LogicalOp<false>{});
}
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return run<false, bool, bool>(make_plan(x.to(DType::Bool), dim_mask(x, {dim}, "all"), keepdim), LogicalOp<true>{});
}
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  return run<false, bool, bool>(make_plan(x.to(DType::Bool), dim_mask(x, {dim}, "any"), keepdim), LogicalOp<false>{});
}

// ---- cumsum: sequential along the dim, accumulating like LibTorch's CPU kernel (double for float32) ----
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const BareKernel bare("cumsum", {&x});
  const DType dt = sum_dtype(x, dtype);
  const int64_t d = core::wrap_dim(dim, x.dim(), "cumsum");
  Tensor xin = cast(x, dt).contiguous();
  Tensor out = empty(x.sizes(), dt);
  int64_t O = 1, R = x.dim() == 0 ? 1 : x.size(d), I = 1;
  for (int64_t k = 0; k < x.dim(); ++k) (k < d ? O : I) *= k == d ? 1 : x.size(k);
  core::dispatch(dt, [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, cpu::sum_acc_t<T>>;
    const T* xp = xin.data_ptr<T>();
    T* op = out.data_ptr<T>();
    const bool par = num_threads() > 1 && O * R * I >= kParallelGrain && O > 1;
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      std::vector<Acc> acc(static_cast<size_t>(I));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < O; ++o) {
        if (I == 1) {  // along the last dim: the running sum in a register, not in acc's memory
          Acc run = 0;
          for (int64_t r = 0; r < R; ++r) {
            run += Acc(load(xp[o * R + r]));
            op[o * R + r] = static_cast<T>(run);
          }
          continue;
        }
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t r = 0; r < R; ++r) {
          const int64_t base = (o * R + r) * I;
          for (int64_t i = 0; i < I; ++i) {
            acc[size_t(i)] += Acc(load(xp[base + i]));
            op[base + i] = static_cast<T>(acc[size_t(i)]);
          }
        }
      }
    }
  });
  return out;
}
Tensor& cumsum_(Tensor& x, int64_t dim) {
  const BareKernel bare("cumsum_", {&x});
  x.copy_(cumsum(x, dim, x.dtype()));
  return x;
}

// ---- backward kernels ----
namespace {
// t seen as a contiguous (O, R, I) block with R along dim (a copy when t is not contiguous).
struct Slices {
  Tensor t;
  int64_t O = 1, R = 1, I = 1;
};
Slices slices(const Tensor& t, int64_t d) {
  Slices s{t.contiguous()};
  for (int64_t k = 0; k < t.dim(); ++k) (k < d ? s.O : k == d ? s.R : s.I) *= t.size(k);
  return s;
}
}  // namespace

Tensor prod_backward(const Tensor& grad, const Tensor& x, const Tensor& result, int64_t dim) {
  KernelEvent event("prod_backward", {&grad, &x, &result});  // Note [Backward kernels]
  const int64_t d = core::wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "prod_backward");
  if (x.dim() == 0) return grad.to(x.dtype()).clone();
  const Slices xs = slices(x, d);
  const Tensor g = grad.to(x.dtype()).expand(x.sizes()).contiguous();
  const Tensor r = result.to(x.dtype()).expand(x.sizes()).contiguous();
  Tensor out = empty(x.sizes(), x.dtype());
  const int64_t O = xs.O, R = xs.R, I = xs.I, n = x.numel();
  core::dispatch_floating(x.dtype(), "prod_backward", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* xp = xs.t.data_ptr<T>();
    const T* gp = g.data_ptr<T>();
    const T* rp = r.data_ptr<T>();
    T* op = out.data_ptr<T>();
    bool any_zero = false;
    for (int64_t i = 0; i < n && !any_zero; ++i) any_zero = load(xp[i]) == Op(0);
    const bool par = num_threads() > 1 && n >= kParallelGrain;
    if (!any_zero) {
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
      for (int64_t i = 0; i < n; ++i) op[i] = T(Op(gp[i]) * Op(T(Op(rp[i]) / Op(xp[i]))));
      return;
    }
    // Exclusive products: prefix (elements before r) times suffix (elements after r), rounded to
    // T at each step as PyTorch's cumprod-based formula does.
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
    for (int64_t o = 0; o < O; ++o) {
      for (int64_t i = 0; i < I; ++i) {
        const int64_t base = o * R * I + i;
        T pre = T(1);
        for (int64_t k = 0; k < R; ++k) {
          op[base + k * I] = pre;
          pre = T(Op(pre) * Op(xp[base + k * I]));
        }
        T suf = T(1);
        for (int64_t k = R - 1; k >= 0; --k) {
          const int64_t at = base + k * I;
          op[at] = T(Op(gp[at]) * Op(T(Op(op[at]) * Op(suf))));
          suf = T(Op(suf) * Op(xp[at]));
        }
      }
    }
  });
  return out;
}

Tensor cumsum_backward(const Tensor& grad, int64_t dim) {
  KernelEvent event("cumsum_backward", {&grad});  // Note [Backward kernels]
  const int64_t d = core::wrap_dim(dim, std::max<int64_t>(grad.dim(), 1), "cumsum_backward");
  if (grad.numel() <= 1 || grad.dim() == 0 || grad.size(d) == 1) return grad;
  const Slices gs = slices(grad, d);
  Tensor out = empty(grad.sizes(), grad.dtype());
  const int64_t O = gs.O, R = gs.R, I = gs.I;
  core::dispatch_numeric(grad.dtype(), "cumsum_backward", [&]<typename T>() {
    using Acc = std::conditional_t<std::is_same_v<T, float>, double, cpu::sum_acc_t<T>>;
    const T* gp = gs.t.data_ptr<T>();
    T* op = out.data_ptr<T>();
    const bool par = num_threads() > 1 && O * R * I >= kParallelGrain && O > 1;
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      std::vector<Acc> acc(static_cast<size_t>(I));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < O; ++o) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t r = R - 1; r >= 0; --r) {
          const int64_t base = (o * R + r) * I;
          for (int64_t i = 0; i < I; ++i) {
            acc[size_t(i)] += Acc(load(gp[base + i]));
            op[base + i] = static_cast<T>(acc[size_t(i)]);
          }
        }
      }
    }
  });
  return out;
}

}  // namespace tb::ops
