// LibTorch twins of engine/nn/models.h, built from torch::nn modules with the engine's exact
// parameter names (so a state dict copies over by name): MLP, the pre-norm TransformerBlock
// and GPT. No LibTorch in this header.
#pragma once
#include <string>

#include "reference/nn_modules.h"

namespace tb::ref {

// Sequential(Linear(in, hidden), ReLU, Linear(hidden, hidden), ReLU, Linear(hidden, out)).
NnModule nn_mlp(int64_t in, int64_t hidden, int64_t out);
// ln1, attn (MultiheadAttention, causal), ln2, mlp = Sequential(Linear(d, 4d), GELU, Linear(4d, d)).
// forward inputs: x (B, T, d).
NnModule nn_transformer_block(int64_t d_model, int64_t n_heads, double dropout, const std::string& gelu_approximate);
// tok_emb, pos_emb, drop, blocks.<i>, ln_f, head (no bias). forward inputs: idx int64 (B, T) -> logits.
NnModule nn_gpt(int64_t vocab, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t max_seq, double dropout,
                const std::string& gelu_approximate);
// Mean cross-entropy of logits (B, T, V) against targets (B, T), flattened.
Tensor gpt_loss(const Tensor& logits, const Tensor& targets);

}  // namespace tb::ref
