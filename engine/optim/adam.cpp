// Adam/AdamW's update, following torch/optim/adam.py (_single_tensor_adam, capturable=False)
// operation by operation, per element in one pass:
//   step += 1                                        (a float32 0-dim tensor, read back as a number)
//   g = maximize ? -grad : grad
//   p = p * (1 - lr * wd)        if decoupled (AdamW)  |  g = g + wd * p   otherwise (if wd != 0)
//   m = lerp(m, g, 1 - beta1)                        (ATen's two-branch lerp)
//   v = beta2 * v + (1 - beta2) * g * g
//   vmax = max(vmax, v), used for v                  (amsgrad)
//   denom = sqrt(v) / sqrt(1 - beta2^step) + eps
//   p = p - (lr / (1 - beta1^step)) * m / denom
// Scalars are computed in double as Python does, then cast to the compute type; each value that
// PyTorch stores in a tensor is rounded to the parameter's dtype at the same point (a no-op for
// float32/float64).
#include "engine/optim/adam.h"

#include <cmath>
#include <type_traits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "engine/autograd/autocast.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/profiler.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/ops/common.h"
#include "engine/ops/cpu/bf16_convert.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/state_fence.h"

namespace tb::optim {

namespace {

struct AdamArgs {
  double lr, beta1, beta2, eps, weight_decay, step;
  bool amsgrad, maximize, decoupled;
};

// p, g, m, v, vmax: n elements in one layout; vmax is null without amsgrad.
// kDecay: 0 none, 1 L2 (Adam), 2 decoupled (AdamW); fixed per call so the loop has no branches
// and vectorises.
// The engine builds with -fno-math-errno (engine/CMakeLists.txt): errno handling would put a
// branch on std::sqrt in this loop and stop it vectorising.
template <typename T, bool kAmsgrad, int kDecay>
void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v, T* __restrict__ vmax,
                 int64_t begin, int64_t end, const AdamArgs& a) {
  using C = core::opmath_t<T>;
  using detail::round_to;
  const double bias1 = 1 - std::pow(a.beta1, a.step), bias2 = 1 - std::pow(a.beta2, a.step);
  const C decay = C(1 - a.lr * a.weight_decay), wd = C(a.weight_decay);
  const C w = C(1 - a.beta1), one_minus_w = C(1) - w, beta2 = C(a.beta2), one_minus_beta2 = C(1 - a.beta2);
  const C bias2_sqrt = C(std::sqrt(bias2)), eps = C(a.eps), neg_step_size = C(-(a.lr / bias1));
  const bool small_w = std::abs(w) < C(0.5);
  const C sign = a.maximize ? C(-1) : C(1);  // exact negation
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    // The update on 16 lanes with its fmas spelled out (the scalar loop below spells the same
    // ones: bitwise the same results), every load of a step before its stores.
    // The caching allocator gives large blocks 2 MiB alignment, so p, g, m and v share their low
    // 12 address bits, and where GCC's vectorised loop loaded v after storing m (and p after v)
    // each such load waited on the store (4K aliasing): AdamW over the MLP's 1.9M float32
    // parameters, one thread, 4.0-4.2 ms per step; loads first 1.4 ms (LibTorch's fused kernel
    // 1.7-2.0 ms).
    using vf = float __attribute__((vector_size(64)));
    const auto ld = [](const float* q) {
      vf x;
      __builtin_memcpy(&x, q, sizeof x);
      return x;
    };
    const auto st = [](float* q, vf x) { __builtin_memcpy(q, &x, sizeof x); };
    for (; begin + 16 <= end; begin += 16) {
      const vf p0 = ld(p + begin), g0 = ld(g + begin), m0 = ld(m + begin), v0 = ld(v + begin);
      vf old{};
      if constexpr (kAmsgrad) old = ld(vmax + begin);
      // Keeps the loads here: GCC otherwise folds them into arithmetic after the stores below.
      asm volatile("" ::: "memory");
      const auto fma = [](vf x, auto y, vf z) {  // x * y + z, one rounding
        const __m512 y512 = reinterpret_cast<__m512>(y + vf{});
        return reinterpret_cast<vf>(_mm512_fmadd_ps(reinterpret_cast<__m512>(x), y512, reinterpret_cast<__m512>(z)));
      };
      vf gi = sign * g0;
      if constexpr (kDecay == 1) gi = fma(p0, wd, gi);
      const vf d = gi - m0;
      const vf mi = small_w ? fma(d, w, m0) : fma(-d, one_minus_w, gi);
      const vf vi = fma(v0, beta2, one_minus_beta2 * gi * gi);
      vf vv = vi;
      if constexpr (kAmsgrad) vv = ((old > vi) | (old != old)) ? old : vi;
      // The masked form: GCC 12 warns maybe-uninitialized inside _mm512_sqrt_ps.
      const __m512 vv512 = reinterpret_cast<__m512>(vv);
      const vf denom = reinterpret_cast<vf>(_mm512_mask_sqrt_ps(vv512, __mmask16(0xFFFF), vv512)) / bias2_sqrt + eps;
      const vf q = mi / denom;
      const vf pn = kDecay == 2 ? fma(p0, decay, neg_step_size * q) : fma(q, neg_step_size, p0);
      st(m + begin, mi);
      st(v + begin, vi);
      if constexpr (kAmsgrad) st(vmax + begin, vv);
      st(p + begin, pn);
    }
  }
#endif
  // float32: the fmas of the 16-lane path above, spelled out, so a parameter's scalar tail rounds
  // as its body does (left to contraction, GCC fused different products in its vectorised and
  // scalar loops). Other dtypes round intermediates to T and keep the plain expressions.
  constexpr bool kFused = std::is_same_v<T, float>;
  for (int64_t i = begin; i < end; ++i) {
    const C p0 = C(p[i]);
    C pi = p0;
    C gi = sign * C(g[i]);
    if constexpr (kDecay == 2) pi = round_to<T>(pi * decay);
    if constexpr (kDecay == 1) gi = kFused ? std::fma(p0, wd, gi) : round_to<T>(gi + wd * pi);
    const C mi0 = C(m[i]);
    C mi, vi;
    if constexpr (kFused) {
      const C d = gi - mi0;
      mi = small_w ? std::fma(d, w, mi0) : std::fma(-d, one_minus_w, gi);
      vi = std::fma(C(v[i]), beta2, one_minus_beta2 * gi * gi);
    } else {
      const C lerp_small = mi0 + w * (gi - mi0), lerp_large = gi - (gi - mi0) * one_minus_w;
      mi = round_to<T>(small_w ? lerp_small : lerp_large);
      vi = round_to<T>(round_to<T>(C(v[i]) * beta2) + one_minus_beta2 * gi * gi);
    }
    m[i] = T(mi);
    v[i] = T(vi);
    C vv = vi;
    if constexpr (kAmsgrad) {
      const C old = C(vmax[i]);
      vv = ((old > vi) | (old != old)) ? old : vi;  // torch.maximum: NaN in either gives NaN
      vmax[i] = T(vv);
    }
    const C denom = round_to<T>(round_to<T>(round_to<T>(std::sqrt(vv)) / bias2_sqrt) + eps);
    const C q = mi / denom;
    if constexpr (kFused) p[i] = kDecay == 2 ? std::fma(p0, decay, neg_step_size * q) : std::fma(q, neg_step_size, p0);
    else p[i] = T(pi + neg_step_size * q);
  }
}

void check_adam_options(const char* op, const ParamGroup& g, double lr, const std::pair<double, double>& betas,
                        double eps, double weight_decay) {
  TB_CHECK(lr >= 0, op, "Invalid learning rate: ", lr, " (must be >= 0)");
  TB_CHECK(eps >= 0, op, "Invalid epsilon value: ", eps, " (must be >= 0)");
  TB_CHECK(betas.first >= 0 && betas.first < 1, op, "Invalid beta parameter at index 0: ", betas.first,
           " (must be in [0, 1))");
  TB_CHECK(betas.second >= 0 && betas.second < 1, op, "Invalid beta parameter at index 1: ", betas.second,
           " (must be in [0, 1))");
  TB_CHECK(weight_decay >= 0, op, "Invalid weight_decay value: ", weight_decay, " (must be >= 0)");
  (void)g;
}

}  // namespace

nlohmann::json Adam::to_json(const Options& o, bool decoupled) {
  return {{"lr", o.lr},
          {"betas", {o.betas.first, o.betas.second}},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad},
          {"maximize", o.maximize},
          {"foreach", nullptr},
          {"capturable", false},
          {"differentiable", false},
          {"fused", nullptr},
          {"decoupled_weight_decay", decoupled}};
}

Adam::Adam(std::vector<Tensor> params, Options o)
    : Adam(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, o) {}

Adam::Adam(std::vector<ParamGroup> groups, Options defaults)
    : Adam(FromJson{}, std::move(groups), to_json(defaults, false)) {}

Adam::Adam(FromJson, std::vector<ParamGroup> groups, nlohmann::json defaults)
    : Optimizer(std::move(groups), std::move(defaults)) {
  check_options(defaults_);
  check_all_groups();
}

void Adam::check_options(const nlohmann::json& o) const {
  ParamGroup g{{}, o};
  const char* op = opt_bool(g, "decoupled_weight_decay") ? "AdamW" : "Adam";
  check_adam_options(op, g, opt_double(g, "lr"), opt_pair(g, "betas"), opt_double(g, "eps"),
                     opt_double(g, "weight_decay"));
  opt_bool(g, "amsgrad");
  opt_bool(g, "maximize");
}

void Adam::step() {
  state_fence();  // a background checkpoint may still be copying this state (Note [State fences])
  memory::TagGuard tag(memory::Tag::OptimizerState);  // the lazily created state (Note [Memory tags])
  const char* name = dynamic_cast<const AdamW*>(this) ? "adamw.step" : "adam.step";
  memory::OpScope op(name);  // for OOM reports
  profiler::Scope prof(name, profiler::Category::Optimizer);
  autograd::NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    const auto betas = opt_pair(group, "betas");
    AdamArgs a{opt_double(group, "lr"),
               betas.first,
               betas.second,
               opt_double(group, "eps"),
               opt_double(group, "weight_decay"),
               0,
               opt_bool(group, "amsgrad"),
               opt_bool(group, "maximize"),
               opt_bool(group, "decoupled_weight_decay")};
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& ps = state_of(param_index(gi, i));
      if (ps.empty()) {  // lazy init, as PyTorch: only parameters that have had a gradient
        ps["step"] = scalar_tensor(0, DType::Float32);
        ps["exp_avg"] = zeros_state(p);
        ps["exp_avg_sq"] = zeros_state(p);
      }
      if (a.amsgrad && !ps.count("max_exp_avg_sq")) ps["max_exp_avg_sq"] = zeros_state(p);
      for (const char* k : {"step", "exp_avg", "exp_avg_sq"})
        TB_CHECK(ps.count(k) && ps[k].defined(), "Adam.step", "state of parameter ", param_index(gi, i), " lacks '", k,
                 "'; load a complete Adam state dict");
      // step_t += 1 in float32, then read back (_get_value) as a double.
      Tensor& step_t = ps["step"];
      float* sp = step_t.data_ptr<float>();
      *sp += 1.0f;
      step_t.bump_version();
      a.step = double(*sp);
      std::vector<Tensor> state{ps["exp_avg"], ps["exp_avg_sq"]};
      if (a.amsgrad) state.push_back(ps["max_exp_avg_sq"]);
      FlatUpdate f = flat_update(p, grad, state);
      // Note [Autocast weight shadows]: the bfloat16 rounding of the updated weights, for the next
      // forward's autocast, written while each chunk is still in L1.
      const Tensor shadow = f.param.is_same(p) ? autograd::autocast_shadow_buffer(p) : Tensor();
      auto* sh = shadow.defined() ? static_cast<core::BFloat16*>(shadow.data()) : nullptr;
      // The update is an op event of its own inside adam(w).step, with the shapes it walks, named
      // as PyTorch's fused kernels (which take every parameter at once; this one runs per
      // parameter). Off: one relaxed load (Note [Profiler cost when off]).
      const ops::KernelEvent event(a.decoupled ? "_fused_adamw_" : "_fused_adam_",
                                   {&p, &grad, &state[0], &state[1], a.amsgrad ? &state[2] : nullptr});
      core::dispatch_floating(p.dtype(), "Adam.step", [&]<typename T>() {
        T* pp = static_cast<T*>(f.param.data());
        const T* gp = static_cast<const T*>(f.grad.data());
        T* mp = static_cast<T*>(f.state[0].data());
        T* vp = static_cast<T*>(f.state[1].data());
        T* vmax = a.amsgrad ? static_cast<T*>(f.state[2].data()) : nullptr;
        parallel_for(p.numel(), [&](int64_t b, int64_t e) {
          const int decay = a.weight_decay == 0 ? 0 : a.decoupled ? 2 : 1;
          auto run = [&]<bool kAms>(int64_t cb, int64_t ce) {
            if (decay == 0) adam_kernel<T, kAms, 0>(pp, gp, mp, vp, vmax, cb, ce, a);
            else if (decay == 1) adam_kernel<T, kAms, 1>(pp, gp, mp, vp, vmax, cb, ce, a);
            else adam_kernel<T, kAms, 2>(pp, gp, mp, vp, vmax, cb, ce, a);
          };
          // With a shadow, 2048 values (8 KiB of float32) at a time: still in L1 for the rounding.
          const int64_t chunk = sh ? 2048 : e - b;
          for (int64_t cb = b; cb < e; cb += chunk) {
            const int64_t ce = std::min(e, cb + chunk);
            if (a.amsgrad) run.template operator()<true>(cb, ce);
            else run.template operator()<false>(cb, ce);
            if constexpr (std::is_same_v<T, float>)
              if (sh) ops::cpu::store_bf16(sh + cb, pp + cb, ce - cb);
          }
        });
      });
      f.finish();
      if (sh) autograd::autocast_shadow_written(p);
    }
  }
}

static nlohmann::json adamw_defaults(const AdamW::Options& o) {
  return Adam::to_json(Adam::Options{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize}, true);
}

AdamW::AdamW(std::vector<Tensor> params, Options o)
    : AdamW(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, o) {}

AdamW::AdamW(std::vector<ParamGroup> groups, Options defaults)
    : Adam(FromJson{}, std::move(groups), adamw_defaults(defaults)) {}

}  // namespace tb::optim
