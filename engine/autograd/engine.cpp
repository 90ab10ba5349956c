#include "engine/autograd/engine.h"

#include <cmath>
#include <queue>
#include <unordered_map>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/core/profiler.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"

namespace tb::autograd {

namespace {

// Sums `g` down to `sizes` (undoing a broadcast) and casts it to `dtype`.
Tensor coerce(const Tensor& g, const OutputMeta& m, const Node& producer) {
  Tensor r = g;
  if (r.sizes() != m.sizes) {
    const int64_t lead = r.dim() - int64_t(m.sizes.size());
    bool ok = lead >= 0;
    ops::DimList dims;
    for (int64_t d = 0; ok && d < r.dim(); ++d) {
      if (d < lead) dims.push_back(d);
      else if (m.sizes[d - lead] != r.size(d)) {
        ok = m.sizes[d - lead] == 1;
        dims.push_back(d);
      }
    }
    TB_CHECK(ok, producer.name(), "returned a gradient of shape ", core::to_string(g.sizes()),
             " for an input of shape ", core::to_string(m.sizes), " (not broadcastable)");
    r = ops::sum(r, dims, /*keepdim=*/true);
    if (lead > 0) r = r.reshape(m.sizes);
  }
  if (r.dtype() != m.dtype) r = r.to(m.dtype);
  return r;
}

bool has_non_finite(const Tensor& t) {
  if (!core::is_floating(t.dtype()) || t.numel() == 0) return false;
  return !ops::all(ops::isfinite(t)).item<bool>();
}

// The callbacks of the backward running on this thread (null outside one); see queue_callback.
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;

struct NodeTask {
  TensorList buffer;  // gradients arriving for the node's outputs
  int64_t deps = 0;
  bool exec = true;  // runs apply(); false for nodes that only feed nothing needed
  bool captured = false;
};

struct Capture {
  Node* node;
  uint32_t input_nr;
  size_t slot;
  Tensor leaf;  // defined for leaves: its tensor hooks run on the captured gradient
};

// How run_backward treats its captures: Grad (autograd::grad) runs the captured nodes' tensor
// hooks on what it returns and lets leaves keep their .grad; Boundary
// (detail::backward_to_boundary) takes the gradient as it arrives, before any hook, and runs
// nothing at or below a captured node, while leaves accumulate as in the enclosing backward.
enum class CaptureMode { Grad, Boundary };

// Runs the graph below `roots`. With captures (autograd::grad), only nodes leading to a captured
// node run, and captured gradients are returned instead of accumulated.
TensorList run_backward(const std::vector<std::pair<Edge, Tensor>>& roots, bool retain_graph,
                        const std::vector<Capture>& captures, CaptureMode mode = CaptureMode::Grad) {
  const bool boundary = mode == CaptureMode::Boundary;
  NoGradGuard no_grad;
  memory::TagGuard tag(memory::Tag::Gradient, /*keep_outer=*/true);  // Note [Memory tags]
  std::vector<std::function<void()>> callbacks;
  struct CallbackScope {  // nested backwards (a hook calling grad()) keep their own list
    std::vector<std::function<void()>>* saved;
    explicit CallbackScope(std::vector<std::function<void()>>* mine) : saved(current_callbacks) {
      current_callbacks = mine;
    }
    ~CallbackScope() { current_callbacks = saved; }
  } callback_scope(&callbacks);
  struct AccumulateScope {  // Note [Gradient buffers]: lent only when leaves accumulate
    bool saved;
    explicit AccumulateScope(bool on) : saved(detail::leaves_accumulate) { detail::leaves_accumulate = on; }
    ~AccumulateScope() { detail::leaves_accumulate = saved; }
  } accumulate_scope(boundary ? detail::leaves_accumulate : captures.empty());
  std::unordered_map<Node*, NodeTask> tasks;
  // Post-order of the graph (children first), iteratively: graphs can be thousands deep.
  std::vector<Node*> post;
  {
    std::vector<std::pair<Node*, size_t>> stack;
    for (const auto& [e, g] : roots)
      if (!tasks.count(e.fn.get())) {
        tasks[e.fn.get()];
        stack.push_back({e.fn.get(), 0});
        while (!stack.empty()) {
          auto& [n, i] = stack.back();
          if (i < n->next_edges.size()) {
            Node* c = n->next_edges[i++].fn.get();
            if (c && !tasks.count(c)) {
              tasks[c];
              stack.push_back({c, 0});
            }
          } else {
            post.push_back(n);
            stack.pop_back();
          }
        }
      }
  }
  for (const Capture& c : captures) {
    auto it = tasks.find(c.node);
    if (it != tasks.end()) it->second.captured = true;
  }
  if (!captures.empty()) {
    for (Node* n : post) {  // children are decided before their parents
      bool exec = false;
      if (boundary && tasks[n].captured) {  // nothing at or below a boundary runs
        tasks[n].exec = false;
        continue;
      }
      for (const Edge& e : n->next_edges)
        if (e.fn) {
          const NodeTask& c = tasks[e.fn.get()];
          exec |= c.exec || c.captured;
        }
      tasks[n].exec = exec;
    }
  }
  auto wanted = [&](Node* c) {
    const NodeTask& t = tasks[c];
    return t.exec || t.captured;
  };
  for (Node* n : post)
    if (tasks[n].exec)
      for (const Edge& e : n->next_edges)
        if (e.fn && wanted(e.fn.get())) ++tasks[e.fn.get()].deps;

  auto later_first = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  auto deliver = [&](Node* n, uint32_t k, const Tensor& g) {
    NodeTask& t = tasks[n];
    t.buffer.resize(n->outputs.size());
    Tensor& slot = t.buffer.at(k);
    slot = slot.defined() ? ops::add(slot, g) : g;
  };
  for (const auto& [e, g] : roots) deliver(e.fn.get(), e.input_nr, g);
  for (const auto& [e, g] : roots) {
    NodeTask& t = tasks[e.fn.get()];
    if (t.deps == 0 && wanted(e.fn.get())) {
      t.deps = -1;  // queued once even if it is several roots' node
      ready.push(e.fn.get());
    }
  }

  TensorList captured(captures.size());
  const bool anomaly = anomaly_mode_enabled();
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    // What this node's hooks, formula and delivery allocate is named after it ("MmBackward0") in
    // OOM reports and memory snapshots; intern() is a lookup once the name is known.
    const char* node_name = memory::intern(n->name());
    memory::OpScope op_scope(node_name);
    profiler::Scope prof(node_name, profiler::Category::Backward);  // the node's event in a profile
    NodeTask& task = tasks[n];
    TensorList grads = std::move(task.buffer);
    grads.resize(n->outputs.size());
    if (boundary && task.captured) {  // raw: the enclosing backward runs this node's hooks
      for (const Capture& c : captures)
        if (c.node == n) captured[c.slot] = grads.at(c.input_nr);
      continue;
    }
    for (auto& h : n->pre_hooks) {
      if (!grads.at(h.output).defined()) continue;
      grads[h.output] = checked_hook_result(grads[h.output], h.fn(grads[h.output]));
    }
    for (auto& [k, weak] : n->retained) {
      std::shared_ptr<TensorImpl> impl = weak.lock();
      if (!impl || !grads.at(k).defined()) continue;
      Tensor owner(impl);
      Tensor old = owner.grad();
      owner.set_grad(old.defined() ? ops::add(old, grads[k]) : grads[k].clone());
    }
    if (task.captured)
      for (const Capture& c : captures)
        if (c.node == n && grads.at(c.input_nr).defined())
          captured[c.slot] = c.leaf.defined() ? run_tensor_hooks(c.leaf, grads[c.input_nr]) : grads[c.input_nr];
    if (!task.exec) continue;

    bool any = false;
    for (const Tensor& g : grads) any |= g.defined();
    TensorList outs;
    if (any) {
      for (size_t k = 0; k < grads.size(); ++k)
        if (!grads[k].defined()) grads[k] = zeros(n->outputs[k].sizes, n->outputs[k].dtype);
      TensorList received = n->post_hooks.empty() ? TensorList{} : grads;
      outs = n->apply(std::move(grads));
      for (auto& h : n->post_hooks) h(outs, received);
    }
    if (!retain_graph) n->release_saved();
    outs.resize(n->next_edges.size());
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn || !wanted(e.fn.get())) continue;
      if (outs[i].defined()) {
        if (anomaly && has_non_finite(outs[i]))
          throw core::Error(n->name(), "Function '" + n->name() + "' returned nan or inf values in its " +
                                           std::to_string(i) + "th output; it is the backward of the forward op '" +
                                           n->forward_op() + "' (anomaly mode)");
        deliver(e.fn.get(), e.input_nr, coerce(outs[i], e.fn->outputs.at(e.input_nr), *n));
      }
      if (--tasks[e.fn.get()].deps == 0) ready.push(e.fn.get());
    }
  }
  for (size_t i = 0; i < callbacks.size(); ++i) {  // by index: a callback may queue more
    std::function<void()> cb = std::move(callbacks[i]);
    cb();
  }
  return captured;
}

std::vector<std::pair<Edge, Tensor>> make_roots(const TensorList& tensors, const TensorList& grads, const char* op) {
  TB_CHECK(grads.empty() || grads.size() == tensors.size(), op, "got ", grads.size(), " gradients for ", tensors.size(),
           " tensors");
  std::vector<std::pair<Edge, Tensor>> roots;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    Edge e = edge_of(t);
    TB_CHECK(e.valid(), op, "element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined()) {
      TB_CHECK(t.numel() == 1, op, "grad can be implicitly created only for scalar outputs (output ", i, " has shape ",
               core::to_string(t.sizes()), "); pass a gradient");
      g = ones_like(t);
    }
    TB_CHECK(g.sizes() == t.sizes(), op, "Mismatch in shape: grad_output[", i, "] has a shape of ",
             core::to_string(g.sizes()), " and output[", i, "] has a shape of ", core::to_string(t.sizes()));
    if (g.dtype() != t.dtype()) g = g.to(t.dtype());
    roots.push_back({e, g});
  }
  return roots;
}

}  // namespace

TensorList detail::backward_to_boundary(const TensorList& outputs, const TensorList& grad_outputs,
                                        const std::vector<Edge>& boundary) {
  std::vector<std::pair<Edge, Tensor>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Edge e = edge_of(outputs[i]);
    if (e.valid() && grad_outputs.at(i).defined()) roots.push_back({e, grad_outputs[i]});
  }
  std::vector<Capture> captures;
  std::vector<size_t> index;  // capture slot -> boundary position
  for (size_t i = 0; i < boundary.size(); ++i)
    if (boundary[i].valid()) {
      captures.push_back({boundary[i].fn.get(), boundary[i].input_nr, captures.size(), Tensor()});
      index.push_back(i);
    }
  TensorList result(boundary.size());
  if (roots.empty()) return result;
  TensorList r = run_backward(roots, /*retain_graph=*/false, captures, CaptureMode::Boundary);
  for (size_t k = 0; k < r.size(); ++k) result[index[k]] = std::move(r[k]);
  return result;
}

void queue_callback(std::function<void()> cb) {
  TB_CHECK(current_callbacks != nullptr, "queue_callback", "called outside of a backward pass");
  current_callbacks->push_back(std::move(cb));
}

void backward(const TensorList& tensors, const TensorList& grad_tensors, bool retain_graph) {
  run_backward(make_roots(tensors, grad_tensors, "backward"), retain_graph, {});
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs, bool retain_graph,
                bool allow_unused) {
  auto roots = make_roots(outputs, grad_outputs, "grad");
  std::vector<Capture> captures;
  std::vector<Edge> keep;  // holds accumulators made for leaf inputs until the run ends
  for (size_t i = 0; i < inputs.size(); ++i) {
    Edge e = edge_of(inputs[i]);
    TB_CHECK(e.valid(), "grad", "One of the differentiated Tensors (input ", i, ") does not require grad");
    keep.push_back(e);
    captures.push_back({e.fn.get(), e.input_nr, i, inputs[i].is_leaf() ? inputs[i] : Tensor()});
  }
  TensorList result = run_backward(roots, retain_graph, captures);
  for (size_t i = 0; i < result.size(); ++i)
    TB_CHECK(result[i].defined() || allow_unused, "grad", "One of the differentiated Tensors (input ", i,
             ") appears to not have been used in the graph. Set allow_unused=true if this is the desired behavior.");
  return result;
}

}  // namespace tb::autograd
