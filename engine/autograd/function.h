// How a public differentiable op is written (engine/autograd/functions/<family>.cpp, namespace tb):
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = kernel([&] { return ops::mul(a, b); });
//     record("mul", {a, b}, {out}, /*saved=*/{a, b}, [](BackwardContext& ctx, const TensorList& g) {
//       return TensorList{ops::mul(g[0], ctx.saved(1)), ops::mul(g[0], ctx.saved(0))};
//     });
//     return out;
//   }
//
// The backward returns one gradient per input (undefined where ctx.needs_grad(i) is false, or
// where it is zero); the engine sums each to its input's shape (undoing broadcasting) and casts
// it to the input's dtype. Backward closures run with grad mode off and call ops:: kernels.
#pragma once
#include <utility>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/autograd/variable.h"
#include "engine/core/profiler.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"

namespace tb::autograd {

// Runs a forward kernel with grad mode off, so the views and copies it makes inside join no
// graph. View ops must not use it: their results are views tracked by the tensor hooks.
// What it allocates while grad mode is on is counted as activation memory (Note [Memory tags]),
// under the op's name for the OOM report and the memory snapshot (engine/memory/site.h): by
// default the calling function's name ("matmul" for tb::matmul), a static string. An enclosing
// op (a composite op, an optimizer step) keeps its own name.
template <typename F>
auto kernel(F&& f, const char* op = __builtin_FUNCTION()) {
  memory::OpScope op_scope(op, /*keep_outer=*/true);
  profiler::Scope prof(op, profiler::Category::Op);  // one relaxed load when not profiling
  memory::TagGuard tag(grad_mode_enabled() ? memory::Tag::Activation : memory::TagGuard::current(),
                       /*keep_outer=*/true);
  NoGradGuard no_grad;
  return std::forward<F>(f)();
}

// Records outputs of op `op` computed from `inputs` (no-op unless grad mode is on and an input
// requires grad). `saved` may include outputs.
void record(const char* op, const TensorList& inputs, const TensorList& outputs, const TensorList& saved,
            BackwardFn fn);

// In-place ops: call check_inplace(self) (variable.h) before the kernel, then record_inplace.
// Gradient 0 of the backward is for self's value before the op; 1.. for `others`.
void record_inplace(const char* op, const Tensor& self, const TensorList& others, const TensorList& saved,
                    BackwardFn fn);

}  // namespace tb::autograd
