// One table of rows per op family drives every mode: the value check against LibTorch (trainbench
// test --suite ops, and the GoogleTest program ops_test), the benchmarks (trainbench bench --suite
// ops, rows with `bench` set) and, for rows with `grad` set, the gradient check against LibTorch
// autograd (grad/<name>) and the finite-difference check (gradcheck/<name>, float64 rows) in the
// autograd suite (suites/autograd/grad_check.cpp). A row names how to make its inputs (shape,
// dtype, awkward layout, value range); both sides get the same bytes in the same layout and the
// outputs are compared under per-dtype tolerances (tolerance.h).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/rng.h"
#include "engine/tensor/tensor.h"
#include "harness/suite.h"
#include "reference/tensor.h"
#include "suites/compare.h"  // Diff, compare_values
#include "suites/ops/tolerance.h"

namespace tb::suites {

// How an input is laid out in memory. Non-contiguous layouts are the default in most tables.
enum class Layout {
  Contiguous,
  Transposed,    // last two dims swapped (a transposed view of a contiguous tensor)
  Strided,       // every other element of the last dim, with a storage offset
  Expanded,      // the first dim broadcast from size 1 (stride 0)
  ChannelsLast,  // 4-D (5-D): an NHWC (NDHWC) tensor permuted to NCHW (NCDHW); other ranks contiguous
};

enum class Values {
  Normal,    // standard normal (integers: in [-5, 5])
  Positive,  // in (0.1, 3): for log, sqrt, ...
  Unit,      // in (-0.9, 0.9): for atanh-like domains
  NonZero,   // |x| in (0.5, 3) with random signs: for division
  Index,     // integers in [0, hi): for index arguments
  Bool,      // random true/false
  Zeros,     // all zero: for out= buffers
  NearOne,   // in (0.9, 1.1): long products (prod over 1024 elements) stay in range
  Perm,      // integers: every slice along the last dim a random permutation of [0, its size), so
             // indices along that dim are distinct (scatter, where which duplicate wins is unspecified)
};

struct Input {
  Shape shape;
  DType dtype = DType::Float32;
  Layout layout = Layout::Contiguous;
  Values values = Values::Normal;
  int64_t hi = 0;  // exclusive bound for Values::Index
};

enum class Check {
  Values,  // outputs equal within tolerance (dtype and shape exact)
  View,    // as Values, plus sizes/strides/offset equal and output 0 shares storage with
           // input 0 exactly when LibTorch's does
  Error,   // both sides must throw (engine: core::Error; LibTorch: ref::RefError)
  Stats,   // random ops: shape and dtype exact, mean/std within a few standard errors
};

using EngineFn = std::function<std::vector<tb::Tensor>(const std::vector<tb::Tensor>&)>;
using RefFn = std::function<std::vector<ref::Tensor>(const std::vector<ref::Tensor>&)>;

struct OpCase {
  std::string name;  // "<op>/<dtype>/<shape or variant>"
  std::vector<Input> inputs;
  EngineFn engine;
  RefFn reference;
  Check check = Check::Values;
  std::optional<Tolerance> tol;          // overrides the dtype default; say why beside it
  bool bench = false;                    // also a benchmark row
  double flops = 0;                      // per call, for GFLOP/s
  double bytes = 0;                      // read + written per call, for GB/s
  double stats_mean = 0, stats_std = 1;  // Check::Stats: expected moments
  // Autograd (suite autograd): when `grad` is set, grad/<name> compares the forward outputs and
  // the gradient of every input in `wrt` with LibTorch autograd (same random output gradients),
  // and for float64 rows with `gradcheck`, gradcheck/<name> compares with central finite
  // differences of the engine's own forward. Engine lambdas of such rows call the
  // differentiable functions (tb::autograd::).
  bool grad = false;
  std::vector<size_t> wrt;            // empty: every floating input
  std::optional<Tolerance> grad_tol;  // overrides grad_tolerance(dtype); say why beside it
  bool gradcheck = true;
};

// The family tables (suites/ops/cases_<family>.cpp).
std::vector<OpCase> tensor_cases();  // views, copies, casts, creation
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> reduce_cases();
std::vector<OpCase> linalg_cases();
std::vector<OpCase> index_cases();    // shape and index ops
std::vector<OpCase> nn_cases();       // conv, pooling, embedding, dropout, one_hot, pad
std::vector<OpCase> nn_norm_cases();  // softmax, log_softmax, layer_norm, batch_norm
std::vector<OpCase> loss_cases();     // nll, cross_entropy, mse, l1, bce_with_logits
std::vector<OpCase> sweep_cases();    // a benchmark row for every op family (cases_sweep.cpp)
std::vector<OpCase> all_op_cases();   // every family's rows

// Every row the autograd suite checks: the rows of all_op_cases() with `grad` set.
std::vector<OpCase> all_grad_cases();
harness::Record run_grad_case(const OpCase& c);  // grad/<name>; never throws
harness::Record run_gradcheck(const OpCase& c);  // gradcheck/<name>; never throws
// Whether a row gets a gradcheck/ record: `grad` and `gradcheck` set, every floating input float64.
bool wants_gradcheck(const OpCase& c);

// One input of a case, drawn from `gen` (suites/autograd builds its inputs the same way).
tb::Tensor make_input(const Input& in, core::Generator& gen);

// Builds the inputs of a case (deterministic in the case name and TRAINBENCH_SEED).
std::vector<tb::Tensor> make_inputs(const OpCase& c);
uint64_t case_seed(const std::string& name);
// Runs one case in its check mode; never throws.
harness::Record run_case(const OpCase& c);
harness::BenchCase make_bench(const OpCase& c);

// A row of a table (the fields most rows set; the rest keep their defaults).
inline OpCase make_case(std::string name, std::vector<Input> inputs, EngineFn engine, RefFn reference,
                        Check check = Check::Values) {
  OpCase c;
  c.name = std::move(name);
  c.inputs = std::move(inputs);
  c.engine = std::move(engine);
  c.reference = std::move(reference);
  c.check = check;
  return c;
}

// A differentiable row: checked by value, by gradient against LibTorch autograd and (float64) by
// finite differences. `engine` calls the public tb:: ops (engine/autograd/functions.h).
inline OpCase make_grad_case(std::string name, std::vector<Input> inputs, EngineFn engine, RefFn reference) {
  OpCase c = make_case(std::move(name), std::move(inputs), std::move(engine), std::move(reference));
  c.grad = true;
  return c;
}

// Shorthands for tables: a single-output engine/reference op.
inline std::vector<tb::Tensor> one(tb::Tensor t) { return {std::move(t)}; }
inline std::vector<ref::Tensor> one(ref::Tensor t) { return {std::move(t)}; }

}  // namespace tb::suites
