// BatchNorm, LayerNorm and GroupNorm layers over the autograd normalisation functions. See norm.h.
#include "engine/nn/norm.h"

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/nn/init.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"

namespace tb::nn {

BatchNormBase::BatchNormBase(const char* type_name, const BatchNormOptions& o) : Module(type_name), options(o) {
  const int64_t c = o.num_features;
  weight = register_parameter("weight", o.affine ? empty({c}, o.dtype) : Tensor());
  bias = register_parameter("bias", o.affine ? empty({c}, o.dtype) : Tensor());
  if (o.track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({c}, o.dtype));
    running_var = register_buffer("running_var", ones({c}, o.dtype));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
  }
  reset_parameters();
}

void BatchNormBase::reset_running_stats() {
  if (!options.track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  autograd::NoGradGuard no_grad;
  zero_(num_batches_tracked);
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (options.affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input_dim(x);
  // PyTorch's _BatchNorm.forward: count the batch, pick the averaging factor, and normalise with
  // batch statistics in training or when there are no running statistics.
  double factor = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    autograd::NoGradGuard no_grad;
    ops::add_(num_batches_tracked, 1);
    if (!options.momentum) factor = 1.0 / num_batches_tracked.item<double>();
  }
  const bool use_batch_stats = is_training() || !running_mean.defined();
  const bool pass_stats = !is_training() || options.track_running_stats;
  return tb::batch_norm(x, pass_stats ? running_mean : Tensor(), pass_stats ? running_var : Tensor(), weight, bias,
                        use_batch_stats, factor, options.eps);
}

void BatchNorm1d::check_input_dim(const Tensor& x) const {
  TB_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d", "expected 2D or 3D input (got ", x.dim(), "D input)");
}

void BatchNorm2d::check_input_dim(const Tensor& x) const {
  TB_CHECK(x.dim() == 4, "BatchNorm2d", "expected 4D input (got ", x.dim(), "D input)");
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, bool has_bias, DType dtype)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  weight = register_parameter("weight", affine ? empty(normalized_shape, dtype) : Tensor());
  bias = register_parameter("bias", affine && has_bias ? empty(normalized_shape, dtype) : Tensor());
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNorm::forward(const Tensor& x) { return tb::layer_norm(x, normalized_shape, weight, bias, eps); }

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine, DType dtype)
    : Module("GroupNorm"), num_groups(groups), num_channels(channels), eps(eps_) {
  TB_CHECK(groups > 0 && channels % groups == 0, "GroupNorm", "num_channels (", channels,
           ") must be divisible by num_groups (", groups, ")");
  weight = register_parameter("weight", affine ? empty({channels}, dtype) : Tensor());
  bias = register_parameter("bias", affine ? empty({channels}, dtype) : Tensor());
  reset_parameters();
}

void GroupNorm::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor GroupNorm::forward(const Tensor& x) { return tb::group_norm(x, num_groups, weight, bias, eps); }

}  // namespace tb::nn
