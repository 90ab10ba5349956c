// The backward engine: a dependency-counted walk over the graph from the roots, in decreasing
// sequence number (the reverse of creation order) among ready nodes, as PyTorch's engine does on
// one thread. Gradients arriving at one node input are summed; each node's outputs are summed
// to the shape and cast to the dtype of the tensor they are for (broadcasting in the forward
// becomes a sum here).
#pragma once
#include <functional>
#include <vector>

#include "engine/autograd/node.h"

namespace tb::autograd {

// Accumulates d(sum_i <tensors_i, grad_tensors_i>)/d(leaf) into every leaf's .grad. A missing
// grad_tensors entry is 1 for a one-element tensor (an error otherwise). Without retain_graph,
// the saved tensors of every node run are freed.
void backward(const TensorList& tensors, const TensorList& grad_tensors = {}, bool retain_graph = false);

// The gradients of `outputs` with respect to `inputs`, returned instead of accumulated into
// .grad. An input the outputs do not depend on is an error unless allow_unused (then undefined).
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

// Runs `cb` once the backward pass running on this thread has walked its whole graph, before
// backward()/grad() returns (PyTorch's Engine::queue_callback; DDP waits for its gradient
// all-reduces there). Callable only from inside a backward (a hook); callbacks run in the order
// queued, may queue more, and an exception from one ends the backward with that exception.
void queue_callback(std::function<void()> cb);

namespace detail {
// For activation checkpointing (checkpoint.h): backpropagates grad_outputs[i] from outputs[i]
// (skipping outputs with no history or no gradient) down to the `boundary` edges and returns,
// for each, the sum of the gradients that arrive there, as they arrive: no node at or below a
// boundary runs, and no hook or retain_grad of a boundary node fires (the enclosing backward,
// which owns those nodes, runs them). Nodes that lead to no boundary do not run either.
// Callable inside a backward; the graph above the boundary is freed. A formula may write a
// boundary leaf's gradient into the buffer its accumulator offers (Note [Gradient buffers])
// only if the enclosing backward accumulates into leaves (backward(), not grad()).
TensorList backward_to_boundary(const TensorList& outputs, const TensorList& grad_outputs,
                                const std::vector<Edge>& boundary);
}  // namespace detail

}  // namespace tb::autograd
