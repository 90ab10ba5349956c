// Autocast rows: the same forward under the engine's AutocastGuard and under LibTorch's CPU
// autocast (bfloat16), then the same backward outside it. Outputs must have LibTorch's dtypes
// (bf16 products, float32 losses, untouched softmax and float64) and the gradients of the
// float32 inputs arrive in float32 through the casts.
#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/ops/cpu/linalg_gemm.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/linalg.h"
#include "reference/loss.h"
#include "reference/nn.h"
#include "reference/nn_norm.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

// bf16 products accumulate in float32 on both sides and round once: at most about one bf16 ulp
// (2^-8 relative) apart, plus an absolute floor for gradients that cancel to near zero.
constexpr Tolerance kBf16{1.6e-2, 1e-2};

OpCase autocast_row(std::string name, std::vector<Input> inputs, std::function<tb::Tensor(const In&)> e,
                      std::function<R::Tensor(const RIn&)> r) {
  OpCase c = make_grad_case(
      "autocast/" + std::move(name), std::move(inputs),
      [e](const In& x) {
        A::AutocastGuard guard;
        return one(e(x));
      },
      [r](const RIn& x) {
        std::vector<R::Tensor> out;
        R::with_autocast([&] { out = one(r(x)); });
        return out;
      });
  c.grad_tol = kBf16;
  c.gradcheck = false;  // bf16 arithmetic: finite differences cannot resolve it
  return c;
}

}  // namespace

std::vector<OpCase> grad_autocast_cases() {
  const DType f = DType::Float32, b = DType::BFloat16;
  const Layout Tr = Layout::Transposed;
  std::vector<OpCase> v;
  v.push_back(autocast_row("linear/float32", {{{4, 3, 16}, f}, {{8, 16}, f, Tr}, {{8}, f}},
                           [](const In& x) { return A::linear(x[0], x[1], x[2]); },
                           [](const RIn& x) { return R::linear(x[0], x[1], x[2]); }));
  v.push_back(autocast_row("mm/float32", {{{5, 12}, f}, {{12, 7}, f, Tr}},
                           [](const In& x) { return A::mm(x[0], x[1]); }, [](const RIn& x) { return R::mm(x[0], x[1]); }));
  v.push_back(autocast_row("bmm/float32", {{{2, 5, 12}, f}, {{2, 12, 7}, f}},
                           [](const In& x) { return A::bmm(x[0], x[1]); }, [](const RIn& x) { return R::bmm(x[0], x[1]); }));
  v.push_back(autocast_row("matmul/float32/batched_by_matrix", {{{3, 5, 12}, f}, {{12, 7}, f}},
                           [](const In& x) { return A::matmul(x[0], x[1]); },
                           [](const RIn& x) { return R::matmul(x[0], x[1]); }));
  v.push_back(autocast_row("addmm/float32", {{{7}, f}, {{5, 12}, f}, {{12, 7}, f}},
                           [](const In& x) { return A::addmm(x[0], x[1], x[2], 0.5, 2); },
                           [](const RIn& x) { return R::addmm(x[0], x[1], x[2], 0.5, 2); }));
  v.push_back(autocast_row("einsum/float32", {{{4, 6}, f}, {{5, 6}, f}},
                           [](const In& x) { return A::einsum("ij,kj->ik", {x[0], x[1]}); },
                           [](const RIn& x) { return R::einsum("ij,kj->ik", {x[0], x[1]}); }));
  // Where LibTorch has oneDNN's bfloat16 convolution (AVX-512 CPUs) it accumulates in float32 and
  // rounds once, like the engine. Below AVX-512 it falls back to a convolution whose backward rounds
  // partial sums to bfloat16 (measured here: 8 of 216 input-gradient elements off by up to 17%
  // on a Zen 3), so there the reference is the exact product of the same bfloat16-rounded operands
  // (float64 math, which autocast leaves alone) rounded once to bfloat16: the contract both
  // oneDNN's kernels and the engine's float32 fallback implement.
  v.push_back(autocast_row("conv2d/float32", {{{2, 3, 6, 6}, f}, {{4, 3, 3, 3}, f}, {{4}, f}},
                           [](const In& x) { return A::conv2d(x[0], x[1], x[2], {1}, {1}); },
                           [](const RIn& x) {
                             if (ops::cpu::dnnl_has_bf16()) return R::conv2d(x[0], x[1], x[2], {1}, {1}, {1}, 1);
                             auto exact = [](const R::Tensor& t) { return R::to(R::to(t, b), DType::Float64); };
                             return R::to(R::conv2d(exact(x[0]), exact(x[1]), exact(x[2]), {1}, {1}, {1}, 1), b);
                           }));
  // float32 list: bf16 inputs compute in float32.
  v.push_back(autocast_row("prod/bfloat16", {{{6}, b, Layout::Contiguous, Values::Positive}},
                           [](const In& x) { return A::prod(x[0]); }, [](const RIn& x) { return R::prod(x[0]); }));
  {
    OpCase c = autocast_row("cross_entropy/bfloat16", {{{6, 5}, b}, {{6}, DType::Int64, Layout::Contiguous, Values::Index, 5}},
                              [](const In& x) { return A::cross_entropy(x[0], x[1]); },
                              [](const RIn& x) { return R::cross_entropy(x[0], x[1]); });
    c.wrt = {0};
    v.push_back(std::move(c));
  }
  v.push_back(autocast_row("mse_loss/bfloat16", {{{4, 5}, b}, {{4, 5}, b}},
                           [](const In& x) { return A::mse_loss(x[0], x[1]); },
                           [](const RIn& x) { return R::mse_loss(x[0], x[1]); }));
  v.push_back(autocast_row("pad_reflect/bfloat16", {{{2, 3, 4, 4}, b}},
                           [](const In& x) { return A::pad(x[0], {1, 1, 2, 0}, "reflect"); },
                           [](const RIn& x) { return R::pad(x[0], {1, 1, 2, 0}, "reflect"); }));
  // Not on a list: the input's dtype rules (softmax stays bf16; float64 is never cast).
  v.push_back(autocast_row("softmax/bfloat16", {{{4, 9}, b}},
                           [](const In& x) { return A::softmax(x[0], 1); },
                           [](const RIn& x) { return R::softmax(x[0], 1); }));
  {
    OpCase c = autocast_row("linear/float64", {{{4, 8}, DType::Float64}, {{3, 8}, DType::Float64}},
                              [](const In& x) { return A::linear(x[0], x[1]); },
                              [](const RIn& x) { return R::linear(x[0], x[1]); });
    c.grad_tol = grad_tolerance(DType::Float64);
    v.push_back(std::move(c));
  }
  // An MLP step as a model runs it: bf16 products, float32 residual add, float32 loss.
  {
    OpCase c = autocast_row(
        "mlp_step/float32",
        {{{8, 16}, f}, {{32, 16}, f}, {{32}, f}, {{5, 32}, f}, {{5}, f}, {{8}, DType::Int64, Layout::Contiguous, Values::Index, 5}},
        [](const In& x) {
          const tb::Tensor h = A::relu(A::linear(x[0], x[1], x[2]));
          return A::cross_entropy(A::linear(h, x[3], x[4]), x[5]);
        },
        [](const RIn& x) {
          const R::Tensor h = R::relu(R::linear(x[0], x[1], x[2]));
          return R::cross_entropy(R::linear(h, x[3], x[4]), x[5]);
        });
    c.wrt = {0, 1, 2, 3, 4};
    v.push_back(std::move(c));
  }
  return v;
}

}  // namespace tb::suites
