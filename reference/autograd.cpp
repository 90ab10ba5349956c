#include "reference/autograd.h"

#include <ATen/autocast_mode.h>

#include "reference/torch_access.h"

namespace tb::ref {

void requires_grad_(const Tensor& t, bool on) {
  guarded("requires_grad_", [&] { t.impl()->t.requires_grad_(on); });
}
bool requires_grad(const Tensor& t) { return T(t).requires_grad(); }
bool is_leaf(const Tensor& t) { return T(t).is_leaf(); }
Tensor grad_of(const Tensor& t) {
  torch::Tensor g = T(t).grad();
  return g.defined() ? wrap(g) : Tensor();
}
std::string grad_fn_name(const Tensor& t) {
  auto fn = T(t).grad_fn();
  return fn ? fn->name() : "";
}
Tensor detach(const Tensor& t) { return wrap(T(t).detach()); }
void retain_grad(const Tensor& t) {
  guarded("retain_grad", [&] { T(t).retain_grad(); });
}

void backward(const Tensor& t, const Tensor& gradient, bool retain_graph) {
  guarded("backward", [&] { T(t).backward(gradient.defined() ? T(gradient) : torch::Tensor(), retain_graph); });
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  return guarded("grad", [&] {
    std::vector<torch::Tensor> o, i, g;
    for (const Tensor& t : outputs) o.push_back(T(t));
    for (const Tensor& t : inputs) i.push_back(T(t));
    for (const Tensor& t : grad_outputs) g.push_back(t.defined() ? T(t) : torch::Tensor());
    auto r = torch::autograd::grad(o, i, g, retain_graph, /*create_graph=*/false, allow_unused);
    std::vector<Tensor> out;
    for (auto& t : r) out.push_back(t.defined() ? wrap(t) : Tensor());
    return out;
  });
}

void register_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook) {
  guarded("register_hook", [&] {
    T(t).register_hook([hook](torch::Tensor g) -> torch::Tensor {
      Tensor r = hook(wrap(g));
      return r.defined() ? T(r) : torch::Tensor();
    });
  });
}

bool is_inference(const Tensor& t) { return T(t).is_inference(); }
int64_t version(const Tensor& t) { return int64_t(T(t)._version()); }

void with_no_grad(const std::function<void()>& f) {
  torch::NoGradGuard g;
  guarded("no_grad", f);
}
void with_inference_mode(const std::function<void()>& f) {
  c10::InferenceMode g;
  guarded("inference_mode", f);
}
void with_anomaly_mode(const std::function<void()>& f) {
  torch::autograd::DetectAnomalyGuard g;
  guarded("anomaly_mode", f);
}

void with_autocast(const std::function<void()>& f) { with_autocast(DType::BFloat16, f); }

void with_autocast(DType dtype, const std::function<void()>& f) {
  // What torch.autocast("cpu", dtype=dtype) does on entry and exit.
  const bool prev = at::autocast::is_autocast_enabled(at::kCPU);
  const at::ScalarType prev_dtype = at::autocast::get_autocast_dtype(at::kCPU);
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::autocast::set_autocast_dtype(at::kCPU, to_torch(dtype));
  at::autocast::increment_nesting();
  struct Restore {
    bool prev;
    at::ScalarType dtype;
    ~Restore() {
      if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      at::autocast::set_autocast_enabled(at::kCPU, prev);
      at::autocast::set_autocast_dtype(at::kCPU, dtype);
    }
  } restore{prev, prev_dtype};
  guarded("autocast", f);
}

void mul_inplace(const Tensor& t, double v) {
  guarded("mul_", [&] { T(t).mul_(v); });
}
void add_inplace(const Tensor& t, const Tensor& o) {
  guarded("add_", [&] { T(t).add_(T(o)); });
}

}  // namespace tb::ref
