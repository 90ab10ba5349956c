// MLP, TransformerBlock and GPT from torch::nn modules. See models.h.
#include "reference/models.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace tnn = torch::nn;

namespace {

struct BlockImpl : tnn::Module {
  tnn::LayerNorm ln1{nullptr}, ln2{nullptr};
  tnn::MultiheadAttention attn{nullptr};
  tnn::Sequential mlp{nullptr};

  BlockImpl(int64_t d, int64_t heads, double dropout, const std::string& approx) : tnn::Module("TransformerBlock") {
    ln1 = register_module("ln1", tnn::LayerNorm(tnn::LayerNormOptions({d})));
    attn = register_module("attn", tnn::MultiheadAttention(tnn::MultiheadAttentionOptions(d, heads).dropout(dropout)));
    ln2 = register_module("ln2", tnn::LayerNorm(tnn::LayerNormOptions({d})));
    mlp = register_module("mlp",
                          tnn::Sequential(tnn::Linear(d, 4 * d), tnn::GELU(tnn::GELUOptions().approximate(approx)),
                                          tnn::Linear(4 * d, d)));
  }
  // x: (B, T, d); the C++ MultiheadAttention takes (T, B, d) and an additive mask.
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t t = x.size(1);
    torch::Tensor mask = torch::full({t, t}, -std::numeric_limits<double>::infinity(), x.options()).triu(1);
    torch::Tensor h = ln1->forward(x).transpose(0, 1);
    torch::Tensor a = std::get<0>(attn->forward(h, h, h, {}, /*need_weights=*/false, mask)).transpose(0, 1);
    torch::Tensor y = x + a;
    return y + mlp->forward(ln2->forward(y));
  }
};

struct GPTImpl : tnn::Module {
  tnn::Embedding tok_emb{nullptr}, pos_emb{nullptr};
  tnn::Dropout drop{nullptr};
  tnn::ModuleList blocks{nullptr};
  tnn::LayerNorm ln_f{nullptr};
  tnn::Linear head{nullptr};
  std::vector<std::shared_ptr<BlockImpl>> block_list;

  GPTImpl(int64_t vocab, int64_t d, int64_t layers, int64_t heads, int64_t max_seq, double dropout,
          const std::string& approx)
      : tnn::Module("GPT") {
    tok_emb = register_module("tok_emb", tnn::Embedding(vocab, d));
    pos_emb = register_module("pos_emb", tnn::Embedding(max_seq, d));
    drop = register_module("drop", tnn::Dropout(dropout));
    blocks = register_module("blocks", tnn::ModuleList());
    for (int64_t i = 0; i < layers; ++i) {
      block_list.push_back(std::make_shared<BlockImpl>(d, heads, dropout, approx));
      blocks->push_back(block_list.back());
    }
    ln_f = register_module("ln_f", tnn::LayerNorm(tnn::LayerNormOptions({d})));
    head = register_module("head", tnn::Linear(tnn::LinearOptions(d, vocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t t = idx.size(1);
    torch::Tensor x = drop->forward(tok_emb->forward(idx) + pos_emb->forward(torch::arange(t, torch::kInt64)));
    for (auto& b : block_list) x = b->forward(x);
    return head->forward(ln_f->forward(x));
  }
};

}  // namespace

NnModule nn_mlp(int64_t in, int64_t hidden, int64_t out) {
  return nn_sequential(
      {nn_linear(in, hidden), nn_relu(), nn_linear(hidden, hidden), nn_relu(), nn_linear(hidden, out)});
}

NnModule nn_transformer_block(int64_t d, int64_t heads, double dropout, const std::string& approx) {
  return guarded("nn_transformer_block", [&] {
    auto b = std::make_shared<BlockImpl>(d, heads, dropout, approx);
    NnModule m;
    m.module = b;
    m.fwd = [b](const std::vector<Tensor>& in) { return wrap(b->forward(T(in.at(0)))); };
    return m;
  });
}

NnModule nn_gpt(int64_t vocab, int64_t d, int64_t layers, int64_t heads, int64_t max_seq, double dropout,
                const std::string& approx) {
  return guarded("nn_gpt", [&] {
    auto g = std::make_shared<GPTImpl>(vocab, d, layers, heads, max_seq, dropout, approx);
    NnModule m;
    m.module = g;
    m.fwd = [g](const std::vector<Tensor>& in) { return wrap(g->forward(T(in.at(0)))); };
    return m;
  });
}

Tensor gpt_loss(const Tensor& logits, const Tensor& targets) {
  return guarded("gpt_loss", [&] {
    const torch::Tensor& l = T(logits);
    return wrap(torch::nn::functional::cross_entropy(l.reshape({-1, l.size(2)}), T(targets).reshape({-1})));
  });
}

}  // namespace tb::ref
