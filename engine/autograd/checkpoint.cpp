#include "engine/autograd/checkpoint.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "engine/autograd/autocast.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/memory/allocator.h"

namespace tb::autograd {

// Note [Activation checkpointing]
// PyTorch has two variants. The reentrant one (a custom Function) runs fn under no_grad, saves
// the inputs, and in backward reruns fn with grad on and calls backward() on it from inside the
// outer backward: parameters get their gradients from that inner backward, so the output
// requires grad only if an input does (a checkpointed first block, or one whose inputs do not
// require grad, silently gets no parameter gradients), and autograd::grad through it is refused.
// The non-reentrant one records fn's graph as usual but swaps every saved tensor for a handle that
// recomputes fn when unpacked; no input needs to require grad, but it needs saved-tensor hooks.
//
// This one is a hybrid, chosen for what FSDP and DDP need: one node per region, whose edges
// are the inputs' edges AND the edges of every other tensor requiring grad that fn reaches
// (parameters, or tensors fn closes over), found from the graph fn records at the forward.
//   forward:  fn runs with grad mode on, on detached inputs, while detail::discard_saved makes
//             every SavedTensor keep nothing; so the graph holds no activation and dies when fn
//             returns. Walking it from the outputs down to the nodes made before fn started (by
//             sequence number) and to leaf accumulators gives the boundary: which inputs and
//             which outside edges the region reaches. Outputs that required grad inside fn get
//             the CheckpointBackward0 node, edges = inputs' edges, then the outside edges.
//   backward: the node restores the generator state of the forward (and the autocast state),
//             reruns fn with grad on, on fresh detached inputs, restores the generators to what
//             they were, checks the rerun reached the same boundary and made outputs of the same
//             shapes and dtypes, and backpropagates the incoming gradients through the rerun
//             graph down to the boundary (detail::backward_to_boundary): it returns the summed
//             gradient arriving at each boundary edge, one per edge of the node, and the enclosing
//             backward delivers them.
// So a parameter's AccumulateGrad is a node of the enclosing graph, as without checkpointing: it
// runs once per backward in the enclosing engine, its post-hooks (DDP's reducer, FSDP's
// reduce-scatter) fire there, the outputs require grad whatever the inputs do, DDP's
// find_unused_parameters walk reaches the parameters through the node, and autograd::grad works.
// Hooks on the region's outputs (FSDP's pre-backward all-gather) run before the rerun; the
// region's parameters become ready together when its node has run, and their accumulators run
// next (they come first among ready nodes), before anything below the region. The inner
// backward is an ordinary run_backward nested in the enclosing one: it has its own callbacks
// (queue_callback from a hook inside the region runs at its end) and leaves the enclosing one's
// state alone. A tensor passed as several inputs is one leaf inside the region, so its gradients
// are summed there in the plain run's order.
// Running fn with grad mode on at the forward (rather than under no_grad) also makes the forward
// the same computation as without checkpointing, so the outputs are bitwise those of the plain run
// even where a kernel differs with grad mode, and the rerun is bitwise the forward.
// Gradients are bitwise those of the plain run: inside the region the rerun graph runs in the same
// relative order, so gradients meeting at a tensor are summed in the same order; a parameter used
// both inside and outside one region gets its two partial sums added in the enclosing engine,
// which can round differently from the plain run's single running sum (not the case for
// per-block checkpointing of the reference models).
// Costs: fn's intermediate tensors live while fn runs (at the forward, only as long as without
// grad: nothing is saved); the node keeps the inputs (version-checked, as any saved tensor),
// the generator states and fn. Differences from PyTorch: fn may not write its inputs in place
// (an error at the forward: the rerun would read the written values); a rerun that reaches other
// tensors requiring grad, or makes outputs of other shapes or dtypes, is an error (PyTorch's
// non-reentrant variant compares the metadata of the recomputed saved tensors); the rerun never
// stops early; the generators replayed are the default one and those listed in
// CheckpointOptions (PyTorch replays the CPU generator and one device type's, inferred from the
// inputs). Modules: engine/nn/activation_checkpoint.h.

namespace {

const char* kOp = "checkpoint";

struct DiscardScope {
  bool saved;
  explicit DiscardScope(bool on) : saved(detail::discard_saved) { detail::discard_saved = on; }
  ~DiscardScope() { detail::discard_saved = saved; }
};

struct GeneratorState {
  core::Generator* gen;
  uint64_t seed, offset;
};

std::vector<GeneratorState> snapshot(const std::vector<core::Generator*>& gens) {
  std::vector<GeneratorState> s;
  for (core::Generator* g : gens) s.push_back({g, g->seed(), g->offset()});
  return s;
}

void restore(const std::vector<GeneratorState>& states) {
  for (const GeneratorState& s : states) s.gen->set_state(s.seed, s.offset);
}

// Sets the generators to `to` for its lifetime, then back to what they were.
struct ReplayGenerators {
  std::vector<GeneratorState> before;
  explicit ReplayGenerators(const std::vector<GeneratorState>& to) {
    for (const GeneratorState& s : to) before.push_back({s.gen, s.gen->seed(), s.gen->offset()});
    restore(to);
  }
  ~ReplayGenerators() { restore(before); }
};

// Detached aliases of the inputs, requiring grad where the inputs do. A tensor passed twice
// (self-attention's query, key and value) is one leaf, so its gradients meet inside the region in
// the plain run's order, not in the enclosing engine in edge order.
// The first input that is the same tensor as input i (i itself if none is).
size_t first_same(const TensorList& inputs, size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (inputs[i].defined() && inputs[j].is_same(inputs[i])) return j;
  return i;
}

TensorList detach_inputs(const TensorList& inputs, const std::vector<bool>& requires_grad) {
  TensorList d(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (const size_t j = first_same(inputs, i); j != i) {
      d[i] = d[j];
      continue;
    }
    d[i] = inputs[i].detach();
    if (requires_grad[i]) d[i].requires_grad_();
  }
  return d;
}

struct Boundary {
  std::vector<bool> inputs_reached;
  std::vector<Edge> outside;  // in the order first reached
};

// The edges the graph of `outputs` (made by nodes numbered first_seq or later) leaves through:
// into an input (one of `inputs`, detached leaves) or outside (a leaf accumulator or an older node).
Boundary find_boundary(const TensorList& outputs, const TensorList& inputs, uint64_t first_seq) {
  Boundary b;
  b.inputs_reached.assign(inputs.size(), false);
  std::unordered_map<const Node*, size_t> input_of;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) input_of[edge_of(inputs[i]).fn.get()] = i;
  std::set<std::pair<const Node*, uint32_t>> seen_edges;
  std::unordered_set<const Node*> seen_nodes;
  std::vector<const Node*> stack;
  auto reach = [&](const Edge& e) {
    if (!e.fn) return;
    const Node* n = e.fn.get();
    if (auto it = input_of.find(n); it != input_of.end()) {
      b.inputs_reached[it->second] = true;
      return;
    }
    const bool inside = n->sequence_nr() >= first_seq && !dynamic_cast<const AccumulateGrad*>(n);
    if (!inside) {
      if (seen_edges.insert({n, e.input_nr}).second) b.outside.push_back(e);
    } else if (seen_nodes.insert(n).second) {
      stack.push_back(n);
    }
  };
  for (const Tensor& o : outputs)
    if (o.defined()) reach(edge_of(o));
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) reach(e);
  }
  return b;
}

struct OutputInfo {
  bool defined = false, differentiable = false;
  Shape sizes;
  DType dtype = DType::Float32;
};

OutputInfo info_of(const Tensor& t) {
  OutputInfo i;
  if (!t.defined()) return i;
  i.defined = true;
  i.differentiable = t.requires_grad();
  i.sizes = t.sizes();
  i.dtype = t.dtype();
  return i;
}

void check_outputs(const TensorList& outs) {
  const bool any = std::any_of(outs.begin(), outs.end(), [](const Tensor& t) { return t.defined(); });
  TB_CHECK(any, kOp, "fn returned no tensor (", outs.size(), " outputs, none defined); a checkpointed function ",
           "must return at least one tensor");
}

class CheckpointNode final : public Node {
 public:
  CheckpointNode() : Node("CheckpointBackward0", kOp) {}

  TensorList apply(TensorList&& grads) override;
  void release_saved() override {
    for (SavedTensor& s : inputs_) s.release();
    released_ = true;
  }

  CheckpointFn fn_;
  std::vector<SavedTensor> inputs_;
  std::vector<bool> input_requires_grad_;
  std::vector<size_t> same_as_;             // the first input that is the same tensor as input i
  std::vector<Edge> outside_;               // next_edges[inputs_.size():]
  std::vector<OutputInfo> outputs_;         // all of fn's outputs, as at the forward
  std::vector<size_t> differentiable_;      // this node's output k is fn's output differentiable_[k]
  std::vector<GeneratorState> generators_;  // as at the forward (empty: not preserved)
  bool autocast_ = false;
  DType autocast_dtype_ = DType::BFloat16;
  bool released_ = false;
};

TensorList CheckpointNode::apply(TensorList&& grads) {
  TB_CHECK(!released_, name(),
           "Trying to backward through the graph a second time (or directly access saved tensors after they "
           "have already been freed). Saved intermediate values of the graph are freed when you call "
           ".backward() or autograd::grad(). Specify retain_graph=true if you need to backward through the "
           "graph a second time.");
  TensorList saved(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    saved[i] = inputs_[i].unpack(*this);  // an input written in place since the forward is an error
    // Unpacked aliases are new tensors: mark repeats by the forward's record instead.
    if (same_as_[i] != i) saved[i] = saved[same_as_[i]];
  }
  TensorList in = detach_inputs(saved, input_requires_grad_);  // fresh leaves for every backward (retain_graph)

  TensorList outs;
  uint64_t first_seq = 0;
  {
    ReplayGenerators replay(generators_);
    EnableGradGuard grad_on;
    AutocastGuard autocast(autocast_, autocast_dtype_);
    DiscardScope keep_saved(false);
    memory::TagGuard tag(memory::Tag::Activation);  // not the backward's gradient tag: Note [Memory tags]
    first_seq = next_sequence_nr();
    outs = fn_(in);
  }

  bool same = outs.size() == outputs_.size();
  for (size_t i = 0; same && i < outs.size(); ++i) {
    const OutputInfo now = info_of(outs[i]), then = outputs_[i];
    same = now.defined == then.defined && now.differentiable == then.differentiable && now.sizes == then.sizes &&
           now.dtype == then.dtype;
  }
  TB_CHECK(same, name(),
           "the recomputation of the checkpointed function returned outputs that differ from the forward's "
           "(number, shapes, dtypes or which require grad): fn must compute the same thing when run again in "
           "backward (state it reads was changed in between?)");

  TensorList roots, root_grads;
  for (size_t k = 0; k < differentiable_.size(); ++k) {
    roots.push_back(outs[differentiable_[k]]);
    root_grads.push_back(grads.at(k));
  }
  const Boundary b = find_boundary(roots, in, first_seq);
  std::set<std::pair<const Node*, uint32_t>> then, now;
  for (const Edge& e : outside_) then.insert({e.fn.get(), e.input_nr});
  for (const Edge& e : b.outside) now.insert({e.fn.get(), e.input_nr});
  TB_CHECK(then == now, name(), "the recomputation of the checkpointed function used ", now.size(),
           " tensors requiring grad besides its inputs where the forward used ", then.size(),
           (then.size() == now.size() ? " different ones" : ""),
           ": fn must use the same parameters when run again in backward (were parameters replaced, or state "
           "that fn reads changed, between the forward and the backward?)");

  std::vector<Edge> boundary;
  for (size_t i = 0; i < in.size(); ++i)
    boundary.push_back(in[i].defined() && in[i].requires_grad() && same_as_[i] == i ? edge_of(in[i]) : Edge{});
  boundary.insert(boundary.end(), outside_.begin(), outside_.end());
  memory::TagGuard tag(memory::Tag::Gradient);
  return detail::backward_to_boundary(roots, root_grads, boundary);
}

}  // namespace

TensorList checkpoint(const CheckpointFn& fn, const TensorList& inputs, const CheckpointOptions& options) {
  TB_CHECK(static_cast<bool>(fn), kOp, "fn is empty");
  for (core::Generator* g : options.generators) TB_CHECK(g != nullptr, kOp, "a generator in options is null");
  if (!grad_mode_enabled()) {  // nothing will be differentiated: no reason to recompute
    TensorList outs = fn(inputs);
    check_outputs(outs);
    return outs;
  }

  std::vector<core::Generator*> gens;
  if (options.preserve_rng_state) {
    gens.push_back(&core::default_generator());
    for (core::Generator* g : options.generators)
      if (std::find(gens.begin(), gens.end(), g) == gens.end()) gens.push_back(g);
  }
  const std::vector<GeneratorState> generators = snapshot(gens);
  std::vector<uint64_t> versions;
  for (const Tensor& t : inputs) versions.push_back(t.defined() ? t.version() : 0);

  std::vector<bool> requires_grad;
  for (const Tensor& t : inputs) requires_grad.push_back(t.defined() && t.requires_grad());
  const TensorList detached = detach_inputs(inputs, requires_grad);
  const uint64_t first_seq = next_sequence_nr();
  TensorList outs;
  {
    DiscardScope discard(true);
    outs = fn(detached);
  }
  check_outputs(outs);
  for (size_t i = 0; i < inputs.size(); ++i)
    TB_CHECK(!inputs[i].defined() || inputs[i].version() == versions[i], kOp, "fn wrote its input ", i,
             " in place; the recomputation in backward would read the written value. Clone the input inside fn "
             "before writing it");

  std::vector<size_t> differentiable;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined() && outs[i].requires_grad()) differentiable.push_back(i);
  if (differentiable.empty()) return outs;  // nothing requiring grad reached: no node to record

  auto node = std::make_shared<CheckpointNode>();
  node->fn_ = fn;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node->inputs_.emplace_back(inputs[i]);
    node->same_as_.push_back(first_same(inputs, i));
  }
  TensorList diff_outs;
  for (size_t i : differentiable) diff_outs.push_back(outs[i]);
  node->outside_ = find_boundary(diff_outs, detached, first_seq).outside;
  for (const Tensor& t : outs) node->outputs_.push_back(info_of(t));
  node->input_requires_grad_ = requires_grad;
  node->differentiable_ = differentiable;
  node->generators_ = generators;
  node->autocast_ = autocast_enabled();
  node->autocast_dtype_ = autocast_dtype();

  TensorList result = outs;
  for (size_t k = 0; k < differentiable.size(); ++k)
    diff_outs[k] = result[differentiable[k]] = outs[differentiable[k]].detach();
  set_history(diff_outs, node, inputs);
  node->next_edges.insert(node->next_edges.end(), node->outside_.begin(), node->outside_.end());
  return result;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options) {
  TB_CHECK(static_cast<bool>(fn), kOp, "fn is empty");
  return checkpoint([fn](const TensorList& in) { return TensorList{fn(in[0])}; }, TensorList{input}, options)[0];
}

}  // namespace tb::autograd
