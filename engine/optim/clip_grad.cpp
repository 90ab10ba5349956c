// clip_grad_norm_ and clip_grad_value_. Each gradient's norm is accumulated in double over its
// elements (PyTorch accumulates in the opmath type, so float32 norms can differ in the last
// bits), rounded to the gradient's dtype like torch.linalg.vector_norm's result, and the total is
// the same norm over those per-gradient norms, as torch does with torch.stack.
#include "engine/optim/clip_grad.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"

namespace tb::optim {

namespace {

// The gradients that exist (undefined ones are skipped, as PyTorch skips p.grad is None).
std::vector<Tensor> grads_of(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    TB_CHECK(params[i].defined(), op, "parameter ", i, " is an undefined tensor");
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    TB_CHECK(core::is_floating(g.dtype()), op, "gradient of parameter ", i, " is ", core::name(g.dtype()),
             "; expected a floating dtype");
    out.push_back(g);
  }
  return out;
}

enum class Kind { Inf, NegInf, Zero, One, Two, P };

Kind kind_of(double p) {
  if (p == std::numeric_limits<double>::infinity()) return Kind::Inf;
  if (p == -std::numeric_limits<double>::infinity()) return Kind::NegInf;
  if (p == 0) return Kind::Zero;
  if (p == 1) return Kind::One;
  if (p == 2) return Kind::Two;
  return Kind::P;
}

// The p-norm of n values read through at(i), accumulated in double.
template <typename At>
double vector_norm(int64_t n, double p, At at) {
  const Kind k = kind_of(p);
  if (k == Kind::Inf || k == Kind::NegInf) {
    double r = k == Kind::Inf ? 0.0 : std::numeric_limits<double>::infinity();
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::abs(at(i));
      if (a != a) nan = true;
      r = k == Kind::Inf ? std::max(r, a) : std::min(r, a);
    }
    return nan ? std::numeric_limits<double>::quiet_NaN() : r;
  }
  double acc = 0;
#pragma omp parallel for reduction(+ : acc) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::abs(at(i));
    switch (k) {
      case Kind::Zero: acc += a != 0 ? 1.0 : 0.0; break;
      case Kind::One: acc += a; break;
      case Kind::Two: acc += a * a; break;
      default: acc += std::pow(a, p); break;
    }
  }
  if (k == Kind::Zero || k == Kind::One) return acc;
  if (k == Kind::Two) return std::sqrt(acc);
  return std::pow(acc, 1.0 / p);
}

double round_to_dtype(double v, DType t) {
  return core::dispatch_floating(t, "clip_grad_norm_", [&]<typename T>() { return double(T(v)); });
}

// Applies f to every element of g in place (g dense: flat; otherwise through a contiguous copy).
template <typename F>
void apply_inplace(Tensor g, F f) {
  Tensor work = is_non_overlapping_and_dense(g) ? g : g.contiguous();
  core::dispatch_floating(g.dtype(), "clip_grad", [&]<typename T>() {
    T* d = static_cast<T*>(work.data());
    const int64_t n = work.numel();
#pragma omp parallel for if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) d[i] = T(f(core::opmath_t<T>(d[i])));
  });
  if (work.is_same(g)) g.bump_version();
  else g.copy_(work);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const char* op = "clip_grad_norm_";
  autograd::NoGradGuard no_grad;
  TB_CHECK(!std::isnan(norm_type), op, "norm_type is NaN; pass a p >= 0 or infinity");
  std::vector<Tensor> grads = grads_of(params, op);
  if (grads.empty()) return scalar_tensor(0, DType::Float32);

  std::vector<double> norms;
  DType total_dtype = grads[0].dtype();
  for (const Tensor& g : grads) {
    const Tensor c = is_non_overlapping_and_dense(g) ? g : g.contiguous();
    const double n = core::dispatch_floating(c.dtype(), op, [&]<typename T>() {
      const T* d = static_cast<const T*>(c.data());
      return vector_norm(c.numel(), norm_type, [d](int64_t i) { return double(d[i]); });
    });
    norms.push_back(round_to_dtype(n, g.dtype()));
    total_dtype = core::promote_types(total_dtype, g.dtype());
  }
  const double total = round_to_dtype(vector_norm(int64_t(norms.size()), norm_type,
                                                  [&](int64_t i) { return norms[size_t(i)]; }),
                                      total_dtype);
  TB_CHECK(!(error_if_nonfinite && !std::isfinite(total)), op, "The total norm of order ", norm_type,
           " for gradients from `parameters` is non-finite (", total,
           "), so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, "
           "set error_if_nonfinite=false");

  // clip_coef = clamp(max_norm / (total_norm + 1e-6), max=1), as tensor ops in total's dtype.
  const double denom = round_to_dtype(total + 1e-6, total_dtype);
  double coef = round_to_dtype(max_norm / denom, total_dtype);
  if (coef > 1.0) coef = 1.0;  // clamp keeps NaN
  for (Tensor& g : grads) {
    core::dispatch_floating(g.dtype(), op, [&]<typename T>() {
      const core::opmath_t<T> c = core::opmath_t<T>(coef);
      apply_inplace(g, [c](core::opmath_t<T> x) { return x * c; });
    });
  }
  return scalar_tensor(total, total_dtype);
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  const char* op = "clip_grad_value_";
  autograd::NoGradGuard no_grad;
  TB_CHECK(!std::isnan(clip_value), op, "clip_value is NaN; pass a finite bound");
  for (Tensor& g : grads_of(params, op)) {
    core::dispatch_floating(g.dtype(), op, [&]<typename T>() {
      using C = core::opmath_t<T>;
      const C lo = C(-clip_value), hi = C(clip_value);
      // clamp_min_ then clamp_max_, as torch: a negative clip_value gives clip_value everywhere.
      apply_inplace(g, [lo, hi](C x) {
        x = x < lo ? lo : x;
        return x > hi ? hi : x;
      });
    });
  }
}

}  // namespace tb::optim
