// Elementwise family, part 4: the fused backward kernels of the activations (threshold_backward for
// relu, gelu_backward in both approximations, silu_backward, softplus_backward, and sigmoid/tanh
// backward from the forward output). Each is one pass over (grad, x) instead of the 3-6 separate
// elementwise ops its formula would chain, so the MLP/GPT training steps do not pay for
// temporaries. Formulas and their evaluation order are LibTorch's (aten/src/ATen/native/cpu/
// Activation.cpp, BinaryOpsKernel.cpp), except that float32 gelu (erf) takes Phi and e^{-x^2/2}
// from one ew::normal_cdf; float32 uses the branch-free exp of vec_math.h and Phi of
// elementwise_detail.h so the contiguous loop vectorises, and StridedLoop splits large tensors
// across threads.
// These are kernels only: autograd/functions/elementwise.cpp decides when to call them.
#include <cmath>
#include <string>

#include "engine/ops/cpu/elementwise_detail.h"
#include "engine/ops/elementwise.h"

namespace tb::ops {

namespace {

using core::opmath_t;

[[gnu::always_inline]] inline float tanh_vec(float x) { return ew::tanh_fast(x); }
inline double tanh_vec(double x) { return std::tanh(x); }

template <typename M>
[[gnu::always_inline]] inline M exp_vec(M x) {
  return cpu::exp_fast(x);
}

// The per-element formulas, f(grad, x) in the compute type M. Structs with always-inlined calls:
// an out-of-line call would stop the contiguous loop from vectorising.
struct Threshold {
  double th;
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M x) const {
    return x <= M(th) ? M(0) : g;
  }
};

// d/dx [x Phi(x)] = Phi(x) + x phi(x).
struct GeluErfBackward {
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M x) const {
    const M kBeta = M(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2 pi)
    if constexpr (std::is_same_v<M, float>) {
      const ew::NormalCdf n = ew::normal_cdf(x);  // one exp for both terms
      return g * (n.cdf + x * (kBeta * n.gauss));
    } else {
      const M cdf = M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
      const M pdf = kBeta * std::exp(x * x * M(-0.5));
      return g * (cdf + x * pdf);
    }
  }
};

// d/dx [0.5 x (1 + tanh(u))], u = sqrt(2/pi) (x + 0.044715 x^3).
struct GeluTanhBackward {
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M x) const {
    const M kBeta = M(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2 / pi)
    const M kKappa = M(0.044715);
    const M x_sq = x * x;
    const M x_cube = x_sq * x;
    const M inner = kBeta * (x + kKappa * x_cube);
    const M t = tanh_vec(inner);
    const M left = M(0.5) * x;
    const M right = M(1) + t;
    const M left_derivative = M(0.5) * right;
    const M tanh_derivative = M(1) - t * t;
    const M inner_derivative = kBeta * (M(1) + M(3) * kKappa * x_sq);
    const M right_derivative = left * tanh_derivative * inner_derivative;
    return g * (left_derivative + right_derivative);
  }
};

// d/dx [x s(x)] = s (1 + x (1 - s)), s = sigmoid(x) (e^x / (1 + e^x) for x < 0: no 0 where e^-x
// overflows, as the forward).
struct SiluBackward {
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M x) const {
    const M e = exp_vec(-std::fabs(x));
    const M s = (x < M(0) ? e : M(1)) / (M(1) + e);
    return g * s * (M(1) + x * (M(1) - s));
  }
};

struct SigmoidBackward {
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M y) const {
    return g * (M(1) - y) * y;
  }
};

struct TanhBackward {
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M y) const {
    return g * (M(1) - y * y);
  }
};

// Linear above the threshold (as the forward), else the logistic of beta * x.
struct SoftplusBackward {
  double beta, threshold;
  template <typename M>
  [[gnu::always_inline]] M operator()(M g, M x) const {
    const M bx = x * M(beta);
    const M z = exp_vec(bx);
    return bx > M(threshold) ? g : g * z / (z + M(1));
  }
};

// f in the compute type M (bf16/f16 elements convert to float on the way in). A struct with an
// always-inlined call rather than a lambda: GCC leaves a lambda this size out of line, and the
// call stops the loop from vectorising.
template <typename M, typename F>
struct InM {
  F f;
  [[gnu::always_inline]] M operator()(M g, M v) const { return f.template operator()<M>(g, v); }
};

// grad: any shape broadcastable with x, any strides; x: the saved input (or output). The result
// has their broadcast shape and result_type(grad, x), a floating dtype.
template <typename F>
Tensor backward_kernel(const char* op, const Tensor& grad, const Tensor& x, F f) {
  TB_CHECK(grad.defined() && x.defined(), op, "undefined input tensor");
  const DType dt = result_type(grad, x);
  TB_CHECK(core::is_floating(dt), op, "not implemented for dtype ", core::name(dt));
  return ew::binary(op, grad, x, dt, dt, nullptr, false, [&](const StridedLoop& loop) {
    core::dispatch_floating(dt, op, [&]<typename T>() {
      using M = opmath_t<T>;
      cpu::cpu_kernel<T, T, T>(loop, InM<M, F>{f});
    });
  });
}

}  // namespace

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  KernelEvent event("threshold_backward", {&grad_output, &self});  // Note [Backward kernels]
  return backward_kernel("threshold_backward", grad_output, self, Threshold{threshold.d});
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate) {
  KernelEvent event("gelu_backward", {&grad_output, &self});  // Note [Backward kernels]
  TB_CHECK(approximate == "none" || approximate == "tanh", "gelu_backward",
           "approximate argument must be either none or tanh, got '", approximate, "'");
  if (approximate == "tanh") return backward_kernel("gelu_backward", grad_output, self, GeluTanhBackward{});
  return backward_kernel("gelu_backward", grad_output, self, GeluErfBackward{});
}

Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  KernelEvent event("silu_backward", {&grad_output, &self});  // Note [Backward kernels]
  return backward_kernel("silu_backward", grad_output, self, SiluBackward{});
}

Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  KernelEvent event("sigmoid_backward", {&grad_output, &output});  // Note [Backward kernels]
  return backward_kernel("sigmoid_backward", grad_output, output, SigmoidBackward{});
}

Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  KernelEvent event("tanh_backward", {&grad_output, &output});  // Note [Backward kernels]
  return backward_kernel("tanh_backward", grad_output, output, TanhBackward{});
}

Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, const Scalar& beta, const Scalar& threshold) {
  KernelEvent event("softplus_backward", {&grad_output, &self});  // Note [Backward kernels]
  return backward_kernel("softplus_backward", grad_output, self, SoftplusBackward{beta.d, threshold.d});
}

}  // namespace tb::ops
