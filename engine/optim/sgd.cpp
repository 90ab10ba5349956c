// SGD's update, following torch/optim/sgd.py (_single_tensor_sgd) operation by operation:
//   g = maximize ? -grad : grad
//   g = g + weight_decay * p                                   (if weight_decay != 0)
//   buf = clone(g) on its first step, else momentum * buf + (1 - dampening) * g  (if momentum != 0)
//   g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// Each value PyTorch stores in a tensor is rounded to the parameter's dtype at the same point
// (a no-op for float32/float64), so bf16/f16 parameters see PyTorch's roundings.
#include "engine/optim/sgd.h"

#include "engine/autograd/grad_mode.h"
#include "engine/core/profiler.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/ops/common.h"
#include "engine/tensor/state_fence.h"

namespace tb::optim {

namespace {

struct SgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, first;  // first: the momentum buffer starts as the gradient
};

// p, g, buf: n elements in one layout; buf is null without momentum.
template <typename T>
void sgd_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ buf, int64_t begin, int64_t end,
                const SgdArgs& a) {
  using C = core::opmath_t<T>;
  using detail::round_to;
  const C wd = C(a.weight_decay), mom = C(a.momentum), damp1 = C(1 - a.dampening), neg_lr = C(-a.lr);
  const bool use_wd = a.weight_decay != 0, use_mom = a.momentum != 0, maximize = a.maximize, first = a.first,
             nesterov = a.nesterov;
  for (int64_t i = begin; i < end; ++i) {
    C pi = C(p[i]);
    C gi = maximize ? -C(g[i]) : C(g[i]);
    if (use_wd) gi = round_to<T>(gi + wd * pi);
    if (use_mom) {
      C b = first ? gi : round_to<T>(round_to<T>(C(buf[i]) * mom) + damp1 * gi);
      buf[i] = T(b);
      gi = nesterov ? round_to<T>(gi + mom * b) : b;
    }
    p[i] = T(pi + neg_lr * gi);
  }
}

}  // namespace

nlohmann::json SGD::to_json(const Options& o) {
  // PyTorch's defaults dict (foreach/differentiable/fused are recorded as PyTorch records them;
  // this engine has one implementation and ignores them).
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov},
          {"maximize", o.maximize},
          {"foreach", nullptr},
          {"differentiable", false},
          {"fused", nullptr}};
}

SGD::SGD(std::vector<Tensor> params, Options o) : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, o) {}

SGD::SGD(std::vector<ParamGroup> groups, Options defaults) : Optimizer(std::move(groups), to_json(defaults)) {
  check_options(defaults_);
  check_all_groups();
}

void SGD::check_options(const nlohmann::json& o) const {
  ParamGroup g{{}, o};
  const double lr = opt_double(g, "lr"), momentum = opt_double(g, "momentum");
  const double dampening = opt_double(g, "dampening"), weight_decay = opt_double(g, "weight_decay");
  TB_CHECK(lr >= 0, "SGD", "Invalid learning rate: ", lr, " (must be >= 0)");
  TB_CHECK(momentum >= 0, "SGD", "Invalid momentum value: ", momentum, " (must be >= 0)");
  TB_CHECK(weight_decay >= 0, "SGD", "Invalid weight_decay value: ", weight_decay, " (must be >= 0)");
  TB_CHECK(!opt_bool(g, "nesterov") || (momentum > 0 && dampening == 0), "SGD",
           "Nesterov momentum requires a momentum and zero dampening (got momentum=", momentum,
           ", dampening=", dampening, ")");
  opt_bool(g, "maximize");
}

void SGD::step() {
  state_fence();  // a background checkpoint may still be copying this state (Note [State fences])
  memory::TagGuard tag(memory::Tag::OptimizerState);  // the momentum buffers (Note [Memory tags])
  memory::OpScope op("sgd.step");                     // for OOM reports
  profiler::Scope prof("sgd.step", profiler::Category::Optimizer);
  autograd::NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    SgdArgs a{opt_double(group, "lr"),
              opt_double(group, "momentum"),
              opt_double(group, "dampening"),
              opt_double(group, "weight_decay"),
              opt_bool(group, "nesterov"),
              opt_bool(group, "maximize"),
              false};
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      std::vector<Tensor> state;
      a.first = false;
      if (a.momentum != 0) {
        ParamState& ps = state_of(param_index(gi, i));
        auto it = ps.find("momentum_buffer");
        if (it == ps.end() || !it->second.defined()) {
          it = ps.insert_or_assign("momentum_buffer", empty_like_preserve(p, p.dtype())).first;
          a.first = true;
        }
        state.push_back(it->second);
      }
      FlatUpdate f = flat_update(p, grad, state);
      // The update's own op event inside sgd.step, as adam.cpp's.
      const ops::KernelEvent event("_fused_sgd_", {&p, &grad, state.empty() ? nullptr : &state[0]});
      core::dispatch_floating(p.dtype(), "SGD.step", [&]<typename T>() {
        T* pp = static_cast<T*>(f.param.data());
        const T* gp = static_cast<const T*>(f.grad.data());
        T* bp = f.state.empty() ? nullptr : static_cast<T*>(f.state[0].data());
        parallel_for(p.numel(), [&](int64_t b, int64_t e) { sgd_kernel<T>(pp, gp, bp, b, e, a); });
      });
      f.finish();
    }
  }
}

}  // namespace tb::optim
