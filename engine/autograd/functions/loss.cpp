// Backward formulas of the losses (engine/ops/loss.h). nll_loss and cross_entropy use the fused
// kernels of ops/loss.cpp (cross_entropy keeps log_softmax's output and the mean's denominator,
// and goes straight from the loss gradient to the logits' gradient); the elementwise losses
// follow PyTorch's derivatives.yaml entries with elementwise ops. Class-index targets and class
// weights are not differentiated (as in PyTorch).
#include "engine/autograd/autocast.h"
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/loss.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

namespace {
// The output gradient g spread over an elementwise loss of n elements: g / n for "mean".
Tensor loss_grad_scale(const Tensor& g, const std::string& reduction, int64_t n) {
  return reduction == "mean" ? ops::div(g, Scalar(double(n))) : g;
}
}  // namespace

Tensor nll_loss(const Tensor& input_in, const Tensor& target, const Tensor& weight_in, const std::string& reduction,
                int64_t ignore_index) {
  const Tensor input = autocast_fp32(input_in), weight = autocast_fp32(weight_in);
  auto [out,
        total_weight] = kernel([&] { return ops::nll_loss_forward(input, target, weight, reduction, ignore_index); });
  record("nll_loss", {input}, {out}, {input, target, weight, total_weight},
         [reduction, ignore_index](BackwardContext& ctx, const TensorList& g) {
           return TensorList{ops::nll_loss_backward(g[0], ctx.saved(0), ctx.saved(1), ctx.saved(2), reduction,
                                                    ignore_index, ctx.saved(3))};
         });
  return out;
}

// Inputs: the logits and, for probability targets, the target (its gradient is cheap to give).
Tensor cross_entropy(const Tensor& input_in, const Tensor& target_in, const Tensor& weight_in,
                     const std::string& reduction, int64_t ignore_index, double label_smoothing) {
  const Tensor input = autocast_fp32(input_in), target = autocast_fp32(target_in), weight = autocast_fp32(weight_in);
  auto [out, log_probs, denominator] = kernel(
      [&] { return ops::cross_entropy_forward(input, target, weight, reduction, ignore_index, label_smoothing); });
  const bool prob = core::is_floating(target.dtype());
  record("cross_entropy", prob ? TensorList{input, target} : TensorList{input}, {out},
         {log_probs, target, weight, denominator},
         [reduction, ignore_index, label_smoothing, prob](BackwardContext& ctx, const TensorList& g) {
           auto [dx, dt] = ops::cross_entropy_backward(g[0], ctx.saved(0), ctx.saved(1), ctx.saved(2), reduction,
                                                       ignore_index, label_smoothing, ctx.saved(3),
                                                       prob && ctx.needs_grad(1));
           return prob ? TensorList{dx, dt} : TensorList{dx};
         });
  return out;
}

// d input = 2 (x - t) g (/ n), d target = -d input.
Tensor mse_loss(const Tensor& input_in, const Tensor& target_in, const std::string& reduction) {
  const Tensor input = autocast_fp32(input_in), target = autocast_fp32(target_in);
  Tensor out = kernel([&] { return ops::mse_loss(input, target, reduction); });
  record("mse_loss", {input, target}, {out}, {input, target}, [reduction](BackwardContext& ctx, const TensorList& g) {
    const Tensor d = ops::sub(ctx.saved(0), ctx.saved(1));
    const Tensor gi = ops::mul(ops::mul(d, loss_grad_scale(g[0], reduction, d.numel())), Scalar(2.0));
    return TensorList{gi, ctx.needs_grad(1) ? ops::neg(gi) : Tensor()};
  });
  return out;
}

// d input = sign(x - t) g (/ n): zero where x == t, as abs' gradient.
Tensor l1_loss(const Tensor& input_in, const Tensor& target_in, const std::string& reduction) {
  const Tensor input = autocast_fp32(input_in), target = autocast_fp32(target_in);
  Tensor out = kernel([&] { return ops::l1_loss(input, target, reduction); });
  record("l1_loss", {input, target}, {out}, {input, target}, [reduction](BackwardContext& ctx, const TensorList& g) {
    const Tensor s = ops::sign(ops::sub(ctx.saved(0), ctx.saved(1)));
    const Tensor gi = ops::mul(s, loss_grad_scale(g[0], reduction, s.numel()));
    return TensorList{gi, ctx.needs_grad(1) ? ops::neg(gi) : Tensor()};
  });
  return out;
}

// With lw = 1 + (pw - 1) t (lw = 1 without pos_weight) and l = (1 - t) x + lw softplus(-x):
//   d x = w (lw sigmoid(x) - pw t) g,  d t = w (-x + (pw - 1) softplus(-x)) g   (/ n for "mean").
// weight and pos_weight are not differentiable: PyTorch refuses them when they require grad.
Tensor binary_cross_entropy_with_logits(const Tensor& input_in, const Tensor& target_in, const Tensor& weight_in,
                                        const std::string& reduction, const Tensor& pos_weight_in) {
  const Tensor input = autocast_fp32(input_in), target = autocast_fp32(target_in);
  const Tensor weight = autocast_fp32(weight_in), pos_weight = autocast_fp32(pos_weight_in);
  for (const auto& [t, name] : {std::pair{&weight, "weight"}, std::pair{&pos_weight, "pos_weight"}})
    TB_CHECK(!(grad_mode_enabled() && t->defined() && t->requires_grad()), "binary_cross_entropy_with_logits",
             "The function 'binary_cross_entropy_with_logits' is not differentiable with respect to argument '", name,
             "'. This input cannot have requires_grad True.");
  Tensor out = kernel(
      [&] { return ops::binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight); });
  record("binary_cross_entropy_with_logits", {input, target}, {out}, {input, target, weight, pos_weight},
         [reduction](BackwardContext& ctx, const TensorList& g) {
           const Tensor x = ctx.saved(0), t = ctx.saved(1), w = ctx.saved(2), pw = ctx.saved(3);
           const int64_t n =  // the loss's (broadcast) size
               w.defined() ? core::checked_numel(core::broadcast_shapes(x.sizes(), w.sizes(), "bce"), "bce")
                           : x.numel();
           const Tensor gs = loss_grad_scale(g[0], reduction, n);
           const Tensor gw = w.defined() ? ops::mul(gs, w) : gs;  // gradient with the weight folded in
           Tensor dx, dt;
           if (ctx.needs_grad(0)) {
             const Tensor sig = ops::sigmoid(x);
             if (pw.defined()) {
               const Tensor pt = ops::mul(pw, t);
               dx = ops::sub(ops::mul(ops::add(ops::sub(pt, t), 1), sig), pt);
             } else {
               dx = ops::sub(sig, t);
             }
             dx = ops::mul(dx, gw);
           }
           if (ctx.needs_grad(1)) {
             const Tensor d = pw.defined()
                                  ? ops::add(ops::neg(x), ops::mul(ops::sub(pw, 1), ops::softplus(ops::neg(x))))
                                  : ops::neg(x);
             dt = ops::mul(d, gw);
           }
           return TensorList{dx, dt};
         });
  return out;
}

}  // namespace tb
