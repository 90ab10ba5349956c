// The gradient suite: one table of differentiable-op cases per family drives two checks.
//   grad/<case>:      forward outputs and the gradient of every input that requires grad equal
//                     LibTorch autograd's, for the same inputs (same bytes, same awkward layouts)
//                     and the same random output gradients.
//   gradcheck/<case>: (float64 rows) the engine's gradient equals central finite differences of
//                     the engine's own forward (torch.autograd.gradcheck's eps/atol/rtol).
// Inputs are described as in suites/ops (Input: shape, dtype, layout, values).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "suites/ops/op_case.h"

namespace tb::suites {

struct GradCase {
  std::string name;                  // "<op>/<dtype>/<variant>"
  std::vector<Input> inputs;
  EngineFn engine;                   // calls tb::autograd:: functions
  RefFn reference;                   // the same LibTorch lines as the op tables
  std::vector<size_t> wrt;           // inputs that require grad; empty: every floating input
  std::optional<Tolerance> tol;      // overrides grad_tolerance(dtype); say why beside it
  bool gradcheck = true;             // float64 rows: also check against finite differences
};

// Gradients pass through more arithmetic than one op's forward: a little looser than
// default_tolerance for float32.
inline Tolerance grad_tolerance(DType t) {
  switch (t) {
    case DType::Float32: return {1e-5, 1e-5};
    case DType::Float64: return {1e-7, 1e-7};
    case DType::BFloat16: return {1.6e-2, 1e-2};
    case DType::Float16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

inline GradCase make_grad_case(std::string name, std::vector<Input> inputs, EngineFn engine, RefFn reference) {
  GradCase c;
  c.name = std::move(name);
  c.inputs = std::move(inputs);
  c.engine = std::move(engine);
  c.reference = std::move(reference);
  return c;
}

// The family tables (suites/autograd/grad_cases_<family>.cpp).
std::vector<GradCase> grad_elementwise_cases();
std::vector<GradCase> grad_reduce_cases();
std::vector<GradCase> grad_linalg_cases();
std::vector<GradCase> grad_nn_cases();       // conv, pooling, embedding, dropout, pad
std::vector<GradCase> grad_loss_cases();     // nll, cross_entropy, mse, l1, bce_with_logits
std::vector<GradCase> grad_autocast_cases(); // under AutocastGuard vs LibTorch's CPU autocast
std::vector<GradCase> grad_nn_norm_cases();  // softmax, log_softmax, layer/group/batch norm
std::vector<GradCase> grad_index_cases();    // views, shape and index ops
std::vector<GradCase> all_grad_cases();

harness::Record run_grad_case(const GradCase& c);  // never throws
harness::Record run_gradcheck(const GradCase& c);  // never throws

}  // namespace tb::suites
