// MultiheadAttention from autograd ops. See attention.h.
#include "engine/nn/attention.h"

#include <cmath>
#include <limits>

#include "engine/autograd/functions.h"
#include "engine/nn/init.h"
#include "engine/tensor/factories.h"

namespace tb::nn {

Tensor causal_mask(int64_t L, int64_t S) {
  std::vector<double> v(size_t(L * S));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) v[size_t(i * S + j)] = j > i ? 1 : 0;
  return from_vector(v, {L, S}, DType::Bool);
}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& o) : Module("MultiheadAttention"), options(o) {
  const int64_t e = o.embed_dim;
  TB_CHECK(o.num_heads > 0 && e % o.num_heads == 0, "MultiheadAttention", "embed_dim (", e,
           ") must be divisible by num_heads (", o.num_heads, ")");
  head_dim = e / o.num_heads;
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}, o.dtype));
  in_proj_bias = register_parameter("in_proj_bias", o.bias ? empty({3 * e}, o.dtype) : Tensor());
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, o.bias, o.dtype));
  reset_parameters();
}

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       bool batch_first, DType dtype)
    : MultiheadAttention(MultiheadAttentionOptions{embed_dim, num_heads, dropout, bias, batch_first, dtype}) {}

void MultiheadAttention::reset_parameters(core::Generator* gen) {
  out_proj->reset_parameters(gen);
  init::xavier_uniform_(in_proj_weight, 1, gen);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

Tensor MultiheadAttention::forward(const Tensor& x) { return forward(x, x, x); }

Tensor MultiheadAttention::operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const Tensor& key_padding_mask, const Tensor& attn_mask, bool is_causal) {
  // By value: a checkpointed module runs this again in backward (call_with_hooks).
  return call_with_hooks({query, key, value}, [this, key_padding_mask, attn_mask, is_causal](const TensorList& in) {
    return forward(in[0], in[1], in[2], key_padding_mask, attn_mask, is_causal);
  });
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& key_padding_mask, const Tensor& attn_mask, bool is_causal) {
  const char* op = "MultiheadAttention";
  const int64_t E = options.embed_dim, H = options.num_heads, hd = head_dim;
  TB_CHECK(query.dim() == 2 || query.dim() == 3, op, "query must be 2-D or 3-D, got ", shape_str(query.sizes()));
  TB_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), op, "query, key and value must have the same rank");
  const bool unbatched = query.dim() == 2;
  // Work in (N, L, E).
  auto to_nle = [&](const Tensor& t) {
    if (unbatched) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  const Tensor q_in = to_nle(query), k_in = to_nle(key), v_in = to_nle(value);
  TB_CHECK(q_in.size(2) == E && k_in.size(2) == E && v_in.size(2) == E, op, "expected embed_dim ", E, ", got query ",
           shape_str(query.sizes()), ", key ", shape_str(key.sizes()), ", value ", shape_str(value.sizes()));
  const int64_t N = q_in.size(0), L = q_in.size(1), S = k_in.size(1);
  TB_CHECK(k_in.size(0) == N && v_in.size(0) == N && v_in.size(1) == S, op, "key ", shape_str(key.sizes()),
           " and value ", shape_str(value.sizes()), " do not match query ", shape_str(query.sizes()));

  auto part = [&](const Tensor& t, int64_t i) { return t.defined() ? t.narrow(0, i * E, E) : Tensor(); };
  // (N, len, E) -> (N, H, len, hd)
  auto heads = [&](const Tensor& t, int64_t len) { return t.reshape({N, len, H, hd}).transpose(1, 2); };
  // q is scaled before the product, as LibTorch's multi_head_attention_forward does.
  Tensor q = mul(heads(linear(q_in, part(in_proj_weight, 0), part(in_proj_bias, 0)), L), 1.0 / std::sqrt(double(hd)));
  Tensor k = heads(linear(k_in, part(in_proj_weight, 1), part(in_proj_bias, 1)), S);
  Tensor v = heads(linear(v_in, part(in_proj_weight, 2), part(in_proj_bias, 2)), S);

  Tensor scores = matmul(q, k.transpose(-2, -1));  // (N, H, L, S)
  const double inf = std::numeric_limits<double>::infinity();
  auto apply_mask = [&](const Tensor& s, const Tensor& m) {
    return m.dtype() == DType::Bool ? masked_fill(s, m, -inf) : add(s, m);
  };
  if (attn_mask.defined()) {
    TB_CHECK((attn_mask.dim() == 2 && attn_mask.size(0) == L && attn_mask.size(1) == S) ||
                 (attn_mask.dim() == 3 && attn_mask.size(0) == N * H && attn_mask.size(1) == L &&
                  attn_mask.size(2) == S),
             op, "attn_mask must be (", L, ", ", S, ") or (", N * H, ", ", L, ", ", S, "), got ",
             shape_str(attn_mask.sizes()));
    scores = apply_mask(scores, attn_mask.dim() == 3 ? attn_mask.reshape({N, H, L, S}) : attn_mask);
  }
  if (key_padding_mask.defined()) {
    const Tensor kpm = unbatched ? key_padding_mask.reshape({1, S}) : key_padding_mask;
    TB_CHECK(kpm.dim() == 2 && kpm.size(0) == N && kpm.size(1) == S, op, "key_padding_mask must be (", N, ", ", S,
             "), got ", shape_str(key_padding_mask.sizes()));
    scores = apply_mask(scores, kpm.reshape({N, 1, 1, S}));
  }
  // The causal mask (when no attn_mask replaces it) is applied by the softmax itself: no masked
  // copy of the scores forward, none of their gradient backward.
  Tensor attn = is_causal && !attn_mask.defined() ? softmax_causal(scores) : softmax(scores, -1);
  if (options.dropout > 0 && is_training()) attn = dropout(attn, options.dropout, true, dropout_gen);
  Tensor out = matmul(attn, v).transpose(1, 2).reshape({N, L, E});  // (N, L, E)
  out = linear(out, out_proj->weight, out_proj->bias);
  if (unbatched) return out.squeeze(0);
  return options.batch_first ? out : out.transpose(0, 1);
}

}  // namespace tb::nn
