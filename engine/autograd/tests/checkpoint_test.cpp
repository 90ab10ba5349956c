// autograd::checkpoint against the same computation without it: outputs, input and parameter
// gradients and the generator state after backward are bitwise those of the plain run (with
// dropout drawing from the default generator), hooks of the parameters fire once, in the
// enclosing backward; nesting, retain_graph, autograd::grad, autocast, inputs that do not require
// grad, functions with side effects, misuse, and the activation memory against sizes worked out
// by hand. The module-level switch and the GPT are tested in engine/nn/tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/autograd/autocast.h"
#include "engine/autograd/checkpoint.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/core/rng.h"
#include "engine/core/tests/error_of.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

namespace A = autograd;
using testing::error_of;
using testing::expect_contains;
using testing::values;
using V = std::vector<double>;
using TensorList = A::TensorList;

Tensor param(const Shape& sizes, uint64_t seed) {
  core::Generator g(seed);
  Tensor t = mul(randn(sizes, DType::Float32, &g), 0.3);
  t.requires_grad_();
  return t;
}

// Two residual blocks x + W2 dropout(gelu(W1 x + b1)) + b2: dropout draws from the default
// generator, x is used twice in each block (its gradients meet inside the region).
struct Net {
  static constexpr int64_t D = 8, H = 16;
  Tensor w1[2], b1[2], w2[2], b2[2];
  Net() {
    for (int k = 0; k < 2; ++k) {
      w1[k] = param({H, D}, 10 + k);
      b1[k] = param({H}, 20 + k);
      w2[k] = param({D, H}, 30 + k);
      b2[k] = param({D}, 40 + k);
    }
  }
  Tensor block(int k, const Tensor& x) const {
    Tensor h = tb::dropout(tb::gelu(tb::linear(x, w1[k], b1[k]), "tanh"), 0.25);
    return tb::add(x, tb::linear(h, w2[k], b2[k]));
  }
  TensorList params() const { return {w1[0], b1[0], w2[0], b2[0], w1[1], b1[1], w2[1], b2[1]}; }
  void zero_grad() const {
    for (const Tensor& p : params()) p.set_grad(Tensor());
  }
};

Tensor input(bool requires_grad) {
  core::Generator g(99);
  Tensor x = randn({4, Net::D}, DType::Float32, &g);
  if (requires_grad) x.requires_grad_();
  return x;
}

// What a run leaves: the loss, every gradient, and the default generator's offset afterwards.
struct Result {
  V loss;
  std::vector<V> grads;
  uint64_t rng_offset = 0;
};

Result finish(const Net& net, const Tensor& x, const Tensor& loss) {
  Result r;
  r.loss = values(loss);
  if (x.requires_grad()) r.grads.push_back(values(x.grad()));
  for (const Tensor& p : net.params()) r.grads.push_back(p.grad().defined() ? values(p.grad()) : V{});
  r.rng_offset = core::default_generator().offset();
  return r;
}

Tensor loss_of(const Tensor& y) { return tb::sum(tb::mul(y, y)); }

// mode 0: plain; 1: each block checkpointed; 2: both blocks in one region, each block nested in it.
Result run(const Net& net, bool x_requires_grad, int mode, const A::CheckpointOptions& options = {}) {
  net.zero_grad();
  core::manual_seed(1234);
  Tensor x = input(x_requires_grad);
  Tensor y;
  auto b0 = [&](const Tensor& t) { return net.block(0, t); };
  auto b1 = [&](const Tensor& t) { return net.block(1, t); };
  if (mode == 0) y = b1(b0(x));
  if (mode == 1) y = A::checkpoint(b1, A::checkpoint(b0, x, options), options);
  if (mode == 2)
    y = A::checkpoint([&](const Tensor& t) { return A::checkpoint(b1, A::checkpoint(b0, t, options), options); }, x,
                      options);
  Tensor loss = loss_of(y);
  loss.backward();
  return finish(net, x, loss);
}

void expect_same(const Result& a, const Result& b) {
  EXPECT_EQ(a.loss, b.loss);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) EXPECT_EQ(a.grads[i], b.grads[i]) << "gradient " << i;
  EXPECT_EQ(a.rng_offset, b.rng_offset);
}

TEST(Checkpoint, GradientsAndGeneratorBitwiseThoseOfThePlainRun) {
  Net net;
  const Result plain = run(net, true, 0);
  EXPECT_GT(plain.rng_offset, 0u);  // dropout drew from the default generator
  const Result ckpt = run(net, true, 1);
  expect_same(plain, ckpt);
  const Result nested = run(net, true, 2);
  expect_same(plain, nested);

  // Without the generator replayed, the recomputation draws other masks: other gradients (and the
  // generator ends further on). This is what the replay is for, and proves the comparison sees it.
  A::CheckpointOptions no_replay;
  no_replay.preserve_rng_state = false;
  const Result drifted = run(net, true, 1, no_replay);
  EXPECT_EQ(drifted.loss, plain.loss);  // the forward is the plain forward either way
  EXPECT_NE(drifted.grads.at(1), plain.grads.at(1));
  EXPECT_GT(drifted.rng_offset, plain.rng_offset);
}

TEST(Checkpoint, ParametersGetGradientsWhenNoInputRequiresGrad) {
  // PyTorch's reentrant checkpoint gives these parameters no gradient; here they get the plain
  // run's, because the node's edges include every parameter the region reached.
  Net net;
  const Result plain = run(net, false, 0);
  const Result ckpt = run(net, false, 1);
  ASSERT_EQ(plain.grads.size(), 8u);
  for (const V& g : plain.grads) EXPECT_FALSE(g.empty());
  expect_same(plain, ckpt);
}

TEST(Checkpoint, OutputsRecordOneNodeWithEdgesToInputsAndParameters) {
  Net net;
  Tensor x = input(true);
  Tensor y = A::checkpoint([&](const Tensor& t) { return net.block(0, t); }, x);
  ASSERT_TRUE(y.requires_grad());
  const std::shared_ptr<A::Node> fn = y.grad_fn();
  EXPECT_EQ(fn->name(), "CheckpointBackward0");
  // x, then W1, b1, W2, b2 in the order the walk from the output meets them.
  ASSERT_EQ(fn->next_edges.size(), 5u);
  EXPECT_EQ(fn->next_edges[0].fn, A::edge_of(x).fn);
  std::vector<A::Node*> params;
  for (size_t i = 1; i < 5; ++i) params.push_back(fn->next_edges[i].fn.get());
  for (const Tensor& p : {net.w1[0], net.b1[0], net.w2[0], net.b2[0]})
    EXPECT_NE(std::find(params.begin(), params.end(), A::edge_of(p).fn.get()), params.end());
}

TEST(Checkpoint, ParameterHooksFireOnceInTheEnclosingBackwardWithTheWholeGradient) {
  // DDP's reducer and FSDP reduce from AccumulateGrad post-hooks: each must fire once per
  // backward, see the finished gradient, and the second block's before the first block's.
  Net net;
  const Result plain = run(net, true, 0);
  std::vector<std::string> fired;
  std::vector<V> seen;
  const TensorList ps = net.params();
  std::vector<std::shared_ptr<A::Node>> accs;
  for (size_t i = 0; i < ps.size(); ++i) {
    accs.push_back(A::edge_of(ps[i]).fn);
    accs.back()->post_hooks.push_back([&, i](const TensorList&, const TensorList&) {
      fired.push_back("p" + std::to_string(i));
      seen.push_back(values(ps[i].grad()));
    });
  }
  int tensor_hooks = 0;
  ps[0].register_hook([&](const Tensor&) {
    ++tensor_hooks;
    return Tensor();
  });
  const Result ckpt = run(net, true, 1);
  for (auto& a : accs) a->post_hooks.clear();
  expect_same(plain, ckpt);
  ASSERT_EQ(fired.size(), 8u);
  EXPECT_EQ(tensor_hooks, 1);
  for (size_t k = 0; k < 8; ++k) {
    const size_t i = size_t(std::stoi(fired[k].substr(1)));
    EXPECT_EQ(seen[k], plain.grads[1 + i]) << fired[k];
    EXPECT_EQ(i >= 4, k < 4) << "block 1's parameters first: " << fired[k] << " fired " << k << "th";
  }
}

TEST(Checkpoint, RetainGraphRecomputesAgainAndWithoutItASecondBackwardIsAnError) {
  Net net;
  auto twice = [&](bool ckpt) {
    net.zero_grad();
    core::manual_seed(7);
    Tensor x = input(true);
    auto b0 = [&](const Tensor& t) { return net.block(0, t); };
    Tensor loss = loss_of(ckpt ? A::checkpoint(b0, x) : b0(x));
    loss.backward(Tensor(), /*retain_graph=*/true);
    loss.backward();
    return finish(net, x, loss);
  };
  const Result plain = twice(false), ckpt = twice(true);
  expect_same(plain, ckpt);

  core::manual_seed(7);
  Tensor x = input(true);
  // sum saves nothing, so the checkpoint's node is the first to find its saved inputs freed
  Tensor loss = tb::sum(A::checkpoint([&](const Tensor& t) { return net.block(0, t); }, x));
  loss.backward();
  expect_contains(error_of([&] { loss.backward(); }),
                  {"CheckpointBackward0", "backward through the graph a second time", "retain_graph=true"});
}

TEST(Checkpoint, GradReturnsThePlainGradients) {
  Net net;
  auto grads = [&](bool ckpt) {
    core::manual_seed(5);
    Tensor x = input(true);
    auto b0 = [&](const Tensor& t) { return net.block(0, t); };
    Tensor loss = loss_of(ckpt ? A::checkpoint(b0, x) : b0(x));
    std::vector<V> out;
    for (const Tensor& g : A::grad({loss}, {x, net.w1[0], net.b2[0]})) out.push_back(values(g));
    out.push_back({double(core::default_generator().offset())});
    return out;
  };
  EXPECT_EQ(grads(false), grads(true));
  EXPECT_FALSE(net.w1[0].grad().defined());  // grad() accumulates nothing, inside the region either
}

TEST(Checkpoint, TheRecomputationRunsUnderTheForwardsAutocast) {
  Net net;
  auto run_autocast = [&](bool ckpt) {
    net.zero_grad();
    core::manual_seed(3);
    Tensor x = input(true);
    Tensor y;
    {
      A::AutocastGuard autocast;  // linear in bfloat16
      auto mlp = [&](const Tensor& t) {
        return tb::linear(tb::dropout(tb::gelu(tb::linear(t, net.w1[0], net.b1[0])), 0.25), net.w2[0], net.b2[0]);
      };
      y = ckpt ? A::checkpoint(mlp, x) : mlp(x);
    }
    // A recomputation in float32 would be an error (another output dtype), and give other gradients.
    EXPECT_EQ(y.dtype(), DType::BFloat16);
    Tensor loss = loss_of(y.to(DType::Float32));
    loss.backward();  // outside the guard: the recomputation must still run in bfloat16
    return finish(net, x, loss);
  };
  const Result plain = run_autocast(false), ckpt = run_autocast(true);
  expect_same(plain, ckpt);
}

TEST(Checkpoint, AnInputPassedSeveralTimesIsOneLeafInside) {
  // Self-attention passes one tensor as query, key and value: its three gradients must be summed
  // where the plain run sums them (inside, in the graph's order), not by the enclosing engine.
  Tensor w = param({4096}, 8), v = param({4096}, 9);
  auto fn = [&](const TensorList& in) {  // in this order, so the backward meets them in reverse
    Tensor q = tb::tanh(tb::mul(in[0], w));
    Tensor k = tb::sin(tb::mul(in[1], v));
    Tensor e = tb::exp(tb::mul(in[2], tb::add(w, v)));
    return TensorList{tb::add(tb::mul(q, k), e)};
  };
  auto grads = [&](bool ckpt) {
    Tensor leaf = param({4096}, 10);
    Tensor h = tb::mul(leaf, 1.5);  // a non-leaf, as a LayerNorm's output would be
    Tensor y = ckpt ? A::checkpoint(fn, {h, h, h}).at(0) : fn({h, h, h}).at(0);
    tb::sum(y).backward();
    return std::vector<V>{values(leaf.grad()), values(w.grad()), values(v.grad())};
  };
  const std::vector<V> plain = grads(false);
  w.set_grad(Tensor());
  v.set_grad(Tensor());
  EXPECT_EQ(plain, grads(true));
}

TEST(Checkpoint, InputsThatDoNotRequireGradIntegerOutputsAndNoGradMode) {
  Tensor w = param({3}, 1);
  Tensor c = from_vector(V{1, 2, 3}, DType::Float32);  // no grad
  Tensor idx = from_vector(V{2, 0}, DType::Int64);
  auto fn = [&](const TensorList& in) { return TensorList{tb::mul(tb::mul(in[0], w), w), in[1], Tensor()}; };
  TensorList out = A::checkpoint(fn, {c, idx});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_FALSE(out[2].defined());
  EXPECT_EQ(values(out[1]), V({2, 0}));
  tb::sum(out[0]).backward();
  const V wv = values(w);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(values(w.grad())[i], double(float(2 * (i + 1)) * float(wv[i]))) << i;

  // Outside grad mode it is fn itself: no node, run once.
  int runs = 0;
  A::NoGradGuard no_grad;
  Tensor y = A::checkpoint(
      [&](const Tensor& t) {
        ++runs;
        return tb::mul(t, w);
      },
      c);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(runs, 1);
}

TEST(Checkpoint, SideEffectsOfFnHappenAtTheForwardAndAgainInBackward) {
  // As in PyTorch: fn runs twice, so a counter or a buffer it updates (running statistics) moves
  // twice, while its gradients are the plain ones.
  Tensor w = param({2}, 4);
  Tensor buffer = zeros({1});
  int runs = 0;
  auto fn = [&](const Tensor& t) {
    ++runs;
    tb::add_(buffer, from_vector(V{1}, DType::Float32));  // not requiring grad: allowed under grad mode
    return tb::mul(t, w);
  };
  Tensor x = from_vector(V{3, 5}, DType::Float32);
  Tensor y = A::checkpoint(fn, x);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(values(buffer), V({1}));
  tb::sum(y).backward();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(values(buffer), V({2}));
  EXPECT_EQ(values(w.grad()), V({3, 5}));
}

TEST(Checkpoint, MisuseIsAClearError) {
  Tensor w = param({2}, 4);
  Tensor x = from_vector(V{1, 2}, DType::Float32);
  expect_contains(error_of([&] { A::checkpoint([](const TensorList&) { return TensorList{}; }, {x}); }),
                  {"checkpoint", "fn returned no tensor"});
  expect_contains(error_of([&] { A::checkpoint([](const TensorList&) { return TensorList{Tensor()}; }, {x}); }),
                  {"checkpoint", "fn returned no tensor"});
  expect_contains(error_of([&] { A::checkpoint(A::CheckpointFn(), {x}); }), {"checkpoint", "fn is empty"});

  // Writing an input: the recomputation would read the written value.
  expect_contains(error_of([&] {
                    A::checkpoint(
                        [&](const Tensor& t) {
                          Tensor u = t;
                          tb::mul_(u, from_vector(V{2, 2}, DType::Float32));
                          return tb::mul(u, w);
                        },
                        x);
                  }),
                  {"checkpoint", "fn wrote its input 0 in place"});

  // An input written after the forward: the saved-tensor version check, as for any saved tensor.
  {
    Tensor a = tb::mul(param({2}, 5), 1.0);  // a non-leaf input
    Tensor y = A::checkpoint([&](const Tensor& t) { return tb::mul(t, w); }, a);
    tb::add_(a, from_vector(V{1, 1}, DType::Float32));
    expect_contains(error_of([&] { tb::sum(y).backward(); }),
                    {"CheckpointBackward0", "modified by an inplace operation"});
  }

  // fn reading state that changed in between: a replaced parameter, another output shape.
  {
    Tensor current = w;
    Tensor y = A::checkpoint([&](const Tensor& t) { return tb::mul(t, current); }, x);
    current = param({2}, 6);
    expect_contains(error_of([&] { tb::sum(y).backward(); }),
                    {"CheckpointBackward0", "recomputation", "used 1 tensors requiring grad", "different ones"});
  }
  {
    int64_t n = 2;
    Tensor y = A::checkpoint([&](const Tensor& t) { return tb::mul(t, w).narrow(0, 0, n); }, x);
    n = 1;
    expect_contains(error_of([&] { tb::sum(y).backward(); }),
                    {"CheckpointBackward0", "recomputation", "outputs that differ from the forward's"});
  }
}

// Note [Checkpoint memory test]
// A chain of L = 24 tanh over x of n floats (u bytes, a block of its own), in K = 4 regions of
// M = 6. tanh saves its output, so without checkpointing the L outputs are alive when the
// forward ends: L u of activations, and the peak is at least that. With it, what the forward
// keeps is each region's input (the region before's output, saved by the next node): K - 1
// blocks (x itself was allocated before); inside a region at most its input, the current
// output and the one being made are alive. The backward of a region holds the K - 1 saved
// inputs, the M recomputed outputs, the incoming gradient, the gradient being made and x.grad:
// the peak is at most (K - 1 + M + 3) u = 12 u, half of the plain run's 24 u.
TEST(Checkpoint, ActivationMemoryIsMeasuredLower) {
  constexpr int64_t n = 1 << 18, L = 24, K = 4, M = L / K;
  const int64_t u = int64_t(memory::block_size(n * 4));
  auto chain = [](const Tensor& t) {
    Tensor y = t;
    for (int64_t i = 0; i < M; ++i) y = tb::tanh(y);
    return y;
  };
  struct Measured {
    int64_t activations_after_forward, peak, activations_after_backward;
    V grad;
  };
  auto measure = [&](bool ckpt) {
    core::Generator g(2);
    Tensor x = randn({n}, DType::Float32, &g);
    x.requires_grad_();
    memory::CpuCachingAllocator& alloc = memory::cpu_allocator();
    const int64_t before = alloc.stats().allocated_bytes;
    const int64_t act_before = alloc.stats().allocated_by_tag[size_t(memory::Tag::Activation)];
    alloc.reset_peak();
    Tensor loss;
    {
      Tensor y = x;
      for (int64_t k = 0; k < K; ++k) y = ckpt ? A::checkpoint(chain, y) : chain(y);
      loss = tb::sum(y);
    }
    const int64_t act = alloc.stats().allocated_by_tag[size_t(memory::Tag::Activation)] - act_before;
    loss.backward();
    // Without retain_graph the backward frees what it kept (the regions' inputs and reruns too).
    const int64_t act_after = alloc.stats().allocated_by_tag[size_t(memory::Tag::Activation)] - act_before;
    Measured m{act, alloc.stats().peak_allocated_bytes - before, act_after, {}};
    m.grad = values(x.grad());
    return m;
  };
  const Measured plain = measure(false), ckpt = measure(true);
  EXPECT_EQ(plain.grad, ckpt.grad);
  const int64_t scalar = int64_t(memory::block_size(4));  // the loss
  EXPECT_EQ(plain.activations_after_forward, L * u + scalar);
  EXPECT_EQ(ckpt.activations_after_forward, (K - 1) * u + scalar);
  EXPECT_EQ(plain.activations_after_backward, scalar);
  EXPECT_EQ(ckpt.activations_after_backward, scalar);
  EXPECT_GE(plain.peak, L * u);
  EXPECT_LE(ckpt.peak, (K - 1 + M + 3) * u + 4096);  // + the scalars
  std::printf("activation peak over forward + backward: plain %lld bytes, checkpointed %lld bytes (u = %lld)\n",
              (long long)plain.peak, (long long)ckpt.peak, (long long)u);
}

}  // namespace
}  // namespace tb
