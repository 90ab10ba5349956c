// Gradient table of the nn family: conv2d, max_pool2d (and max_pool2d_with_indices), avg_pool2d,
// embedding, dropout, pad. Rows are built in loops over dtypes and variants; float64 inputs stay
// under ~100 elements for the finite-difference gradcheck.
//
// Dropout cannot reproduce LibTorch's random mask, so its random rows take the mask from the
// engine: the engine lambda draws from a fixed-seed Generator made inside it (so the forward is
// deterministic and gradcheck works), and the reference lambda redraws the same mask by running
// the engine's dropout on ones with the same seed, then lets LibTorch differentiate x * mask. The
// gradient is thereby checked to be grad * mask / (1 - p) for the mask the forward drew.
#include "engine/autograd/functions.h"
#include "engine/ops/nn.h"
#include "engine/tensor/factories.h"
#include "reference/elementwise.h"
#include "reference/nn.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using L = Layout;
constexpr DType kF32 = DType::Float32, kF64 = DType::Float64;

void add_conv(std::vector<OpCase>& v) {
  struct Var { const char* tag; Shape x, w; bool bias; Shape stride, padding, dilation; int64_t groups; L xl, wl; };
  const Var vars[] = {
      {"basic", {2, 2, 5, 5}, {3, 2, 3, 3}, true, {1}, {0}, {1}, 1, L::Contiguous, L::Contiguous},
      {"stride2_pad1", {1, 2, 6, 5}, {3, 2, 3, 3}, true, {2}, {1}, {1}, 1, L::Contiguous, L::Contiguous},
      {"dilation2", {1, 2, 7, 7}, {2, 2, 3, 3}, true, {1}, {2}, {2}, 1, L::Contiguous, L::Contiguous},
      {"groups2", {1, 4, 4, 4}, {4, 2, 3, 3}, true, {1}, {1}, {1}, 2, L::Contiguous, L::Contiguous},
      {"depthwise", {1, 3, 5, 5}, {3, 1, 3, 3}, false, {1}, {1}, {1}, 3, L::Contiguous, L::Contiguous},
      {"nobias_asym", {2, 2, 5, 4}, {3, 2, 2, 3}, false, {1, 2}, {1, 0}, {1}, 1, L::Contiguous, L::Contiguous},
      {"1x1", {2, 3, 4, 4}, {2, 3, 1, 1}, true, {1}, {0}, {1}, 1, L::Contiguous, L::Contiguous},
      {"unbatched", {2, 5, 5}, {3, 2, 3, 3}, true, {1}, {1}, {1}, 1, L::Contiguous, L::Contiguous},
      {"transposed", {1, 2, 6, 6}, {3, 2, 3, 2}, true, {1}, {1}, {1}, 1, L::Transposed, L::Transposed},
      {"strided", {1, 2, 6, 5}, {3, 2, 3, 3}, true, {2, 1}, {1}, {1}, 1, L::Strided, L::Strided},
      {"empty_batch", {0, 2, 5, 5}, {3, 2, 3, 3}, true, {1}, {0}, {1}, 1, L::Contiguous, L::Contiguous},
  };
  for (DType dt : {kF32, kF64}) {
    const std::string d = core::name(dt);
    for (const Var& c : vars) {
      std::vector<Input> in = {{c.x, dt, c.xl}, {c.w, dt, c.wl}};
      if (c.bias) in.push_back({{c.w[0]}, dt});
      v.push_back(make_grad_case(
          "conv2d/" + d + "/" + c.tag, in,
          [c](const In& t) {
            return one(tb::conv2d(t[0], t[1], t.size() > 2 ? t[2] : tb::Tensor(), c.stride, c.padding, c.dilation,
                                 c.groups));
          },
          [c](const RIn& t) {
            return one(R::conv2d(t[0], t[1], t.size() > 2 ? t[2] : ref::Tensor(), c.stride, c.padding, c.dilation,
                                 c.groups));
          }));
    }
    // Only the weight and bias require grad (a first layer's input does not).
    OpCase wonly = make_grad_case(
        "conv2d/" + d + "/weight_only", {{{2, 2, 5, 5}, dt}, {{3, 2, 3, 3}, dt}, {{3}, dt}},
        [](const In& t) { return one(tb::conv2d(t[0], t[1], t[2], {1}, {1})); },
        [](const RIn& t) { return one(R::conv2d(t[0], t[1], t[2], {1}, {1}, {1}, 1)); });
    wonly.wrt = {1, 2};
    v.push_back(wonly);
    // A channels-last view: the (N, H, W, C) input permuted to (N, C, H, W).
    v.push_back(make_grad_case(
        "conv2d/" + d + "/permuted_view", {{{1, 5, 5, 2}, dt}, {{3, 2, 3, 3}, dt}},
        [](const In& t) { return one(tb::conv2d(t[0].permute({0, 3, 1, 2}), t[1], {}, {1}, {1})); },
        [](const RIn& t) {
          return one(R::conv2d(R::permute(t[0], {0, 3, 1, 2}), t[1], ref::Tensor(), {1}, {1}, {1}, 1));
        }));
    // reflect pad -> conv -> max pool, as in a small encoder.
    v.push_back(make_grad_case(
        "conv2d/" + d + "/pad_conv_pool", {{{1, 2, 6, 6}, dt}, {{2, 2, 3, 3}, dt}, {{2}, dt}},
        [](const In& t) {
          return one(tb::max_pool2d(tb::conv2d(tb::pad(t[0], {1, 1, 1, 1}, "reflect"), t[1], t[2]), {2}));
        },
        [](const RIn& t) {
          return one(R::max_pool2d(R::conv2d(R::pad(t[0], {1, 1, 1, 1}, "reflect"), t[1], t[2], {1}, {0}, {1}, 1),
                                   {2}, {}, {0}, {1}, false));
        }));
  }
  // Past oneDNN's small-shape paths: blocked layouts and reorders on both backward primitives.
  // Gradients of the weight sum 2 * 10 * 10 = 200 products (and the input's 16 * 9 = 144): float32
  // accumulation order differs from LibTorch's, hence the long-sum tolerance.
  OpCase big = make_grad_case(
      "conv2d/float32/blocked", {{{2, 16, 10, 10}, kF32}, {{16, 16, 3, 3}, kF32}, {{16}, kF32}},
      [](const In& t) { return one(tb::conv2d(t[0], t[1], t[2], {1}, {1})); },
      [](const RIn& t) { return one(R::conv2d(t[0], t[1], t[2], {1}, {1}, {1}, 1)); });
  big.grad_tol = Tolerance{1e-4, 1e-4};
  v.push_back(big);
}

void add_pool(std::vector<OpCase>& v) {
  struct Var { const char* tag; Shape x, k, s, p, d; bool ceil; L layout; };
  const Var vars[] = {
      {"k2", {2, 2, 4, 4}, {2}, {}, {0}, {1}, false, L::Contiguous},
      {"k3_s2_p1", {1, 2, 7, 6}, {3}, {2}, {1}, {1}, false, L::Contiguous},
      {"overlap_s1", {1, 2, 5, 5}, {3}, {1}, {1}, {1}, false, L::Contiguous},
      {"ceil", {1, 2, 7, 7}, {3}, {2}, {0}, {1}, true, L::Contiguous},
      {"ceil_pad", {1, 2, 6, 5}, {3, 2}, {2, 2}, {1, 1}, {1}, true, L::Contiguous},
      {"dilation2", {1, 2, 7, 7}, {3}, {1}, {1}, {2}, false, L::Contiguous},
      {"unbatched", {2, 6, 6}, {2}, {}, {0}, {1}, false, L::Contiguous},
      {"strided", {2, 2, 5, 4}, {2}, {1}, {0}, {1}, false, L::Strided},
      {"transposed", {1, 2, 6, 6}, {3, 2}, {1, 2}, {1, 0}, {1}, false, L::Transposed},
      {"1x1_input", {1, 1, 1, 1}, {1}, {}, {0}, {1}, false, L::Contiguous},
  };
  for (DType dt : {kF32, kF64}) {
    const std::string d = core::name(dt);
    for (const Var& c : vars) {
      v.push_back(make_grad_case("max_pool2d/" + d + "/" + c.tag, {{c.x, dt, c.layout}},
                                 [c](const In& t) { return one(tb::max_pool2d(t[0], c.k, c.s, c.p, c.d, c.ceil)); },
                                 [c](const RIn& t) { return one(R::max_pool2d(t[0], c.k, c.s, c.p, c.d, c.ceil)); }));
      if (c.d[0] != 1) continue;  // avg_pool2d has no dilation
      for (bool cip : {true, false}) {
        if (!cip && c.p[0] == 0) continue;
        v.push_back(make_grad_case(
            "avg_pool2d/" + d + "/" + c.tag + (cip ? "" : "_exclude_pad"), {{c.x, dt, c.layout}},
            [c, cip](const In& t) { return one(tb::avg_pool2d(t[0], c.k, c.s, c.p, c.ceil, cip)); },
            [c, cip](const RIn& t) { return one(R::avg_pool2d(t[0], c.k, c.s, c.p, c.ceil, cip, std::nullopt)); }));
      }
    }
    v.push_back(make_grad_case(
        "max_pool2d_with_indices/" + d + "/k3_s2_p1", {{{1, 2, 7, 6}, dt, L::Transposed}},
        [](const In& t) {
          auto [o, i] = tb::max_pool2d_with_indices(t[0], {3}, {2}, {1});
          return In{o, i};
        },
        [](const RIn& t) {
          auto [o, i] = R::max_pool2d_with_indices(t[0], {3}, {2}, {1}, {1}, false);
          return RIn{o, i};
        }));
    // Integer-valued inputs: windows hold ties, and the gradient must go to the first maximum (in
    // row-major order), where LibTorch sends it. Finite differences are meaningless at a tie.
    OpCase ties = make_grad_case(
        "max_pool2d/" + d + "/ties", {{{2, 2, 6, 6}, dt, L::Contiguous, Values::Index, 3}},
        [](const In& t) { return one(tb::max_pool2d(t[0], {3}, {1}, {1})); },
        [](const RIn& t) { return one(R::max_pool2d(t[0], {3}, {1}, {1}, {1}, false)); });
    ties.gradcheck = false;
    ties.wrt = {0};
    v.push_back(ties);
    v.push_back(make_grad_case(
        "avg_pool2d/" + d + "/divisor_override", {{{1, 2, 6, 6}, dt}},
        [](const In& t) { return one(tb::avg_pool2d(t[0], {3}, {2}, {1}, true, true, 5)); },
        [](const RIn& t) { return one(R::avg_pool2d(t[0], {3}, {2}, {1}, true, true, 5)); }));
    v.push_back(make_grad_case(
        "avg_pool2d/" + d + "/ceil_exclude_pad_override", {{{1, 2, 5, 6}, dt}},
        [](const In& t) { return one(tb::avg_pool2d(t[0], {2, 3}, {2}, {1}, true, false, 3)); },
        [](const RIn& t) { return one(R::avg_pool2d(t[0], {2, 3}, {2}, {1}, true, false, 3)); }));
    // A view before the op and a second pooling after it.
    v.push_back(make_grad_case(
        "avg_pool2d/" + d + "/view_then_max_pool", {{{2, 3, 8, 6}, dt}},
        [](const In& t) {
          return one(tb::avg_pool2d(tb::max_pool2d(t[0].select(0, 1).narrow(1, 1, 6).transpose(1, 2), {2}, {1}), {2}));
        },
        [](const RIn& t) {
          ref::Tensor x = R::transpose(R::narrow(R::select(t[0], 0, 1), 1, 1, 6), 1, 2);
          return one(R::avg_pool2d(R::max_pool2d(x, {2}, {1}, {0}, {1}, false), {2}, {}, {0}, false, true,
                                   std::nullopt));
        }));
  }
}

void add_embedding(std::vector<OpCase>& v) {
  for (DType dt : {kF32, kF64}) {
    const std::string d = core::name(dt);
    for (int64_t pad_idx : {int64_t(-1), int64_t(2)}) {
      for (L wl : {L::Contiguous, L::Transposed}) {
        // 15 indices over 4 rows: repeats are certain, so their gradients must accumulate.
        OpCase c = make_grad_case(
            "embedding/" + d + "/" + (pad_idx < 0 ? "repeats" : "padding_idx") +
                (wl == L::Transposed ? "_transposed" : ""),
            {{{6, 5}, dt, wl}, {{3, 5}, DType::Int64, L::Contiguous, Values::Index, 4}},
            [pad_idx](const In& t) { return one(tb::embedding(t[0], t[1], pad_idx)); },
            [pad_idx](const RIn& t) { return one(R::embedding(t[0], t[1], pad_idx)); });
        c.wrt = {0};
        // The padding_idx row's gradient is zero by definition, not the derivative: finite
        // differences of the forward disagree there by design (the LibTorch check covers it).
        c.gradcheck = pad_idx < 0;
        v.push_back(c);
      }
    }
    OpCase i32 = make_grad_case(
        "embedding/" + d + "/int32_strided_indices",
        {{{5, 3}, dt}, {{4, 6}, DType::Int32, L::Strided, Values::Index, 5}},
        [](const In& t) { return one(tb::embedding(t[0], t[1], 0)); },
        [](const RIn& t) { return one(R::embedding(t[0], t[1], 0)); });
    i32.wrt = {0};
    i32.gradcheck = false;  // padding_idx 0: its zero gradient is not the derivative (as above)
    v.push_back(i32);
    OpCase empty = make_grad_case(
        "embedding/" + d + "/empty_indices", {{{5, 3}, dt}, {{0, 2}, DType::Int64, L::Contiguous, Values::Index, 5}},
        [](const In& t) { return one(tb::embedding(t[0], t[1])); },
        [](const RIn& t) { return one(R::embedding(t[0], t[1])); });
    empty.wrt = {0};
    v.push_back(empty);
    // A view of the table (rows 1..6) and a chain into pooling.
    OpCase chain = make_grad_case(
        "embedding/" + d + "/view_then_pool",
        {{{8, 4}, dt}, {{2, 3, 4}, DType::Int64, L::Contiguous, Values::Index, 6}},
        [](const In& t) { return one(tb::avg_pool2d(tb::embedding(t[0].narrow(0, 1, 6), t[1]), {2})); },
        [](const RIn& t) {
          return one(R::avg_pool2d(R::embedding(R::narrow(t[0], 0, 1, 6), t[1]), {2}, {}, {0}, false, true,
                                   std::nullopt));
        });
    chain.wrt = {0};
    v.push_back(chain);
  }
}

constexpr uint64_t kSeed = 20240611;  // the dropout rows' fixed generator seed

void add_dropout(std::vector<OpCase>& v) {
  for (DType dt : {kF32, kF64}) {
    const std::string d = core::name(dt);
    // Deterministic rows LibTorch matches exactly: p = 0, eval mode, p = 1.
    struct Det { const char* tag; double p; bool training; };
    for (Det c : {Det{"p0", 0.0, true}, Det{"eval", 0.5, false}, Det{"p1", 1.0, true}}) {
      v.push_back(make_grad_case(
          "dropout/" + d + "/" + c.tag, {{{3, 4}, dt, L::Transposed}, {{3, 4}, dt}},
          [c](const In& t) { return one(tb::mul(tb::dropout(t[0], c.p, c.training), t[1])); },
          [c](const RIn& t) { return one(R::mul(R::dropout(t[0], c.p, c.training, kSeed), t[1])); }));
    }
    v.push_back(make_grad_case(
        "dropout/" + d + "/p0_alone", {{{2, 3}, dt}},
        [](const In& t) { return one(tb::dropout(t[0], 0.0, true)); },
        [](const RIn& t) { return one(R::dropout(t[0], 0.0, true, kSeed)); }));
    // Random masks, redrawn from the engine for the reference (see the file comment).
    struct Rnd { const char* tag; double p; Shape shape; L layout; };
    for (Rnd c : {Rnd{"p0.3", 0.3, {4, 5}, L::Contiguous}, Rnd{"p0.5_transposed", 0.5, {5, 6}, L::Transposed},
                  Rnd{"p0.8_strided", 0.8, {3, 7}, L::Strided}}) {
      v.push_back(make_grad_case(
          "dropout/" + d + "/" + c.tag, {{c.shape, dt, c.layout}},
          [c](const In& t) {
            core::Generator gen(kSeed);
            return one(tb::dropout(t[0], c.p, true, &gen));
          },
          [c](const RIn& t) {
            core::Generator gen(kSeed);
            const tb::Tensor mask = tb::dropout(tb::ones(t[0].sizes(), t[0].dtype()), c.p, true, &gen);
            return one(R::mul(t[0], ref::to_ref(mask)));
          }));
    }
    // A view before dropout and a product after it.
    v.push_back(make_grad_case(
        "dropout/" + d + "/view_chain", {{{4, 3, 2}, dt}, {{2, 3}, dt}},
        [](const In& t) {
          core::Generator gen(kSeed + 1);
          return one(tb::mul(tb::dropout(t[0].select(0, 2).transpose(0, 1), 0.4, true, &gen), t[1]));
        },
        [](const RIn& t) {
          core::Generator gen(kSeed + 1);
          const tb::Tensor mask = tb::dropout(tb::ones({2, 3}, t[0].dtype()), 0.4, true, &gen);
          return one(R::mul(R::mul(R::transpose(R::select(t[0], 0, 2), 0, 1), ref::to_ref(mask)), t[1]));
        }));
  }
}

void add_pad(std::vector<OpCase>& v) {
  struct Var { const char* tag; Shape x; Shape pad; const char* mode; double value; L layout; };
  const Var vars[] = {
      {"constant", {2, 3, 4}, {1, 2, 2, 1}, "constant", 0.5, L::Contiguous},
      {"constant_crop", {2, 4, 5}, {-1, 2, 1, -2}, "constant", 0.0, L::Transposed},
      {"constant_3d", {2, 3, 4}, {1, 0, 0, 1, 1, 1}, "constant", -1.0, L::Strided},
      {"constant_empty", {0, 3}, {1, 1}, "constant", 0.0, L::Contiguous},
      {"reflect_2d", {1, 2, 4, 5}, {2, 1, 1, 3}, "reflect", 0.0, L::Contiguous},
      {"reflect_1d", {2, 3, 5}, {2, 4}, "reflect", 0.0, L::Strided},
      {"reflect_unbatched", {2, 4, 4}, {3, 3, 3, 3}, "reflect", 0.0, L::Transposed},
      {"replicate_2d", {1, 2, 3, 4}, {2, 2, 1, 3}, "replicate", 0.0, L::Contiguous},
      {"replicate_1d", {3, 4}, {3, 1}, "replicate", 0.0, L::Transposed},
  };
  for (DType dt : {kF32, kF64}) {
    const std::string d = core::name(dt);
    for (const Var& c : vars) {
      v.push_back(make_grad_case("pad/" + d + "/" + c.tag, {{c.x, dt, c.layout}},
                                 [c](const In& t) { return one(tb::pad(t[0], c.pad, c.mode, c.value)); },
                                 [c](const RIn& t) { return one(R::pad(t[0], c.pad, c.mode, c.value)); }));
    }
    // Replicate padding of a view, then a convolution.
    v.push_back(make_grad_case(
        "pad/" + d + "/view_then_conv", {{{3, 2, 4}, dt}, {{2, 2, 3, 3}, dt}},
        [](const In& t) { return one(tb::conv2d(tb::pad(t[0].permute({1, 0, 2}), {1, 1, 1, 1}, "replicate"), t[1])); },
        [](const RIn& t) {
          return one(R::conv2d(R::pad(R::permute(t[0], {1, 0, 2}), {1, 1, 1, 1}, "replicate"), t[1], ref::Tensor(),
                               {1}, {0}, {1}, 1));
        }));
  }
}

}  // namespace

std::vector<OpCase> grad_nn_cases() {
  std::vector<OpCase> v;
  add_conv(v);
  add_pool(v);
  add_embedding(v);
  add_dropout(v);
  add_pad(v);
  return v;
}

}  // namespace tb::suites
