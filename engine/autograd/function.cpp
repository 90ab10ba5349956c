#include "engine/autograd/function.h"

namespace tb::autograd {

namespace {
std::vector<SavedTensor> save(const TensorList& ts) {
  std::vector<SavedTensor> s;
  s.reserve(ts.size());
  for (const Tensor& t : ts) s.emplace_back(t);
  return s;
}

// The profiler's args for an op's event: its inputs' shapes and dtypes (profiler::input_args).
void profile_inputs(const TensorList& inputs) {
  std::vector<profiler::OpScope::Input> in;
  in.reserve(inputs.size());
  for (const Tensor& t : inputs) in.push_back({t.defined() ? &t.sizes() : nullptr, t.defined() ? t.dtype() : DType()});
  profiler::annotate_last_op(profiler::input_args(in));
}
}  // namespace

void record(const char* op, const TensorList& inputs, const TensorList& outputs, const TensorList& saved,
            BackwardFn fn) {
  if (profiler::enabled()) profile_inputs(inputs);  // the kernel's event, just closed
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(op, save(saved), std::move(fn));
  set_history(outputs, node, inputs);
}

void record_inplace(const char* op, const Tensor& self, const TensorList& others, const TensorList& saved,
                    BackwardFn fn) {
  if (!grad_mode_enabled()) return;
  const AutogradMeta* m = meta_of(self);
  const bool view_of_tracked = m && m->is_view && requires_grad(m->base);
  if (!any_requires_grad(others) && !requires_grad(self) && !view_of_tracked) return;
  auto node = std::make_shared<FunctionNode>(op, save(saved), std::move(fn));
  node->next_edges.push_back(edge_of(self));
  for (const Tensor& o : others) node->next_edges.push_back(edge_of(o));
  rebase_history(self, node);
}

}  // namespace tb::autograd
