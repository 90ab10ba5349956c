// What autograd keeps on a tensor (AutogradMeta, in TensorImpl::autograd_meta) and the
// operations on it that differentiable functions need: the edge a tensor's gradient flows into,
// recording an op's outputs, and rebasing history after an in-place op.
#pragma once
#include <memory>
#include <vector>

#include "engine/autograd/node.h"

namespace tb::autograd {

// How a view was made (PyTorch's CreationMeta): with grad mode on (Default), under NoGradGuard, or
// in InferenceMode. See AutogradMeta::view_creation.
enum class ViewCreation : uint8_t { Default, NoGrad, InferenceMode };

struct AutogradMeta {
  bool requires_grad = false;  // leaves only; non-leaves require grad through grad_fn
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;               // leaves: created on first use in a graph
  std::vector<std::pair<int64_t, TensorHook>> hooks;  // leaves (non-leaf hooks sit on grad_fn)
  bool retains_grad = false;
  // Differentiable views: the tensor whose storage this one views (never itself a view).
  bool is_view = false;
  Tensor base;
  // The version this view's grad_fn was made at. An in-place write through another view of the
  // same base changes the version; the view's history is then remade from the base's current
  // history (as PyTorch does), so it never bypasses that write.
  uint64_t attr_version = 0;
  // A piece of split/chunk, or a view of one: no in-place ops while it requires grad (PyTorch's
  // CreationMeta::MULTI_OUTPUT_NODE).
  bool multi_output_view = false;
  // A view made under NoGradGuard or in InferenceMode of a tensor that has autograd meta, or a
  // view of such a view (PyTorch's CreationMeta::NO_GRAD_MODE, INFERENCE_MODE). It has no history
  // (is_view stays false), so an in-place op on it with grad mode on would bypass the graph of its
  // root base: check_inplace refuses it when the op requires grad (the view, its root base or an
  // operand does), as PyTorch does. Under NoGradGuard such writes stay legal. The root is held
  // weakly: once it is gone no tensor with history sees the storage (saved tensors check the
  // version), and a view saved by a node of its root's graph must not keep that graph alive.
  ViewCreation view_creation = ViewCreation::Default;
  std::weak_ptr<TensorImpl> view_root;
  // Returned by a custom function that passes its input through as-is (a module's full backward
  // hook: Note [Full backward hooks] in engine/nn/module.cpp), or a view of such a tensor: no
  // in-place ops while it requires grad, as they would cut the function's node out of the graph
  // (PyTorch's CreationMeta::IN_CUSTOM_FUNCTION).
  bool custom_function_view = false;
  // A view of a leaf that requires grad and is itself a view (w = t.view(..); w.requires_grad_(),
  // its root base t without history), or a view of such a view: that leaf, the nearest tensor
  // between the view and its root that the gradient must reach (PyTorch's chain of view nodes
  // ends there). An as_strided view of an overlapping view maps through it, else through the root
  // base (Note [View backward]).
  Tensor leaf_base;
};

AutogradMeta* meta_of(const Tensor& t);      // null when the tensor has none
AutogradMeta& ensure_meta(const Tensor& t);  // creates it
bool requires_grad(const Tensor& t);
// The edge the gradient of `t` flows into (invalid if t needs no gradient).
Edge edge_of(const Tensor& t);
// Runs a leaf's tensor hooks on its gradient.
Tensor run_tensor_hooks(const Tensor& leaf, const Tensor& grad);
// What a tensor hook returned in place of `value`, checked as PyTorch checks it: the same dtype
// and sizes, else an error (a float64 or a shorter gradient was taken silently). Undefined
// (the hook replaced nothing): `value`.
Tensor checked_hook_result(const Tensor& value, const Tensor& returned);

// True when grad mode is on and any defined tensor among `ts` requires grad.
bool any_requires_grad(const TensorList& ts);

// Records `node` as the producer of `outputs` (their output_nr is their index), with edges to
// `inputs`. Integer and bool outputs never require grad.
void set_history(const TensorList& outputs, const std::shared_ptr<Node>& node, const TensorList& inputs);
// Before an in-place op on `self` with operands `others`: a leaf that requires grad (or a view of
// one) may not be modified while grad mode is on, nor a view made under NoGradGuard or in
// InferenceMode when the op requires grad (AutogradMeta::view_creation). Called by every
// differentiable in-place function.
void check_inplace(const Tensor& self, const TensorList& others = {});
// After an in-place op on `self` whose backward is `node` (edge 0 = self's old history): self's
// history becomes node; if self is a view, its base's history becomes CopySlices (see node.h).
// retain_grad() follows the new history (the base's too), so .grad is the gradient with respect
// to the value after the op, as in PyTorch; tensor hooks registered before stay on the old node.
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& node);

}  // namespace tb::autograd
