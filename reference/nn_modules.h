// LibTorch's torch::nn modules seen from the suites, without including LibTorch: a NnModule is
// a torch::nn::Module (forward-declared only) with its forward over ref::Tensors. The nn suite
// builds one beside each engine module, copies the engine's state dict into it BY NAME
// (load_by_name fails unless the names and shapes map one to one), and compares outputs and
// gradients. Every LibTorch error surfaces as ref::RefError.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/tensor.h"

namespace torch::nn {
class Module;
}

namespace tb::ref {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct NnModule {
  std::shared_ptr<torch::nn::Module> module;
  std::function<Tensor(const std::vector<Tensor>&)> fwd;

  Tensor forward(const std::vector<Tensor>& inputs) const;
  Tensor forward(const Tensor& x) const { return forward(std::vector<Tensor>{x}); }
  void train(bool on = true) const;
  void to(DType dtype) const;
  NamedTensors named_parameters() const;  // recursive, dotted; None slots skipped
  NamedTensors named_buffers() const;
  // Copies every entry into the parameter or buffer of the same name. Throws RefError naming
  // the keys unless every entry has a LibTorch tensor of the same shape and every LibTorch
  // parameter and buffer has an entry.
  void load_by_name(const NamedTensors& state) const;
  NamedTensors named_grads() const;  // each parameter's .grad (undefined when none)
  void zero_grad() const;
};

NnModule nn_linear(int64_t in, int64_t out, bool bias = true);
NnModule nn_conv2d(int64_t in, int64_t out, const Shape& kernel, const Shape& stride, const Shape& padding,
                   const Shape& dilation, int64_t groups, bool bias);
NnModule nn_batch_norm1d(int64_t c, double eps, std::optional<double> momentum, bool affine, bool track_running_stats);
NnModule nn_batch_norm2d(int64_t c, double eps, std::optional<double> momentum, bool affine, bool track_running_stats);
NnModule nn_layer_norm(const Shape& normalized_shape, double eps, bool elementwise_affine);
NnModule nn_group_norm(int64_t groups, int64_t channels, double eps, bool affine);
NnModule nn_embedding(int64_t num, int64_t dim, std::optional<int64_t> padding_idx);
NnModule nn_dropout(double p);
NnModule nn_relu();
NnModule nn_gelu(const std::string& approximate);
NnModule nn_silu();
NnModule nn_tanh();
// Children named 0, 1, ...
NnModule nn_sequential(const std::vector<NnModule>& items);
// torch::nn::MultiheadAttention (no batch_first in the C++ API: the forward transposes around
// it). forward inputs: query, key, value, key_padding_mask (bool, or undefined), attn_mask
// (undefined, float additive, or bool: turned into -inf where true, as Python's MHA does).
NnModule nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, bool batch_first);

}  // namespace tb::ref
