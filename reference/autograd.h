// LibTorch autograd seen from the suites: requires_grad, backward, grad, .grad, and the switches
// the semantics suite compares against (no_grad, inference_mode, anomaly mode). Every LibTorch
// error surfaces as ref::RefError with LibTorch's message.
#pragma once
#include <functional>
#include <vector>

#include "reference/tensor.h"

namespace tb::ref {

void requires_grad_(const Tensor& t, bool on = true);
bool requires_grad(const Tensor& t);
bool is_leaf(const Tensor& t);
Tensor grad_of(const Tensor& t);            // .grad; undefined when none
std::string grad_fn_name(const Tensor& t);  // "" for a leaf
Tensor detach(const Tensor& t);
void retain_grad(const Tensor& t);
void backward(const Tensor& t, const Tensor& gradient = {}, bool retain_graph = false);
// Undefined entries for unused inputs (allow_unused) or, in grad_outputs, "ones for a scalar".
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph = false, bool allow_unused = true);
// hook(grad) -> replacement or undefined.
void register_hook(const Tensor& t, std::function<Tensor(const Tensor&)> hook);
bool is_inference(const Tensor& t);
int64_t version(const Tensor& t);  // _version(): in-place writes so far

// Runs f with the guard on.
void with_no_grad(const std::function<void()>& f);
void with_inference_mode(const std::function<void()>& f);
void with_anomaly_mode(const std::function<void()>& f);
// torch.autocast("cpu", dtype=bfloat16), or dtype=float16 with the DType overload
void with_autocast(const std::function<void()>& f);
void with_autocast(DType dtype, const std::function<void()>& f);

// In-place ops the semantics suite needs beside the op families (clone is in views.h).
void mul_inplace(const Tensor& t, double v);
void add_inplace(const Tensor& t, const Tensor& other);

}  // namespace tb::ref
