// MultiheadAttention, as torch.nn.MultiheadAttention with kdim = vdim = embed_dim and
// need_weights=False: parameters in_proj_weight (3E, E), in_proj_bias (3E), out_proj (a Linear
// child: out_proj.weight, out_proj.bias), initialised as PyTorch does. Computed from autograd
// ops (linear, views, matmul, softmax, dropout), so it needs no backward of its own.
#pragma once
#include "engine/nn/linear.h"
#include "engine/nn/module.h"

namespace tb::nn {

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0, num_heads = 1;
  double dropout = 0;  // on the attention weights, in training
  bool bias = true;
  bool batch_first = false;  // (N, L, E) instead of (L, N, E)
  DType dtype = DType::Float32;
};

class MultiheadAttention : public Module {
 public:
  explicit MultiheadAttention(const MultiheadAttentionOptions& o);
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0, bool bias = true,
                     bool batch_first = false, DType dtype = DType::Float32);

  // query: (L, N, E) ((N, L, E) with batch_first; (L, E) unbatched); key, value: (S, N, E) likewise.
  // key_padding_mask: (N, S), bool (true = ignore that key) or float (added).
  // attn_mask: (L, S) or (N * num_heads, L, S), bool (true = masked) or float (added).
  // is_causal: mask key j > query i (PyTorch needs attn_mask too; here it is built when absent).
  // Returns the attention output, shaped like query.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask = {},
                 const Tensor& attn_mask = {}, bool is_causal = false);
  // Self-attention: forward(x, x, x).
  Tensor forward(const Tensor& x) override;
  // forward with the module's hooks (the backward hook sees the gradients of query, key, value).
  using Module::operator();
  Tensor operator()(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask = {},
                    const Tensor& attn_mask = {}, bool is_causal = false);
  // xavier_uniform_ in_proj_weight; zero in_proj_bias and out_proj.bias; out_proj.weight as Linear.
  void reset_parameters(core::Generator* gen = nullptr);

  MultiheadAttentionOptions options;
  int64_t head_dim;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  core::Generator* dropout_gen = nullptr;  // masks for attention dropout (default generator if null)
};

// A (L, S) bool mask, true above the diagonal: key j is hidden from query i when j > i.
Tensor causal_mask(int64_t L, int64_t S);

}  // namespace tb::nn
