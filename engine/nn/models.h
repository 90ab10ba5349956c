// The reference models the suites and benchmarks train: MLP (784-1024-1024-10 with ReLU, named
// like torch.nn.Sequential: 0.weight, 0.bias, 2.weight, ...), the pre-norm TransformerBlock and
// GPT (token + position embeddings, blocks, final LayerNorm, a bias-free head), with a
// cross-entropy loss over the flattened logits. reference/models.cpp builds the same models from
// torch::nn modules with identical parameter names.
#pragma once
#include <string>

#include "engine/nn/activation.h"
#include "engine/nn/attention.h"
#include "engine/nn/container.h"
#include "engine/nn/embedding.h"
#include "engine/nn/linear.h"
#include "engine/nn/norm.h"

namespace tb::nn {

class MLP : public Sequential {
 public:
  // Linear(in, hidden), ReLU, Linear(hidden, hidden), ReLU, Linear(hidden, out)
  explicit MLP(int64_t in = 784, int64_t hidden = 1024, int64_t out = 10, DType dtype = DType::Float32);
};

// x = x + attn(ln1(x), causal); x = x + mlp(ln2(x)), mlp = Linear(d, 4d), GELU, Linear(4d, d).
class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t n_heads, double dropout = 0, const std::string& gelu_approximate = "tanh",
                   DType dtype = DType::Float32);
  // x: (B, T, d_model) -> (B, T, d_model)
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<LayerNorm> ln1, ln2;
  std::shared_ptr<MultiheadAttention> attn;  // batch_first
  std::shared_ptr<Sequential> mlp;
};

struct GPTConfig {
  int64_t vocab = 64, d_model = 32, n_layers = 2, n_heads = 4, max_seq = 16;
  double dropout = 0;                     // after the embeddings and on attention weights
  std::string gelu_approximate = "tanh";  // GPT-2's
  DType dtype = DType::Float32;
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& c);
  // idx: int64 (B, T), T <= max_seq -> logits (B, T, vocab)
  Tensor forward(const Tensor& idx) override;
  // Mean cross-entropy of logits (B, T, vocab) against targets int64 (B, T).
  static Tensor loss(const Tensor& logits, const Tensor& targets);

  GPTConfig config;
  std::shared_ptr<Embedding> tok_emb, pos_emb;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> head;
};

}  // namespace tb::nn
