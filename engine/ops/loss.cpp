// The loss kernels of loss.h. Class losses see their input as contiguous (N, C, S) (S: the
// product of the spatial dims d1, ...; an unbatched (C) input is (1, C, 1)) and their target as
// (N * S) values; per-target terms are summed in double. The elementwise losses are built from
// elementwise and reduction ops.
#include "engine/ops/loss.h"

#include <cmath>
#include <vector>

#include "engine/ops/cpu/elementwise_detail.h"
#include "engine/ops/cpu/loops.h"
#include "engine/ops/cpu/vec_math.h"
#include "engine/ops/cpu/vec_math_sleef.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/nn_norm.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/iterator.h"
#include "engine/tensor/stride_order.h"

namespace tb::ops {

namespace {

enum class Reduction { None, Mean, Sum };

Reduction parse_reduction(const std::string& r, const char* op) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  TB_CHECK(r == "none", op, r, " is not a valid value for reduction");
  return Reduction::None;
}

// The (N, C, S) view of a class loss's input and the shape of its unreduced loss.
struct ClassLayout {
  int64_t N = 1, C = 1, S = 1;
  Shape loss_shape;
};

ClassLayout class_layout(const Tensor& input, const Tensor& target, bool prob_target, const char* op) {
  TB_CHECK(input.dim() >= 1, op, "Expected 1 or more dimensions (got ", input.dim(), ")");
  TB_CHECK(core::is_floating(input.dtype()), op, "expected a floating input, got ", core::name(input.dtype()));
  ClassLayout l;
  l.C = input.dim() == 1 ? input.size(0) : input.size(1);
  l.N = input.dim() == 1 ? 1 : input.size(0);
  for (int64_t k = 2; k < input.dim(); ++k) l.S *= input.size(k);
  if (prob_target) {
    TB_CHECK(target.sizes() == input.sizes(), op, "Expected target size ", core::to_string(input.sizes()),
             " (class probabilities of the input's shape), got ", core::to_string(target.sizes()));
  } else {
    TB_CHECK(target.dtype() == DType::Int64, op, "expected scalar type Long but found ", core::name(target.dtype()),
             " (class-index targets are int64)");
    if (input.dim() == 1) {
      TB_CHECK(target.dim() == 0, op, "Expected a 0-dim target for an unbatched (C) input, got target of shape ",
               core::to_string(target.sizes()));
    } else if (input.dim() == 2) {
      TB_CHECK(target.dim() == 1, op, "0D or 1D target tensor expected, multi-target not supported");
      TB_CHECK(target.size(0) == l.N, op, "Expected input batch_size (", l.N, ") to match target batch_size (",
               target.size(0), ").");
    } else {
      Shape want = input.sizes();
      want.erase(want.begin() + 1);
      TB_CHECK(target.sizes() == want, op, "Expected target size ", core::to_string(want), ", got ",
               core::to_string(target.sizes()));
    }
  }
  l.loss_shape = input.sizes();
  l.loss_shape.erase(l.loss_shape.begin() + (input.dim() == 1 ? 0 : 1));
  return l;
}

// Class weights as a contiguous float64 tensor (undefined when weight is), checked to hold C values.
Tensor class_weights_f64(const Tensor& weight, int64_t C, const char* op) {
  if (!weight.defined()) return Tensor();
  TB_CHECK(weight.dim() == 1 && weight.numel() == C, op, "weight tensor should be defined either for all ", C,
           " classes or no classes but got weight tensor of shape: ", core::to_string(weight.sizes()));
  return weight.to(DType::Float64).contiguous();
}

// Class weights as doubles (all ones when undefined), checked to hold C values.
std::vector<double> class_weights(const Tensor& weight, int64_t C, const char* op) {
  const Tensor w = class_weights_f64(weight, C, op);
  if (!w.defined()) return std::vector<double>(size_t(C), 1.0);
  return std::vector<double>(w.data_ptr<double>(), w.data_ptr<double>() + C);
}

// The targets as a contiguous int64 buffer, each in [0, C) or equal to ignore_index. One
// branch-free pass over them (it vectorises), and only when it finds one out of range a second
// that names the first; the check per target with numel() in the loop's condition (an out-of-line
// call) was a third of nll_loss's time on 4096 targets.
Tensor checked_targets(const Tensor& target, int64_t C, int64_t ignore_index, const char* op) {
  Tensor t = target.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  const int64_t n = t.numel();
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= int(tp[i] != ignore_index) & int(uint64_t(tp[i]) >= uint64_t(C));
  if (bad)
    for (int64_t i = 0; i < n; ++i)
      TB_CHECK(tp[i] == ignore_index || (tp[i] >= 0 && tp[i] < C), op, "Target ", tp[i], " is out of bounds.");
  return t;
}

// grad_output as one value per target (reduced losses broadcast their scalar), in double.
std::vector<double> per_target_grad(const Tensor& grad_output, Reduction red, double denominator, int64_t n) {
  if (red == Reduction::None) {
    const Tensor g = grad_output.to(DType::Float64).contiguous();
    return std::vector<double>(g.data_ptr<double>(), g.data_ptr<double>() + n);
  }
  const double g = grad_output.item_double();
  return std::vector<double>(size_t(n), red == Reduction::Mean ? g / denominator : g);
}

Tensor finish(const std::vector<double>& per, Reduction red, double denominator, const Shape& loss_shape, DType dt) {
  if (red == Reduction::None) return from_vector(per, loss_shape, DType::Float64).to(dt);
  double s = 0;
  for (double v : per) s += v;
  return full({}, red == Reduction::Mean ? s / denominator : s, dt);
}

}  // namespace

Tensor apply_loss_reduction(const Tensor& loss, const std::string& reduction) {
  switch (parse_reduction(reduction, "loss")) {
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
    default: return loss;
  }
}

// ---- nll_loss ----

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                            const std::string& reduction, int64_t ignore_index) {
  const char* op = "nll_loss";
  const Reduction red = parse_reduction(reduction, op);
  const ClassLayout l = class_layout(input, target, false, op);
  const Tensor wd = class_weights_f64(weight, l.C, op);
  const double* wp = wd.defined() ? wd.data_ptr<double>() : nullptr;
  const Tensor t = checked_targets(target, l.C, ignore_index, op);
  // Only the N * S picked values are read, each widened to double where it is read: a cast of the
  // whole input to float64 first made nll_loss of (4096, 1024) float32 122x slower than LibTorch.
  // Note [nll_loss's one pass]: a reduced loss is summed as the values are picked, in the order
  // finish() summed the per-target vector (the ignored targets' zeros added nothing: the sum
  // starts at +0), so the result is unchanged; only reduction="none" keeps the vector. Without
  // class weights no vector of C ones is made or read.
  const Tensor x = input.contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  std::vector<double> per(red == Reduction::None ? size_t(l.N * l.S) : 0, 0.0);
  double tw = 0, sum = 0;
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using M = core::opmath_t<T>;
    const T* xp = x.data_ptr<T>();
    auto pick = [&](auto weighted, auto keep) {
      for (int64_t n = 0; n < l.N; ++n)
        for (int64_t s = 0; s < l.S; ++s) {
          const int64_t e = n * l.S + s, c = tp[e];
          if (c == ignore_index) continue;
          const double wc = weighted ? wp[c] : 1.0;
          const double v = -wc * double(static_cast<M>(xp[(n * l.C + c) * l.S + s]));
          if constexpr (keep) per[size_t(e)] = v;
          else sum += v;
          tw += wc;
        }
    };
    const bool keep = red == Reduction::None;
    if (wp && keep) pick(std::true_type{}, std::true_type{});
    else if (wp) pick(std::true_type{}, std::false_type{});
    else if (keep) pick(std::false_type{}, std::true_type{});
    else pick(std::false_type{}, std::false_type{});
  });
  const DType dt = input.dtype();
  if (red != Reduction::None) return {full({}, red == Reduction::Mean ? sum / tw : sum, dt), full({}, tw, dt)};
  // PyTorch sums an unbatched input's one term into a zero, so its loss of a 0 input is +0, not -0.
  if (input.dim() == 1)
    for (double& v : per) v += 0.0;
  return {finish(per, red, tw, l.loss_shape, dt), full({}, 0.0, dt)};
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                int64_t ignore_index) {
  const BareKernel bare("nll_loss", {&input, &weight});
  return std::get<0>(nll_loss_forward(input, target, weight, reduction, ignore_index));
}

Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target, const Tensor& weight,
                         const std::string& reduction, int64_t ignore_index, const Tensor& total_weight) {
  KernelEvent event("nll_loss_backward", {&grad_output, &input, &target, &weight});  // Note [Backward kernels]
  const char* op = "nll_loss_backward";
  const Reduction red = parse_reduction(reduction, op);
  const ClassLayout l = class_layout(input, target, false, op);
  const std::vector<double> w = class_weights(weight, l.C, op);
  const Tensor t = checked_targets(target, l.C, ignore_index, op);
  const std::vector<double> g = per_target_grad(grad_output, red, total_weight.item_double(), l.N * l.S);
  Tensor gi = zeros(input.sizes(), input.dtype());
  const int64_t* tp = t.data_ptr<int64_t>();
  core::dispatch_floating(input.dtype(), op, [&]<typename T>() {
    T* gp = gi.data_ptr<T>();
    for (int64_t n = 0; n < l.N; ++n)
      for (int64_t s = 0; s < l.S; ++s) {
        const int64_t e = n * l.S + s, c = tp[e];
        if (c != ignore_index) gp[(n * l.C + c) * l.S + s] = static_cast<T>(-w[size_t(c)] * g[size_t(e)]);
      }
  });
  return gi;
}

// ---- cross_entropy: log_softmax over the class dim fused with the loss ----
//
// Class indices t, smoothing ls, weights w (W = sum w):
//   loss_e = (1 - ls) * -w[t] logp[t] + ls / C * -sum_c w_c logp[c]   (0 where t is ignored)
// and mean divides by the summed w[t] of the kept targets (as PyTorch does for both terms).
// Its gradient with respect to the logits, with gs the per-target output gradient:
//   d x_c = gs * (p_c * ((1 - ls) w[t] + ls / C * W) - ls / C * w_c - [c == t] (1 - ls) w[t]).
// Probabilities q = target * (1 - ls) + ls / C: loss_e = -sum_c w_c q_c logp_c (mean over N * S),
//   d x_c = gs * (p_c * sum_c' w q - w_c q_c),  d target_c = -gs * (1 - ls) w_c logp_c.

std::tuple<Tensor, Tensor, Tensor> cross_entropy_forward(const Tensor& input, const Tensor& target,
                                                         const Tensor& weight, const std::string& reduction,
                                                         int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  const Reduction red = parse_reduction(reduction, op);
  const bool prob = core::is_floating(target.dtype());
  const ClassLayout l = class_layout(input, target, prob, op);
  TB_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op,
           "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  const std::vector<double> w = class_weights(weight, l.C, op);
  const Tensor logp = log_softmax(input, input.dim() == 1 ? 0 : 1).contiguous();
  const double ls = label_smoothing, lsc = l.C ? ls / double(l.C) : 0.0;
  const int64_t C = l.C, S = l.S;
  std::vector<double> per(size_t(l.N * S), 0.0);
  double denom = 0;
  core::dispatch_floating(logp.dtype(), op, [&]<typename T>() {
    const T* lp = logp.data_ptr<T>();
    if (!prob) {
      const Tensor t = checked_targets(target, C, ignore_index, op);
      const int64_t* tp = t.data_ptr<int64_t>();
      for (int64_t n = 0; n < l.N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t e = n * S + s, c = tp[e];
          if (c == ignore_index) continue;
          const T* row = lp + n * C * S + s;
          double v = -(1 - ls) * w[size_t(c)] * double(row[c * S]);
          if (ls > 0) {
            double sm = 0;
            for (int64_t k = 0; k < C; ++k) sm += w[size_t(k)] * double(row[k * S]);
            v -= lsc * sm;
          }
          // As nll_loss's: PyTorch sums an unbatched input's one term into a zero (+0, not -0).
          per[size_t(e)] = input.dim() == 1 ? v + 0.0 : v;
          denom += w[size_t(c)];
        }
    } else {
      const Tensor q = target.to(DType::Float64).contiguous();
      const double* qp = q.data_ptr<double>();
      for (int64_t n = 0; n < l.N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          double v = 0;
          for (int64_t k = 0; k < C; ++k) {
            const int64_t i = (n * C + k) * S + s;
            v -= w[size_t(k)] * (qp[i] * (1 - ls) + lsc) * double(lp[i]);
          }
          per[size_t(n * S + s)] = v;
        }
      denom = double(l.N * S);
    }
  });
  if (red != Reduction::Mean) denom = 1;
  return {finish(per, red, denom, l.loss_shape, input.dtype()), logp, full({}, denom, DType::Float64)};
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  const BareKernel bare("cross_entropy", {&input, &target, &weight});
  return std::get<0>(cross_entropy_forward(input, target, weight, reduction, ignore_index, label_smoothing));
}

std::tuple<Tensor, Tensor> cross_entropy_backward(const Tensor& grad_output, const Tensor& log_probs,
                                                  const Tensor& target, const Tensor& weight,
                                                  const std::string& reduction, int64_t ignore_index,
                                                  double label_smoothing, const Tensor& denominator, bool want_target) {
  KernelEvent event("cross_entropy_backward", {&grad_output, &log_probs, &target, &weight});  // Note [Backward kernels]
  const char* op = "cross_entropy_backward";
  const Reduction red = parse_reduction(reduction, op);
  const bool prob = core::is_floating(target.dtype());
  const ClassLayout l = class_layout(log_probs, target, prob, op);
  const std::vector<double> w = class_weights(weight, l.C, op);
  const int64_t N = l.N, C = l.C, S = l.S;
  const std::vector<double> g = per_target_grad(grad_output, red, denominator.item_double(), N * S);
  const Tensor lpc = log_probs.contiguous();
  const double ls = label_smoothing, lsc = C ? ls / double(C) : 0.0;
  double W = 0;
  for (double v : w) W += v;
  Tensor dx = empty(log_probs.sizes(), log_probs.dtype()), dt;
  const Tensor t = prob ? Tensor() : checked_targets(target, C, ignore_index, op);
  const Tensor q = prob ? target.to(DType::Float64).contiguous() : Tensor();
  if (prob && want_target) dt = empty(target.sizes(), DType::Float64);
  core::dispatch_floating(log_probs.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const T* lp = lpc.data_ptr<T>();
    T* dp = dx.data_ptr<T>();
    const int64_t* tp = prob ? nullptr : t.data_ptr<int64_t>();
    const double* qp = prob ? q.data_ptr<double>() : nullptr;
    double* dtp = dt.defined() ? dt.data_ptr<double>() : nullptr;
    std::vector<A> wa(w.begin(), w.end());
    const bool par = num_threads() > 1 && N * C * S >= kParallelGrain;
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      std::vector<A> gs(static_cast<size_t>(S)),
          K(static_cast<size_t>(S));  // per position: output gradient, and p's coefficient
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const T* row = lp + n * C * S;
        T* out = dp + n * C * S;
        for (int64_t s = 0; s < S; ++s) {
          const int64_t e = n * S + s;
          if (!prob) {
            const int64_t c = tp[e];
            const bool keep = c != ignore_index;
            gs[size_t(s)] = keep ? A(g[size_t(e)]) : A(0);
            K[size_t(s)] = keep ? A((1 - ls) * w[size_t(c)] + lsc * W) : A(0);
          } else {
            double k = 0;
            for (int64_t c = 0; c < C; ++c) k += w[size_t(c)] * (qp[(n * C + c) * S + s] * (1 - ls) + lsc);
            gs[size_t(s)] = A(g[size_t(e)]);
            K[size_t(s)] = A(k);
          }
        }
        if (!prob && S == 1) {  // the language-model case: one contiguous row of C logits
          const A gk = gs[0] * K[0], gl = gs[0] * A(lsc);
          for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(cpu::exp_fast(A(row[c])) * gk - gl * wa[size_t(c)]);
        } else if (!prob) {
          for (int64_t c = 0; c < C; ++c)
            for (int64_t s = 0; s < S; ++s)
              out[c * S + s] = static_cast<T>(
                  gs[size_t(s)] * (cpu::exp_fast(A(row[c * S + s])) * K[size_t(s)] - A(lsc) * wa[size_t(c)]));
        } else {
          for (int64_t c = 0; c < C; ++c)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t i = (n * C + c) * S + s;
              const A qv = A(qp[i] * (1 - ls) + lsc);
              out[c * S + s] = static_cast<T>(gs[size_t(s)] *
                                              (cpu::exp_fast(A(row[c * S + s])) * K[size_t(s)] - wa[size_t(c)] * qv));
              if (dtp) dtp[i] = -double(gs[size_t(s)]) * (1 - ls) * w[size_t(c)] * double(row[c * S + s]);
            }
        }
        if (!prob)
          for (int64_t s = 0; s < S; ++s) {
            const int64_t c = tp[n * S + s];
            if (c == ignore_index) continue;
            out[c * S + s] = static_cast<T>(A(out[c * S + s]) - gs[size_t(s)] * A((1 - ls) * w[size_t(c)]));
          }
      }
    }
  });
  return {dx, dt.defined() ? dt.to(target.dtype()) : dt};
}

// ---- elementwise losses ----

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const BareKernel bare("mse_loss", {&input, &target});
  if (input.sizes() == target.sizes() && input.dtype() == target.dtype() && core::is_floating(input.dtype())) {
    // (input - target)^2 in one pass, the difference rounded to the dtype first as LibTorch's
    // kernel does; sub then mul read and wrote the difference once more (1.4x LibTorch's time).
    // Laid out as LibTorch's TensorIterator lays out its binary result (Note [Result layouts]):
    // a later .view sees it.
    Tensor sq = ew::empty_like_inputs(input.sizes(), input.dtype(), {input, target}, ew::Setup::Fast);
    StridedLoop loop({sq, input, target});
    core::dispatch_floating(input.dtype(), "mse_loss", [&]<typename T>() {
      using M = core::opmath_t<T>;
      cpu::cpu_kernel<T, T, T>(loop, [](M x, M y) -> M {
        const M d = static_cast<M>(static_cast<T>(x - y));
        return d * d;
      });
    });
    return apply_loss_reduction(sq, reduction);
  }
  const Tensor d = sub(input, target);
  return apply_loss_reduction(mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const BareKernel bare("l1_loss", {&input, &target});
  return apply_loss_reduction(abs(sub(input, target)), reduction);
}

namespace {

// Note [binary_cross_entropy_with_logits in one pass]
// The loss was composed of neg, softplus, sub, neg, mul and add (and mul, sub, add for pos_weight,
// mul for weight): six or more passes over (4096, 1024) float32, each writing a tensor the next
// one read. bce_fused computes the same expression a run of kVecChunk elements at a time, every
// step rounded to the dtype T as the composed ops' results were (bit-identical for float and
// double, where T is the compute type, and for bfloat16/float16, where each op's result was
// rounded): softplus(-x) as softplus's kernel (exp and log1p through vec_math_run over the run,
// -x where -x > 20), then -(t - 1) * x + lw * softplus(-x), lw = (pw - 1) t + 1, times the
// weight. No product may be fused with the sum that follows it (GCC contracts a * b + c into an
// FMA within a loop, which changed the last bit of some float losses): each such step is a loop
// of its own, and engine/ops/tests/loss_test.cpp checks the result bit for bit against the
// composed ops. It takes input, target, weight and pos_weight of one dtype, weight and pos_weight
// broadcasting to the input's shape (the loss's shape is then the input's); anything else is the
// composed path below. The reduction stays apply_loss_reduction's over the unreduced loss, as
// mse_loss's does (91eb22a). The backward (autograd/functions/loss.cpp) reads only the inputs.
template <typename T, bool HasW, bool HasPw>
void bce_fused(const StridedLoop& loop) {
  using M = core::opmath_t<T>;
  constexpr int64_t K = cpu::kVecChunk;
  constexpr int kW = 3, kPw = HasW ? 4 : 3;  // operands: loss, input, target[, weight][, pos_weight]
  loop.for_each([](char** data, const int64_t* st, int64_t n) {
    alignas(64) M x[K], e[K], t[K], w[K], pw[K], l[K];
    const auto load = [&](M* buf, int k, int64_t c, int64_t m) {
      const char* p = data[k] + c * st[k];
      if (st[k] == int64_t(sizeof(T))) {
        const T* q = reinterpret_cast<const T*>(p);
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(q[i]);
      } else {
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(*reinterpret_cast<const T*>(p + i * st[k]));
      }
    };
    const auto r = [](M v) { return static_cast<M>(static_cast<T>(v)); };  // a composed op's rounded result
    for (int64_t c = 0; c < n; c += K) {
      const int64_t m = std::min(int64_t(K), n - c);
      load(x, 1, c, m);
      load(t, 2, c, m);
      if constexpr (HasW) load(w, kW, c, m);
      if constexpr (HasPw) load(pw, kPw, c, m);
      for (int64_t i = 0; i < m; ++i) e[i] = -x[i];  // neg(input): exact
      cpu::vec_math_run<cpu::VecFn::Exp>(e, m);
      cpu::vec_math_run<cpu::VecFn::Log1p>(e, m);
      // One loop per step where a product would meet a sum: GCC contracts a * b + c into an FMA
      // (its default -ffp-contract=fast) inside a loop, but not across loops through memory, and
      // the composed ops rounded every product.
      for (int64_t i = 0; i < m; ++i) {
        e[i] = r(-x[i] > M(20) ? -x[i] : e[i]);  // softplus(-x): beta 1, threshold 20
        l[i] = r(-r(t[i] - M(1)) * x[i]);        // mul(neg(sub(target, 1)), input)
      }
      if constexpr (HasPw) {
        for (int64_t i = 0; i < m; ++i) pw[i] = r(r(pw[i] - M(1)) * t[i]);
        for (int64_t i = 0; i < m; ++i) e[i] = r(r(pw[i] + M(1)) * e[i]);  // lw * softplus(-x)
      }
      for (int64_t i = 0; i < m; ++i) x[i] = r(l[i] + e[i]);
      if constexpr (HasW)
        for (int64_t i = 0; i < m; ++i) x[i] = r(x[i] * w[i]);
      char* out = data[0] + c * st[0];
      if (st[0] == int64_t(sizeof(T))) {
        if constexpr (std::is_same_v<T, core::BFloat16>) {
          cpu::store_bf16(reinterpret_cast<core::BFloat16*>(out), x, m);
        } else {
          T* q = reinterpret_cast<T*>(out);
          for (int64_t i = 0; i < m; ++i) q[i] = static_cast<T>(x[i]);
        }
      } else {
        for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(out + i * st[0]) = static_cast<T>(x[i]);
      }
    }
  });
}

// True when `t` is undefined, or of dtype dt and broadcasts to `shape` without enlarging it.
bool broadcasts_to(const Tensor& t, const Shape& shape, DType dt) {
  if (!t.defined()) return true;
  if (t.dtype() != dt || t.dim() > int64_t(shape.size())) return false;
  for (int64_t d = 1; d <= t.dim(); ++d) {
    const int64_t ts = t.size(t.dim() - d), s = shape[shape.size() - size_t(d)];
    if (ts != s && ts != 1) return false;
  }
  return true;
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  const BareKernel bare("binary_cross_entropy_with_logits", {&input, &target, &weight, &pos_weight});
  const char* op = "binary_cross_entropy_with_logits";
  TB_CHECK(target.sizes() == input.sizes(), op, "Target size (", core::to_string(target.sizes()),
           ") must be the same as input size (", core::to_string(input.sizes()), ")");
  const DType dt = input.dtype();
  if (core::is_floating(dt) && target.dtype() == dt && broadcasts_to(weight, input.sizes(), dt) &&
      broadcasts_to(pos_weight, input.sizes(), dt)) {
    // Note [binary_cross_entropy_with_logits in one pass]
    const bool plain = input.is_contiguous() && target.is_contiguous();
    Tensor loss = plain ? empty(input.sizes(), dt) : empty_in_stride_order(input.sizes(), dt, {target, input});
    std::vector<Tensor> operands = {loss, input, target};
    if (weight.defined()) operands.push_back(weight.expand(input.sizes()));
    if (pos_weight.defined()) operands.push_back(pos_weight.expand(input.sizes()));
    const StridedLoop loop(operands);
    const bool w = weight.defined(), pw = pos_weight.defined();
    core::dispatch_floating(dt, op, [&]<typename T>() {
      if (w && pw) bce_fused<T, true, true>(loop);
      else if (w) bce_fused<T, true, false>(loop);
      else if (pw) bce_fused<T, false, true>(loop);
      else bce_fused<T, false, false>(loop);
    });
    return apply_loss_reduction(loss, reduction);
  }
  const Tensor sp = softplus(neg(input));  // -log(sigmoid(x)), stable for large |x|
  // (1 - t) x + (1 + (pw - 1) t) softplus(-x), PyTorch's grouping: at x = +inf, t = 0 it is inf
  // (x - t x would be inf - 0 * inf = NaN).
  Tensor loss = mul(neg(sub(target, 1)), input);
  const Tensor lw = pos_weight.defined() ? add(mul(sub(pos_weight, 1), target), 1) : Tensor();
  loss = add(loss, lw.defined() ? mul(lw, sp) : sp);
  if (weight.defined()) loss = mul(loss, weight);
  return apply_loss_reduction(loss, reduction);
}

}  // namespace tb::ops
