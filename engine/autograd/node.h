// The autograd graph: a Node is the backward of one forward op; its Edges point at the nodes
// that produced its inputs (one edge per differentiable input; an invalid edge where the input
// needs no gradient). Tensors a node needs are SavedTensors, checked against the version
// counter when unpacked. FunctionNode holds the backward as a closure (micrograd's idea: a
// closure per op); the formulas themselves live in engine/autograd/functions/.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::autograd {

class Node;
using TensorList = std::vector<Tensor>;
using TensorHook = std::function<Tensor(const Tensor&)>;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;  // which of fn's gradient inputs (= the forward op's outputs) this feeds
  bool valid() const { return fn != nullptr; }
};

// Shape and dtype of one forward output: the gradient arriving for it is made to match.
struct OutputMeta {
  Shape sizes;
  DType dtype = DType::Float32;
};

// A tensor kept for backward. It holds a detached alias (same storage and version counter, no
// history, so saving an op's own output makes no reference cycle) and the version at save time.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  // The saved value; an error if it was modified in place since, or freed by an earlier backward.
  Tensor unpack(const Node& owner) const;
  void release() {
    data_ = Tensor();
    released_ = true;
  }
  bool defined() const { return defined_; }

 private:
  Tensor data_;
  std::weak_ptr<TensorImpl> original_;  // to name the op that last wrote it, in the error
  uint64_t version_ = 0;
  bool defined_ = false;
  bool released_ = false;
  bool discarded_ = false;  // saved inside a checkpointed forward: nothing kept (detail::discard_saved)
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node(std::string name, std::string forward_op);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads: one per forward output (zero-filled where nothing arrived); returns one gradient per
  // next edge (undefined where none).
  virtual TensorList apply(TensorList&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_saved() {}

  const std::string& name() const { return name_; }              // "MulBackward0"
  const std::string& forward_op() const { return forward_op_; }  // "mul"
  uint64_t sequence_nr() const { return seq_; }

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;  // forward outputs, one per gradient input
  // Tensor hooks on forward output k, run on its gradient before apply().
  struct PreHook {
    uint32_t output;
    int64_t handle;
    TensorHook fn;
  };
  std::vector<PreHook> pre_hooks;
  // Non-leaf tensors with retain_grad(): output k's gradient is stored into their .grad.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;
  // Run after apply() with (gradients produced for the inputs, gradients received for the outputs).
  std::vector<std::function<void(const TensorList&, const TensorList&)>> post_hooks;

 protected:
  uint64_t seq_;

 private:
  std::string name_, forward_op_;
};

// Context a backward closure reads its saved tensors from.
class BackwardContext {
 public:
  BackwardContext(const Node& node, const std::vector<SavedTensor>& saved) : node_(node), saved_(saved) {}
  Tensor saved(size_t i) const { return saved_.at(i).unpack(node_); }
  // Whether input i needs a gradient (skip work for inputs that do not).
  bool needs_grad(size_t i) const { return i < node_.next_edges.size() && node_.next_edges[i].valid(); }
  // A buffer to write input i's gradient into instead of allocating one, when that input is a
  // leaf whose accumulator was offered one (Note [Gradient buffers]); undefined otherwise. The
  // formula must then return that buffer, holding the whole gradient, as input i's gradient.
  Tensor grad_buffer(size_t i) const;
  const Node& node() const { return node_; }

 private:
  const Node& node_;
  const std::vector<SavedTensor>& saved_;
};

using BackwardFn = std::function<TensorList(BackwardContext&, const TensorList& grads)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string forward_op, std::vector<SavedTensor> saved, BackwardFn fn);
  TensorList apply(TensorList&& grads) override;
  void release_saved() override;

 private:
  std::vector<SavedTensor> saved_;
  BackwardFn fn_;
};

// The sink for a leaf: adds the gradient into leaf.grad (after the leaf's tensor hooks). Holds the
// leaf; the leaf holds it weakly, so there is no cycle.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  TensorList apply(TensorList&& grads) override;
  const Tensor& variable() const { return variable_; }

  // Note [Gradient buffers]: offers `buffer` (the leaf's shape, dtype and strides) as the memory
  // of the leaf's next gradient; undefined withdraws the offer. Lent at most once
  // (take_grad_buffer) and adopted as .grad when it comes back as the whole gradient.
  void offer_grad_buffer(Tensor buffer);
  // The offered buffer, if a backward() (not grad()) is running, .grad is undefined and the leaf
  // has no tensor hooks; else undefined. Withdraws the offer either way.
  Tensor take_grad_buffer();

 private:
  Tensor variable_;
  Tensor offered_, lent_;
};

namespace detail {
// True while the engine runs a backward() that accumulates into leaves (false in grad(), whose
// results are returned to the caller): only then are gradient buffers lent.
extern thread_local bool leaves_accumulate;
// True while autograd::checkpoint runs its function for the forward: the graph recorded there only
// tells which tensors the region reaches and is dropped when the function returns, so the
// SavedTensors made meanwhile keep nothing (Note [Activation checkpointing] in checkpoint.cpp).
extern thread_local bool discard_saved;
}  // namespace detail

// The backward of any view (view, reshape, transpose, permute, expand, narrow, slice, select,
// squeeze, unsqueeze, as_strided, split, ...): the view's gradient is laid back over a buffer with
// the base's geometry. See Note [View backward].
struct Geometry {
  Shape sizes, strides;
  int64_t offset = 0;
};
class ViewNode final : public Node {
 public:
  ViewNode(Geometry base, Geometry view, DType dtype);
  TensorList apply(TensorList&& grads) override;

 private:
  Geometry base_, view_;
  DType dtype_;
};

// An in-place op on a view rewrites part of its base: the base's new history is CopySlices,
// which runs the op's backward on the view's region of the base's gradient and passes the rest
// through unchanged (PyTorch's CopySlices).
class CopySlices final : public Node {
 public:
  CopySlices(const Edge& base_edge, Geometry base, Geometry view, DType dtype, std::shared_ptr<Node> fn);
  TensorList apply(TensorList&& grads) override;
  void release_saved() override { fn_->release_saved(); }

 private:
  Geometry base_, view_;
  std::shared_ptr<Node> fn_;
};

// The gradient of a base-shaped buffer: `view` (an offset/strides description in the base's
// storage) applied to a tensor `g` laid out with the base's geometry.
Tensor view_of_base_grad(const Tensor& g, const Geometry& base, const Geometry& view);
uint64_t next_sequence_nr();
// "log_softmax" -> "LogSoftmaxBackward0", as PyTorch names its nodes.
std::string backward_name(const std::string& forward_op);

}  // namespace tb::autograd
