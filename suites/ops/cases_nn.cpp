// Case table of the nn family: conv2d, max_pool2d (and max_pool2d_with_indices), avg_pool2d,
// embedding, dropout, one_hot, pad, and the conv2d benchmark row. Built by loops over dtypes and variants.
// Rows with `grad` also check the gradients (engine/autograd/functions/nn.cpp), float32 and float64.
//
// Dropout cannot reproduce LibTorch's random mask, so its random gradient rows take the mask from
// the engine: the engine lambda draws from a fixed-seed Generator made inside it (so the forward is
// deterministic and gradcheck works), and the reference lambda redraws the same mask by running
// the engine's dropout on ones with the same seed, then lets LibTorch differentiate x * mask. The
// gradient is thereby checked to be grad * mask / (1 - p) for the mask the forward drew.
#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/nn.h"
#include "engine/tensor/factories.h"
#include "reference/elementwise.h"
#include "reference/nn.h"
#include "reference/views.h"
#include "suites/ops/autocast_case.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

// The long float32 dot-product tolerance, explained in cases_linalg.cpp.
std::optional<Tolerance> long_dot_tol(DType dt, int64_t K);

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using L = Layout;
using V = Values;
constexpr DType kF32 = DType::Float32, kF64 = DType::Float64, kBF16 = DType::BFloat16, kF16 = DType::Float16,
                kI64 = DType::Int64, kI32 = DType::Int32, kBool = DType::Bool;
constexpr DType kFloats[] = {kF32, kF64, kBF16, kF16};

std::string dn(DType t) { return core::name(t); }

// The dtypes whose rows also check gradients.
bool differentiable(DType t) { return t == kF32 || t == kF64; }

OpCase make(std::string name, std::vector<Input> in, EngineFn e, RefFn r, Check check = Check::Values) {
  return make_case(std::move(name), std::move(in), std::move(e), std::move(r), check);
}

void add_conv(std::vector<OpCase>& cs) {
  struct Var {
    const char* tag;
    Shape x, w;
    bool bias;
    Shape stride, padding, dilation;
    int64_t groups;
    L layout;
  };
  const Var vars[] = {
      {"basic", {2, 3, 7, 7}, {4, 3, 3, 3}, true, {1}, {0}, {1}, 1, L::Contiguous},
      {"stride2_pad1", {2, 3, 8, 7}, {5, 3, 3, 3}, true, {2}, {1}, {1}, 1, L::Contiguous},
      {"dilation2", {1, 2, 9, 9}, {3, 2, 3, 3}, true, {1}, {2}, {2}, 1, L::Contiguous},
      {"groups2", {2, 4, 6, 6}, {6, 2, 3, 3}, true, {1}, {1}, {1}, 2, L::Contiguous},
      {"depthwise", {1, 4, 5, 5}, {4, 1, 3, 3}, false, {1}, {1}, {1}, 4, L::Contiguous},
      {"nobias_asym", {2, 3, 7, 6}, {4, 3, 2, 3}, false, {1, 2}, {2, 0}, {1, 1}, 1, L::Contiguous},
      {"1x1", {2, 5, 4, 4}, {3, 5, 1, 1}, true, {1}, {0}, {1}, 1, L::Contiguous},
      {"unbatched", {3, 5, 5}, {2, 3, 3, 3}, true, {1}, {1}, {1}, 1, L::Contiguous},
      {"strided_input", {2, 3, 6, 6}, {4, 3, 3, 3}, true, {1}, {1}, {1}, 1, L::Strided},
      {"transposed_input", {2, 3, 6, 6}, {4, 3, 3, 3}, true, {1}, {1}, {1}, 1, L::Transposed},
      {"empty_batch", {0, 3, 5, 5}, {4, 3, 3, 3}, true, {1}, {0}, {1}, 1, L::Contiguous},
      // Channels in whole blocks of 16: oneDNN runs on channel-blocked copies (Note [Blocked
      // activations for oneDNN 2.6's convolutions] in engine/ops/cpu/conv2d.cpp), per group too.
      {"channel_blocks", {2, 16, 8, 8}, {32, 16, 3, 3}, true, {1}, {1}, {1}, 1, L::Contiguous},
      {"channel_blocks_groups2_stride2", {2, 32, 9, 9}, {32, 16, 3, 3}, false, {2}, {1}, {1}, 2, L::Contiguous},
      {"channel_blocks_1x1", {2, 32, 7, 7}, {16, 32, 1, 1}, true, {1}, {0}, {1}, 1, L::Contiguous},
      {"channel_blocks_in_only", {2, 16, 6, 6}, {24, 16, 3, 3}, true, {1}, {1}, {1}, 1, L::Contiguous},  // `any`
  };
  for (DType dt : {kF32, kF64, kBF16, kF16, kI64, kI32}) {
    for (const Var& v : vars) {
      if (dt == kI32 && v.dilation[0] != 1) continue;  // LibTorch has no int32 dilated convolution
      std::vector<Input> in = {{v.x, dt, v.layout}, {v.w, dt}};
      if (v.bias) in.push_back({{v.w[0]}, dt});
      cs.push_back(make(
          "conv2d/" + dn(dt) + "/" + v.tag, in,
          [v](const std::vector<tb::Tensor>& t) {
            return one(
                tb::conv2d(t[0], t[1], t.size() > 2 ? t[2] : tb::Tensor(), v.stride, v.padding, v.dilation, v.groups));
          },
          [v](const std::vector<ref::Tensor>& t) {
            return one(ref::conv2d(t[0], t[1], t.size() > 2 ? t[2] : ref::Tensor(), v.stride, v.padding, v.dilation,
                                   v.groups));
          }));
      cs.back().grad = differentiable(dt);
    }
  }
  struct Err {
    const char* tag;
    Shape x, w;
    DType dt;
    int64_t groups;
  };
  const Err errs[] = {
      {"error_channels", {1, 3, 5, 5}, {4, 2, 3, 3}, kF32, 1},
      {"error_kernel_too_big", {1, 3, 2, 2}, {4, 3, 3, 3}, kF32, 1},
      {"error_groups", {1, 4, 5, 5}, {3, 2, 3, 3}, kF32, 2},
      {"error_bool", {1, 3, 5, 5}, {4, 3, 3, 3}, kBool, 1},
  };
  for (const Err& e : errs) {
    const int64_t g = e.groups;
    cs.push_back(make(
        std::string("conv2d/") + dn(e.dt) + "/" + e.tag, {{e.x, e.dt}, {e.w, e.dt}},
        [g](const std::vector<tb::Tensor>& t) { return one(tb::conv2d(t[0], t[1], {}, {1}, {0}, {1}, g)); },
        [g](const std::vector<ref::Tensor>& t) {
          return one(ref::conv2d(t[0], t[1], ref::Tensor(), {1}, {0}, {1}, g));
        },
        Check::Error));
  }
  // ResNet's 3x3 64->64 layer at 56x56. Dot products of length 64 * 9 = 576 in float32: LibTorch
  // and oneDNN accumulate in different orders (see the long-K note in cases_linalg.cpp).
  for (DType d : {kF32, kBF16}) {
    OpCase b = make(
        std::string("conv2d/") + core::name(d) + "/resnet", {{{8, 64, 56, 56}, d}, {{64, 64, 3, 3}, d}},
        [](const std::vector<tb::Tensor>& t) { return one(tb::conv2d(t[0], t[1], {}, {1}, {1})); },
        [](const std::vector<ref::Tensor>& t) {
          return one(ref::conv2d(t[0], t[1], ref::Tensor(), {1}, {1}, {1}, 1));
        });
    b.tol = long_dot_tol(d, 64 * 9);
    b.bench = true;
    b.flops = 2.0 * 8 * 64 * 56 * 56 * 64 * 9;
    cs.push_back(b);
  }
  // The same layer's backward kernel (grad_input and grad_weight, as a training step runs it, the
  // bias gradient aside): oneDNN's backward-data and backward-weights primitives and their
  // reorders. grad_weight sums 8 * 56 * 56 = 25088 products per element.
  {
    OpCase b = make(
        "convolution_backward/float32/resnet",
        {{{8, 64, 56, 56}, kF32}, {{8, 64, 56, 56}, kF32}, {{64, 64, 3, 3}, kF32}},
        [](const std::vector<tb::Tensor>& t) {
          auto [gx, gw, gb] = ops::convolution_backward(t[0], t[1], t[2], {1}, {1}, {1}, 1, {true, true, false});
          return std::vector<tb::Tensor>{gx, gw};
        },
        [](const std::vector<ref::Tensor>& t) {
          auto [gx, gw] = ref::convolution_backward(t[0], t[1], t[2], {1, 1}, {1, 1}, {1, 1}, 1);
          return std::vector<ref::Tensor>{gx, gw};
        });
    b.tol = long_dot_tol(kF32, 8 * 56 * 56);
    b.bench = true;
    b.flops = 2 * 2.0 * 8 * 64 * 56 * 56 * 64 * 9;  // backward-data and backward-weights, a forward's each
    cs.push_back(b);
  }
}

void add_pool(std::vector<OpCase>& cs) {
  struct Var {
    const char* tag;
    Shape x;
    Shape k, s, p, d;
    bool ceil;
    L layout;
  };
  const Var vars[] = {
      {"k2", {2, 3, 8, 8}, {2}, {}, {0}, {1}, false, L::Contiguous},
      {"k3_s2_p1", {2, 3, 9, 8}, {3}, {2}, {1}, {1}, false, L::Contiguous},
      {"ceil", {1, 2, 7, 7}, {3}, {2}, {0}, {1}, true, L::Contiguous},
      {"ceil_pad", {1, 2, 6, 5}, {3, 2}, {2, 2}, {1, 1}, {1}, true, L::Contiguous},
      {"dilation2", {1, 2, 9, 9}, {3}, {1}, {1}, {2}, false, L::Contiguous},
      {"unbatched", {3, 6, 6}, {2}, {}, {0}, {1}, false, L::Contiguous},
      {"strided", {2, 2, 6, 5}, {2}, {1}, {0}, {1}, false, L::Strided},
      {"transposed", {2, 2, 6, 6}, {3, 2}, {1, 2}, {1, 0}, {1}, false, L::Transposed},
      {"1x1_input", {1, 1, 1, 1}, {1}, {}, {0}, {1}, false, L::Contiguous},
  };
  for (DType dt : kFloats) {
    for (const Var& v : vars) {
      cs.push_back(make(
          "max_pool2d/" + dn(dt) + "/" + v.tag, {{v.x, dt, v.layout}},
          [v](const std::vector<tb::Tensor>& t) { return one(tb::max_pool2d(t[0], v.k, v.s, v.p, v.d, v.ceil)); },
          [v](const std::vector<ref::Tensor>& t) { return one(ref::max_pool2d(t[0], v.k, v.s, v.p, v.d, v.ceil)); }));
      cs.back().grad = differentiable(dt);
      cs.push_back(make(
          "max_pool2d_with_indices/" + dn(dt) + "/" + v.tag, {{v.x, dt, v.layout}},
          [v](const std::vector<tb::Tensor>& t) {
            auto [o, i] = tb::max_pool2d_with_indices(t[0], v.k, v.s, v.p, v.d, v.ceil);
            return std::vector<tb::Tensor>{o, i};
          },
          [v](const std::vector<ref::Tensor>& t) {
            auto [o, i] = ref::max_pool2d_with_indices(t[0], v.k, v.s, v.p, v.d, v.ceil);
            return std::vector<ref::Tensor>{o, i};
          }));
      cs.back().grad = differentiable(dt);
      if (v.d[0] != 1) continue;  // avg_pool2d has no dilation
      for (bool cip : {true, false}) {
        if (!cip && v.p[0] == 0) continue;
        cs.push_back(make(
            "avg_pool2d/" + dn(dt) + "/" + v.tag + (cip ? "" : "_exclude_pad"), {{v.x, dt, v.layout}},
            [v, cip](const std::vector<tb::Tensor>& t) {
              return one(tb::avg_pool2d(t[0], v.k, v.s, v.p, v.ceil, cip));
            },
            [v, cip](const std::vector<ref::Tensor>& t) {
              return one(ref::avg_pool2d(t[0], v.k, v.s, v.p, v.ceil, cip, std::nullopt));
            }));
        cs.back().grad = differentiable(dt);
      }
    }
    cs.push_back(make(
        "avg_pool2d/" + dn(dt) + "/divisor_override", {{{1, 2, 6, 6}, dt}},
        [](const std::vector<tb::Tensor>& t) { return one(tb::avg_pool2d(t[0], {3}, {2}, {1}, false, true, 4)); },
        [](const std::vector<ref::Tensor>& t) { return one(ref::avg_pool2d(t[0], {3}, {2}, {1}, false, true, 4)); }));
    cs.back().grad = differentiable(dt);
  }
  cs.push_back(make(
      "avg_pool2d/int64/k2", {{{1, 2, 6, 6}, kI64}},
      [](const std::vector<tb::Tensor>& t) { return one(tb::avg_pool2d(t[0], {2}, {}, {0})); },
      [](const std::vector<ref::Tensor>& t) {
        return one(ref::avg_pool2d(t[0], {2}, {}, {0}, false, true, std::nullopt));
      }));
  // Integer-valued windows: ties must name the first maximum, as LibTorch's indices do.
  for (DType dt : {kF32, kBF16}) {
    cs.push_back(make(
        "max_pool2d_with_indices/" + dn(dt) + "/ties", {{{2, 2, 6, 6}, dt, L::Contiguous, V::Index, 3}},
        [](const std::vector<tb::Tensor>& t) {
          auto [o, i] = tb::max_pool2d_with_indices(t[0], {3}, {1}, {1});
          return std::vector<tb::Tensor>{o, i};
        },
        [](const std::vector<ref::Tensor>& t) {
          auto [o, i] = ref::max_pool2d_with_indices(t[0], {3}, {1}, {1}, {1}, false);
          return std::vector<ref::Tensor>{o, i};
        }));
  }
  auto mp_err = [&](const char* tag, Input in, Shape k, Shape s, Shape p) {
    cs.push_back(make(
        std::string("max_pool2d/") + dn(in.dtype) + "/" + tag, {in},
        [=](const std::vector<tb::Tensor>& t) { return one(tb::max_pool2d(t[0], k, s, p, {1}, false)); },
        [=](const std::vector<ref::Tensor>& t) { return one(ref::max_pool2d(t[0], k, s, p, {1}, false)); },
        Check::Error));
  };
  mp_err("error_pad_too_big", {{1, 1, 6, 6}, kF32}, {2}, {}, {2});
  mp_err("error_output_too_small", {{1, 1, 2, 2}, kF32}, {3}, {}, {0});
  mp_err("error_2d_input", {{6, 6}, kF32}, {2}, {}, {0});
  mp_err("error_zero_stride", {{1, 1, 6, 6}, kF32}, {2}, {0}, {0});
}

void add_embedding(std::vector<OpCase>& cs) {
  auto e = [](const std::vector<tb::Tensor>& t) { return one(tb::embedding(t[0], t[1])); };
  auto r = [](const std::vector<ref::Tensor>& t) { return one(ref::embedding(t[0], t[1])); };
  for (DType dt : {kF32, kF64, kBF16, kF16, kI64}) {
    cs.push_back(
        make("embedding/" + dn(dt) + "/2x3", {{{10, 4}, dt}, {{2, 3}, kI64, L::Contiguous, V::Index, 10}}, e, r));
    cs.push_back(
        make("embedding/" + dn(dt) + "/int32_index", {{{10, 4}, dt}, {{7}, kI32, L::Strided, V::Index, 10}}, e, r));
    cs.push_back(make("embedding/" + dn(dt) + "/0d_index",
                      {{{10, 3}, dt, L::Transposed}, {{}, kI64, L::Contiguous, V::Index, 10}}, e, r));
    cs.push_back(make("embedding/" + dn(dt) + "/empty_index",
                      {{{10, 4}, dt}, {{0, 2}, kI64, L::Contiguous, V::Index, 10}}, e, r));
  }
  OpCase pi = make(
      "embedding/float32/padding_idx", {{{10, 4}, kF32}, {{3, 4}, kI64, L::Contiguous, V::Index, 10}},
      [](const std::vector<tb::Tensor>& t) { return one(tb::embedding(t[0], t[1], 2)); },
      [](const std::vector<ref::Tensor>& t) { return one(ref::embedding(t[0], t[1], 2)); });
  pi.grad = true;
  cs.push_back(pi);
  cs.push_back(make("embedding/float32/error_out_of_range",
                    {{{10, 4}, kF32}, {{12}, kI64, L::Contiguous, V::Index, 1000}}, e, r, Check::Error));
  cs.push_back(make("embedding/float32/error_float_index", {{{10, 4}, kF32}, {{3}, kF32}}, e, r, Check::Error));
}

// Dropout's mask comes from different generators on the two sides, so values cannot match. Both
// sides reduce their own output to [kept fraction, consistency]: consistency is 1 when every
// element is either 0 or x / (1 - p) (to the dtype's precision), else 0. The fraction must be
// within 5 binomial standard deviations of LibTorch's (both estimate 1 - p).
std::vector<tb::Tensor> dropout_summary(const tb::Tensor& x, const tb::Tensor& out, double p) {
  const tb::Tensor xd = x.to(kF64).contiguous(), od = out.to(kF64).contiguous();
  const double* xp = xd.data_ptr<double>();
  const double* op = od.data_ptr<double>();
  const double rel = x.dtype() == kF32 ? 1e-6 : 1e-2;
  int64_t kept = 0;
  bool ok = out.sizes() == x.sizes() && out.dtype() == x.dtype();
  for (int64_t i = 0; i < xd.numel(); ++i) {
    if (op[i] == 0) continue;
    ++kept;
    const double want = xp[i] / (1 - p);
    ok = ok && std::fabs(op[i] - want) <= rel * std::fabs(want);
  }
  return {scalar_tensor(double(kept) / double(std::max<int64_t>(xd.numel(), 1)), kF64),
          scalar_tensor(ok ? 1 : 0, kF64)};
}

void add_dropout(std::vector<OpCase>& cs) {
  const Shape shape = {64, 128};
  for (DType dt : {kF32, kBF16}) {
    for (double p : {0.2, 0.5}) {
      OpCase c = make(
          "dropout/" + dn(dt) + "/p" + std::to_string(int(p * 10)), {{shape, dt}},
          [p](const std::vector<tb::Tensor>& t) {
            core::Generator gen(1234);
            return dropout_summary(t[0], tb::dropout(t[0], p, true, &gen), p);
          },
          [p](const std::vector<ref::Tensor>& t) {
            std::vector<ref::Tensor> r;
            for (const tb::Tensor& s :
                 dropout_summary(ref::from_ref(t[0]), ref::from_ref(ref::dropout(t[0], p, true, 1234)), p))
              r.push_back(ref::to_ref(s));
            return r;
          });
      c.tol = Tolerance{0, 5 * std::sqrt(p * (1 - p) / double(64 * 128))};
      cs.push_back(c);
    }
  }
  for (double p : {0.0, 1.0}) {
    cs.push_back(make(
        "dropout/float32/p" + std::to_string(int(p)) + "_exact", {{{5, 7}, kF32, L::Strided}},
        [p](const std::vector<tb::Tensor>& t) { return one(tb::dropout(t[0], p, true)); },
        [p](const std::vector<ref::Tensor>& t) { return one(ref::dropout(t[0], p, true, 1)); }));
  }
  cs.push_back(make(
      "dropout/float32/eval", {{{5, 7}, kF32, L::Transposed}},
      [](const std::vector<tb::Tensor>& t) { return one(tb::dropout(t[0], 0.5, false)); },
      [](const std::vector<ref::Tensor>& t) { return one(ref::dropout(t[0], 0.5, false, 1)); }));
  cs.back().grad = true;
  cs.push_back(make(
      "dropout/float32/error_p", {{{5}, kF32}},
      [](const std::vector<tb::Tensor>& t) { return one(tb::dropout(t[0], 1.5, true)); },
      [](const std::vector<ref::Tensor>& t) { return one(ref::dropout(t[0], 1.5, true, 1)); }, Check::Error));
}

void add_one_hot(std::vector<OpCase>& cs) {
  auto row = [&](std::string tag, Input in, int64_t n, Check check = Check::Values) {
    cs.push_back(make(
        "one_hot/" + dn(in.dtype) + "/" + tag, {in},
        [n](const std::vector<tb::Tensor>& t) { return one(tb::one_hot(t[0], n)); },
        [n](const std::vector<ref::Tensor>& t) { return one(ref::one_hot(t[0], n)); }, check));
  };
  row("infer", {{2, 3}, kI64, L::Contiguous, V::Index, 5}, -1);
  row("num_classes7", {{2, 3}, kI64, L::Transposed, V::Index, 5}, 7);
  row("0d", {{}, kI64, L::Contiguous, V::Index, 4}, 4);
  row("empty", {{0}, kI64, L::Contiguous, V::Index, 4}, 3);
  row("error_too_small", {{8}, kI64, L::Contiguous, V::Index, 10}, 1, Check::Error);
  row("error_empty_infer", {{0}, kI64, L::Contiguous, V::Index, 4}, -1, Check::Error);
  row("error_dtype", {{3}, kI32, L::Contiguous, V::Index, 4}, -1, Check::Error);
}

void add_pad(std::vector<OpCase>& cs) {
  struct Var {
    const char* tag;
    Input x;
    Shape pad;
    std::string mode;
    double value;
  };
  for (DType dt : {kF32, kF64, kBF16, kF16, kI64, kI32, kBool}) {
    const Var vars[] = {
        {"last_dim", {{2, 3, 4}, dt}, {1, 2}, "constant", 1},
        {"two_dims", {{2, 3, 4}, dt, L::Transposed}, {1, 1, 2, 0}, "constant", 0},
        {"three_dims", {{2, 3, 4}, dt, L::Strided}, {1, 0, 0, 1, 2, 2}, "constant", 1},
        {"negative", {{3, 5}, dt}, {-1, 2, 1, -2}, "constant", 0},
        {"empty_dim", {{0, 4}, dt}, {1, 1}, "constant", 1},
        {"1d", {{5}, dt, L::Expanded}, {2, 3}, "constant", 1},
    };
    for (const Var& v : vars) {
      cs.push_back(make(
          "pad/" + dn(dt) + "/" + v.tag, {v.x},
          [v](const std::vector<tb::Tensor>& t) { return one(tb::pad(t[0], v.pad, v.mode, v.value)); },
          [v](const std::vector<ref::Tensor>& t) { return one(ref::pad(t[0], v.pad, v.mode, v.value)); }));
    }
  }
  for (DType dt : {kF32, kF64, kBF16}) {
    const Var vars[] = {
        {"reflect_2d", {{1, 2, 5, 6}, dt}, {2, 1, 1, 3}, "reflect", 0},
        {"reflect_2d_unbatched", {{2, 4, 4}, dt, L::Transposed}, {3, 0, 1, 2}, "reflect", 0},
        {"reflect_1d", {{2, 3, 6}, dt, L::Strided}, {2, 3}, "reflect", 0},
        {"replicate_2d", {{1, 2, 5, 6}, dt}, {2, 1, 1, 3}, "replicate", 0},
        {"replicate_1d", {{3, 4}, dt}, {3, 1}, "replicate", 0},
        // An empty batch is padded to an empty result, as in PyTorch.
        {"reflect_1d_empty_batch", {{0, 3, 4}, dt}, {1, 2}, "reflect", 0},
        {"reflect_2d_empty_batch", {{0, 2, 3, 4}, dt, L::Transposed}, {1, 1, 2, 0}, "reflect", 0},
        {"replicate_1d_empty_batch", {{0, 3, 4}, dt}, {2, 1}, "replicate", 0},
    };
    for (const Var& v : vars) {
      cs.push_back(make(
          "pad/" + dn(dt) + "/" + v.tag, {v.x},
          [v](const std::vector<tb::Tensor>& t) { return one(tb::pad(t[0], v.pad, v.mode, v.value)); },
          [v](const std::vector<ref::Tensor>& t) { return one(ref::pad(t[0], v.pad, v.mode, v.value)); }));
      cs.back().grad = differentiable(dt);
    }
  }
  // A channels-last input pads to a channels-last result in every mode (strides compared), also
  // where size-1 dims leave the layout ambiguous (Note [Channels-last by strides]); 5-D constant
  // padding keeps channels-last-3d.
  for (DType dt : {kF32, kF64}) {
    const Var vars[] = {
        {"constant_channels_last", {{2, 3, 4, 5}, dt, L::ChannelsLast}, {1, 2, 0, 1}, "constant", 0.5},
        {"constant_channels_last_ambiguous", {{1, 2, 1, 1}, dt, L::ChannelsLast}, {0, 1, -1, 1}, "constant", 0},
        {"constant_channels_last_3d", {{1, 3, 2, 2, 2}, dt, L::ChannelsLast}, {1, 0, 0, 1, 1, 1}, "constant", 1},
        {"reflect_channels_last", {{2, 3, 4, 5}, dt, L::ChannelsLast}, {2, 1, 1, 2}, "reflect", 0},
        {"reflect_channels_last_ambiguous", {{1, 2, 2, 1}, dt, L::ChannelsLast}, {0, 0, 1, 1}, "reflect", 0},
        {"replicate_channels_last", {{1, 2, 1, 1}, dt, L::ChannelsLast}, {0, 1, 2, 2}, "replicate", 0},
    };
    for (const Var& v : vars) {
      cs.push_back(make(
          "pad/" + dn(dt) + "/" + v.tag, {v.x},
          [v](const std::vector<tb::Tensor>& t) { return one(tb::pad(t[0], v.pad, v.mode, v.value)); },
          [v](const std::vector<ref::Tensor>& t) { return one(ref::pad(t[0], v.pad, v.mode, v.value)); }, Check::View));
      cs.back().grad = true;
    }
  }
  // Cropping only (every pad <= 0): a clone of the narrowed input, stride order kept (strides
  // compared).
  for (const Shape& pads : {Shape{0, -1}, Shape{-1, 0, 0, -1}, Shape{0, 0}}) {
    std::string tag = "crop_only_transposed";
    for (int64_t p : pads) tag += "_" + std::to_string(-p);
    cs.push_back(make(
        "pad/float32/" + tag, {{{3, 4, 5}, kF32, L::Transposed}},
        [pads](const std::vector<tb::Tensor>& t) { return one(tb::pad(t[0], pads, "constant", 0)); },
        [pads](const std::vector<ref::Tensor>& t) { return one(ref::pad(t[0], pads, "constant", 0)); }, Check::View));
  }
  const Var errs[] = {
      {"error_reflect_too_big", {{1, 2, 3, 3}, kF32}, {3, 0, 0, 0}, "reflect", 0},
      {"error_odd_length", {{2, 3}, kF32}, {1}, "constant", 0},
      {"error_too_long", {{3}, kF32}, {1, 1, 1, 1}, "constant", 0},
      {"error_negative_size", {{3}, kF32}, {-2, -2}, "constant", 0},
      // A negative pad may not take more than the dim holds, even when the output size is >= 0.
      {"error_negative_narrow_empty", {{0}, kF32}, {-1, 2}, "constant", 0},
      {"error_negative_narrow_right", {{2, 1}, kF32}, {1, -2}, "constant", 0},
      // Only the batch dim may be empty.
      {"error_reflect_empty_channels", {{2, 0, 4}, kF32}, {1, 1}, "reflect", 0},
      {"error_reflect_empty_width", {{2, 3, 0}, kF32}, {0, 0}, "reflect", 0},
      {"error_replicate_empty_unbatched", {{0, 4}, kF32}, {1, 1}, "replicate", 0},
  };
  for (const Var& v : errs) {
    cs.push_back(make(
        std::string("pad/float32/") + v.tag, {v.x},
        [v](const std::vector<tb::Tensor>& t) { return one(tb::pad(t[0], v.pad, v.mode, v.value)); },
        [v](const std::vector<ref::Tensor>& t) { return one(ref::pad(t[0], v.pad, v.mode, v.value)); }, Check::Error));
  }
}

// ---- Gradient rows (float32 and float64): configurations only the gradient check had. ----

OpCase& grad_row(std::vector<OpCase>& cs, std::string name, std::vector<Input> in, EngineFn e, RefFn r) {
  cs.push_back(make_grad_case(std::move(name), std::move(in), std::move(e), std::move(r)));
  return cs.back();
}

// conv2d with both operands awkward, a frozen input, a channels-last view, a small encoder, and
// (float32) a size past oneDNN's small-shape paths.
void add_conv_grads(std::vector<OpCase>& cs, DType dt) {
  const std::string d = dn(dt);
  struct Var {
    const char* tag;
    Shape x, w, stride;
    L layout;
  };
  for (const Var& c : {Var{"transposed", {1, 2, 6, 6}, {3, 2, 3, 2}, {1}, L::Transposed},
                       Var{"strided", {1, 2, 6, 5}, {3, 2, 3, 3}, {2, 1}, L::Strided}}) {
    grad_row(
        cs, "conv2d/" + d + "/" + c.tag, {{c.x, dt, c.layout}, {c.w, dt, c.layout}, {{c.w[0]}, dt}},
        [c](const In& t) { return one(tb::conv2d(t[0], t[1], t[2], c.stride, {1})); },
        [c](const RIn& t) { return one(R::conv2d(t[0], t[1], t[2], c.stride, {1}, {1}, 1)); });
  }
  // Only the weight and bias require grad (a first layer's input does not).
  grad_row(
      cs, "conv2d/" + d + "/weight_only", {{{2, 2, 5, 5}, dt}, {{3, 2, 3, 3}, dt}, {{3}, dt}},
      [](const In& t) { return one(tb::conv2d(t[0], t[1], t[2], {1}, {1})); },
      [](const RIn& t) { return one(R::conv2d(t[0], t[1], t[2], {1}, {1}, {1}, 1)); })
      .wrt = {1, 2};
  // A channels-last view: the (N, H, W, C) input permuted to (N, C, H, W).
  grad_row(
      cs, "conv2d/" + d + "/permuted_view", {{{1, 5, 5, 2}, dt}, {{3, 2, 3, 3}, dt}},
      [](const In& t) {
        return one(tb::conv2d(t[0].permute({0, 3, 1, 2}), t[1], {}, {1}, {1}));
      },
      [](const RIn& t) {
        return one(R::conv2d(R::permute(t[0], {0, 3, 1, 2}), t[1], ref::Tensor(), {1}, {1}, {1}, 1));
      });
  // reflect pad -> conv -> max pool, as in a small encoder.
  grad_row(
      cs, "conv2d/" + d + "/pad_conv_pool", {{{1, 2, 6, 6}, dt}, {{2, 2, 3, 3}, dt}, {{2}, dt}},
      [](const In& t) {
        return one(tb::max_pool2d(tb::conv2d(tb::pad(t[0], {1, 1, 1, 1}, "reflect"), t[1], t[2]), {2}));
      },
      [](const RIn& t) {
        return one(R::max_pool2d(R::conv2d(R::pad(t[0], {1, 1, 1, 1}, "reflect"), t[1], t[2], {1}, {0}, {1}, 1), {2},
                                 {}, {0}, {1}, false));
      });
  if (dt != kF32) return;
  // Past oneDNN's small-shape paths: blocked layouts and reorders on both backward primitives.
  // Gradients of the weight sum 2 * 10 * 10 = 200 products (and the input's 16 * 9 = 144): float32
  // accumulation order differs from LibTorch's, hence the long-sum tolerances.
  OpCase& big = grad_row(
      cs, "conv2d/float32/blocked", {{{2, 16, 10, 10}, kF32}, {{16, 16, 3, 3}, kF32}, {{16}, kF32}},
      [](const In& t) { return one(tb::conv2d(t[0], t[1], t[2], {1}, {1})); },
      [](const RIn& t) { return one(R::conv2d(t[0], t[1], t[2], {1}, {1}, {1}, 1)); });
  big.tol = long_dot_tol(kF32, 16 * 9);
  big.grad_tol = Tolerance{1e-4, 1e-4};
}

// Pooling with overlapping windows, ties, ceil mode with an override, and a view before the op.
void add_pool_grads(std::vector<OpCase>& cs, DType dt) {
  const std::string d = dn(dt);
  grad_row(
      cs, "max_pool2d/" + d + "/overlap_s1", {{{1, 2, 5, 5}, dt}},
      [](const In& t) { return one(tb::max_pool2d(t[0], {3}, {1}, {1}, {1}, false)); },
      [](const RIn& t) { return one(R::max_pool2d(t[0], {3}, {1}, {1}, {1}, false)); });
  for (bool cip : {true, false})
    grad_row(
        cs, "avg_pool2d/" + d + "/overlap_s1" + (cip ? "" : "_exclude_pad"), {{{1, 2, 5, 5}, dt}},
        [cip](const In& t) { return one(tb::avg_pool2d(t[0], {3}, {1}, {1}, false, cip)); },
        [cip](const RIn& t) { return one(R::avg_pool2d(t[0], {3}, {1}, {1}, false, cip, std::nullopt)); });
  // Integer-valued inputs: windows hold ties, and the gradient must go to the first maximum (in
  // row-major order), where LibTorch sends it. Finite differences are meaningless at a tie.
  OpCase& ties = grad_row(
      cs, "max_pool2d/" + d + "/ties", {{{2, 2, 6, 6}, dt, L::Contiguous, V::Index, 3}},
      [](const In& t) { return one(tb::max_pool2d(t[0], {3}, {1}, {1})); },
      [](const RIn& t) { return one(R::max_pool2d(t[0], {3}, {1}, {1}, {1}, false)); });
  ties.gradcheck = false;
  ties.wrt = {0};
  grad_row(
      cs, "avg_pool2d/" + d + "/ceil_exclude_pad_override", {{{1, 2, 5, 6}, dt}},
      [](const In& t) {
        return one(tb::avg_pool2d(t[0], {2, 3}, {2}, {1}, true, false, 3));
      },
      [](const RIn& t) {
        return one(R::avg_pool2d(t[0], {2, 3}, {2}, {1}, true, false, 3));
      });
  // A view before the op and a second pooling after it.
  grad_row(
      cs, "avg_pool2d/" + d + "/view_then_max_pool", {{{2, 3, 8, 6}, dt}},
      [](const In& t) {
        return one(tb::avg_pool2d(tb::max_pool2d(t[0].select(0, 1).narrow(1, 1, 6).transpose(1, 2), {2}, {1}), {2}));
      },
      [](const RIn& t) {
        ref::Tensor x = R::transpose(R::narrow(R::select(t[0], 0, 1), 1, 1, 6), 1, 2);
        return one(R::avg_pool2d(R::max_pool2d(x, {2}, {1}, {0}, {1}, false), {2}, {}, {0}, false, true, std::nullopt));
      });
}

// embedding: repeated indices (their gradients accumulate), padding_idx, int32 strided indices,
// no indices, and a view of the table chained into pooling. Only the table takes a gradient.
void add_embedding_grads(std::vector<OpCase>& cs, DType dt) {
  const std::string d = dn(dt);
  for (int64_t pad_idx : {int64_t(-1), int64_t(2)}) {
    for (L wl : {L::Contiguous, L::Transposed}) {
      const std::string name = std::string(pad_idx < 0 ? "repeats" : "padding_idx") +
                               (wl == L::Transposed ? "_transposed" : "");
      if (name == "padding_idx" && dt == kF32) continue;  // a row of add_embedding
      // 15 indices over 4 rows: repeats are certain, so their gradients must accumulate.
      OpCase& c = grad_row(
          cs, "embedding/" + d + "/" + name, {{{6, 5}, dt, wl}, {{3, 5}, kI64, L::Contiguous, V::Index, 4}},
          [pad_idx](const In& t) { return one(tb::embedding(t[0], t[1], pad_idx)); },
          [pad_idx](const RIn& t) { return one(R::embedding(t[0], t[1], pad_idx)); });
      c.wrt = {0};
      // The padding_idx row's gradient is zero by definition, not the derivative: finite
      // differences of the forward disagree there by design (the LibTorch check covers it).
      c.gradcheck = pad_idx < 0;
    }
  }
  OpCase& i32 = grad_row(
      cs, "embedding/" + d + "/int32_strided_indices", {{{5, 3}, dt}, {{4, 6}, kI32, L::Strided, V::Index, 5}},
      [](const In& t) { return one(tb::embedding(t[0], t[1], 0)); },
      [](const RIn& t) { return one(R::embedding(t[0], t[1], 0)); });
  i32.wrt = {0};
  i32.gradcheck = false;  // padding_idx 0 (as above)
  grad_row(
      cs, "embedding/" + d + "/empty_indices", {{{5, 3}, dt}, {{0, 2}, kI64, L::Contiguous, V::Index, 5}},
      [](const In& t) { return one(tb::embedding(t[0], t[1])); },
      [](const RIn& t) { return one(R::embedding(t[0], t[1])); })
      .wrt = {0};
  grad_row(
      cs, "embedding/" + d + "/view_then_pool", {{{8, 4}, dt}, {{2, 3, 4}, kI64, L::Contiguous, V::Index, 6}},
      [](const In& t) { return one(tb::avg_pool2d(tb::embedding(t[0].narrow(0, 1, 6), t[1]), {2})); },
      [](const RIn& t) {
        return one(
            R::avg_pool2d(R::embedding(R::narrow(t[0], 0, 1, 6), t[1]), {2}, {}, {0}, false, true, std::nullopt));
      })
      .wrt = {0};
}

constexpr uint64_t kSeed = 20240611;  // the dropout gradient rows' fixed generator seed

// dropout: deterministic rows LibTorch matches exactly (p = 0, eval mode, p = 1), then random masks
// redrawn from the engine for the reference (see the file comment).
void add_dropout_grads(std::vector<OpCase>& cs, DType dt) {
  const std::string d = dn(dt);
  struct Det {
    const char* tag;
    double p;
    bool training;
  };
  for (Det c : {Det{"p0", 0.0, true}, Det{"eval", 0.5, false}, Det{"p1", 1.0, true}}) {
    if (std::string(c.tag) == "eval" && dt == kF32) continue;  // a row of add_dropout
    grad_row(
        cs, "dropout/" + d + "/" + c.tag, {{{3, 4}, dt, L::Transposed}, {{3, 4}, dt}},
        [c](const In& t) { return one(tb::mul(tb::dropout(t[0], c.p, c.training), t[1])); },
        [c](const RIn& t) { return one(R::mul(R::dropout(t[0], c.p, c.training, kSeed), t[1])); });
  }
  grad_row(
      cs, "dropout/" + d + "/p0_alone", {{{2, 3}, dt}}, [](const In& t) { return one(tb::dropout(t[0], 0.0, true)); },
      [](const RIn& t) { return one(R::dropout(t[0], 0.0, true, kSeed)); });
  struct Rnd {
    const char* tag;
    double p;
    Shape shape;
    L layout;
  };
  for (Rnd c : {Rnd{"p0.3", 0.3, {4, 5}, L::Contiguous}, Rnd{"p0.5_transposed", 0.5, {5, 6}, L::Transposed},
                Rnd{"p0.8_strided", 0.8, {3, 7}, L::Strided}}) {
    grad_row(
        cs, "dropout/" + d + "/" + c.tag, {{c.shape, dt, c.layout}},
        [c](const In& t) {
          core::Generator gen(kSeed);
          return one(tb::dropout(t[0], c.p, true, &gen));
        },
        [c](const RIn& t) {
          core::Generator gen(kSeed);
          const tb::Tensor mask = tb::dropout(tb::ones(t[0].sizes(), t[0].dtype()), c.p, true, &gen);
          return one(R::mul(t[0], ref::to_ref(mask)));
        });
  }
  // A view before dropout and a product after it.
  grad_row(
      cs, "dropout/" + d + "/view_chain", {{{4, 3, 2}, dt}, {{2, 3}, dt}},
      [](const In& t) {
        core::Generator gen(kSeed + 1);
        return one(tb::mul(tb::dropout(t[0].select(0, 2).transpose(0, 1), 0.4, true, &gen), t[1]));
      },
      [](const RIn& t) {
        core::Generator gen(kSeed + 1);
        const tb::Tensor mask = tb::dropout(tb::ones({2, 3}, t[0].dtype()), 0.4, true, &gen);
        return one(R::mul(R::mul(R::transpose(R::select(t[0], 0, 2), 0, 1), ref::to_ref(mask)), t[1]));
      });
}

// pad: constant (with a value, cropping, three dims, empty), reflect and replicate on awkward
// layouts, and replicate padding of a view into a convolution.
void add_pad_grads(std::vector<OpCase>& cs, DType dt) {
  const std::string d = dn(dt);
  struct Var {
    const char* tag;
    Shape x;
    Shape pad;
    const char* mode;
    double value;
    L layout;
  };
  const Var vars[] = {
      {"constant", {2, 3, 4}, {1, 2, 2, 1}, "constant", 0.5, L::Contiguous},
      {"constant_crop", {2, 4, 5}, {-1, 2, 1, -2}, "constant", 0.0, L::Transposed},
      {"constant_3d", {2, 3, 4}, {1, 0, 0, 1, 1, 1}, "constant", -1.0, L::Strided},
      {"constant_empty", {0, 3}, {1, 1}, "constant", 0.0, L::Contiguous},
      {"reflect_unbatched", {2, 4, 4}, {3, 3, 3, 3}, "reflect", 0.0, L::Transposed},
  };
  for (const Var& c : vars)
    grad_row(
        cs, "pad/" + d + "/" + c.tag, {{c.x, dt, c.layout}},
        [c](const In& t) { return one(tb::pad(t[0], c.pad, c.mode, c.value)); },
        [c](const RIn& t) { return one(R::pad(t[0], c.pad, c.mode, c.value)); });
  grad_row(
      cs, "pad/" + d + "/view_then_conv", {{{3, 2, 4}, dt}, {{2, 2, 3, 3}, dt}},
      [](const In& t) {
        return one(tb::conv2d(tb::pad(t[0].permute({1, 0, 2}), {1, 1, 1, 1}, "replicate"), t[1]));
      },
      [](const RIn& t) {
        return one(R::conv2d(R::pad(R::permute(t[0], {1, 0, 2}), {1, 1, 1, 1}, "replicate"), t[1], ref::Tensor(), {1},
                             {0}, {1}, 1));
      });
}

// Under autocast (see autocast_case.h): conv2d computes in bf16, reflect padding keeps its input's
// dtype. Where LibTorch has oneDNN's bfloat16 convolution (AVX-512 CPUs) it accumulates in float32
// and rounds once, like the engine. Below AVX-512 it falls back to a convolution whose backward
// rounds partial sums to bfloat16 (measured here: 8 of 216 input-gradient elements off by up to
// 17% on a Zen 3), so there the reference is the exact product of the same bfloat16-rounded
// operands (float64 math, which autocast leaves alone) rounded once to bfloat16: the contract both
// oneDNN's kernels and the engine's float32 fallback implement.
void add_autocast(std::vector<OpCase>& cs) {
  cs.push_back(autocast_case(
      "conv2d/float32", {{{2, 3, 6, 6}, kF32}, {{4, 3, 3, 3}, kF32}, {{4}, kF32}},
      [](const In& x) { return tb::conv2d(x[0], x[1], x[2], {1}, {1}); },
      [](const RIn& x) {
        if (ops::cpu::dnnl_has_bf16()) return R::conv2d(x[0], x[1], x[2], {1}, {1}, {1}, 1);
        auto exact = [](const R::Tensor& t) { return R::to(R::to(t, kBF16), kF64); };
        return R::to(R::conv2d(exact(x[0]), exact(x[1]), exact(x[2]), {1}, {1}, {1}, 1), kBF16);
      }));
  cs.push_back(autocast_case(
      "pad_reflect/bfloat16", {{{2, 3, 4, 4}, kBF16}},
      [](const In& x) {
        return tb::pad(x[0], {1, 1, 2, 0}, "reflect");
      },
      [](const RIn& x) {
        return R::pad(x[0], {1, 1, 2, 0}, "reflect");
      }));
}

}  // namespace

std::vector<OpCase> nn_cases() {
  std::vector<OpCase> cs;
  add_conv(cs);
  add_pool(cs);
  add_embedding(cs);
  add_dropout(cs);
  add_one_hot(cs);
  add_pad(cs);
  for (DType dt : {kF32, kF64}) {
    add_conv_grads(cs, dt);
    add_pool_grads(cs, dt);
    add_embedding_grads(cs, dt);
    add_dropout_grads(cs, dt);
    add_pad_grads(cs, dt);
  }
  add_autocast(cs);
  return cs;
}

}  // namespace tb::suites
