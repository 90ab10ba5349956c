// torch.nn.Embedding over tb::embedding. See embedding.h.
#include "engine/nn/embedding.h"

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/nn/init.h"
#include "engine/tensor/factories.h"

namespace tb::nn {

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, DType dtype)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
  if (pad) {
    TB_CHECK(*pad < num && *pad >= -num, "Embedding", "Padding_idx must be within num_embeddings (got ", *pad, " for ",
             num, " embeddings)");
    padding_idx = *pad < 0 ? *pad + num : *pad;
  }
  weight = register_parameter("weight", empty({num, dim}, dtype));
  reset_parameters();
}

void Embedding::reset_parameters(core::Generator* gen) {
  init::normal_(weight, 0, 1, gen);
  if (padding_idx) {
    autograd::NoGradGuard no_grad;
    Tensor row = weight.select(0, *padding_idx);
    zero_(row);
  }
}

Tensor Embedding::forward(const Tensor& indices) { return tb::embedding(weight, indices, padding_idx.value_or(-1)); }

}  // namespace tb::nn
