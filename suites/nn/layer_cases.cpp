// nn suite rows for the single layers: Linear, Conv2d, BatchNorm1d/2d, LayerNorm, GroupNorm,
// Embedding, Dropout, the activations and Sequential, each in float32 and float64, on
// contiguous and awkward input layouts, in train and eval mode where the mode matters.
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/nn/activation.h"
#include "engine/nn/container.h"
#include "engine/nn/conv.h"
#include "engine/nn/embedding.h"
#include "engine/nn/linear.h"
#include "engine/nn/norm.h"
#include "engine/tensor/factories.h"
#include "suites/nn/nn_case.h"

namespace tb::suites {

namespace {

constexpr DType kDtypes[] = {DType::Float32, DType::Float64};

LayerCase row(std::string name, DType dt, std::function<nn::ModulePtr()> engine,
              std::function<ref::NnModule()> reference, std::vector<Input> inputs, bool train = true) {
  LayerCase c;
  c.name = std::move(name);
  c.dtype = dt;
  c.engine = std::move(engine);
  c.reference = std::move(reference);
  c.inputs = std::move(inputs);
  c.train = train;
  return c;
}

std::string nm(const std::string& layer, DType dt, const std::string& variant) {
  return layer + "/" + core::name(dt) + "/" + variant;
}

// Running statistics away from their initial 0 / 1, so eval rows test that they are used.
void random_running_stats(nn::Module& m, core::Generator& gen) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, b] : m.named_buffers()) {
    if (name.ends_with("running_mean")) b.copy_(randn(b.sizes(), DType::Float64, &gen));
    if (name.ends_with("running_var")) b.copy_(tb::add(rand(b.sizes(), DType::Float64, &gen), 0.5));
    if (name.ends_with("num_batches_tracked")) fill_(b, 3);
  }
}

void linear_rows(std::vector<LayerCase>& v, DType dt) {
  v.push_back(row(
      nm("linear", dt, "contiguous"), dt, [=] { return std::make_shared<nn::Linear>(5, 7, true, dt); },
      [] { return ref::nn_linear(5, 7); }, {{{4, 5}, dt}}));
  v.push_back(row(
      nm("linear", dt, "transposed_3d"), dt, [=] { return std::make_shared<nn::Linear>(6, 3, true, dt); },
      [] { return ref::nn_linear(6, 3); }, {{{2, 4, 6}, dt, Layout::Transposed}}));
  v.push_back(row(
      nm("linear", dt, "no_bias_strided"), dt, [=] { return std::make_shared<nn::Linear>(4, 5, false, dt); },
      [] { return ref::nn_linear(4, 5, false); }, {{{3, 4}, dt, Layout::Strided}}));
}

void conv_rows(std::vector<LayerCase>& v, DType dt) {
  v.push_back(row(
      nm("conv2d", dt, "k3_pad1"), dt, [=] { return std::make_shared<nn::Conv2d>(3, 4, 3, 1, 1, true, dt); },
      [] {
        return ref::nn_conv2d(3, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true);
      },
      {{{2, 3, 6, 6}, dt}}));
  nn::Conv2dOptions o{4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true, dt};
  v.push_back(row(
      nm("conv2d", dt, "groups_stride_dilation_strided"), dt, [=] { return std::make_shared<nn::Conv2d>(o); },
      [] {
        return ref::nn_conv2d(4, 6, {3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true);
      },
      {{{2, 4, 7, 7}, dt, Layout::Strided}}));
  v.push_back(row(
      nm("conv2d", dt, "no_bias_transposed"), dt,
      [=] { return std::make_shared<nn::Conv2d>(2, 3, 2, 1, 0, false, dt); },
      [] {
        return ref::nn_conv2d(2, 3, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1, false);
      },
      {{{1, 2, 5, 4}, dt, Layout::Transposed}}));
}

void batch_norm_rows(std::vector<LayerCase>& v, DType dt) {
  struct Variant {
    std::string name;
    bool two_d;
    Shape shape;
    nn::BatchNormOptions o;
    bool train;
    Layout layout;
  };
  const int64_t c = 5;
  const std::vector<Variant> variants = {
      {"train_2d", false, {8, c}, {c, 1e-5, 0.1, true, true, dt}, true, Layout::Contiguous},
      {"train_3d_transposed", false, {4, c, 6}, {c, 1e-5, 0.1, true, true, dt}, true, Layout::Transposed},
      {"eval_3d", false, {4, c, 6}, {c, 1e-5, 0.1, true, true, dt}, false, Layout::Contiguous},
      {"train_cumulative_momentum", false, {6, c}, {c, 1e-3, std::nullopt, true, true, dt}, true, Layout::Contiguous},
      {"train_no_affine", false, {6, c, 3}, {c, 1e-5, 0.3, false, true, dt}, true, Layout::Strided},
      {"train_untracked", false, {6, c}, {c, 1e-5, 0.1, true, false, dt}, true, Layout::Contiguous},
      {"eval_untracked", false, {6, c}, {c, 1e-5, 0.1, true, false, dt}, false, Layout::Contiguous},
      {"train_4d", true, {3, c, 4, 5}, {c, 1e-5, 0.1, true, true, dt}, true, Layout::Contiguous},
      {"train_4d_strided", true, {2, c, 3, 4}, {c, 1e-5, 0.2, true, true, dt}, true, Layout::Strided},
      {"eval_4d", true, {3, c, 4, 5}, {c, 1e-5, 0.1, true, true, dt}, false, Layout::Transposed},
  };
  for (const Variant& var : variants) {
    const nn::BatchNormOptions o = var.o;
    const bool two_d = var.two_d;
    LayerCase r = row(
        nm(two_d ? "batch_norm2d" : "batch_norm1d", dt, var.name), dt,
        [=]() -> nn::ModulePtr {
          if (two_d) return std::make_shared<nn::BatchNorm2d>(o);
          return std::make_shared<nn::BatchNorm1d>(o);
        },
        [=] {
          return two_d ? ref::nn_batch_norm2d(o.num_features, o.eps, o.momentum, o.affine, o.track_running_stats)
                       : ref::nn_batch_norm1d(o.num_features, o.eps, o.momentum, o.affine, o.track_running_stats);
        },
        {{var.shape, dt, var.layout}}, var.train);
    r.prepare = random_running_stats;
    v.push_back(std::move(r));
  }
}

void norm_rows(std::vector<LayerCase>& v, DType dt) {
  v.push_back(row(
      nm("layer_norm", dt, "last_dim"), dt,
      [=] { return std::make_shared<nn::LayerNorm>(Shape{6}, 1e-5, true, true, dt); },
      [] { return ref::nn_layer_norm({6}, 1e-5, true); }, {{{3, 4, 6}, dt}}));
  v.push_back(row(
      nm("layer_norm", dt, "two_dims_transposed"), dt,
      [=] {
        return std::make_shared<nn::LayerNorm>(Shape{4, 6}, 1e-5, true, true, dt);
      },
      [] {
        return ref::nn_layer_norm({4, 6}, 1e-5, true);
      },
      {{{2, 4, 6}, dt, Layout::Transposed}}));
  v.push_back(row(
      nm("layer_norm", dt, "no_affine"), dt,
      [=] { return std::make_shared<nn::LayerNorm>(Shape{5}, 1e-3, false, true, dt); },
      [] { return ref::nn_layer_norm({5}, 1e-3, false); }, {{{3, 5}, dt, Layout::Strided}}));
  v.push_back(row(
      nm("group_norm", dt, "affine"), dt, [=] { return std::make_shared<nn::GroupNorm>(2, 6, 1e-5, true, dt); },
      [] { return ref::nn_group_norm(2, 6, 1e-5, true); }, {{{3, 6, 4, 4}, dt}}));
  v.push_back(row(
      nm("group_norm", dt, "no_affine_strided"), dt,
      [=] { return std::make_shared<nn::GroupNorm>(3, 6, 1e-4, false, dt); },
      [] { return ref::nn_group_norm(3, 6, 1e-4, false); }, {{{2, 6, 5}, dt, Layout::Strided}}));
}

void embedding_rows(std::vector<LayerCase>& v, DType dt) {
  v.push_back(row(
      nm("embedding", dt, "plain"), dt, [=] { return std::make_shared<nn::Embedding>(10, 4, std::nullopt, dt); },
      [] { return ref::nn_embedding(10, 4, std::nullopt); },
      {{{3, 5}, DType::Int64, Layout::Contiguous, Values::Index, 10}}));
  v.push_back(row(
      nm("embedding", dt, "padding_idx"), dt, [=] { return std::make_shared<nn::Embedding>(6, 3, 2, dt); },
      [] { return ref::nn_embedding(6, 3, 2); }, {{{4, 6}, DType::Int64, Layout::Transposed, Values::Index, 6}}));
  v.push_back(row(
      nm("embedding", dt, "negative_padding_idx"), dt, [=] { return std::make_shared<nn::Embedding>(5, 3, -1, dt); },
      [] { return ref::nn_embedding(5, 3, -1); }, {{{12}, DType::Int64, Layout::Contiguous, Values::Index, 5}}));
}

void activation_rows(std::vector<LayerCase>& v, DType dt) {
  const std::vector<Input> x = {{{3, 4, 5}, dt, Layout::Transposed}};
  v.push_back(row(
      nm("relu", dt, "transposed"), dt, [] { return std::make_shared<nn::ReLU>(); }, [] { return ref::nn_relu(); }, x));
  v.push_back(row(
      nm("gelu", dt, "none"), dt, [] { return std::make_shared<nn::GELU>(); }, [] { return ref::nn_gelu("none"); }, x));
  v.push_back(row(
      nm("gelu", dt, "tanh"), dt, [] { return std::make_shared<nn::GELU>("tanh"); },
      [] { return ref::nn_gelu("tanh"); }, x));
  v.push_back(row(
      nm("silu", dt, "transposed"), dt, [] { return std::make_shared<nn::SiLU>(); }, [] { return ref::nn_silu(); }, x));
  v.push_back(row(
      nm("tanh", dt, "strided"), dt, [] { return std::make_shared<nn::Tanh>(); }, [] { return ref::nn_tanh(); },
      {{{4, 6}, dt, Layout::Strided}}));
  // Dropout is the identity with p = 0 in training and with any p in eval.
  v.push_back(row(
      nm("dropout", dt, "train_p0"), dt, [] { return std::make_shared<nn::Dropout>(0.0); },
      [] { return ref::nn_dropout(0.0); }, x, true));
  v.push_back(row(
      nm("dropout", dt, "eval_p05"), dt, [] { return std::make_shared<nn::Dropout>(0.5); },
      [] { return ref::nn_dropout(0.5); }, x, false));
}

void sequential_rows(std::vector<LayerCase>& v, DType dt) {
  // Linear + ReLU pairs run fused (Note [Sequential fuses Linear + ReLU]); the trailing Linear
  // and the lone ReLU after a Tanh do not.
  v.push_back(row(
      nm("sequential", dt, "linear_relu_fused"), dt,
      [=] {
        return std::make_shared<nn::Sequential>(std::initializer_list<nn::ModulePtr>{
            std::make_shared<nn::Linear>(6, 8, true, dt), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(8, 8, false, dt), std::make_shared<nn::ReLU>(), std::make_shared<nn::Tanh>(),
            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(8, 3, true, dt)});
      },
      [] {
        return ref::nn_sequential({ref::nn_linear(6, 8), ref::nn_relu(), ref::nn_linear(8, 8, false), ref::nn_relu(),
                                   ref::nn_tanh(), ref::nn_relu(), ref::nn_linear(8, 3)});
      },
      {{{5, 6}, dt, Layout::Transposed}}));
  v.push_back(row(
      nm("sequential", dt, "linear_gelu_linear"), dt,
      [=] {
        return std::make_shared<nn::Sequential>(
            std::initializer_list<nn::ModulePtr>{std::make_shared<nn::Linear>(6, 8, true, dt),
                                                 std::make_shared<nn::GELU>("tanh"),
                                                 std::make_shared<nn::LayerNorm>(Shape{8}, 1e-5, true, true, dt),
                                                 std::make_shared<nn::Linear>(8, 3, true, dt)});
      },
      [] {
        return ref::nn_sequential(
            {ref::nn_linear(6, 8), ref::nn_gelu("tanh"), ref::nn_layer_norm({8}, 1e-5, true), ref::nn_linear(8, 3)});
      },
      {{{5, 6}, dt, Layout::Transposed}}));
  LayerCase bn = row(
      nm("sequential", dt, "conv_bn_relu"), dt,
      [=] {
        return std::make_shared<nn::Sequential>(
            std::initializer_list<nn::ModulePtr>{std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1, false, dt),
                                                 std::make_shared<nn::BatchNorm2d>(4, dt),
                                                 std::make_shared<nn::ReLU>()});
      },
      [] {
        return ref::nn_sequential({ref::nn_conv2d(2, 4, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false),
                                   ref::nn_batch_norm2d(4, 1e-5, 0.1, true, true), ref::nn_relu()});
      },
      {{{2, 2, 5, 5}, dt}});
  v.push_back(bn);
  bn.name = nm("sequential", dt, "conv_bn_relu_eval");
  bn.train = false;
  bn.prepare = random_running_stats;
  v.push_back(bn);
}

}  // namespace

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> v;
  for (DType dt : kDtypes) {
    linear_rows(v, dt);
    conv_rows(v, dt);
    batch_norm_rows(v, dt);
    norm_rows(v, dt);
    embedding_rows(v, dt);
    activation_rows(v, dt);
    sequential_rows(v, dt);
  }
  return v;
}

}  // namespace tb::suites
