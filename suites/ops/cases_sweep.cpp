// The sweep: one benchmark row per op family, so that the CI perf gate (ci/perf_gate, which runs
// every `bench` row of the ops suite and bounds its engine/LibTorch time ratio) sees every family
// that computes. A family with no benchmark row is invisible to the gate: a one-off survey of such
// ops (engine/ops/README.md, "A survey of ops without benchmark rows") found slowdowns no row had
// caught (softplus, remainder and div with floor 9-14x; cumsum, max along a dim and pow 2-4x).
// These rows are its durable form; ops_test's BenchCoverage test fails when a family of
// all_op_cases() has no benchmark row and is not on its list of exemptions (views, factories, ...).
//
// Rows are named <family>/<dtype>/sweep (sweep_<variant> where a family has two, e.g. a reduction
// along the last dim and along dim 0) and take contiguous inputs of the survey's shape (4096, 1024)
// float32, or the shape the op needs: matrix products of 1024^3, pooling and the batch and group
// norms on (32, 64, 56, 56), attention scores (4, 16, 256, 256), class targets of 1024 classes.
// Index inputs (gather, scatter_add, index_add, embedding, one_hot) are inputs of the row, made
// before the timed calls, not computed in them. `bytes` counts what one call reads and writes at
// least; `flops` is set where the op is arithmetic (0 otherwise). Each row is also a correctness
// row with the default tolerances unless it says why not.
#include <cmath>
#include <limits>

#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/factories.h"
#include "reference/index.h"
#include "reference/linalg.h"
#include "reference/loss.h"
#include "reference/nn.h"
#include "reference/nn_norm.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

// The long float32 dot-product tolerance, explained in cases_linalg.cpp.
std::optional<Tolerance> long_dot_tol(DType dt, int64_t K);

namespace {

namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using Tn = tb::Tensor;
using RT = ref::Tensor;
using V = Values;
using UnaryE = Tn (*)(const Tn&);
using UnaryR = RT (*)(const RT&);
using BinaryE = std::function<Tn(const Tn&, const Tn&)>;
using BinaryR = std::function<RT(const RT&, const RT&)>;
using OS = std::optional<Scalar>;

constexpr DType F32 = DType::Float32, BF16 = DType::BFloat16, I64 = DType::Int64, BOOL = DType::Bool;
constexpr int64_t kRows = 4096, kCols = 1024;
constexpr double kN = double(kRows) * double(kCols);  // elements of the survey's shape
const Shape kShape = {kRows, kCols};
const Shape kImage = {32, 64, 56, 56};            // pooling, batch_norm, group_norm
constexpr double kImageN = 32.0 * 64 * 56 * 56;   // elements of kImage
constexpr double kPooledN = 32.0 * 64 * 28 * 28;  // kImage pooled with stride 2
constexpr int64_t kMm = 1024;                     // matrix products: 1024 x 1024 x 1024
constexpr double kMmFlops = 2.0 * kMm * kMm * kMm;

Input x32(V v = V::Normal, Shape s = kShape) { return {std::move(s), F32, Layout::Contiguous, v}; }
Input mask(Shape s = kShape) { return {std::move(s), BOOL, Layout::Contiguous, V::Bool}; }
Input idx(Shape s, int64_t hi) { return {std::move(s), I64, Layout::Contiguous, V::Index, hi}; }

class Table {
 public:
  // A benchmark row named family/dtype/variant.
  OpCase& row(const std::string& family, const std::string& variant, std::vector<Input> in, EngineFn e, RefFn r,
              double bytes, double flops = 0, const std::string& dtype = "float32") {
    rows_.push_back(make_case(family + "/" + dtype + "/" + variant, std::move(in), std::move(e), std::move(r)));
    OpCase& c = rows_.back();
    c.bench = true;
    c.bytes = bytes;
    c.flops = flops;
    return c;
  }
  // f(x) on one (4096, 1024) float32 input of values `v`; `out_size`: bytes per output element.
  OpCase& unary(const std::string& family, UnaryE f, UnaryR r, V v = V::Normal, double out_size = 4,
                const std::string& variant = "sweep") {
    return row(
        family, variant, {x32(v)}, [f](const In& x) { return one(f(x[0])); },
        [r](const RIn& x) { return one(r(x[0])); }, (4 + out_size) * kN);
  }
  // f(a, b) on two (4096, 1024) inputs of `dtype` (float32 or bool).
  OpCase& binary(const std::string& family, BinaryE f, BinaryR r, V va = V::Normal, V vb = V::Normal,
                 double out_size = 4, const std::string& variant = "sweep", DType dtype = F32) {
    const double in_size = double(core::itemsize(dtype));
    return row(
        family, variant, {{kShape, dtype, Layout::Contiguous, va}, {kShape, dtype, Layout::Contiguous, vb}},
        [f](const In& x) { return one(f(x[0], x[1])); }, [r](const RIn& x) { return one(r(x[0], x[1])); },
        (2 * in_size + out_size) * kN, kN, core::name(dtype));
  }
  // A reduction of the (4096, 1024) input along `dim`: the row "sweep" along the last dim (1),
  // "sweep_dim0" along dim 0. `out_size`: bytes per output element (values and indices: 12).
  using AlongE = std::function<In(const Tn&, int64_t)>;
  using AlongR = std::function<RIn(const RT&, int64_t)>;
  OpCase& along(const std::string& family, int64_t dim, AlongE f, AlongR r, V v = V::Normal, double out_size = 4) {
    const double kept = dim == 0 ? double(kCols) : double(kRows);
    return row(
        family, dim == 0 ? "sweep_dim0" : "sweep", {x32(v)}, [f, dim](const In& x) { return f(x[0], dim); },
        [r, dim](const RIn& x) { return r(x[0], dim); }, 4 * kN + out_size * kept, kN);
  }
  std::vector<OpCase> take() { return std::move(rows_); }

 private:
  std::vector<OpCase> rows_;
};

// Wraps a single-output reduction for Table::along.
template <typename F>
Table::AlongE one_e(F f) {
  return [f](const Tn& x, int64_t d) { return In{f(x, d)}; };
}
template <typename F>
Table::AlongR one_r(F f) {
  return [f](const RT& x, int64_t d) { return RIn{f(x, d)}; };
}

// ------------------------------------------------------------------ elementwise
void elementwise(Table& t) {
  t.unary("abs", tb::abs, R::abs);
  t.unary("neg", tb::neg, R::neg);
  t.unary("sign", tb::sign, R::sign);
  t.unary("sqrt", tb::sqrt, R::sqrt, V::Positive);
  t.unary("rsqrt", tb::rsqrt, R::rsqrt, V::Positive);
  t.unary("reciprocal", tb::reciprocal, R::reciprocal, V::NonZero);
  t.unary("sin", tb::sin, R::sin);
  t.unary("cos", tb::cos, R::cos);
  t.unary("tanh", tb::tanh, R::tanh);
  t.unary("sigmoid", tb::sigmoid, R::sigmoid);
  t.unary("expm1", tb::expm1, R::expm1);
  t.unary("log1p", tb::log1p, R::log1p, V::Positive);
  t.unary("silu", tb::silu, R::silu);
  t.unary(
      "softplus", [](const Tn& x) { return tb::softplus(x); }, [](const RT& x) { return R::softplus(x); });
  t.unary(
      "clamp", [](const Tn& x) { return tb::clamp(x, OS(-0.5), OS(0.5)); },
      [](const RT& x) { return R::clamp(x, OS(-0.5), OS(0.5)); });
  t.unary("isnan", tb::isnan, R::isnan, V::Normal, 1);
  t.unary("isinf", tb::isinf, R::isinf, V::Normal, 1);
  t.unary("isfinite", tb::isfinite, R::isfinite, V::Normal, 1);
  t.row(
      "logical_not", "sweep", {mask()}, [](const In& x) { return one(tb::logical_not(x[0])); },
      [](const RIn& x) { return one(R::logical_not(x[0])); }, 2 * kN, 0, "bool");

  t.binary(
      "sub", [](const Tn& a, const Tn& b) { return tb::sub(a, b); },
      [](const RT& a, const RT& b) { return R::sub(a, b); });
  t.binary(
      "div", [](const Tn& a, const Tn& b) { return tb::div(a, b); },
      [](const RT& a, const RT& b) { return R::div(a, b); }, V::Normal, V::NonZero);
  t.binary(
      "div", [](const Tn& a, const Tn& b) { return tb::div(a, b, std::string("floor")); },
      [](const RT& a, const RT& b) { return R::div(a, b, std::string("floor")); }, V::Normal, V::NonZero, 4,
      "sweep_floor");
  t.unary(
       "div", [](const Tn& x) { return tb::div(x, Scalar(0.7), std::string("floor")); },
       [](const RT& x) { return R::div(x, Scalar(0.7), std::string("floor")); }, V::Normal, 4, "sweep_floor_scalar")
      .flops = kN;
  t.binary(
      "remainder", [](const Tn& a, const Tn& b) { return tb::remainder(a, b); },
      [](const RT& a, const RT& b) { return R::remainder(a, b); }, V::Normal, V::NonZero);
  // pow: positive bases keep fractional powers real.
  t.binary(
      "pow", [](const Tn& a, const Tn& b) { return tb::pow(a, b); },
      [](const RT& a, const RT& b) { return R::pow(a, b); }, V::Positive, V::Normal);
  t.unary(
       "pow", [](const Tn& x) { return tb::pow(x, Scalar(2.5)); }, [](const RT& x) { return R::pow(x, Scalar(2.5)); },
       V::Positive, 4, "sweep_scalar")
      .flops = kN;
  t.binary(
      "maximum", [](const Tn& a, const Tn& b) { return tb::maximum(a, b); },
      [](const RT& a, const RT& b) { return R::maximum(a, b); });
  t.binary(
      "minimum", [](const Tn& a, const Tn& b) { return tb::minimum(a, b); },
      [](const RT& a, const RT& b) { return R::minimum(a, b); });
  struct Pred {
    const char* name;
    Tn (*f)(const Tn&, const Tn&);
    RT (*r)(const RT&, const RT&);
  };
  const Pred comparisons[] = {{"eq", tb::eq, R::eq}, {"ne", tb::ne, R::ne}, {"lt", tb::lt, R::lt},
                              {"le", tb::le, R::le}, {"gt", tb::gt, R::gt}, {"ge", tb::ge, R::ge}};
  for (const Pred& p : comparisons) t.binary(p.name, p.f, p.r, V::Normal, V::Normal, 1);
  const Pred logical[] = {{"logical_and", tb::logical_and, R::logical_and},
                          {"logical_or", tb::logical_or, R::logical_or},
                          {"logical_xor", tb::logical_xor, R::logical_xor}};
  for (const Pred& p : logical) t.binary(p.name, p.f, p.r, V::Bool, V::Bool, 1, "sweep", BOOL);
  t.row(
      "where", "sweep", {mask(), x32(), x32()}, [](const In& x) { return one(tb::where(x[0], x[1], x[2])); },
      [](const RIn& x) { return one(R::where(x[0], x[1], x[2])); }, 13 * kN);
  t.row(
      "masked_fill", "sweep", {x32(), mask()}, [](const In& x) { return one(tb::masked_fill(x[0], x[1], -1.5)); },
      [](const RIn& x) { return one(R::masked_fill(x[0], x[1], -1.5)); }, 9 * kN);
}

// ------------------------------------------------------------------ reductions
void reductions(Table& t) {
  for (int64_t dim : {1, 0}) {
    // Sums of 1024 (dim 1) and 4096 (dim 0) standard normals, |partial sums| up to ~30-60, summed
    // in different orders on the two sides: measured differences (seeds 0-5) up to 2.7e-5 and
    // 4.6e-5 absolute, past the default atol of 1e-5 where the sum is near 0. As
    // sum/float32/dim0_4096x4096 (cases_reduce.cpp), an absolute 1e-4.
    t.along("sum", dim, one_e([](const Tn& x, int64_t d) { return tb::sum(x, {d}); }),
            one_r([](const RT& x, int64_t d) { return R::sum(x, {d}); }))
        .tol = Tolerance{1.3e-6, 1e-4};
    t.along("mean", dim, one_e([](const Tn& x, int64_t d) { return tb::mean(x, {d}); }),
            one_r([](const RT& x, int64_t d) { return R::mean(x, {d}); }));
    t.along("var", dim, one_e([](const Tn& x, int64_t d) { return tb::var(x, {d}); }),
            one_r([](const RT& x, int64_t d) { return R::var(x, {d}); }));
    // cumsum's output is the input's size: 4 bytes times the reduced dim per kept element.
    t.along("cumsum", dim, one_e([](const Tn& x, int64_t d) { return tb::cumsum(x, d); }),
            one_r([](const RT& x, int64_t d) { return R::cumsum(x, d); }), V::Normal, 4.0 * (dim == 0 ? kRows : kCols));
  }
  t.along("std", 1, one_e([](const Tn& x, int64_t d) { return tb::std(x, {d}); }),
          one_r([](const RT& x, int64_t d) { return R::std(x, {d}); }));
  t.along("var_corr0", 1, one_e([](const Tn& x, int64_t d) { return tb::var(x, {d}, 0); }),
          one_r([](const RT& x, int64_t d) { return R::var(x, {d}, 0); }));
  t.along("var_corr2", 1, one_e([](const Tn& x, int64_t d) { return tb::var(x, {d}, 2); }),
          one_r([](const RT& x, int64_t d) { return R::var(x, {d}, 2); }));
  t.along("std_corr0", 1, one_e([](const Tn& x, int64_t d) { return tb::std(x, {d}, 0); }),
          one_r([](const RT& x, int64_t d) { return R::std(x, {d}, 0); }));
  // 1024 factors in (0.9, 1.1): products between about e^-9 and e^5, where Values::Normal would
  // overflow or underflow (through subnormals). Each of the 1023 products rounds: the two sides'
  // orders differ by up to 3.2e-6 relative (measured, seeds 0-5), past the default rtol of 1.3e-6;
  // rtol 1e-5.
  t.along("prod", 1, one_e([](const Tn& x, int64_t d) { return tb::prod(x, d); }),
          one_r([](const RT& x, int64_t d) { return R::prod(x, d); }), V::NearOne)
      .tol = Tolerance{1e-5, 1e-5};
  t.along("logsumexp", 1, one_e([](const Tn& x, int64_t d) { return tb::logsumexp(x, {d}); }),
          one_r([](const RT& x, int64_t d) { return R::logsumexp(x, {d}); }));
  t.along("amax", 1, one_e([](const Tn& x, int64_t d) { return tb::amax(x, {d}); }),
          one_r([](const RT& x, int64_t d) { return R::amax(x, {d}); }));
  t.along("amin", 1, one_e([](const Tn& x, int64_t d) { return tb::amin(x, {d}); }),
          one_r([](const RT& x, int64_t d) { return R::amin(x, {d}); }));
  t.along(
      "max_dim", 1,
      [](const Tn& x, int64_t d) {
        auto [v, i] = tb::max(x, d);
        return In{v, i};
      },
      [](const RT& x, int64_t d) {
        auto [v, i] = R::max(x, d);
        return RIn{v, i};
      },
      V::Normal, 12);
  t.along(
      "min_dim", 1,
      [](const Tn& x, int64_t d) {
        auto [v, i] = tb::min(x, d);
        return In{v, i};
      },
      [](const RT& x, int64_t d) {
        auto [v, i] = R::min(x, d);
        return RIn{v, i};
      },
      V::Normal, 12);
  t.along("argmax", 1, one_e([](const Tn& x, int64_t d) { return tb::argmax(x, d); }),
          one_r([](const RT& x, int64_t d) { return R::argmax(x, d); }), V::Normal, 8);
  t.along("argmin", 1, one_e([](const Tn& x, int64_t d) { return tb::argmin(x, d); }),
          one_r([](const RT& x, int64_t d) { return R::argmin(x, d); }), V::Normal, 8);
  for (double p : {2.0, 0.0, 1.0, 3.0, double(INFINITY), -double(INFINITY)}) {
    const std::string family = p == 2          ? "norm"
                               : p == INFINITY ? "norm_inf"
                               : p < 0         ? "norm_neginf"
                                               : "norm_p" + std::to_string(int(p));
    OpCase& c = t.along(family, 1, one_e([p](const Tn& x, int64_t d) { return tb::norm(x, p, {d}); }),
                        one_r([p](const RT& x, int64_t d) { return R::norm(x, p, {d}); }));
    // The 1-norm is a plain sum of 1024 |x| (~800, where an ulp is 6e-5), in different orders:
    // measured differences up to 1.9e-6 relative (seeds 0-5); rtol 1e-5, as norm_p1/float32/long.
    if (p == 1) c.tol = Tolerance{1e-5, 1e-5};
  }
  // all over values that are never zero and any over zeros: both must read every element.
  t.row(
      "min", "sweep", {x32()}, [](const In& x) { return one(tb::min(x[0])); },
      [](const RIn& x) { return one(R::min(x[0])); }, 4 * kN, kN);
  t.row(
      "all", "sweep", {x32(V::NonZero)}, [](const In& x) { return one(tb::all(x[0])); },
      [](const RIn& x) { return one(R::all(x[0])); }, 4 * kN);
  t.row(
      "any", "sweep", {x32(V::Zeros)}, [](const In& x) { return one(tb::any(x[0])); },
      [](const RIn& x) { return one(R::any(x[0])); }, 4 * kN);
  t.along("all_dim", 1, one_e([](const Tn& x, int64_t d) { return tb::all(x, d); }),
          one_r([](const RT& x, int64_t d) { return R::all(x, d); }), V::NonZero, 1);
  t.along("any_dim", 1, one_e([](const Tn& x, int64_t d) { return tb::any(x, d); }),
          one_r([](const RT& x, int64_t d) { return R::any(x, d); }), V::Zeros, 1);
  // topk, k = 8: float32 normals tie often enough in a row's top 8 (seed 2 has one) that the
  // indices are implementation-defined, so the engine returns the input gathered at its indices,
  // which must equal the values (as the topk rows of cases_index.cpp; the gather of 32K elements
  // is under 1% of the call).
  t.row(
      "topk", "sweep", {x32()},
      [](const In& x) {
        auto [v, i] = tb::topk(x[0], 8);
        return In{v, tb::gather(x[0], -1, i)};
      },
      [](const RIn& x) {
        auto [v, i] = R::topk(x[0], 8);
        return RIn{v, v};
      },
      4 * kN + 12.0 * kRows * 8);
}

// ------------------------------------------------------------------ shape and index ops
void shape_index(Table& t) {
  // Along the last dim, every index in [0, 1024): a random column per element.
  t.row(
      "gather", "sweep", {x32(), idx(kShape, kCols)}, [](const In& x) { return one(tb::gather(x[0], 1, x[1])); },
      [](const RIn& x) { return one(R::gather(x[0], 1, x[1])); }, 16 * kN);
  t.row(
      "scatter_add", "sweep", {x32(), idx(kShape, kCols), x32()},
      [](const In& x) { return one(tb::scatter_add(x[0], 1, x[1], x[2])); },
      [](const RIn& x) { return one(R::scatter_add(x[0], 1, x[1], x[2])); }, 20 * kN, kN);
  // Plain scatter: which of duplicate indices wins is unspecified, so each row's indices are a
  // permutation of the columns.
  t.row(
      "scatter", "sweep", {x32(), {kShape, I64, Layout::Contiguous, V::Perm}, x32()},
      [](const In& x) { return one(tb::scatter(x[0], 1, x[1], x[2])); },
      [](const RIn& x) { return one(R::scatter(x[0], 1, x[1], x[2])); }, 20 * kN);
  t.row(
      "index_add", "sweep", {x32(), idx({kRows}, kRows), x32()},
      [](const In& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
      [](const RIn& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, 12 * kN + 8.0 * kRows, kN);
  // About half of the mask is set: bytes count the expected half.
  t.row(
      "masked_select", "sweep", {x32(), mask()}, [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RIn& x) { return one(R::masked_select(x[0], x[1])); }, 7 * kN);
  t.row(
      "nonzero", "sweep", {mask()}, [](const In& x) { return one(tb::nonzero(x[0])); },
      [](const RIn& x) { return one(R::nonzero(x[0])); }, 9 * kN, 0, "bool");
  t.row(
      "cat", "sweep", {x32(), x32()},
      [](const In& x) {
        return one(tb::cat({x[0], x[1]}, 1));
      },
      [](const RIn& x) {
        return one(R::cat({x[0], x[1]}, 1));
      },
      16 * kN);
  t.row(
      "stack", "sweep", {x32(), x32()},
      [](const In& x) {
        return one(tb::stack({x[0], x[1]}));
      },
      [](const RIn& x) {
        return one(R::stack({x[0], x[1]}));
      },
      16 * kN);
  t.row(
      "repeat", "sweep", {x32()},
      [](const In& x) {
        return one(tb::repeat(x[0], {2, 1}));
      },
      [](const RIn& x) {
        return one(R::repeat(x[0], {2, 1}));
      },
      12 * kN);
  t.unary(
      "tril", [](const Tn& x) { return tb::tril(x); }, [](const RT& x) { return R::tril(x); });
  t.unary(
      "triu", [](const Tn& x) { return tb::triu(x); }, [](const RT& x) { return R::triu(x); });
  t.row(
      "pad", "sweep", {x32()},
      [](const In& x) {
        return one(tb::pad(x[0], {1, 1, 1, 1}));
      },
      [](const RIn& x) {
        return one(R::pad(x[0], {1, 1, 1, 1}));
      },
      4 * kN + 4.0 * (kRows + 2) * (kCols + 2));
  t.unary(
      "clone", [](const Tn& x) { return x.clone(); }, [](const RT& x) { return R::clone(x); });
  // to: the dtype in the name is the target's, as in the other to/ rows.
  t.row(
      "to", "sweep_from_float32", {x32()}, [](const In& x) { return one(x[0].to(BF16)); },
      [](const RIn& x) { return one(R::to(x[0], BF16)); }, 6 * kN, 0, "bfloat16");
  // copy_ into a preallocated buffer of the same shape.
  t.row(
      "copy_", "sweep", {x32(), x32(V::Zeros)},
      [](const In& x) {
        Tn d = x[1];
        d.copy_(x[0]);
        return one(d);
      },
      [](const RIn& x) {
        RT d = x[1];
        R::copy_(d, x[0]);
        return one(d);
      },
      8 * kN);
  // A token batch of 4096 into 1024 classes, and a GPT-like embedding lookup (8192 x 1024 table).
  t.row(
      "one_hot", "sweep", {idx({kRows}, kCols)}, [](const In& x) { return one(tb::one_hot(x[0], kCols)); },
      [](const RIn& x) { return one(R::one_hot(x[0], kCols)); }, 8 * kN + 8.0 * kRows, 0, "int64");
  t.row(
      "embedding", "sweep", {x32(V::Normal, {8192, kCols}), idx({kRows}, 8192)},
      [](const In& x) { return one(tb::embedding(x[0], x[1])); },
      [](const RIn& x) { return one(R::embedding(x[0], x[1])); }, 8 * kN + 8.0 * kRows);
}

// ------------------------------------------------------------------ nn: pooling, norms, softmax, dropout
void nn(Table& t) {
  const Input img = x32(V::Normal, kImage);
  // ResNet's stem pooling (3x3, stride 2, padding 1) and a 2x2 average pooling.
  t.row(
      "max_pool2d", "sweep", {img}, [](const In& x) { return one(tb::max_pool2d(x[0], {3}, {2}, {1})); },
      [](const RIn& x) { return one(R::max_pool2d(x[0], {3}, {2}, {1}, {1}, false)); }, 4 * (kImageN + kPooledN),
      9 * kPooledN);
  t.row(
      "max_pool2d_with_indices", "sweep", {img},
      [](const In& x) {
        auto [o, i] = tb::max_pool2d_with_indices(x[0], {3}, {2}, {1});
        return In{o, i};
      },
      [](const RIn& x) {
        auto [o, i] = R::max_pool2d_with_indices(x[0], {3}, {2}, {1}, {1}, false);
        return RIn{o, i};
      },
      4 * kImageN + 12 * kPooledN, 9 * kPooledN);
  t.row(
      "avg_pool2d", "sweep", {img}, [](const In& x) { return one(tb::avg_pool2d(x[0], {2}, {2})); },
      [](const RIn& x) { return one(R::avg_pool2d(x[0], {2}, {2}, {0}, false, true, std::nullopt)); },
      4 * (kImageN + kPooledN), kImageN);
  // Training mode with running statistics (updated in place on each side's own copies).
  t.row(
      "batch_norm", "sweep",
      {img, x32(V::Normal, {64}), x32(V::Positive, {64}), x32(V::Normal, {64}), x32(V::Normal, {64})},
      [](const In& x) { return one(tb::batch_norm(x[0], x[1], x[2], x[3], x[4], true, 0.1, 1e-5)); },
      [](const RIn& x) { return one(R::batch_norm(x[0], x[1], x[2], x[3], x[4], true, 0.1, 1e-5)); }, 8 * kImageN,
      8 * kImageN);
  t.row(
      "group_norm", "sweep", {img, x32(V::Normal, {64}), x32(V::Normal, {64})},
      [](const In& x) { return one(tb::group_norm(x[0], 32, x[1], x[2])); },
      [](const RIn& x) { return one(R::group_norm(x[0], 32, x[1], x[2])); }, 8 * kImageN, 8 * kImageN);
  t.row(
      "log_softmax", "sweep", {x32()}, [](const In& x) { return one(tb::log_softmax(x[0], -1)); },
      [](const RIn& x) { return one(R::log_softmax(x[0], -1)); }, 8 * kN, 4 * kN);
  // Attention scores (batch 4, 16 heads, 256 x 256). LibTorch has no fused causal softmax: its side
  // is what a PyTorch model runs, a masked_fill with the (256, 256) mask, made in the call (its
  // cost is 1/64 of the scores'), then softmax.
  t.row(
      "softmax_causal", "sweep", {x32(V::Normal, {4, 16, 256, 256})},
      [](const In& x) { return one(tb::softmax_causal(x[0])); },
      [](const RIn& x) {
        const RT upper = R::ne(R::triu(R::full({256, 256}, 1, F32), 1), 0);
        return one(R::softmax(R::masked_fill(x[0], upper, -std::numeric_limits<double>::infinity()), -1));
      },
      8 * kN, 4 * kN);
  // dropout: the masks come from different generators, so the values cannot match; Check::Stats
  // compares shape and dtype with LibTorch's output and the engine's mean and standard deviation
  // with their expectation: x * mask / (1 - p) of standard normals has mean 0 and standard
  // deviation 1 / sqrt(1 - p) = sqrt(2) at p = 0.5 (an output left unscaled, or not dropped, has 1).
  // Each call draws from a fixed-seed generator on both sides.
  OpCase& d = t.row(
      "dropout", "sweep", {x32()},
      [](const In& x) {
        core::Generator gen(1234);
        return one(tb::dropout(x[0], 0.5, true, &gen));
      },
      [](const RIn& x) { return one(R::dropout(x[0], 0.5, true, 1234)); }, 8 * kN);
  d.check = Check::Stats;
  d.stats_mean = 0;
  d.stats_std = std::sqrt(2.0);
}

// ------------------------------------------------------------------ losses
void losses(Table& t) {
  // 4096 rows of logits over 1024 classes, mean reduction.
  const std::vector<Input> cls = {x32(), idx({kRows}, kCols)};
  t.row(
      "cross_entropy", "sweep", cls, [](const In& x) { return one(tb::cross_entropy(x[0], x[1])); },
      [](const RIn& x) { return one(R::cross_entropy(x[0], x[1])); }, 4 * kN + 8.0 * kRows, 4 * kN);
  t.row(
      "nll_loss", "sweep", cls, [](const In& x) { return one(tb::nll_loss(x[0], x[1])); },
      [](const RIn& x) { return one(R::nll_loss(x[0], x[1])); }, 12.0 * kRows, double(kRows));
  t.row(
      "mse_loss", "sweep", {x32(), x32()}, [](const In& x) { return one(tb::mse_loss(x[0], x[1])); },
      [](const RIn& x) { return one(R::mse_loss(x[0], x[1])); }, 8 * kN, 3 * kN);
  t.row(
      "l1_loss", "sweep", {x32(), x32()}, [](const In& x) { return one(tb::l1_loss(x[0], x[1])); },
      [](const RIn& x) { return one(R::l1_loss(x[0], x[1])); }, 8 * kN, 3 * kN);
  // Targets 0 and 1.
  t.row(
      "binary_cross_entropy_with_logits", "sweep", {x32(), x32(V::Bool)},
      [](const In& x) { return one(tb::binary_cross_entropy_with_logits(x[0], x[1])); },
      [](const RIn& x) { return one(R::binary_cross_entropy_with_logits(x[0], x[1])); }, 8 * kN);
}

// ------------------------------------------------------------------ matrix products
void products(Table& t) {
  const Shape sq = {kMm, kMm};
  const double sq_bytes = 4.0 * kMm * kMm;
  t.row(
       "mm", "sweep", {x32(V::Normal, sq), x32(V::Normal, sq)}, [](const In& x) { return one(tb::mm(x[0], x[1])); },
       [](const RIn& x) { return one(R::mm(x[0], x[1])); }, 3 * sq_bytes, kMmFlops)
      .tol = long_dot_tol(F32, kMm);
  t.row(
       "addmm", "sweep", {x32(V::Normal, {kMm}), x32(V::Normal, sq), x32(V::Normal, sq)},
       [](const In& x) { return one(tb::addmm(x[0], x[1], x[2])); },
       [](const RIn& x) { return one(R::addmm(x[0], x[1], x[2])); }, 3 * sq_bytes, kMmFlops)
      .tol = long_dot_tol(F32, kMm);
  // A 1024 -> 1024 layer over 1024 tokens.
  const std::vector<Input> layer = {x32(V::Normal, sq), x32(V::Normal, sq), x32(V::Normal, {kMm})};
  t.row(
       "linear", "sweep", layer, [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
       [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); }, 3 * sq_bytes, kMmFlops)
      .tol = long_dot_tol(F32, kMm);
  t.row(
       "linear_relu", "sweep", layer, [](const In& x) { return one(tb::linear_relu(x[0], x[1], x[2])); },
       [](const RIn& x) { return one(R::relu(R::linear(x[0], x[1], x[2]))); }, 3 * sq_bytes, kMmFlops)
      .tol = long_dot_tol(F32, kMm);
  const int64_t n = kRows * kCols;
  t.row(
       "dot", "sweep", {x32(V::Normal, {n}), x32(V::Normal, {n})}, [](const In& x) { return one(tb::dot(x[0], x[1])); },
       [](const RIn& x) { return one(R::dot(x[0], x[1])); }, 8 * kN, 2 * kN)
      .tol = long_dot_tol(F32, n);
  t.row(
      "outer", "sweep", {x32(V::Normal, {kRows}), x32(V::Normal, {kCols})},
      [](const In& x) { return one(tb::outer(x[0], x[1])); }, [](const RIn& x) { return one(R::outer(x[0], x[1])); },
      4 * kN, kN);
  // Attention's scores: (batch 4, 16 heads, 256 queries, 64) x (4, 16, 256 keys, 64).
  const Shape qk = {4, 16, 256, 64};
  t.row(
       "einsum", "sweep", {x32(V::Normal, qk), x32(V::Normal, qk)},
       [](const In& x) {
         return one(tb::einsum("bhqd,bhkd->bhqk", {x[0], x[1]}));
       },
       [](const RIn& x) {
         return one(R::einsum("bhqd,bhkd->bhqk", {x[0], x[1]}));
       },
       4 * (2 * 4 * 16 * 256 * 64 + kN), 2 * kN * 64)
      .tol = long_dot_tol(F32, 64);
}

}  // namespace

std::vector<OpCase> sweep_cases() {
  Table t;
  elementwise(t);
  reductions(t);
  shape_index(t);
  nn(t);
  losses(t);
  products(t);
  return t.take();
}

}  // namespace tb::suites
