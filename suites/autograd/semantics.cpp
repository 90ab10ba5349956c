// The autograd semantics suite. Each case does one thing to a small graph twice, once with the
// engine and once with LibTorch, and compares what happened: gradients, flags, and whether (and
// with which node named) an error was raised.
#include "suites/autograd/semantics.h"

#include <cmath>

#include "engine/autograd/checkpoint.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/autograd/variable.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/linalg.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using E = tb::Tensor;

void expect(bool ok, const std::string& what) { check(ok, what); }

// Engine and LibTorch tensors holding the same values.
struct Pair {
  E e;
  R::Tensor r;
};
Pair leaf(const std::vector<double>& v, const Shape& shape = {}) {
  E e = from_vector(v, shape.empty() ? Shape{int64_t(v.size())} : shape, DType::Float64);
  R::Tensor r = R::to_ref(e);
  e.requires_grad_();
  R::requires_grad_(r);
  return {e, r};
}

void expect_close(const E& actual, const R::Tensor& expected, const std::string& what) {
  expect(actual.defined() == expected.defined(), what + ": engine " + (actual.defined() ? "has" : "has no") +
                                                     " value, LibTorch " + (expected.defined() ? "has" : "has none"));
  if (!actual.defined()) return;
  E ex = R::from_ref(expected);
  expect(actual.sizes() == ex.sizes(),
         what + ": shapes " + core::to_string(actual.sizes()) + " vs " + core::to_string(ex.sizes()));
  Diff d = compare_values(actual, ex, grad_tolerance(DType::Float64));
  expect(d.mismatches == 0, what + ": " + d.first);
}

// Runs f, returning the error message ("" when it did not raise).
template <typename F>
std::string engine_error(F&& f) {
  try {
    f();
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}
template <typename F>
std::string ref_error(F&& f) {
  try {
    f();
  } catch (const R::RefError& e) {
    return e.what();
  }
  return "";
}

// Both raise, and each message contains its `must_contain` (e.g. the node's name).
void expect_both_raise(const std::string& e, const std::string& r, const std::string& must_contain) {
  expect(!r.empty(), "LibTorch did not raise");
  expect(!e.empty(), "engine did not raise; LibTorch raised: " + r.substr(0, 200));
  expect(e.find(must_contain) != std::string::npos, "engine message lacks '" + must_contain + "': " + e.substr(0, 300));
  expect(r.find(must_contain) != std::string::npos,
         "LibTorch message lacks '" + must_contain + "': " + r.substr(0, 300));
}

harness::TestCase semantic(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("autograd", "semantics/" + name, std::move(body), /*with_seed=*/false);
}

// Backward, retain_graph, leaves and non-leaves.
void backward_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("accumulate_two_backward", [](harness::Record&) {
    Pair x = leaf({1.5, -2, 3});
    E y = tb::sum(tb::mul(x.e, x.e));
    R::Tensor ry = R::sum(R::mul(x.r, x.r));
    y.backward({}, /*retain_graph=*/true);
    R::backward(ry, {}, true);
    expect_close(x.e.grad(), R::grad_of(x.r), "grad after one backward");
    y.backward();
    R::backward(ry);
    expect_close(x.e.grad(), R::grad_of(x.r), "grad after two backward calls (accumulated)");
  }));

  t.push_back(semantic("second_backward_without_retain_graph", [](harness::Record&) {
    Pair x = leaf({0.5, 1});
    E y = tb::sum(tb::exp(x.e));  // exp saves its result, so the second backward needs it
    R::Tensor ry = R::sum(R::exp(x.r));
    y.backward();
    R::backward(ry);
    expect_both_raise(engine_error([&] { y.backward(); }), ref_error([&] { R::backward(ry); }),
                      "Trying to backward through the graph a second time");
  }));

  t.push_back(semantic("second_backward_without_saved_tensors", [](harness::Record&) {
    // Nothing saved (add, sum): PyTorch allows the second backward, and so must we.
    Pair x = leaf({0.5, 1});
    E y = tb::sum(tb::add(x.e, 1.0));
    R::Tensor ry = R::sum(R::add(x.r, 1.0));
    y.backward();
    R::backward(ry);
    y.backward();
    R::backward(ry);
    expect_close(x.e.grad(), R::grad_of(x.r), "grad after two backward calls");
  }));

  t.push_back(semantic("leaf_and_non_leaf_grad", [](harness::Record&) {
    Pair x = leaf({1, 2, 3});
    E y = tb::mul(x.e, 2.0), z = tb::sum(tb::mul(y, y));
    R::Tensor ry = R::mul(x.r, 2.0), rz = R::sum(R::mul(ry, ry));
    expect(x.e.is_leaf() == R::is_leaf(x.r) && y.is_leaf() == R::is_leaf(ry), "is_leaf differs");
    z.backward();
    R::backward(rz);
    expect_close(x.e.grad(), R::grad_of(x.r), "leaf grad");
    expect(!y.grad().defined() && !R::grad_of(ry).defined(), "a non-leaf without retain_grad has no .grad");
  }));

  t.push_back(semantic("retain_grad", [](harness::Record&) {
    Pair x = leaf({1, 2, 3});
    E y = tb::mul(x.e, 2.0);
    R::Tensor ry = R::mul(x.r, 2.0);
    y.retain_grad();
    R::retain_grad(ry);
    tb::sum(tb::mul(y, y)).backward();
    R::backward(R::sum(R::mul(ry, ry)));
    expect(y.retains_grad(), "retains_grad() is false after retain_grad()");
    expect_close(y.grad(), R::grad_of(ry), "retained non-leaf grad");
  }));

  // retain_grad() then an in-place op, on the tensor and through a view of it: .grad is the
  // gradient with respect to the value after the op (PyTorch moves the retains_grad hook to the new
  // grad_fn); the engine used to give it with respect to the value before.
  t.push_back(semantic("retain_grad_then_inplace", [](harness::Record&) {
    Pair x = leaf({1, 2, 3});
    E y = tb::mul(x.e, 2.0);
    R::Tensor ry = R::mul(x.r, 2.0);
    y.retain_grad();
    R::retain_grad(ry);
    tb::mul_(y, 3.0);
    R::mul_inplace(ry, 3.0);
    tb::sum(tb::mul(y, y)).backward();
    R::backward(R::sum(R::mul(ry, ry)));
    expect_close(y.grad(), R::grad_of(ry), "retained grad after an in-place op");
    expect_close(x.e.grad(), R::grad_of(x.r), "leaf grad");

    Pair w = leaf({1, 2, 3, 4});
    E b = tb::mul(w.e, 2.0);
    R::Tensor rb = R::mul(w.r, 2.0);
    b.retain_grad();
    R::retain_grad(rb);
    E v = b.narrow(0, 1, 2);
    tb::mul_(v, 3.0);
    R::mul_inplace(R::narrow(rb, 0, 1, 2), 3.0);
    tb::sum(tb::mul(b, b)).backward();
    R::backward(R::sum(R::mul(rb, rb)));
    expect_close(b.grad(), R::grad_of(rb), "retained grad after an in-place op on a view");
    expect_close(w.e.grad(), R::grad_of(w.r), "leaf grad through the view's in-place op");
  }));
}

// Grad modes: no_grad, inference_mode, detach.
void grad_mode_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("no_grad", [](harness::Record&) {
    Pair x = leaf({1, 2});
    E y;
    R::Tensor ry;
    {
      A::NoGradGuard g;
      y = tb::mul(x.e, 3.0);
    }
    R::with_no_grad([&] { ry = R::mul(x.r, 3.0); });
    expect(y.requires_grad() == R::requires_grad(ry) && !y.requires_grad(), "requires_grad under no_grad");
    expect(y.is_leaf() == R::is_leaf(ry), "is_leaf under no_grad");
    expect_both_raise(engine_error([&] { tb::sum(y).backward(); }), ref_error([&] { R::backward(R::sum(ry)); }),
                      "does not require grad");
  }));

  t.push_back(semantic("inference_mode", [](harness::Record&) {
    Pair x = leaf({1, 2});
    E y;
    R::Tensor ry;
    {
      A::InferenceMode g;
      y = tb::mul(x.e, 3.0);
    }
    R::with_inference_mode([&] { ry = R::mul(x.r, 3.0); });
    expect(y.is_inference() == R::is_inference(ry) && y.is_inference(), "is_inference of a result");
    expect(!x.e.is_inference(), "a tensor made outside is not an inference tensor");
    expect(y.requires_grad() == R::requires_grad(ry), "requires_grad in inference mode");
    // Writing an inference tensor in place outside InferenceMode is an error.
    expect_both_raise(engine_error([&] { tb::mul_(y, 2.0); }), ref_error([&] { R::mul_inplace(ry, 2.0); }),
                      "Inplace update to inference tensor outside InferenceMode");
    // So is saving one for backward.
    expect_both_raise(engine_error([&] { tb::mul(x.e, y); }), ref_error([&] { R::mul(x.r, ry); }),
                      "Inference tensors cannot be saved for backward");
  }));

  t.push_back(semantic("detach", [](harness::Record&) {
    Pair x = leaf({1, 2, 3});
    E d = x.e.detach();
    R::Tensor rd = R::detach(x.r);
    expect(!d.requires_grad() && !R::requires_grad(rd), "detach() does not require grad");
    expect(d.shares_storage(x.e) && rd.shares_storage(x.r), "detach() shares storage");
    // The detached alias shares the version counter: an in-place write to it invalidates a
    // saved x.
    E y = tb::sum(tb::mul(x.e, x.e));
    R::Tensor ry = R::sum(R::mul(x.r, x.r));
    tb::mul_(d, 2.0);
    R::mul_inplace(rd, 2.0);
    expect(x.e.version() == uint64_t(R::version(x.r)), "version counters differ: engine " +
                                                           std::to_string(x.e.version()) + " vs LibTorch " +
                                                           std::to_string(R::version(x.r)));
    expect_both_raise(engine_error([&] { y.backward(); }), ref_error([&] { R::backward(ry); }),
                      "modified by an inplace operation");
  }));
}

// In-place changes autograd must refuse.
void inplace_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("inplace_on_saved_tensor", [](harness::Record&) {
    Pair x = leaf({0.5, -1, 2});
    E a = tb::mul(x.e, 1.0);
    E b = tb::sum(tb::mul(a, a));  // mul saves a
    R::Tensor ra = R::mul(x.r, 1.0), rb = R::sum(R::mul(ra, ra));
    tb::add_(a, 1.0);
    R::add_inplace(ra, R::to_ref(ones({3}, DType::Float64)));
    const std::string e = engine_error([&] { b.backward(); }), r = ref_error([&] { R::backward(rb); });
    expect_both_raise(e, r, "modified by an inplace operation");
    // Both name the op that modified the tensor; the engine also names the node that saved it.
    expect_both_raise(e, r, "output 0 of AddBackward0");
    expect(e.find("MulBackward0") != std::string::npos, "engine message does not name MulBackward0: " + e);
  }));

  t.push_back(semantic("inplace_on_leaf", [](harness::Record&) {
    Pair x = leaf({1, 2});
    expect_both_raise(engine_error([&] { tb::add_(x.e, 1.0); }),
                      ref_error([&] { R::add_inplace(x.r, R::to_ref(ones({2}, DType::Float64))); }),
                      "a leaf Variable that requires grad is being used in an in-place operation");
    // ... but allowed under no_grad, as optimizers do.
    {
      A::NoGradGuard g;
      tb::add_(x.e, 1.0);
    }
    R::with_no_grad([&] { R::add_inplace(x.r, R::to_ref(ones({2}, DType::Float64))); });
    expect_close(x.e.detach(), R::detach(x.r), "value after a no_grad in-place update");
  }));

  // A strided slice made a leaf (requires_grad_ on the view): an in-place op on a view of it
  // would change the leaf behind autograd's back. PyTorch refuses it; so must the engine.
  t.push_back(semantic("inplace_on_view_of_strided_leaf", [](harness::Record&) {
    E b = from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, DType::Float64);
    R::Tensor rb = R::to_ref(b);
    E x = b.slice(1, 0, 4, 2);
    R::Tensor rx = R::slice(rb, 1, 0, 4, 2);
    x.requires_grad_();
    R::requires_grad_(rx);
    E v = x.narrow(0, 0, 1);
    R::Tensor rv = R::narrow(rx, 0, 0, 1);
    expect_both_raise(engine_error([&] { tb::mul_(v, 2.0); }), ref_error([&] { R::mul_inplace(rv, 2.0); }),
                      "a view of a leaf Variable that requires grad is being used in an in-place operation");
    expect_close(x.detach(), R::detach(rx), "the leaf after the refused in-place op");
  }));

  // A leaf made from a view of a tensor that does not require grad (w = t.view(..); w.requires_grad_(),
  // or a narrow), expanded, then as_strided of the expand (the identity a module's full backward hook
  // applies): the gradient reaches the leaf, as for a fresh leaf. The engine used to refuse it in
  // backward ("a view of an overlapping tensor"); when the root was later made a leaf that requires
  // grad, it sent the gradient to the root instead of the leaf.
  t.push_back(semantic("as_strided_of_expanded_leaf_view", [](harness::Record&) {
    for (const bool narrowed : {false, true}) {
      const std::string what = narrowed ? "narrowed leaf" : "viewed leaf";
      for (const bool root_requires_grad : {false, true}) {
        E b = narrowed ? from_vector({9, 1, 2, 3}, {4}, DType::Float64) : from_vector({1, 2, 3}, {3}, DType::Float64);
        R::Tensor rb = R::clone(R::to_ref(b));
        E w = (narrowed ? b.narrow(0, 1, 3) : b).view({1, 3});
        R::Tensor rw = R::view(narrowed ? R::narrow(rb, 0, 1, 3) : rb, {1, 3});
        w.requires_grad_();
        R::requires_grad_(rw);
        if (root_requires_grad) {
          b.requires_grad_();
          R::requires_grad_(rb);
        }
        E e = w.expand({4, 3});
        R::Tensor re = R::expand(rw, {4, 3});
        E y = e.as_strided(e.sizes(), e.strides(), e.storage_offset());
        R::Tensor ry = R::as_strided(re, {4, 3}, {0, 1}, e.storage_offset());
        E part = e.as_strided({2}, {1}, e.storage_offset() + 1);  // a storage-addressed piece
        R::Tensor rpart = R::as_strided(re, {2}, {1}, e.storage_offset() + 1);
        tb::sum(tb::add(tb::mul(y, y), tb::sum(tb::mul(part, 5.0)))).backward();
        R::backward(R::sum(R::add(R::mul(ry, ry), R::sum(R::mul(rpart, 5.0)))));
        expect_close(w.grad(), R::grad_of(rw), what + ": leaf grad");
        expect_close(b.grad(), R::grad_of(rb), what + ": root grad");
        expect_both_raise(engine_error([&] { tb::mul_(y, 2.0); }), ref_error([&] { R::mul_inplace(ry, 2.0); }),
                          "a view of a leaf Variable that requires grad is being used in an in-place operation");
      }
    }
  }));

  // The pieces of split/chunk (and views of them) may not be modified in place while they require
  // grad (PyTorch's multi-output views).
  t.push_back(semantic("inplace_on_split_piece", [](harness::Record&) {
    Pair x = leaf({1, 2, 3, 4, 5, 6});
    E y = tb::mul(x.e, 2.0);
    R::Tensor ry = R::mul(x.r, 2.0);
    E piece = tb::split(y, 4, 0)[1];
    R::Tensor rpiece = R::split(ry, 4, 0)[1];
    expect_both_raise(engine_error([&] { tb::mul_(piece, 2.0); }), ref_error([&] { R::mul_inplace(rpiece, 2.0); }),
                      "output of a function that returns multiple views");
    E v = tb::chunk(y, 2, 0)[0].narrow(0, 0, 2);
    R::Tensor rv = R::narrow(R::chunk(ry, 2, 0)[0], 0, 0, 2);
    expect_both_raise(engine_error([&] { tb::mul_(v, 2.0); }), ref_error([&] { R::mul_inplace(rv, 2.0); }),
                      "output of a function that returns multiple views");
  }));

  // A view made under no_grad of a tensor that requires grad, written in place with grad mode on:
  // PyTorch refuses it (CreationMeta::NO_GRAD_MODE), before writing, whatever the op's operands;
  // the engine used to write it and leave the write out of the graph. Under no_grad it is legal.
  t.push_back(semantic("inplace_on_view_made_under_no_grad", [](harness::Record&) {
    const std::string msg = "no_grad mode and is being modified inplace with grad mode enabled";
    // LibTorch's side a plain tensor, not leaf()'s as_strided view of a buffer: a no_grad view of
    // that would be a view of a root that does not require grad, which LibTorch allows.
    Pair w{from_vector({1, 2, 3, 4}, DType::Float64), R::Tensor()};
    w.r = R::clone(R::to_ref(w.e));
    w.e.requires_grad_();
    R::requires_grad_(w.r);
    E b = tb::mul(w.e, 2.0);
    R::Tensor rb = R::mul(w.r, 2.0);
    E v, of_leaf;
    R::Tensor rv, rof_leaf;
    {
      A::NoGradGuard g;
      v = b.narrow(0, 0, 2);
      of_leaf = w.e.narrow(0, 2, 2);
    }
    R::with_no_grad([&] {
      rv = R::narrow(rb, 0, 0, 2);
      rof_leaf = R::narrow(w.r, 0, 2, 2);
    });
    expect_both_raise(engine_error([&] { tb::mul_(v, 3.0); }), ref_error([&] { R::mul_inplace(rv, 3.0); }), msg);
    Pair u = leaf({1, 1});
    expect_both_raise(engine_error([&] { tb::add_(v, u.e); }), ref_error([&] { R::add_inplace(rv, u.r); }), msg);
    expect_both_raise(engine_error([&] { tb::mul_(of_leaf, 3.0); }), ref_error([&] { R::mul_inplace(rof_leaf, 3.0); }),
                      msg);
    expect_close(b.detach(), R::detach(rb), "the base after the refused in-place ops");
    {
      A::NoGradGuard g;
      tb::mul_(v, 3.0);
    }
    R::with_no_grad([&] { R::mul_inplace(rv, 3.0); });
    expect_close(b.detach(), R::detach(rb), "the base after an in-place op under no_grad");
    tb::sum(b).backward();
    R::backward(R::sum(rb));
    expect_close(w.e.grad(), R::grad_of(w.r), "grad after an untracked in-place op under no_grad");
  }));

  // The fused linear_relu saves a mask, not its output; it must still refuse a backward after its
  // output was modified in place, as relu(linear) does.
  t.push_back(semantic("inplace_on_linear_relu_output", [](harness::Record&) {
    Pair x = leaf({1, -2, 3, 0.5, -1, 2}, {2, 3});
    E w = from_vector({0.5, -1, 2, 1, 1, -0.5}, {2, 3}, DType::Float64);
    E y = tb::linear_relu(x.e, w);
    R::Tensor ry = R::relu(R::linear(x.r, R::to_ref(w)));
    tb::mul_(y, 2.0);
    R::mul_inplace(ry, 2.0);
    expect_both_raise(engine_error([&] { tb::sum(y).backward(); }), ref_error([&] { R::backward(R::sum(ry)); }),
                      "modified by an inplace operation");
  }));
}

// Tensor hooks.
void hook_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("tensor_hooks", [](harness::Record&) {
    Pair x = leaf({1, -2, 3});
    E y = tb::mul(x.e, x.e);
    R::Tensor ry = R::mul(x.r, x.r);
    // Non-leaf hook doubles the gradient flowing into y; leaf hook adds one.
    y.register_hook([](const E& g) { return tb::mul(g, 2.0); });
    R::register_hook(ry, [](const R::Tensor& g) { return R::mul(g, 2.0); });
    x.e.register_hook([](const E& g) { return tb::add(g, 1.0); });
    R::register_hook(x.r, [](const R::Tensor& g) { return R::add(g, 1.0); });
    tb::sum(y).backward();
    R::backward(R::sum(ry));
    expect_close(x.e.grad(), R::grad_of(x.r), "grad through hooks");
    // A removed hook no longer runs.
    Pair z = leaf({1, 2});
    const int64_t h = z.e.register_hook([](const E& g) { return tb::mul(g, 100.0); });
    z.e.remove_hook(h);
    tb::sum(z.e).backward();
    R::backward(R::sum(z.r));
    expect_close(z.e.grad(), R::grad_of(z.r), "grad after remove_hook");
  }));
}

// Gradient buffers (Note [Gradient buffers]).
void gradient_buffer_tests(std::vector<harness::TestCase>& t) {
  // Note [Gradient buffers]: a buffer offered to a leaf's accumulator receives linear's weight
  // gradient and becomes .grad -- but only where nobody could see it before (not under grad(),
  // not past tensor hooks, not when .grad holds a gradient, once per offer) -- and every
  // gradient equals LibTorch's either way.
  t.push_back(semantic("gradient_buffers", [](harness::Record&) {
    Pair x = leaf({0.5, -1, 2, 1.5, 0.25, -3}, {2, 3});
    Pair w = leaf({1, -2, 0.5, 3, 0.75, -1, 2, 1, -0.5, 0.125, 4, -2}, {4, 3});
    Pair b = leaf({0.1, -0.2, 0.3, 0.4});
    // Held, as DDP's reducer holds it: a leaf keeps its accumulator only weakly.
    const std::shared_ptr<A::Node> held = A::edge_of(w.e).fn;
    auto* acc = dynamic_cast<A::AccumulateGrad*>(held.get());
    expect(acc != nullptr, "a leaf that requires grad has an AccumulateGrad");
    auto fresh_buffer = [&] { return full(w.e.sizes(), 7.0, DType::Float64); };
    // The loss uses w twice on the second pass (tied weights, on different inputs so that the
    // two gradients differ): they must add up.
    auto loss_e = [&](bool twice) {
      E y = tb::linear(x.e, w.e, b.e);
      if (twice) y = tb::add(y, tb::linear(tb::mul(x.e, 2.0), w.e));
      return tb::sum(tb::mul(y, y));
    };
    R::Tensor ry = R::linear(x.r, w.r, b.r);
    R::Tensor rloss = R::sum(R::mul(ry, ry));
    R::Tensor ry2 = R::add(R::linear(x.r, w.r, b.r), R::linear(R::mul(x.r, 2.0), w.r));
    R::Tensor rloss2 = R::sum(R::mul(ry2, ry2));
    std::vector<R::Tensor> want = R::grad({rloss}, {w.r}, {R::Tensor()}, true, false);
    std::vector<R::Tensor> want2 = R::grad({rloss2}, {w.r}, {R::Tensor()}, true, false);

    E buf = fresh_buffer();
    acc->offer_grad_buffer(buf);
    loss_e(false).backward();
    expect_close(w.e.grad(), want[0], "weight gradient written into the offered buffer");
    expect(w.e.grad().shares_storage(buf), "the offered buffer did not become .grad");

    // As DDP offers it: a view of a flat bucket, made with grad mode on. The product must still go
    // straight into it -- the backward allocates one block fewer than without an offer -- and
    // not be computed apart and copied in.
    auto allocs_of_backward = [&](const E& offer) {
      w.e.set_grad(E());
      E loss = loss_e(false);
      acc->offer_grad_buffer(offer);
      const int64_t before = memory::cpu_allocator().stats().num_allocs;
      loss.backward();
      return memory::cpu_allocator().stats().num_allocs - before;
    };
    const E flat = zeros({w.e.numel() + 5}, DType::Float64);
    const E slot = flat.narrow(0, 5, w.e.numel()).view(w.e.sizes());
    const int64_t plain_allocs = allocs_of_backward(E()), lent_allocs = allocs_of_backward(slot);
    expect_close(w.e.grad(), want[0], "weight gradient written into a bucket view");
    expect(w.e.grad().shares_storage(flat), "the bucket view did not become .grad");
    expect(lent_allocs == plain_allocs - 1, "the backward allocated " + std::to_string(lent_allocs) +
                                                " blocks with a bucket view offered, " + std::to_string(plain_allocs) +
                                                " without: the weight gradient was not written in place");

    w.e.set_grad(E());  // a tied weight: the second producer must not reuse the lent buffer
    buf = fresh_buffer();
    acc->offer_grad_buffer(buf);
    loss_e(true).backward();
    expect_close(w.e.grad(), want2[0], "tied weight's gradient (two producers, one buffer)");

    w.e.set_grad(E());  // grad() returns its results: they must not alias the buffer
    buf = fresh_buffer();
    acc->offer_grad_buffer(buf);
    std::vector<E> got = A::grad({loss_e(false)}, {w.e});
    expect_close(got[0], want[0], "grad() with a buffer offered");
    expect(!got[0].shares_storage(buf) && tb::all(tb::eq(buf, 7.0)).item<bool>(), "grad() wrote into the buffer");
    acc->offer_grad_buffer(E());

    w.e.set_grad(R::from_ref(want[0]).clone());  // .grad defined: the new gradient adds to it
    buf = fresh_buffer();
    acc->offer_grad_buffer(buf);
    loss_e(false).backward();
    expect_close(w.e.grad(), R::mul(want[0], 2.0), "gradient accumulated into an existing .grad");
    expect(!w.e.grad().shares_storage(buf) && tb::all(tb::eq(buf, 7.0)).item<bool>(),
           "the buffer was used although .grad was defined");

    w.e.set_grad(E());  // a tensor hook sees the gradient first: no buffer
    const int64_t h = w.e.register_hook([](const E& g) { return g; });
    buf = fresh_buffer();
    acc->offer_grad_buffer(buf);
    loss_e(false).backward();
    w.e.remove_hook(h);
    acc->offer_grad_buffer(E());
    expect_close(w.e.grad(), want[0], "weight gradient with a tensor hook");
    expect(!w.e.grad().shares_storage(buf), "the buffer was lent past a tensor hook");
  }));
}

// The API around backward: grad(), non-scalar backward, requires_grad rules, anomaly mode, node names.
void api_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("grad_function", [](harness::Record&) {
    Pair x = leaf({1, 2, 3}), w = leaf({0.5, -1, 2});
    E y = tb::sum(tb::mul(tb::exp(x.e), w.e));
    R::Tensor ry = R::sum(R::mul(R::exp(x.r), w.r));
    std::vector<E> g = A::grad({y}, {x.e, w.e}, {}, /*retain_graph=*/true);
    std::vector<R::Tensor> rg = R::grad({ry}, {x.r, w.r}, {R::Tensor()}, true, false);
    expect_close(g[0], rg[0], "d/dx");
    expect_close(g[1], rg[1], "d/dw");
    expect(!x.e.grad().defined() && !R::grad_of(x.r).defined(), "grad() must not accumulate into .grad");
    Pair unused = leaf({1});
    expect_both_raise(engine_error([&] { A::grad({y}, {unused.e}, {}, true, false); }),
                      ref_error([&] { R::grad({ry}, {unused.r}, {R::Tensor()}, true, false); }),
                      "appears to not have been used in the graph");
    std::vector<E> ok = A::grad({y}, {unused.e}, {}, true, /*allow_unused=*/true);
    expect(!ok[0].defined(), "allow_unused gives an undefined gradient");
  }));

  t.push_back(semantic("backward_of_non_scalar", [](harness::Record&) {
    Pair x = leaf({1, 2, 3});
    E y = tb::mul(x.e, x.e);
    R::Tensor ry = R::mul(x.r, x.r);
    expect_both_raise(engine_error([&] { y.backward(); }), ref_error([&] { R::backward(ry); }),
                      "grad can be implicitly created only for scalar outputs");
    E g = from_vector({1, 0.5, -1}, {3}, DType::Float64);
    y.backward(g);
    R::backward(ry, R::to_ref(g));
    expect_close(x.e.grad(), R::grad_of(x.r), "backward(gradient)");
  }));

  t.push_back(semantic("requires_grad_rules", [](harness::Record&) {
    E i = from_vector({1, 2}, {2}, DType::Int64);
    R::Tensor ri = R::to_ref(i);
    expect_both_raise(engine_error([&] { i.requires_grad_(); }), ref_error([&] { R::requires_grad_(ri); }),
                      "floating point");
    Pair x = leaf({1, 2});
    E y = tb::mul(x.e, 2.0);
    R::Tensor ry = R::mul(x.r, 2.0);
    expect_both_raise(engine_error([&] { y.requires_grad_(false); }), ref_error([&] { R::requires_grad_(ry, false); }),
                      "you can only change requires_grad flags of leaf variables");
  }));

  t.push_back(semantic("anomaly_mode_names_the_op", [](harness::Record&) {
    // sqrt at 0: its backward divides 0 by 0 (the incoming gradient is 0 after the multiply).
    Pair x = leaf({0.0, 1.0});
    std::string e, r;
    {
      A::DetectAnomalyGuard g;
      E y = tb::sum(tb::mul(tb::sqrt(x.e), 0.0));
      e = engine_error([&] { y.backward(); });
    }
    R::with_anomaly_mode([&] {
      R::Tensor ry = R::sum(R::mul(R::sqrt(x.r), 0.0));
      r = ref_error([&] { R::backward(ry); });
    });
    expect_both_raise(e, r, "SqrtBackward0");
    expect(e.find("'sqrt'") != std::string::npos, "engine message does not name the forward op sqrt: " + e);
    // Without anomaly mode the NaN passes silently on both sides.
    Pair z = leaf({0.0, 1.0});
    tb::sum(tb::mul(tb::sqrt(z.e), 0.0)).backward();
    R::backward(R::sum(R::mul(R::sqrt(z.r), 0.0)));
    expect_close(z.e.grad(), R::grad_of(z.r), "NaN gradient without anomaly mode");
  }));

  t.push_back(semantic("graph_node_names", [](harness::Record&) {
    Pair x = leaf({1, 2});
    E y = tb::mul(tb::exp(x.e), x.e);
    R::Tensor ry = R::mul(R::exp(x.r), x.r);
    expect(y.grad_fn() && y.grad_fn()->name() == R::grad_fn_name(ry),
           "grad_fn name: engine " + (y.grad_fn() ? y.grad_fn()->name() : std::string("none")) + " vs LibTorch " +
               R::grad_fn_name(ry));
  }));
}

// Views rebased by in-place ops, version counters.
void version_tests(std::vector<harness::TestCase>& t) {
  t.push_back(semantic("view_then_inplace_rebases_base", [](harness::Record&) {
    Pair x = leaf({1, 2, 3, 4});
    E b = tb::mul(x.e, 1.0);
    R::Tensor rb = R::mul(x.r, 1.0);
    E v = b.narrow(0, 1, 2);
    R::Tensor rv = R::narrow(rb, 0, 1, 2);
    tb::mul_(v, 3.0);
    R::mul_inplace(rv, 3.0);
    tb::sum(tb::mul(b, b)).backward();
    R::backward(R::sum(R::mul(rb, rb)));
    expect_close(x.e.grad(), R::grad_of(x.r), "grad through an in-place op on a view");
  }));

  t.push_back(semantic("version_counter", [](harness::Record&) {
    E a = zeros({3}, DType::Float64);
    R::Tensor ra = R::to_ref(a);
    tb::add_(a, 1.0);
    tb::mul_(a, 2.0);
    R::add_inplace(ra, R::to_ref(ones({3}, DType::Float64)));
    R::mul_inplace(ra, 2.0);
    expect(a.version() == uint64_t(R::version(ra)), "version after two in-place ops: engine " +
                                                        std::to_string(a.version()) + " vs LibTorch " +
                                                        std::to_string(R::version(ra)));
  }));
}

// Activation checkpointing (engine/autograd/checkpoint.h) against LibTorch's graph of the same
// computation without it (what a checkpointed region must be equivalent to).
void checkpoint_tests(std::vector<harness::TestCase>& t) {
  auto region = [](const E& w) { return [w](const E& in) { return tb::mul(tb::exp(tb::mul(in, w)), in); }; };
  auto ref_region = [](const R::Tensor& in, const R::Tensor& w) { return R::mul(R::exp(R::mul(in, w)), in); };
  t.push_back(semantic("checkpoint_gradients", [=](harness::Record&) {
    Pair x = leaf({0.5, -1, 2}), w = leaf({1.5, 0.25, -0.75});
    E y = tb::sum(A::checkpoint(region(w.e), tb::mul(x.e, 2.0)));  // the region's input is a non-leaf
    R::Tensor ry = R::sum(ref_region(R::mul(x.r, 2.0), w.r));
    y.backward();
    R::backward(ry);
    expect_close(x.e.grad(), R::grad_of(x.r), "the input's grad through the region");
    expect_close(w.e.grad(), R::grad_of(w.r), "the grad of a parameter used inside the region");
  }));
  t.push_back(semantic("checkpoint_input_without_grad", [=](harness::Record&) {
    // PyTorch's reentrant checkpoint would leave w without a gradient here; its graph does not.
    Pair x = leaf({0.5, -1, 2}), w = leaf({1.5, 0.25, -0.75});
    E y = tb::sum(A::checkpoint(region(w.e), x.e.detach()));
    R::Tensor ry = R::sum(ref_region(R::detach(x.r), w.r));
    y.backward();
    R::backward(ry);
    expect_close(w.e.grad(), R::grad_of(w.r), "the parameter's grad");
  }));
  t.push_back(semantic("checkpoint_second_backward_without_retain_graph", [=](harness::Record&) {
    Pair x = leaf({0.5, 1}), w = leaf({2, -1});
    E y = tb::sum(A::checkpoint(region(w.e), x.e));
    R::Tensor ry = R::sum(ref_region(x.r, w.r));
    y.backward();
    R::backward(ry);
    expect_both_raise(engine_error([&] { y.backward(); }), ref_error([&] { R::backward(ry); }),
                      "Trying to backward through the graph a second time");
  }));
}

}  // namespace

std::vector<harness::TestCase> semantics_tests() {
  std::vector<harness::TestCase> t;
  backward_tests(t);
  grad_mode_tests(t);
  inplace_tests(t);
  hook_tests(t);
  gradient_buffer_tests(t);
  api_tests(t);
  version_tests(t);
  checkpoint_tests(t);
  return t;
}

}  // namespace tb::suites
