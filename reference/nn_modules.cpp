// torch::nn modules behind ref::NnModule. See nn_modules.h.
#include "reference/nn_modules.h"

#include <limits>
#include <map>

#include "reference/torch_access.h"

namespace tb::ref {

namespace tnn = torch::nn;

namespace {

NamedTensors wrap_all(const torch::OrderedDict<std::string, torch::Tensor>& d) {
  NamedTensors out;
  for (const auto& item : d)
    if (item.value().defined()) out.emplace_back(item.key(), wrap(item.value()));
  return out;
}

template <typename Holder>
NnModule unary(Holder h) {
  NnModule m;
  m.module = h.ptr();
  m.fwd = [h](const std::vector<Tensor>& in) mutable { return wrap(h->forward(T(in.at(0)))); };
  return m;
}

std::string shape_text(c10::IntArrayRef s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

Tensor NnModule::forward(const std::vector<Tensor>& inputs) const {
  return guarded("nn forward", [&] { return fwd(inputs); });
}

void NnModule::train(bool on) const { module->train(on); }

// Floating parameters and buffers only, as Python's Module.to (the C++ one also converts
// num_batches_tracked).
void NnModule::to(DType dtype) const {
  guarded("nn to", [&] {
    torch::NoGradGuard no_grad;
    for (auto& item : module->named_parameters(true))
      if (item.value().defined() && item.value().is_floating_point())
        item.value().set_data(item.value().to(to_torch(dtype)));
    for (auto& item : module->named_buffers(true))
      if (item.value().defined() && item.value().is_floating_point())
        item.value().set_data(item.value().to(to_torch(dtype)));
  });
}

NamedTensors NnModule::named_parameters() const { return wrap_all(module->named_parameters(true)); }
NamedTensors NnModule::named_buffers() const { return wrap_all(module->named_buffers(true)); }

void NnModule::load_by_name(const NamedTensors& state) const {
  guarded("load_by_name", [&] {
    std::map<std::string, torch::Tensor> own;
    for (const auto& item : module->named_parameters(true))
      if (item.value().defined()) own.emplace(item.key(), item.value());
    for (const auto& item : module->named_buffers(true))
      if (item.value().defined()) own.emplace(item.key(), item.value());
    std::string errors;
    std::map<std::string, bool> seen;
    for (const auto& [name, t] : state) {
      auto it = own.find(name);
      if (it == own.end()) {
        errors += " engine key '" + name + "' has no LibTorch parameter or buffer;";
        continue;
      }
      if (it->second.sizes() != T(t).sizes()) {
        errors += " '" + name + "': engine shape " + shape_text(T(t).sizes()) + " vs LibTorch " +
                  shape_text(it->second.sizes()) + ";";
        continue;
      }
      seen[name] = true;
    }
    for (const auto& [name, t] : own)
      if (!seen.count(name) && errors.find("'" + name + "'") == std::string::npos)
        errors += " LibTorch key '" + name + "' missing from the engine state dict;";
    if (!errors.empty()) throw RefError("state dict names do not map one to one:" + errors);
    torch::NoGradGuard no_grad;
    for (const auto& [name, t] : state) own.at(name).copy_(T(t));
  });
}

NamedTensors NnModule::named_grads() const {
  NamedTensors out;
  for (const auto& item : module->named_parameters(true))
    if (item.value().defined()) out.emplace_back(item.key(), wrap(item.value().grad()));
  return out;
}

void NnModule::zero_grad() const { module->zero_grad(); }

NnModule nn_linear(int64_t in, int64_t out, bool bias) {
  return guarded("nn_linear", [&] { return unary(tnn::Linear(tnn::LinearOptions(in, out).bias(bias))); });
}

NnModule nn_conv2d(int64_t in, int64_t out, const Shape& kernel, const Shape& stride, const Shape& padding,
                   const Shape& dilation, int64_t groups, bool bias) {
  return guarded("nn_conv2d", [&] {
    auto o = tnn::Conv2dOptions(in, out, torch::ExpandingArray<2>(kernel))
                 .stride(torch::ExpandingArray<2>(stride))
                 .padding(torch::ExpandingArray<2>(padding))
                 .dilation(torch::ExpandingArray<2>(dilation))
                 .groups(groups)
                 .bias(bias);
    return unary(tnn::Conv2d(o));
  });
}

NnModule nn_batch_norm1d(int64_t c, double eps, std::optional<double> momentum, bool affine, bool track) {
  return guarded("nn_batch_norm1d", [&] {
    auto o = tnn::BatchNormOptions(c).eps(eps).affine(affine).track_running_stats(track);
    o.momentum(momentum);
    return unary(tnn::BatchNorm1d(o));
  });
}

NnModule nn_batch_norm2d(int64_t c, double eps, std::optional<double> momentum, bool affine, bool track) {
  return guarded("nn_batch_norm2d", [&] {
    auto o = tnn::BatchNormOptions(c).eps(eps).affine(affine).track_running_stats(track);
    o.momentum(momentum);
    return unary(tnn::BatchNorm2d(o));
  });
}

NnModule nn_layer_norm(const Shape& shape, double eps, bool affine) {
  return guarded("nn_layer_norm", [&] {
    return unary(tnn::LayerNorm(tnn::LayerNormOptions(shape).eps(eps).elementwise_affine(affine)));
  });
}

NnModule nn_group_norm(int64_t groups, int64_t channels, double eps, bool affine) {
  return guarded("nn_group_norm", [&] {
    return unary(tnn::GroupNorm(tnn::GroupNormOptions(groups, channels).eps(eps).affine(affine)));
  });
}

NnModule nn_embedding(int64_t num, int64_t dim, std::optional<int64_t> padding_idx) {
  return guarded("nn_embedding", [&] {
    auto o = tnn::EmbeddingOptions(num, dim);
    if (padding_idx) o.padding_idx(*padding_idx);
    return unary(tnn::Embedding(o));
  });
}

NnModule nn_dropout(double p) {
  return guarded("nn_dropout", [&] { return unary(tnn::Dropout(tnn::DropoutOptions(p))); });
}
NnModule nn_relu() { return unary(tnn::ReLU()); }
NnModule nn_gelu(const std::string& approximate) {
  return guarded("nn_gelu", [&] { return unary(tnn::GELU(tnn::GELUOptions().approximate(approximate))); });
}
NnModule nn_silu() { return unary(tnn::SiLU()); }
NnModule nn_tanh() { return unary(tnn::Tanh()); }

NnModule nn_sequential(const std::vector<NnModule>& items) {
  return guarded("nn_sequential", [&] {
    auto root = std::make_shared<tnn::Module>("Sequential");
    std::vector<NnModule> kept = items;
    for (size_t i = 0; i < items.size(); ++i) root->register_module(std::to_string(i), items[i].module);
    NnModule m;
    m.module = root;
    m.fwd = [kept](const std::vector<Tensor>& in) {
      Tensor x = in.at(0);
      for (const NnModule& k : kept) x = k.fwd({x});
      return x;
    };
    return m;
  });
}

NnModule nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias, bool batch_first) {
  return guarded("nn_multihead_attention", [&] {
    tnn::MultiheadAttention mha(tnn::MultiheadAttentionOptions(embed_dim, num_heads).dropout(dropout).bias(bias));
    NnModule m;
    m.module = mha.ptr();
    m.fwd = [mha, batch_first](const std::vector<Tensor>& in) mutable {
      auto arg = [&](size_t i) { return i < in.size() && in[i].defined() ? T(in[i]) : torch::Tensor(); };
      torch::Tensor q = arg(0), k = arg(1), v = arg(2), kpm = arg(3), mask = arg(4);
      if (batch_first) {
        q = q.transpose(0, 1);
        k = k.transpose(0, 1);
        v = v.transpose(0, 1);
      }
      if (mask.defined() && mask.scalar_type() == torch::kBool)
        mask = torch::zeros(mask.sizes(), q.options()).masked_fill(mask, -std::numeric_limits<double>::infinity());
      torch::Tensor out = std::get<0>(mha->forward(q, k, v, kpm, /*need_weights=*/false, mask));
      return wrap(batch_first ? out.transpose(0, 1) : out);
    };
    return m;
  });
}

}  // namespace tb::ref
