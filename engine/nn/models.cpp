// MLP, TransformerBlock and GPT. See models.h.
#include "engine/nn/models.h"

#include "engine/autograd/functions.h"
#include "engine/tensor/factories.h"

namespace tb::nn {

MLP::MLP(int64_t in, int64_t hidden, int64_t out, DType dtype) {
  push_back(std::make_shared<Linear>(in, hidden, true, dtype));
  push_back(std::make_shared<ReLU>());
  push_back(std::make_shared<Linear>(hidden, hidden, true, dtype));
  push_back(std::make_shared<ReLU>());
  push_back(std::make_shared<Linear>(hidden, out, true, dtype));
}

TransformerBlock::TransformerBlock(int64_t d, int64_t n_heads, double dropout, const std::string& gelu_approximate,
                                   DType dtype)
    : Module("TransformerBlock") {
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(Shape{d}, 1e-5, true, true, dtype));
  attn = register_module("attn",
                         std::make_shared<MultiheadAttention>(
                             MultiheadAttentionOptions{d, n_heads, dropout, true, /*batch_first=*/true, dtype}));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(Shape{d}, 1e-5, true, true, dtype));
  mlp = register_module("mlp", std::make_shared<Sequential>(
                                   std::initializer_list<ModulePtr>{std::make_shared<Linear>(d, 4 * d, true, dtype),
                                                                    std::make_shared<GELU>(gelu_approximate),
                                                                    std::make_shared<Linear>(4 * d, d, true, dtype)}));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  Tensor h = (*ln1)(x);
  Tensor y = tb::add(x, (*attn)(h, h, h, Tensor(), Tensor(), /*is_causal=*/true));
  return tb::add(y, (*mlp)((*ln2)(y)));
}

GPT::GPT(const GPTConfig& c) : Module("GPT"), config(c) {
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(c.vocab, c.d_model, std::nullopt, c.dtype));
  pos_emb = register_module("pos_emb", std::make_shared<Embedding>(c.max_seq, c.d_model, std::nullopt, c.dtype));
  drop = register_module("drop", std::make_shared<Dropout>(c.dropout));
  blocks = register_module("blocks", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_layers; ++i)
    blocks->push_back(std::make_shared<TransformerBlock>(c.d_model, c.n_heads, c.dropout, c.gelu_approximate, c.dtype));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{c.d_model}, 1e-5, true, true, c.dtype));
  head = register_module("head", std::make_shared<Linear>(c.d_model, c.vocab, /*bias=*/false, c.dtype));
}

Tensor GPT::forward(const Tensor& idx) {
  TB_CHECK(idx.dim() == 2, "GPT", "expected token ids (B, T), got ", shape_str(idx.sizes()));
  const int64_t T = idx.size(1);
  TB_CHECK(T <= config.max_seq, "GPT", "sequence length ", T, " exceeds max_seq ", config.max_seq);
  Tensor x = tb::add((*tok_emb)(idx), (*pos_emb)(arange(T)));  // (B, T, d)
  x = (*drop)(x);
  for (const ModulePtr& b : *blocks) x = (*b)(x);
  return (*head)((*ln_f)(x));
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets) {
  TB_CHECK(logits.dim() == 3 && targets.dim() == 2, "GPT.loss", "expected logits (B, T, V) and targets (B, T), got ",
           shape_str(logits.sizes()), " and ", shape_str(targets.sizes()));
  const int64_t n = logits.size(0) * logits.size(1);
  return tb::cross_entropy(logits.reshape({n, logits.size(2)}), targets.reshape({n}));
}

}  // namespace tb::nn
