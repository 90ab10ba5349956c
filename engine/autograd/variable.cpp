// AutogradMeta and the autograd members of Tensor (declared in engine/tensor/tensor.h), and the
// hooks through which tensor/ reports views, copies and fills (See Note [Autograd hooks]).
#include "engine/autograd/variable.h"

#include <atomic>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/grad_mode_flag.h"
#include "engine/tensor/view_replay.h"

namespace tb::autograd {

AutogradMeta* meta_of(const Tensor& t) { return static_cast<AutogradMeta*>(t.impl()->autograd_meta.get()); }

AutogradMeta& ensure_meta(const Tensor& t) {
  if (!t.impl()->autograd_meta) t.impl()->autograd_meta = std::make_shared<AutogradMeta>();
  return *meta_of(t);
}

namespace {
Geometry geometry(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset()}; }

bool overlapping(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  return false;
}

// The view node for `view` of the tracked `base`.
std::shared_ptr<Node> make_view_node(const Tensor& base, const Tensor& view) {
  auto node = std::make_shared<ViewNode>(geometry(base), geometry(view), view.dtype());
  node->next_edges.push_back(edge_of(base));
  return node;
}

// `t`'s grad_fn just changed from `old_fn` to m.grad_fn: its retain_grad() moves to the new node,
// as PyTorch moves the retains_grad hook (update_tensor_hooks_on_new_gradfn), so that .grad is
// the gradient with respect to t's current value. Tensor hooks stay on the old node, as in PyTorch.
void move_retained_grad(const Tensor& t, AutogradMeta& m, const std::shared_ptr<Node>& old_fn) {
  if (!m.retains_grad || !m.grad_fn || m.grad_fn == old_fn) return;
  if (old_fn) std::erase_if(old_fn->retained, [&](const auto& r) { return r.second.lock().get() == t.impl(); });
  m.grad_fn->retained.push_back({m.output_nr, t.impl_ptr()});
}

// See AutogradMeta::attr_version.
void refresh_view(const Tensor& t, AutogradMeta* m) {
  if (!m->is_view || t.version() == m->attr_version || !requires_grad(m->base)) return;
  const std::shared_ptr<Node> old_fn = m->grad_fn;
  m->grad_fn = make_view_node(m->base, t);
  m->output_nr = 0;
  m->attr_version = t.version();
  move_retained_grad(t, *m, old_fn);
}

// An in-place op that requires grad on a view made under NoGradGuard or in InferenceMode
// (AutogradMeta::view_creation): PyTorch's handle_view_on_rebase refuses it, as the engine does.
[[noreturn]] void refuse_untracked_view_inplace(const AutogradMeta& m) {
  // A view made with grad mode on of such a view carries its creation mode on.
  const char* prefix = m.is_view ? "A view of a view which was created in" : "A view was created in";
  if (m.view_creation == ViewCreation::InferenceMode)
    throw core::Error(
        "inplace", core::detail::concat(prefix,
                                        " inference mode and is being modified inplace in normal mode. Given that this "
                                        "use case is ambiguous and error-prone, it is forbidden. You can clarify your "
                                        "code by moving both the view and the inplace either both inside the "
                                        "InferenceMode scope (if you don't want the inplace to be tracked) or both "
                                        "outside (if you want the inplace to be tracked)."));
  throw core::Error("inplace", core::detail::concat(
                                   prefix,
                                   " no_grad mode and is being modified inplace with grad mode enabled. Given that "
                                   "this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
                                   "code by moving both the view and the inplace either both inside the no_grad block "
                                   "(autograd::NoGradGuard; if you don't want the inplace to be tracked) or both "
                                   "outside (if you want the inplace to be tracked)."));
}
}  // namespace

bool requires_grad(const Tensor& t) {
  if (!t.defined()) return false;
  AutogradMeta* m = meta_of(t);
  if (!m) return false;
  refresh_view(t, m);
  return m->requires_grad || m->grad_fn;
}

Edge edge_of(const Tensor& t) {
  AutogradMeta* m = t.defined() ? meta_of(t) : nullptr;
  if (!m) return {};
  refresh_view(t, m);
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

Tensor checked_hook_result(const Tensor& value, const Tensor& returned) {
  if (!returned.defined()) return value;
  TB_CHECK(returned.dtype() == value.dtype(), "backward", "a tensor hook has changed the type of value (was ",
           core::name(value.dtype()), " got ", core::name(returned.dtype()), ")");
  TB_CHECK(returned.sizes() == value.sizes(), "backward", "a tensor hook has changed the size of value (was ",
           core::to_string(value.sizes()), " got ", core::to_string(returned.sizes()), ")");
  return returned;
}

Tensor run_tensor_hooks(const Tensor& leaf, const Tensor& grad) {
  Tensor g = grad;
  if (AutogradMeta* m = meta_of(leaf))
    for (auto& [handle, hook] : m->hooks) g = checked_hook_result(g, hook(g));
  return g;
}

bool any_requires_grad(const TensorList& ts) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : ts)
    if (requires_grad(t)) return true;
  return false;
}

void set_history(const TensorList& outputs, const std::shared_ptr<Node>& node, const TensorList& inputs) {
  node->next_edges.clear();
  for (const Tensor& in : inputs) node->next_edges.push_back(edge_of(in));
  node->outputs.clear();
  for (uint32_t k = 0; k < outputs.size(); ++k) {
    const Tensor& out = outputs[k];
    node->outputs.push_back(out.defined() ? OutputMeta{out.sizes(), out.dtype()} : OutputMeta{});
    if (!out.defined() || !core::is_floating(out.dtype())) continue;
    bool aliases_input = false;  // an op that returned its input unchanged keeps its history
    for (const Tensor& in : inputs) aliases_input |= in.defined() && in.is_same(out);
    if (aliases_input) continue;
    AutogradMeta& m = ensure_meta(out);
    m.grad_fn = node;
    m.output_nr = k;
  }
}

void check_inplace(const Tensor& self, const TensorList& others) {
  if (!grad_mode_enabled()) return;
  const AutogradMeta* m = meta_of(self);
  if (!m) return;
  if (m->view_creation != ViewCreation::Default) {
    // PyTorch's rule: the op requires grad (a view of its root base requires grad when the root
    // does, whatever the mode it was made in) and the view was made under no_grad/inference mode.
    const std::shared_ptr<TensorImpl> root = m->view_root.lock();
    if (requires_grad(self) || (root && requires_grad(Tensor(root))) || any_requires_grad(others))
      refuse_untracked_view_inplace(*m);
  }
  TB_CHECK(!(m->requires_grad && !m->grad_fn), "inplace",
           "a leaf Variable that requires grad is being used in an in-place operation. Wrap the update in "
           "autograd::NoGradGuard (as optimizers do) or clone the tensor first.");
  if (m->is_view && m->multi_output_view && requires_grad(self)) {
    const std::shared_ptr<Node> fn = m->grad_fn;
    TB_CHECK(false, "inplace", "Output ", m->output_nr, " of ", fn ? fn->name() : std::string("a view"),
             " is a view and is being modified inplace. This view is the output of a function that returns "
             "multiple views (split, chunk). Such functions do not allow the output views to be modified inplace. "
             "You should replace the inplace operation by an out-of-place one.");
  }
  if (m->custom_function_view && requires_grad(self)) {
    const std::shared_ptr<Node> fn = m->grad_fn;
    TB_CHECK(false, "inplace", "Output ", m->output_nr, " of ", fn ? fn->name() : std::string("a view"),
             " is a view and is being modified inplace. This view was created inside a custom Function (or because "
             "an input was returned as-is) and the autograd logic to handle view+inplace would override the custom "
             "backward associated with the custom Function, leading to incorrect gradients. This behavior is "
             "forbidden. You can fix this by cloning the output of the custom Function.");
  }
  if (m->is_view) {
    // PyTorch's rule: a view that requires grad (through any tensor between it and its root, e.g.
    // a strided slice made a leaf with requires_grad_) of a root without history, or any view of
    // a leaf root that requires grad.
    const AutogradMeta* bm = meta_of(m->base);
    const bool root_is_leaf = !bm || !bm->grad_fn;
    TB_CHECK(!(root_is_leaf && (requires_grad(self) || (bm && bm->requires_grad))), "inplace",
             "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  }
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& node) {
  AutogradMeta& m = ensure_meta(self);
  // check_inplace refused this already unless only the source of a copy_ requires grad (the copy
  // hook sees the destination alone): then the values are written, but the op still raises.
  if (m.view_creation != ViewCreation::Default) refuse_untracked_view_inplace(m);
  node->outputs.assign(1, {self.sizes(), self.dtype()});
  const std::shared_ptr<Node> old_fn = m.grad_fn;
  if (!m.is_view) {
    m.grad_fn = node;
    m.output_nr = 0;
    move_retained_grad(self, m, old_fn);
    return;
  }
  // In place on a view: the base's new history runs node on the view's region.
  const Tensor& base = m.base;
  auto copy_slices = std::make_shared<CopySlices>(edge_of(base), geometry(base), geometry(self), base.dtype(), node);
  AutogradMeta& bm = ensure_meta(base);
  const std::shared_ptr<Node> old_base_fn = bm.grad_fn;
  bm.grad_fn = copy_slices;
  bm.output_nr = 0;
  move_retained_grad(base, bm, old_base_fn);
  m.grad_fn = make_view_node(base, self);
  m.output_nr = 0;
  m.attr_version = self.version();
  move_retained_grad(self, m, old_fn);
}

namespace {

// ---- the hooks tensor/ calls ----

// A view made under NoGradGuard or in InferenceMode: see AutogradMeta::view_creation. Only views of
// tensors that carry autograd meta are marked (a tensor without one has never been part of a graph,
// and kernels, which run under NoGradGuard, view plain tensors all the time).
void mark_untracked_view(const Tensor& base, const AutogradMeta* bm, Tensor& view) {
  if (!bm || base.is_inference()) return;
  AutogradMeta& m = ensure_meta(view);
  const ViewCreation now = inference_mode_enabled() ? ViewCreation::InferenceMode : ViewCreation::NoGrad;
  if (bm->view_creation != ViewCreation::Default) {  // PyTorch's propagate_creation_meta
    m.view_creation = bm->view_creation == ViewCreation::InferenceMode ? bm->view_creation : now;
    m.view_root = bm->view_root;
  } else {
    m.view_creation = now;
    m.view_root = (bm->is_view ? bm->base : base).impl_ptr();
  }
}

void on_view_replayed(const Tensor& base, Tensor& view, const ViewReplay& replay) {
  const AutogradMeta* bm = meta_of(base);
  if (!grad_mode_enabled()) {
    mark_untracked_view(base, bm, view);
    return;
  }
  AutogradMeta& m = ensure_meta(view);
  m.is_view = true;
  m.base = bm && bm->is_view ? bm->base : base;
  m.attr_version = view.version();
  m.multi_output_view = bm && bm->multi_output_view;
  if (bm && bm->view_creation != ViewCreation::Default) {  // a view of an untracked view stays one
    m.view_creation = bm->view_creation;
    m.view_root = bm->view_root;
  }
  m.custom_function_view = bm && bm->custom_function_view;
  if (bm && bm->is_view) m.leaf_base = bm->requires_grad ? base : bm->leaf_base;  // requires_grad: leaves only
  if (!requires_grad(base)) return;
  m.output_nr = 0;
  if (overlapping(base) && replay) {
    // A view of an expanded tensor: the same view of a dense proxy of the base's shape gives its
    // place in the base's index space, where the backward is exact and the gradient goes to the
    // base itself (a leaf that requires grad, or its expand). See Note [View backward].
    Geometry proxy{base.sizes(), core::contiguous_strides(base.sizes()), 0};
    Tensor pv;
    {
      NoGradGuard no_grad;  // the proxy and its view stay out of the graph
      pv = replay(make_view(base, proxy.sizes, proxy.strides, 0));
    }
    auto node = std::make_shared<ViewNode>(std::move(proxy), geometry(pv), view.dtype());
    node->next_edges.push_back(edge_of(base));
    m.grad_fn = node;
    return;
  }
  // as_strided addresses storage: a view of an expanded view maps exactly through a non-overlapping
  // tensor below it that requires grad: the nearest leaf between it and its root base (a leaf made
  // from a view, whose gradient PyTorch's chain of view nodes reaches), else the root base. See
  // Note [View backward].
  if (overlapping(base))
    for (const Tensor* through : {&m.leaf_base, &m.base})
      if (through->defined() && !through->is_same(base) && !overlapping(*through) && requires_grad(*through)) {
        m.grad_fn = make_view_node(*through, view);
        return;
      }
  m.grad_fn = make_view_node(base, view);
}

void on_view(const Tensor& base, Tensor& view) { on_view_replayed(base, view, {}); }

void hook_check_inplace(const Tensor& dst) { check_inplace(dst); }

void on_copy(Tensor& dst, const Tensor& src) {
  if (!grad_mode_enabled()) return;
  const bool dst_view = meta_of(dst) && meta_of(dst)->is_view;
  if (!requires_grad(src) && !requires_grad(dst) && !(dst_view && requires_grad(meta_of(dst)->base))) return;
  // d(dst)/d(old dst) = 0; d(dst)/d(src) = 1, summed over broadcast dims and cast (by the engine).
  auto node = std::make_shared<FunctionNode>("copy_", std::vector<SavedTensor>{},
                                             [](BackwardContext&, const TensorList& g) {
                                               return TensorList{Tensor(), g[0]};
                                             });
  node->next_edges = {edge_of(dst), edge_of(src)};
  rebase_history(dst, node);
}

void on_fill(Tensor& dst) {
  if (!grad_mode_enabled()) return;
  const AutogradMeta* m = meta_of(dst);
  if (!m || !(requires_grad(dst) || (m->is_view && requires_grad(m->base)))) return;
  auto node = std::make_shared<FunctionNode>("fill_", std::vector<SavedTensor>{},
                                             [](BackwardContext&, const TensorList&) { return TensorList{Tensor()}; });
  node->next_edges = {edge_of(dst)};
  rebase_history(dst, node);
}

// Installed when this file is linked, which any use of autograd brings in (the Tensor members
// below live here).
const bool installed = [] {
  AutogradHooks& h = autograd_hooks();
  h.check_inplace = hook_check_inplace;
  h.on_view = on_view;
  on_replayed_view_hook() = on_view_replayed;
  h.on_copy = on_copy;
  h.on_fill = on_fill;
  requires_grad_hook() = requires_grad;
  return true;
}();

std::atomic<int64_t> next_hook_handle{1};

}  // namespace
}  // namespace tb::autograd

namespace tb {

using autograd::AutogradMeta;
using autograd::meta_of;

bool Tensor::requires_grad() const { return autograd::requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool on) {
  AutogradMeta* m = meta_of(*this);
  if (m && m->grad_fn) {
    TB_CHECK(on, "requires_grad_",
             "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
             "in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return *this;
  }
  if (on) {
    TB_CHECK(core::is_floating(dtype()), "requires_grad_",
             "only Tensors of floating point dtype can require gradients (got ", core::name(dtype()), ")");
    TB_CHECK(!is_inference() || inference_mode_flag(), "requires_grad_",
             "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  }
  if (on || m) autograd::ensure_meta(*this).requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !grad_fn(); }

Tensor Tensor::grad() const {
  const AutogradMeta* m = meta_of(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    TB_CHECK(g.sizes() == sizes() && g.dtype() == dtype(), "set_grad", "assigned grad of ", core::name(g.dtype()),
             core::to_string(g.sizes()), " does not match the tensor's ", core::name(dtype()),
             core::to_string(sizes()));
  if (!g.defined() && !meta_of(*this)) return;
  autograd::ensure_meta(*this).grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (!meta_of(*this)) return nullptr;
  autograd::requires_grad(*this);  // remakes a stale view's history first
  return meta_of(*this)->grad_fn;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* m = meta_of(*this);
  return m ? m->output_nr : 0;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = impl_->sizes;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->version = impl_->version;
  impl->inference = impl_->inference;
  return Tensor(std::move(impl));
}

void Tensor::retain_grad() const {
  TB_CHECK(requires_grad(), "retain_grad", "can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta* m = meta_of(*this);
  if (!m->grad_fn || m->retains_grad) return;  // leaves keep .grad anyway
  m->retains_grad = true;
  m->grad_fn->retained.push_back({m->output_nr, impl_ptr()});
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = meta_of(*this);
  return m && m->retains_grad;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

int64_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  TB_CHECK(requires_grad(), "register_hook", "cannot register a hook on a tensor that doesn't require gradient");
  const int64_t handle = autograd::next_hook_handle++;
  AutogradMeta* m = meta_of(*this);
  if (m->grad_fn) m->grad_fn->pre_hooks.push_back({m->output_nr, handle, std::move(hook)});
  else m->hooks.push_back({handle, std::move(hook)});
  return handle;
}

void Tensor::remove_hook(int64_t handle) const {
  AutogradMeta* m = meta_of(*this);
  if (!m) return;
  std::erase_if(m->hooks, [&](const auto& h) { return h.first == handle; });
  if (m->grad_fn) std::erase_if(m->grad_fn->pre_hooks, [&](const auto& h) { return h.handle == handle; });
}

}  // namespace tb
