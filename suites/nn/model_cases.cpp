// nn suite rows for MultiheadAttention (self and cross attention, both layouts, every mask
// kind), the TransformerBlock, the MLP, GPT (logits, loss, every parameter gradient) and losses
// computed on top of models.
#include "engine/autograd/functions.h"
#include "engine/nn/models.h"
#include "engine/tensor/factories.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "suites/nn/nn_case.h"

namespace tb::suites {

namespace {

constexpr DType kDtypes[] = {DType::Float32, DType::Float64};

std::string nm(const std::string& layer, DType dt, const std::string& variant) {
  return layer + "/" + core::name(dt) + "/" + variant;
}

nn::MultiheadAttention& mha(nn::Module& m) { return dynamic_cast<nn::MultiheadAttention&>(m); }

// Masks every query row keeps at least one key under (fully masked rows are NaN on both sides).
tb::Tensor padding_mask() {  // (N = 2, S = 6): batch 0 ignores its last two keys, batch 1 its fourth
  return from_vector({0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0}, {2, 6}, DType::Bool);
}
tb::Tensor float_mask(DType dt) {  // (L = 4, S = 6), additive
  core::Generator g(77);
  return randn({4, 6}, dt, &g);
}

enum class Mask { None, Padding, Bool, Float, Causal, PaddingAndCausal };

LayerCase mha_row(DType dt, const std::string& variant, bool batch_first, bool bias, bool self, Mask mask,
                  Layout layout = Layout::Contiguous) {
  LayerCase c;
  c.name = nm("multihead_attention", dt, variant);
  c.dtype = dt;
  const int64_t E = 8, H = 2, N = 2, L = self ? 6 : 4, S = 6;
  c.engine = [=] { return std::make_shared<nn::MultiheadAttention>(E, H, 0.0, bias, batch_first, dt); };
  c.reference = [=] { return ref::nn_multihead_attention(E, H, 0.0, bias, batch_first); };
  auto shape = [&](int64_t len) { return batch_first ? Shape{N, len, E} : Shape{len, N, E}; };
  if (self) {
    c.inputs = {{shape(L), dt, layout}};
  } else {
    c.inputs = {{shape(L), dt, layout}, {shape(S), dt}, {shape(S), dt, Layout::Transposed}};
  }
  auto engine_masks = [=]() -> std::tuple<tb::Tensor, tb::Tensor, bool> {
    switch (mask) {
      case Mask::None: return {tb::Tensor(), tb::Tensor(), false};
      case Mask::Padding: return {padding_mask(), tb::Tensor(), false};
      case Mask::Bool: return {tb::Tensor(), nn::causal_mask(L, S), false};
      case Mask::Float: return {tb::Tensor(), float_mask(dt), false};
      case Mask::Causal: return {tb::Tensor(), tb::Tensor(), true};
      case Mask::PaddingAndCausal: return {padding_mask(), tb::Tensor(), true};
    }
    return {};
  };
  c.forward = [=](nn::Module& m, const std::vector<tb::Tensor>& in) {
    auto [kpm, am, causal] = engine_masks();
    const tb::Tensor& q = in[0];
    const tb::Tensor& k = self ? in[0] : in[1];
    const tb::Tensor& v = self ? in[0] : in[2];
    return std::vector<tb::Tensor>{mha(m)(q, k, v, kpm, am, causal)};
  };
  c.ref_forward = [=](const ref::NnModule& r, const std::vector<ref::Tensor>& in) {
    auto [kpm, am, causal] = engine_masks();
    // LibTorch's C++ MultiheadAttention has no is_causal: the same mask, spelled out.
    if (causal) am = nn::causal_mask(L, S);
    std::vector<ref::Tensor> args = {in[0], self ? in[0] : in[1], self ? in[0] : in[2],
                                     kpm.defined() ? ref::to_ref(kpm) : ref::Tensor(),
                                     am.defined() ? ref::to_ref(am) : ref::Tensor()};
    return std::vector<ref::Tensor>{r.forward(args)};
  };
  return c;
}

void attention_rows(std::vector<LayerCase>& v, DType dt) {
  v.push_back(mha_row(dt, "self_batch_first", true, true, true, Mask::None));
  v.push_back(mha_row(dt, "self_seq_first_transposed", false, true, true, Mask::None, Layout::Transposed));
  v.push_back(mha_row(dt, "cross_seq_first", false, true, false, Mask::None));
  v.push_back(mha_row(dt, "cross_batch_first_strided", true, true, false, Mask::None, Layout::Strided));
  v.push_back(mha_row(dt, "key_padding_mask", true, true, false, Mask::Padding));
  v.push_back(mha_row(dt, "bool_attn_mask", false, true, false, Mask::Bool));
  v.push_back(mha_row(dt, "float_attn_mask", true, true, false, Mask::Float));
  v.push_back(mha_row(dt, "is_causal", true, true, true, Mask::Causal));
  v.push_back(mha_row(dt, "causal_and_padding", true, true, true, Mask::PaddingAndCausal));
  v.push_back(mha_row(dt, "no_bias", true, false, false, Mask::None));

  LayerCase b;
  b.name = nm("transformer_block", dt, "pre_norm_causal");
  b.dtype = dt;
  b.engine = [=] { return std::make_shared<nn::TransformerBlock>(8, 2, 0.0, "tanh", dt); };
  b.reference = [] { return ref::nn_transformer_block(8, 2, 0.0, "tanh"); };
  b.inputs = {{{2, 5, 8}, dt}};
  v.push_back(b);
  b.name = nm("transformer_block", dt, "gelu_none_transposed");
  b.engine = [=] { return std::make_shared<nn::TransformerBlock>(8, 4, 0.0, "none", dt); };
  b.reference = [] { return ref::nn_transformer_block(8, 4, 0.0, "none"); };
  b.inputs = {{{3, 4, 8}, dt, Layout::Transposed}};
  v.push_back(b);
}

LayerCase gpt_row(DType dt, const std::string& variant, int64_t T, double dropout, bool train) {
  nn::GPTConfig cfg;  // vocab 64, d 32, 2 layers, 4 heads, max_seq 16
  cfg.dropout = dropout;
  cfg.dtype = dt;
  LayerCase c;
  c.name = nm("gpt", dt, variant);
  c.dtype = dt;
  c.train = train;
  c.engine = [=] { return std::make_shared<nn::GPT>(cfg); };
  c.reference = [=] {
    return ref::nn_gpt(cfg.vocab, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.max_seq, cfg.dropout,
                       cfg.gelu_approximate);
  };
  c.inputs = {{{2, T}, DType::Int64, Layout::Contiguous, Values::Index, cfg.vocab},
              {{2, T}, DType::Int64, Layout::Contiguous, Values::Index, cfg.vocab}};
  c.forward = [](nn::Module& m, const std::vector<tb::Tensor>& in) {
    tb::Tensor logits = m(in[0]);
    return std::vector<tb::Tensor>{logits, nn::GPT::loss(logits, in[1])};
  };
  c.ref_forward = [](const ref::NnModule& r, const std::vector<ref::Tensor>& in) {
    ref::Tensor logits = r.forward(in[0]);
    return std::vector<ref::Tensor>{logits, ref::gpt_loss(logits, in[1])};
  };
  c.loss_output = true;
  // Tolerance: grad_tolerance(dtype), for logits, loss and all 29 parameter gradients alike
  // (float32: rtol 1e-5, atol 1e-5; observed max_abs about 1e-6. float64: 1e-7, 1e-7).
  return c;
}

void model_rows(std::vector<LayerCase>& v, DType dt) {
  LayerCase mlp;
  mlp.name = nm("mlp", dt, "small");
  mlp.dtype = dt;
  mlp.engine = [=] { return std::make_shared<nn::MLP>(20, 16, 5, dt); };
  mlp.reference = [] { return ref::nn_mlp(20, 16, 5); };
  mlp.inputs = {{{4, 20}, dt, Layout::Transposed}};
  v.push_back(mlp);

  // MLP + cross_entropy, backward from the loss.
  LayerCase ce = mlp;
  ce.name = nm("mlp_cross_entropy", dt, "small");
  ce.inputs = {{{6, 20}, dt}, {{6}, DType::Int64, Layout::Contiguous, Values::Index, 5}};
  ce.wrt = {0};
  ce.forward = [](nn::Module& m, const std::vector<tb::Tensor>& in) {
    tb::Tensor logits = m(in[0]);
    return std::vector<tb::Tensor>{logits, tb::cross_entropy(logits, in[1])};
  };
  ce.ref_forward = [](const ref::NnModule& r, const std::vector<ref::Tensor>& in) {
    ref::Tensor logits = r.forward(in[0]);
    return std::vector<ref::Tensor>{logits, ref::cross_entropy(logits, in[1])};
  };
  ce.loss_output = true;
  v.push_back(ce);

  // Sequential regression + mse_loss.
  LayerCase mse;
  mse.name = nm("sequential_mse", dt, "linear_tanh_linear");
  mse.dtype = dt;
  mse.engine = [=] {
    return std::make_shared<nn::Sequential>(
        std::initializer_list<nn::ModulePtr>{std::make_shared<nn::Linear>(7, 9, true, dt), std::make_shared<nn::Tanh>(),
                                             std::make_shared<nn::Linear>(9, 2, true, dt)});
  };
  mse.reference = [] { return ref::nn_sequential({ref::nn_linear(7, 9), ref::nn_tanh(), ref::nn_linear(9, 2)}); };
  mse.inputs = {{{5, 7}, dt, Layout::Strided}, {{5, 2}, dt}};
  mse.wrt = {0};
  mse.forward = [](nn::Module& m, const std::vector<tb::Tensor>& in) {
    tb::Tensor y = m(in[0]);
    return std::vector<tb::Tensor>{y, tb::mse_loss(y, in[1])};
  };
  mse.ref_forward = [](const ref::NnModule& r, const std::vector<ref::Tensor>& in) {
    ref::Tensor y = r.forward(in[0]);
    return std::vector<ref::Tensor>{y, ref::mse_loss(y, in[1])};
  };
  mse.loss_output = true;
  v.push_back(mse);

  v.push_back(gpt_row(dt, "T16_train", 16, 0.0, true));
  v.push_back(gpt_row(dt, "T7_eval_dropout", 7, 0.1, false));
}

}  // namespace

std::vector<LayerCase> attention_cases() {
  std::vector<LayerCase> v;
  for (DType dt : kDtypes) attention_rows(v, dt);
  return v;
}

std::vector<LayerCase> model_cases() {
  std::vector<LayerCase> v;
  for (DType dt : kDtypes) model_rows(v, dt);
  // The full-size MLP of the benchmarks (784-1024-1024-10), float32 only: float64 would add
  // nothing but time.
  LayerCase big;
  big.name = "mlp/float32/784_1024_1024_10";
  big.engine = [] { return std::make_shared<nn::MLP>(); };
  big.reference = [] { return ref::nn_mlp(784, 1024, 10); };
  big.inputs = {{{8, 784}, DType::Float32}};
  v.push_back(big);
  return v;
}

}  // namespace tb::suites
