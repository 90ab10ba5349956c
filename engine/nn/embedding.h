// Embedding, as torch.nn.Embedding: weight (num_embeddings, embedding_dim) ~ N(0, 1); the
// padding_idx row starts at zero and never receives a gradient.
#pragma once
#include <optional>

#include "engine/nn/module.h"

namespace tb::nn {

class Embedding : public Module {
 public:
  // padding_idx may be negative (counted from the end), as in PyTorch.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            DType dtype = DType::Float32);
  // indices: int64 or int32, any shape (*) -> (*, embedding_dim)
  Tensor forward(const Tensor& indices) override;
  void reset_parameters(core::Generator* gen = nullptr);

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalised to [0, num_embeddings)
  Tensor weight;
};

}  // namespace tb::nn
