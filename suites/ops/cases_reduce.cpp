// The reduce family's table (engine/ops/reduce.h and engine/autograd/functions/reduce.cpp vs
// reference/reduce.h): every op over a set of shapes/dims/layouts (outer, inner and non-adjacent
// reduced dims, zero-size, 0-dim, transposed, strided, expanded) for each dtype PyTorch supports,
// Check::Error rows where LibTorch raises, the bench rows (16M-element full reductions), and the
// rows with gradients (float32 and float64; see "rows with gradients" below).
#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/ops/reduce.h"
#include "reference/elementwise.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/autocast_case.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

using DT = DType;
using EV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;
using DimList = std::vector<int64_t>;
namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

const DT kFloats[] = {DT::Float32, DT::Float64, DT::BFloat16, DT::Float16};
const DT kInts[] = {DT::Int64, DT::Int32, DT::Bool};

struct Variant {
  std::string name;
  Shape shape;
  Layout layout;
  DimList dims;  // for single-dim ops the first entry is the dim
  bool keepdim;
};

// Shapes for reductions over a list of dims.
const std::vector<Variant>& dims_variants() {
  static const std::vector<Variant> v = {
      {"inner", {5, 7}, Layout::Contiguous, {1}, false},
      {"outer", {33, 70}, Layout::Contiguous, {0}, false},
      {"middle_keepdim", {4, 5, 6}, Layout::Contiguous, {1}, true},
      {"nonadjacent", {4, 5, 6}, Layout::Contiguous, {0, 2}, false},
      {"negative_dims", {3, 4, 5}, Layout::Contiguous, {-1, -3}, true},
      {"all", {3, 17}, Layout::Contiguous, {}, false},
      {"long", {3000}, Layout::Contiguous, {0}, false},
      {"zero_kept", {0, 4}, Layout::Contiguous, {1}, false},
      {"zero_reduced", {3, 0}, Layout::Contiguous, {1}, true},
      {"zero_all", {0, 3}, Layout::Contiguous, {}, false},
      {"scalar", {}, Layout::Contiguous, {}, false},
      {"single", {1}, Layout::Contiguous, {0}, false},
      {"transposed", {6, 9}, Layout::Transposed, {1}, false},
      {"strided", {5, 8}, Layout::Strided, {0}, true},
      {"expanded", {4, 6}, Layout::Expanded, {0, 1}, false},
  };
  return v;
}

// Shapes for reductions along one dim (prod, max/min with dim, argmax, all/any, cumsum).
const std::vector<Variant>& dim_variants() {
  static const std::vector<Variant> v = {
      {"inner", {5, 7}, Layout::Contiguous, {1}, false},      {"outer", {9, 20}, Layout::Contiguous, {0}, true},
      {"middle", {3, 4, 5}, Layout::Contiguous, {-2}, false}, {"zero_kept", {0, 4}, Layout::Contiguous, {1}, false},
      {"scalar", {}, Layout::Contiguous, {0}, true},          {"transposed", {6, 9}, Layout::Transposed, {1}, false},
      {"strided", {5, 8}, Layout::Strided, {1}, true},        {"expanded", {4, 6}, Layout::Expanded, {0}, false},
  };
  return v;
}

std::string nm(const std::string& op, DT d, const std::string& v) { return op + "/" + core::name(d) + "/" + v; }

Input in(const Variant& v, DT d, Values vals = Values::Normal) { return Input{v.shape, d, v.layout, vals}; }

// The float32/float64 rows of variant `grad_variant` are also gradient rows (their engine
// function must then be the differentiable one, A::).
bool grad_on(DT d, const Variant& v, const char* grad_variant) {
  return grad_variant && v.name == grad_variant && (d == DT::Float32 || d == DT::Float64);
}

template <typename EF, typename RF>
void add_dims_op(std::vector<OpCase>& cs, const std::string& op, std::span<const DT> dts, EF ef, RF rf,
                 Values vals = Values::Normal, Check check = Check::Values, const char* grad_variant = nullptr) {
  for (DT d : dts)
    for (const Variant& v : dims_variants()) {
      OpCase c{nm(op, d, v.name), {in(v, d, vals)}, nullptr, nullptr, check};
      c.grad = grad_on(d, v, grad_variant);
      c.engine = [ef, v](const EV& x) { return one(ef(x[0], v.dims, v.keepdim)); };
      c.reference = [rf, v](const RV& x) { return one(rf(x[0], v.dims, v.keepdim)); };
      cs.push_back(std::move(c));
    }
}

template <typename EF, typename RF>
void add_dim_op(std::vector<OpCase>& cs, const std::string& op, std::span<const DT> dts, EF ef, RF rf,
                Values vals = Values::Normal, const char* grad_variant = nullptr) {
  for (DT d : dts)
    for (const Variant& v : dim_variants()) {
      OpCase c{nm(op, d, v.name), {in(v, d, vals)}};
      c.grad = grad_on(d, v, grad_variant);
      c.engine = [ef, v](const EV& x) { return ef(x[0], v.dims[0], v.keepdim); };
      c.reference = [rf, v](const RV& x) { return rf(x[0], v.dims[0], v.keepdim); };
      cs.push_back(std::move(c));
    }
}

OpCase error_case(std::string name, Input input, EngineFn e, RefFn r) {
  OpCase c{std::move(name), {std::move(input)}, std::move(e), std::move(r), Check::Error};
  return c;
}

OpCase bench_case(std::string name, DT d, int64_t n, EngineFn e, RefFn r) {
  OpCase c{std::move(name), {Input{{n}, d}}, std::move(e), std::move(r)};
  c.bench = true;
  c.bytes = double(n) * double(core::itemsize(d)) + double(core::itemsize(d));
  c.flops = double(n);
  return c;
}

// Every dtype, and those with arithmetic (bool excluded).
const std::vector<DT> all_dts = {DT::Float32, DT::Float64, DT::BFloat16, DT::Float16, DT::Int64, DT::Int32, DT::Bool};
const std::vector<DT> numeric = {DT::Float32, DT::Float64, DT::BFloat16, DT::Float16, DT::Int64, DT::Int32};

// sum, mean, prod (with dtype= and out=).
void sum_mean_prod_rows(std::vector<OpCase>& cs) {
  add_dims_op(
      cs, "sum", all_dts, [](const tb::Tensor& x, const DimList& d, bool k) { return tb::sum(x, d, k); },
      [](const ref::Tensor& x, const DimList& d, bool k) { return ref::sum(x, d, k); }, Values::Normal, Check::Values,
      "scalar");
  add_dims_op(
      cs, "mean", kFloats, [](const tb::Tensor& x, const DimList& d, bool k) { return tb::mean(x, d, k); },
      [](const ref::Tensor& x, const DimList& d, bool k) { return ref::mean(x, d, k); });
  add_dim_op(
      cs, "prod", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::prod(x, d, k)); },
      [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::prod(x, d, k)); }, Values::Normal, "scalar");
  // LibTorch multiplies float16 along an outer (non-innermost) dim in float16, rounding every
  // partial product (checked in Python: prod over dim 0 of a (9, 2) half tensor differs from the
  // float-accumulated product by an ulp); the engine accumulates in float. Up to 9 factors here,
  // each rounding worth half an ulp (2^-11): rtol 5e-3. Measured worst: 1.3e-3.
  for (OpCase& c : cs)
    if (c.name.starts_with("prod/float16/")) c.tol = Tolerance{5e-3, 1e-5};
  for (DT d : all_dts) {
    cs.push_back({nm("prod", d, "all"),
                  {Input{{3, 4}, d}},
                  [](const EV& x) { return one(tb::prod(x[0])); },
                  [](const RV& x) { return one(ref::prod(x[0])); }});
    cs.push_back({nm("sum", d, "full_noargs"),
                  {Input{{4, 9}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::sum(x[0])); },
                  [](const RV& x) { return one(ref::sum(x[0])); }});
  }
  // dtype= arguments: the input is cast first.
  cs.push_back({"sum/bool/dtype_float32",
                {Input{{5, 6}, DT::Bool}},
                [](const EV& x) { return one(tb::sum(x[0], {1}, false, DT::Float32)); },
                [](const RV& x) { return one(ref::sum(x[0], {1}, false, DT::Float32)); }});
  cs.push_back({"sum/float32/dtype_float64",
                {Input{{5, 6}}},
                [](const EV& x) { return one(tb::sum(x[0], DT::Float64)); },
                [](const RV& x) { return one(ref::sum(x[0], DT::Float64)); }});
  cs.push_back({"mean/int64/dtype_float32",
                {Input{{5, 6}, DT::Int64}},
                [](const EV& x) { return one(tb::mean(x[0], {0}, true, DT::Float32)); },
                [](const RV& x) { return one(ref::mean(x[0], {0}, true, DT::Float32)); }});
  cs.push_back({"prod/int32/dtype_float64",
                {Input{{5, 6}, DT::Int32}},
                [](const EV& x) { return one(tb::prod(x[0], 1, false, DT::Float64)); },
                [](const RV& x) { return one(ref::prod(x[0], 1, false, DT::Float64)); }});
  // out= variants: out starts as a zero tensor of the result's shape.
  for (DT d : {DT::Float32, DT::Int64}) {
    cs.push_back({nm("sum_out", d, "dim1"),
                  {Input{{4, 7}, d}, Input{{4}, d, Layout::Contiguous, Values::Zeros}},
                  [](const EV& x) {
                    tb::Tensor o = x[1];
                    return one(tb::sum_out(o, x[0], {1}));
                  },
                  [](const RV& x) {
                    ref::Tensor o = x[1];
                    return one(ref::sum_out(o, x[0], {1}));
                  }});
  }
  cs.push_back({"mean_out/float32/dim0",
                {Input{{4, 7}}, Input{{1, 7}, DT::Float32, Layout::Contiguous, Values::Zeros}},
                [](const EV& x) {
                  tb::Tensor o = x[1];
                  return one(tb::mean_out(o, x[0], {0}, true));
                },
                [](const RV& x) {
                  ref::Tensor o = x[1];
                  return one(ref::mean_out(o, x[0], {0}, true));
                }});
}

// max, min, amax, amin, argmax, argmin.
void extrema_rows(std::vector<OpCase>& cs) {
  for (DT d : all_dts) {
    for (const Variant& v : dims_variants()) {
      if (v.shape.size() > 0 && v.name.rfind("zero", 0) == 0) continue;  // error rows below
      cs.push_back({nm("max", d, v.name),
                    {in(v, d)},
                    [](const EV& x) { return one(tb::max(x[0])); },
                    [](const RV& x) { return one(ref::max(x[0])); }});
      cs.back().grad = grad_on(d, v, "scalar");
      cs.push_back({nm("min", d, v.name),
                    {in(v, d)},
                    [](const EV& x) { return one(tb::min(x[0])); },
                    [](const RV& x) { return one(ref::min(x[0])); }});
      const DimList dims = v.dims;
      const bool k = v.keepdim;
      cs.push_back({nm("amax", d, v.name),
                    {in(v, d)},
                    [=](const EV& x) { return one(tb::amax(x[0], dims, k)); },
                    [=](const RV& x) { return one(ref::amax(x[0], dims, k)); }});
      cs.push_back({nm("amin", d, v.name),
                    {in(v, d)},
                    [=](const EV& x) { return one(tb::amin(x[0], dims, k)); },
                    [=](const RV& x) { return one(ref::amin(x[0], dims, k)); }});
    }
  }
  add_dim_op(
      cs, "max_dim", all_dts,
      [](const tb::Tensor& x, int64_t d, bool k) {
        auto [v, i] = tb::max(x, d, k);
        return EV{v, i};
      },
      [](const ref::Tensor& x, int64_t d, bool k) {
        auto [v, i] = ref::max(x, d, k);
        return RV{v, i};
      });
  add_dim_op(
      cs, "min_dim", all_dts,
      [](const tb::Tensor& x, int64_t d, bool k) {
        auto [v, i] = tb::min(x, d, k);
        return EV{v, i};
      },
      [](const ref::Tensor& x, int64_t d, bool k) {
        auto [v, i] = ref::min(x, d, k);
        return RV{v, i};
      });
  add_dim_op(
      cs, "argmax", numeric, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::argmax(x, d, k)); },
      [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::argmax(x, d, k)); });
  add_dim_op(
      cs, "argmin", numeric, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::argmin(x, d, k)); },
      [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::argmin(x, d, k)); });
  for (DT d : numeric) {
    cs.push_back({nm("argmax", d, "flat"),
                  {Input{{6, 5}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::argmax(x[0])); },
                  [](const RV& x) { return one(ref::argmax(x[0])); }});
    cs.push_back({nm("argmin", d, "flat_keepdim"),
                  {Input{{6, 5}, d}},
                  [](const EV& x) { return one(tb::argmin(x[0], std::nullopt, true)); },
                  [](const RV& x) { return one(ref::argmin(x[0], std::nullopt, true)); }});
  }
}

// var, std (correction 0, 1, 2), norm, logsumexp.
void statistic_rows(std::vector<OpCase>& cs) {
  for (double corr : {1.0, 0.0, 2.0}) {
    const std::string suffix = corr == 1 ? "" : "_corr" + std::to_string(int(corr));
    add_dims_op(
        cs, "var" + suffix, kFloats,
        [corr](const tb::Tensor& x, const DimList& d, bool k) { return tb::var(x, d, corr, k); },
        [corr](const ref::Tensor& x, const DimList& d, bool k) { return ref::var(x, d, corr, k); });
    if (corr != 2)
      add_dims_op(
          cs, "std" + suffix, kFloats,
          [corr](const tb::Tensor& x, const DimList& d, bool k) { return tb::std(x, d, corr, k); },
          [corr](const ref::Tensor& x, const DimList& d, bool k) { return ref::std(x, d, corr, k); });
  }
  for (double p : {2.0, 1.0, 3.0, 0.0}) {
    const std::string name = p == 2 ? "norm" : "norm_p" + std::to_string(int(p));
    add_dims_op(
        cs, name, kFloats, [p](const tb::Tensor& x, const DimList& d, bool k) { return tb::norm(x, p, d, k); },
        [p](const ref::Tensor& x, const DimList& d, bool k) { return ref::norm(x, p, d, k); }, Values::Normal,
        Check::Values, p == 2 ? "single" : nullptr);
    // LibTorch's p-norm accumulates |x|^p in float without cascading: on 3000 elements its
    // measured error vs float64 is ~2e-4 absolute (~1e-7 to 2e-6 relative), the engine's 3e-5.
    for (OpCase& c : cs)
      if (c.name == name + "/float32/long") c.tol = Tolerance{1e-5, 1e-5};
  }
  for (double p : {INFINITY, -INFINITY})
    for (DT d : kFloats)
      for (const Variant& v : dims_variants()) {
        if (v.name.rfind("zero", 0) == 0) continue;
        cs.push_back({nm(p > 0 ? "norm_inf" : "norm_neginf", d, v.name),
                      {in(v, d)},
                      [p, v](const EV& x) { return one(tb::norm(x[0], p, v.dims, v.keepdim)); },
                      [p, v](const RV& x) { return one(ref::norm(x[0], p, v.dims, v.keepdim)); }});
      }
  std::vector<DT> lse_dts(std::begin(kFloats), std::end(kFloats));
  lse_dts.push_back(DT::Int64);
  for (DT d : lse_dts)
    for (const Variant& v : dims_variants()) {
      if (v.dims.empty()) continue;  // LibTorch's logsumexp rejects an empty dim list
      cs.push_back({nm("logsumexp", d, v.name),
                    {in(v, d)},
                    [v](const EV& x) { return one(tb::logsumexp(x[0], v.dims, v.keepdim)); },
                    [v](const RV& x) { return one(ref::logsumexp(x[0], v.dims, v.keepdim)); }});
      cs.back().grad = grad_on(d, v, "single");
    }
  // Note [var's two centers]: whether a constant input's variance is exactly 0, read through
  // `> 0` (the values alone agree within any tolerance). A reduction to one element centers on
  // x.mean() in x's dtype (often an ulp off: > 0), every other on an exact Welford mean (== 0).
  struct Constant {
    const char* name;
    Shape shape;
    DimList dims;
  };
  // Whole reductions of at most 6 elements only: the mean of a longer one rounds as each side's
  // vectorised sum orders it, which depends on the CPU's vector width (Note [var's two centers]).
  const Constant constants[] = {{"all_3", {3}, {}},        {"dim0_3", {3}, {0}},
                                {"all_2x3", {2, 3}, {}},   {"dim1_2x3", {2, 3}, {1}},
                                {"dim0_7x3", {7, 3}, {0}}, {"dims01_3x2x1", {3, 2, 1}, {0, 1}}};
  for (DT d : kFloats) {
    if (d != DT::Float32 && d != DT::Float64) continue;
    for (double c : {0.1, -7.3})
      for (const Constant& k : constants)
        for (const bool sd : {false, true}) {
          const std::string name = std::string(k.name) + (c > 0 ? "_constant_pos" : "_constant_neg") + "_is_positive";
          DimList dims = k.dims;
          cs.push_back({nm(sd ? "std" : "var", d, name),
                        {Input{k.shape, d, Layout::Contiguous, Values::Zeros}},
                        [c, dims, sd](const EV& x) {
                          const tb::Tensor v = tb::add(x[0], c);
                          return one(tb::gt(sd ? tb::std(v, dims) : tb::var(v, dims), 0));
                        },
                        [c, dims, sd](const RV& x) {
                          const ref::Tensor v = ref::add(x[0], c);
                          return one(ref::gt(sd ? ref::std(v, dims) : ref::var(v, dims), 0));
                        }});
        }
  }
}

// all, any.
void all_any_rows(std::vector<OpCase>& cs) {
  for (DT d : all_dts) {
    for (Values vals : {Values::Bool, Values::Normal}) {
      const std::string tag = vals == Values::Bool ? "" : "_values";
      cs.push_back({nm("all", d, "full" + tag),
                    {Input{{3, 5}, d, Layout::Transposed, vals}},
                    [](const EV& x) { return one(tb::all(x[0])); },
                    [](const RV& x) { return one(ref::all(x[0])); }});
      cs.push_back({nm("any", d, "full" + tag),
                    {Input{{3, 5}, d, Layout::Contiguous, vals}},
                    [](const EV& x) { return one(tb::any(x[0])); },
                    [](const RV& x) { return one(ref::any(x[0])); }});
    }
    cs.push_back({nm("all", d, "empty"),
                  {Input{{0, 3}, d}},
                  [](const EV& x) { return one(tb::all(x[0])); },
                  [](const RV& x) { return one(ref::all(x[0])); }});
    cs.push_back({nm("any", d, "empty"),
                  {Input{{0, 3}, d}},
                  [](const EV& x) { return one(tb::any(x[0])); },
                  [](const RV& x) { return one(ref::any(x[0])); }});
  }
  add_dim_op(
      cs, "all_dim", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::all(x, d, k)); },
      [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::all(x, d, k)); }, Values::Bool);
  add_dim_op(
      cs, "any_dim", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::any(x, d, k)); },
      [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::any(x, d, k)); }, Values::Bool);
}

// cumsum.
void cumsum_rows(std::vector<OpCase>& cs) {
  add_dim_op(
      cs, "cumsum", all_dts, [](const tb::Tensor& x, int64_t d, bool) { return one(tb::cumsum(x, d)); },
      [](const ref::Tensor& x, int64_t d, bool) { return one(ref::cumsum(x, d)); }, Values::Normal, "scalar");
  cs.push_back({"cumsum/int32/dtype_int32",
                {Input{{4, 6}, DT::Int32}},
                [](const EV& x) { return one(tb::cumsum(x[0], 1, DT::Int32)); },
                [](const RV& x) { return one(ref::cumsum(x[0], 1, DT::Int32)); }});
  cs.push_back({"cumsum/float32/long",
                {Input{{20000}}},
                [](const EV& x) { return one(tb::cumsum(x[0], 0)); },
                [](const RV& x) { return one(ref::cumsum(x[0], 0)); }});
  for (DT d : {DT::Float32, DT::Int64}) {
    cs.push_back({nm("cumsum_", d, "inplace"),
                  {Input{{4, 6}, d}},
                  [](const EV& x) {
                    tb::Tensor t = x[0];
                    return one(tb::cumsum_(t, 0));
                  },
                  [](const RV& x) {
                    ref::Tensor t = x[0];
                    return one(ref::cumsum_(t, 0));
                  }});
  }
}

// Errors: both sides must raise.
void error_rows(std::vector<OpCase>& cs) {
  for (DT d : kInts) {
    cs.push_back(error_case(
        nm("mean", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::mean(x[0])); },
        [](const RV& x) { return one(ref::mean(x[0])); }));
    cs.push_back(error_case(
        nm("var", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::var(x[0], {1})); },
        [](const RV& x) { return one(ref::var(x[0], {1})); }));
    cs.push_back(error_case(
        nm("std", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::std(x[0])); },
        [](const RV& x) { return one(ref::std(x[0])); }));
    cs.push_back(error_case(
        nm("norm", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::norm(x[0], 2)); },
        [](const RV& x) { return one(ref::norm(x[0], 2)); }));
  }
  cs.push_back(error_case(
      "argmax/bool/error_dtype", Input{{3, 4}, DT::Bool}, [](const EV& x) { return one(tb::argmax(x[0], 1)); },
      [](const RV& x) { return one(ref::argmax(x[0], 1)); }));
  cs.push_back(error_case(
      "max/float32/error_empty", Input{{0, 3}}, [](const EV& x) { return one(tb::max(x[0])); },
      [](const RV& x) { return one(ref::max(x[0])); }));
  cs.push_back(error_case(
      "max_dim/float32/error_empty_dim", Input{{0, 3}}, [](const EV& x) { return one(std::get<0>(tb::max(x[0], 0))); },
      [](const RV& x) { return one(std::get<0>(ref::max(x[0], 0))); }));
  cs.push_back(error_case(
      "amin/float32/error_empty_dim", Input{{3, 0}}, [](const EV& x) { return one(tb::amin(x[0], {1})); },
      [](const RV& x) { return one(ref::amin(x[0], {1})); }));
  cs.push_back(error_case(
      "argmax/float32/error_empty", Input{{0, 3}}, [](const EV& x) { return one(tb::argmax(x[0])); },
      [](const RV& x) { return one(ref::argmax(x[0])); }));
  cs.push_back(error_case(
      "norm_inf/float32/error_empty", Input{{0, 3}}, [](const EV& x) { return one(tb::norm(x[0], INFINITY)); },
      [](const RV& x) { return one(ref::norm(x[0], INFINITY)); }));
  cs.push_back(error_case(
      "sum/float32/error_dup_dims", Input{{3, 4}},
      [](const EV& x) {
        return one(tb::sum(x[0], {1, -1}));
      },
      [](const RV& x) {
        return one(ref::sum(x[0], {1, -1}));
      }));
  cs.push_back(error_case(
      "sum/float32/error_dim_range", Input{{3, 4}}, [](const EV& x) { return one(tb::sum(x[0], {2})); },
      [](const RV& x) { return one(ref::sum(x[0], {2})); }));
  cs.push_back(error_case(
      "max_dim/float32/error_dim_range", Input{{3, 4}}, [](const EV& x) { return one(std::get<1>(tb::max(x[0], -3))); },
      [](const RV& x) { return one(std::get<1>(ref::max(x[0], -3))); }));
  cs.push_back(error_case(
      "cumsum/float32/error_dim_range", Input{{3, 4}}, [](const EV& x) { return one(tb::cumsum(x[0], 2)); },
      [](const RV& x) { return one(ref::cumsum(x[0], 2)); }));
}

// Bench rows: 16M-element full reductions (their correctness rows check the cascade).
void bench_rows(std::vector<OpCase>& cs) {
  constexpr int64_t k16M = 16777216;
  for (DT d : {DT::Float32, DT::BFloat16}) {
    cs.push_back(bench_case(
        nm("sum", d, "16M"), d, k16M, [](const EV& x) { return one(tb::sum(x[0])); },
        [](const RV& x) { return one(ref::sum(x[0])); }));
    // 16M standard normals: partial sums reach ~4096, where a float32 ulp is 4.9e-4, and the two
    // summation orders (our pairwise tree, LibTorch's cascade) land a few such ulps apart. Measured
    // against float64 over seeds 1-8: engine error <= 1.1e-3, LibTorch's <= 1.9e-3, their
    // difference <= 2.9e-3; a total near zero makes rtol useless, hence an absolute 1e-2.
    if (d == DT::Float32) cs.back().tol = Tolerance{1.3e-6, 1e-2};
  }
  for (DT d : {DT::Float32, DT::BFloat16}) {
    cs.push_back(bench_case(
        nm("mean", d, "16M"), d, k16M, [](const EV& x) { return one(tb::mean(x[0])); },
        [](const RV& x) { return one(ref::mean(x[0])); }));
    cs.push_back(bench_case(
        nm("max", d, "16M"), d, k16M, [](const EV& x) { return one(tb::max(x[0])); },
        [](const RV& x) { return one(ref::max(x[0])); }));
  }
  {
    OpCase c{"sum/float32/dim0_4096x4096",
             {Input{{4096, 4096}}},
             [](const EV& x) { return one(tb::sum(x[0], {0})); },
             [](const RV& x) { return one(ref::sum(x[0], {0})); }};
    // Column sums of 4096 float32 values (|partial sums| ~ 64): measured max error vs float64
    // 2.5e-5 for the engine and 3.5e-5 for LibTorch, so they may differ by ~6e-5 > the default.
    c.tol = Tolerance{1.3e-6, 1e-4};
    c.bench = true;
    c.bytes = 4096.0 * 4096 * 4 + 4096.0 * 4;
    c.flops = 4096.0 * 4096;
    cs.push_back(std::move(c));
  }
}

// A bias gradient's reduction in bfloat16: the column sums over 4096 rows (batch x time) of 16
// features, few enough columns that the rows split across the threads. LibTorch accumulates
// bfloat16 sums in float32 and rounds once; so must the per-thread partial sums here (rounding each
// to bfloat16 would move a sum of ~64 by up to 2^-9 per partial). Default bfloat16 tolerances.
void bf16_parallel_rows(std::vector<OpCase>& cs) {
  cs.push_back(OpCase{"sum/bfloat16/dim0_4096x16",
                      {Input{{4096, 16}, DType::BFloat16}},
                      [](const EV& x) { return one(tb::sum(x[0], {0})); },
                      [](const RV& x) { return one(ref::sum(x[0], {0})); }});
}

// NaN anywhere in a long row must come out of every lane of the vectorised leaves: planted in
// the first 64-element step, the second leaf and (last row) the scalar tail of the last leaf (rows
// of 5000 values: leaves of 2048, 2048 and 904 = 14 * 64 + 8), in float32 and bfloat16 (the
// AVX-512 selection leaf redoes a leaf that holds a NaN).
void nan_rows(std::vector<OpCase>& cs) {
  const auto plant = [](tb::Tensor x) {
    x = x.clone();
    const int64_t rows = x.size(0), cols = x.size(1);
    core::dispatch_floating(x.dtype(), "nan_rows", [&]<typename T>() {
      T* p = x.data_ptr<T>();
      for (int64_t r = 0; r < rows; ++r) p[r * cols + (r + 1 == rows ? cols - 1 : (r * 1237 + 5) % cols)] = T(NAN);
    });
    return x;
  };
  using Reduction =
      std::pair<std::function<tb::Tensor(const tb::Tensor&)>, std::function<ref::Tensor(const ref::Tensor&)>>;
  const std::vector<std::pair<std::string, Reduction>> nan_ops = {
      {"sum", {[](auto& x) { return tb::sum(x, {1}); }, [](auto& x) { return ref::sum(x, {1}); }}},
      {"amax", {[](auto& x) { return tb::amax(x, {1}); }, [](auto& x) { return ref::amax(x, {1}); }}},
      {"amin", {[](auto& x) { return tb::amin(x, {1}); }, [](auto& x) { return ref::amin(x, {1}); }}},
      {"norm_inf",
       {[](auto& x) { return tb::norm(x, INFINITY, {1}); }, [](auto& x) { return ref::norm(x, INFINITY, {1}); }}},
  };
  for (const auto& [name, fns] : nan_ops)
    for (DT d : {DT::Float32, DT::BFloat16})
      cs.push_back(
          {nm(name, d, "nan_rows"),
           {{{5, 5000}, d}},
           [plant, f = fns.first](const EV& in) { return one(f(plant(in[0]))); },
           [plant, f = fns.second](const RV& in) { return one(f(ref::to_ref(plant(ref::from_ref(in[0]))))); }});
  // max over everything: one NaN in the scalar tail of the last leaf of 16M + 17 values.
  cs.push_back({"max/bfloat16/nan_tail",
                {{{(int64_t(1) << 24) + 17}, DT::BFloat16}},
                [](const EV& in) {
                  tb::Tensor x = in[0].clone();
                  x.data_ptr<core::BFloat16>()[x.numel() - 3] = core::BFloat16(NAN);
                  return one(tb::max(x));
                },
                [](const RV& in) {
                  tb::Tensor x = ref::from_ref(in[0]).clone();
                  x.data_ptr<core::BFloat16>()[x.numel() - 3] = core::BFloat16(NAN);
                  return one(ref::max(ref::to_ref(x)));
                }});
}

// Column sums where the vector leaf of reduce_cols takes 64 columns at a time: widths with a
// 64-column part and a tail, rows past one leaf of 16 (the pairwise merge), float32 and bfloat16,
// and a transposed input (the plan's copy).
void column_rows(std::vector<OpCase>& cs) {
  for (DT d : {DT::Float32, DT::BFloat16}) {
    cs.push_back({nm("sum", d, "dim0_300x200"),
                  {Input{{300, 200}, d}},
                  [](const EV& x) { return one(tb::sum(x[0], {0})); },
                  [](const RV& x) { return one(ref::sum(x[0], {0})); }});
    cs.push_back({nm("mean", d, "dim1_3x37x129"),
                  {Input{{3, 37, 129}, d}},
                  [](const EV& x) { return one(tb::mean(x[0], {1})); },
                  [](const RV& x) { return one(ref::mean(x[0], {1})); }});
    cs.push_back({nm("sum", d, "dim0_transposed_70x65"),
                  {Input{{65, 70}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::sum(x[0], {0})); },
                  [](const RV& x) { return one(ref::sum(x[0], {0})); }});
  }
}

// ------------------------------------------------------------------ rows with gradients
// Every reduction in float32 and float64, over contiguous, transposed, strided and expanded
// inputs, with keepdim, dtype arguments, ties (max/min/amax/amin split evenly), zeros (prod), zero
// vectors (norm), 0-dim and zero-size inputs, views taken before the op, and chains of two
// reductions; checked by value, by gradient against LibTorch autograd and (float64) by finite
// differences.

struct LayoutName {
  Layout layout;
  const char* name;
};
constexpr LayoutName kLayouts[] = {{Layout::Contiguous, "contig"},
                                   {Layout::Transposed, "transposed"},
                                   {Layout::Strided, "strided"},
                                   {Layout::Expanded, "expanded"}};

OpCase& grad_row(std::vector<OpCase>& v, std::string name, std::vector<Input> in, EngineFn e, RefFn r) {
  v.push_back(make_grad_case(std::move(name), std::move(in), std::move(e), std::move(r)));
  return v.back();
}

// Rows whose values are small integers (ties on purpose) sit at non-differentiable points: the
// LibTorch comparison checks the tie rule, finite differences cannot.
OpCase& no_gradcheck(OpCase& c) {
  c.gradcheck = false;
  return c;
}

// Every reduction over contiguous, transposed, strided and expanded (3, 4) inputs.
void grad_layout_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  for (const LayoutName& l : kLayouts) {
    const std::string ln = l.name;
    const Input x34{{3, 4}, dt, l.layout};
    grad_row(
        v, "sum/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::sum(x[0])); },
        [](const RIn& x) { return one(R::sum(x[0])); });
    grad_row(
        v, "sum/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::sum(x[0], {1})); },
        [](const RIn& x) { return one(R::sum(x[0], {1})); });
    grad_row(
        v, "mean/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::mean(x[0])); },
        [](const RIn& x) { return one(R::mean(x[0])); });
    grad_row(
        v, "mean/" + d + "/dim0_keepdim_" + ln, {x34}, [](const In& x) { return one(tb::mean(x[0], {0}, true)); },
        [](const RIn& x) { return one(R::mean(x[0], {0}, true)); });
    const Input nz{{3, 4}, dt, l.layout, Values::NonZero};
    grad_row(
        v, "prod/" + d + "/all_" + ln, {nz}, [](const In& x) { return one(tb::prod(x[0])); },
        [](const RIn& x) { return one(R::prod(x[0])); });
    grad_row(
        v, "prod/" + d + "/dim1_" + ln, {nz}, [](const In& x) { return one(tb::prod(x[0], 1)); },
        [](const RIn& x) { return one(R::prod(x[0], 1)); });
    // Expanded rows repeat values along dim 0: ties, so no finite differences there.
    const bool distinct = l.layout != Layout::Expanded;
    grad_row(
        v, "max/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::max(x[0])); },
        [](const RIn& x) { return one(R::max(x[0])); })
        .gradcheck = distinct;
    grad_row(
        v, "min/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::min(x[0])); },
        [](const RIn& x) { return one(R::min(x[0])); })
        .gradcheck = distinct;
    grad_row(
        v, "max/" + d + "/dim1_" + ln, {x34},
        [](const In& x) {
          auto [a, b] = tb::max(x[0], 1);
          return In{a, b};
        },
        [](const RIn& x) {
          auto [a, b] = R::max(x[0], 1);
          return RIn{a, b};
        });
    grad_row(
        v, "min/" + d + "/dim0_keepdim_" + ln, {x34},
        [](const In& x) {
          auto [a, b] = tb::min(x[0], 0, true);
          return In{a, b};
        },
        [](const RIn& x) {
          auto [a, b] = R::min(x[0], 0, true);
          return RIn{a, b};
        })
        .gradcheck = distinct;
    grad_row(
        v, "amax/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::amax(x[0], {1})); },
        [](const RIn& x) { return one(R::amax(x[0], {1})); });
    grad_row(
        v, "amin/" + d + "/all_keepdim_" + ln, {x34}, [](const In& x) { return one(tb::amin(x[0], {}, true)); },
        [](const RIn& x) { return one(R::amin(x[0], {}, true)); })
        .gradcheck = distinct;
    grad_row(
        v, "var/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::var(x[0])); },
        [](const RIn& x) { return one(R::var(x[0])); });
    grad_row(
        v, "var/" + d + "/dim1_c0_" + ln, {x34}, [](const In& x) { return one(tb::var(x[0], {1}, 0)); },
        [](const RIn& x) { return one(R::var(x[0], {1}, 0)); });
    grad_row(
        v, "std/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::std(x[0])); },
        [](const RIn& x) { return one(R::std(x[0])); });
    grad_row(
        v, "std/" + d + "/dim0_keepdim_c2_" + ln, {{{5, 4}, dt, l.layout}},
        [](const In& x) { return one(tb::std(x[0], {0}, 2, true)); },
        [](const RIn& x) { return one(R::std(x[0], {0}, 2, true)); });
    grad_row(
        v, "logsumexp/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::logsumexp(x[0], {1})); },
        [](const RIn& x) { return one(R::logsumexp(x[0], {1})); });
    grad_row(
        v, "cumsum/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::cumsum(x[0], 1)); },
        [](const RIn& x) { return one(R::cumsum(x[0], 1)); });
    grad_row(
        v, "cumsum/" + d + "/dim0_" + ln, {x34}, [](const In& x) { return one(tb::cumsum(x[0], -2)); },
        [](const RIn& x) { return one(R::cumsum(x[0], -2)); });
  }
}

// norm: every kind of p, over all dims and over one dim.
void grad_norm_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, double(INFINITY), -double(INFINITY)}) {
    const std::string pn = std::isinf(p) ? (p > 0 ? "inf" : "neg_inf") : std::to_string(p).substr(0, 3);
    grad_row(
        v, "norm/" + d + "/p" + pn + "_all", {{{3, 4}, dt, Layout::Transposed, Values::NonZero}},
        [p](const In& x) { return one(tb::norm(x[0], p)); }, [p](const RIn& x) { return one(R::norm(x[0], p)); });
    grad_row(
        v, "norm/" + d + "/p" + pn + "_dim1_keepdim", {{{3, 5}, dt, Layout::Strided, Values::NonZero}},
        [p](const In& x) { return one(tb::norm(x[0], p, {1}, true)); },
        [p](const RIn& x) { return one(R::norm(x[0], p, {1}, true)); });
  }
  // A zero vector: the gradient is zero (masked), as PyTorch (finite differences agree: 0).
  for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, double(INFINITY)}) {
    const std::string pn = std::isinf(p) ? "inf" : std::to_string(p).substr(0, 3);
    grad_row(
        v, "norm/" + d + "/p" + pn + "_zero_vector", {{{2, 3}, dt, Layout::Contiguous, Values::Zeros}},
        [p](const In& x) { return one(tb::norm(x[0], p, {1})); },
        [p](const RIn& x) { return one(R::norm(x[0], p, {1})); })
        .gradcheck = p >= 1;  // p < 1: |x|^p is not differentiable at 0 (finite differences blow up)
  }
}

// dtype arguments: the gradient comes back in the input's dtype. The float64 rows compute in
// float32, so finite differences at eps = 1e-6 would only see float32 rounding: no gradcheck.
void grad_dtype_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const DType wide = dt == DType::Float32 ? DType::Float64 : DType::Float32;
  const bool exact = dt == DType::Float32;
  grad_row(
      v, "sum/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::sum(x[0], {0}, false, wide)); },
      [wide](const RIn& x) { return one(R::sum(x[0], {0}, false, wide)); })
      .gradcheck = exact;
  grad_row(
      v, "sum/" + d + "/all_dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::sum(x[0], wide)); },
      [wide](const RIn& x) { return one(R::sum(x[0], wide)); })
      .gradcheck = exact;
  grad_row(
      v, "mean/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::mean(x[0], {1}, true, wide)); },
      [wide](const RIn& x) { return one(R::mean(x[0], {1}, true, wide)); })
      .gradcheck = exact;
  grad_row(
      v, "prod/" + d + "/dtype", {{{3, 4}, dt, Layout::Contiguous, Values::NonZero}},
      [wide](const In& x) { return one(tb::prod(x[0], 0, true, wide)); },
      [wide](const RIn& x) { return one(R::prod(x[0], 0, true, wide)); })
      .gradcheck = exact;
  grad_row(
      v, "cumsum/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::cumsum(x[0], 1, wide)); },
      [wide](const RIn& x) { return one(R::cumsum(x[0], 1, wide)); })
      .gradcheck = exact;
}

// prod with zeros: x * m where m holds small integers (0 included), so slices have none, one
// or several zeros; m itself needs no gradient.
void grad_prod_zero_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  for (int64_t hi : {2, 4, 9}) {
    const std::string h = std::to_string(hi);
    const std::vector<Input> in = {{{4, 5}, dt, Layout::Transposed},
                                   {{4, 5}, dt, Layout::Contiguous, Values::Index, hi}};
    grad_row(
        v, "prod/" + d + "/zeros_all_m" + h, in, [](const In& x) { return one(tb::prod(tb::mul(x[0], x[1]))); },
        [](const RIn& x) { return one(R::prod(R::mul(x[0], x[1]))); })
        .wrt = {0};
    grad_row(
        v, "prod/" + d + "/zeros_dim0_m" + h, in, [](const In& x) { return one(tb::prod(tb::mul(x[0], x[1]), 0)); },
        [](const RIn& x) { return one(R::prod(R::mul(x[0], x[1]), 0)); })
        .wrt = {0};
  }
  // Exactly one zero in the whole tensor: x - x[0, 0] (exact at (0, 0)).
  grad_row(
      v, "prod/" + d + "/one_zero", {{{3, 4}, dt, Layout::Transposed}},
      [](const In& x) { return one(tb::prod(tb::add(x[0], x[0].narrow(0, 0, 1).narrow(1, 0, 1), -1))); },
      [](const RIn& x) { return one(R::prod(R::add(x[0], R::narrow(R::narrow(x[0], 0, 0, 1), 1, 0, 1), -1))); });
  grad_row(
      v, "prod/" + d + "/one_zero_dim1", {{{3, 4}, dt}},
      [](const In& x) { return one(tb::prod(tb::add(x[0], x[0].narrow(1, 2, 1), -1), 1)); },
      [](const RIn& x) { return one(R::prod(R::add(x[0], R::narrow(x[0], 1, 2, 1), -1), 1)); });
}

// Ties: small integers as values.
void grad_tie_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const Input ties{{3, 4}, dt, Layout::Transposed, Values::Index, 3};
  no_gradcheck(grad_row(
      v, "max/" + d + "/ties", {ties}, [](const In& x) { return one(tb::max(x[0])); },
      [](const RIn& x) { return one(R::max(x[0])); }));
  no_gradcheck(grad_row(
      v, "min/" + d + "/ties", {ties}, [](const In& x) { return one(tb::min(x[0])); },
      [](const RIn& x) { return one(R::min(x[0])); }));
  no_gradcheck(grad_row(
      v, "amax/" + d + "/ties_dim0", {ties}, [](const In& x) { return one(tb::amax(x[0], {0})); },
      [](const RIn& x) { return one(R::amax(x[0], {0})); }));
  no_gradcheck(grad_row(
      v, "amin/" + d + "/ties_all", {ties}, [](const In& x) { return one(tb::amin(x[0])); },
      [](const RIn& x) { return one(R::amin(x[0])); }));
  no_gradcheck(grad_row(
      v, "norm/" + d + "/inf_ties", {ties}, [](const In& x) { return one(tb::norm(x[0], INFINITY, {1})); },
      [](const RIn& x) { return one(R::norm(x[0], INFINITY, {1})); }));
  no_gradcheck(grad_row(
      v, "max/" + d + "/dim_ties", {ties},
      [](const In& x) {
        auto [a, b] = tb::max(x[0], 0);
        return In{a, b};
      },
      [](const RIn& x) {
        auto [a, b] = R::max(x[0], 0);
        return RIn{a, b};
      }));
}

// 3-D, several dims.
void grad_multi_dim_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const Input x3{{2, 3, 4}, dt, Layout::Strided};
  grad_row(
      v, "sum/" + d + "/dims02_keepdim", {x3},
      [](const In& x) {
        return one(tb::sum(x[0], {0, -1}, true));
      },
      [](const RIn& x) {
        return one(R::sum(x[0], {0, -1}, true));
      });
  grad_row(
      v, "mean/" + d + "/dims02", {x3},
      [](const In& x) {
        return one(tb::mean(x[0], {2, 0}));
      },
      [](const RIn& x) {
        return one(R::mean(x[0], {2, 0}));
      });
  grad_row(
      v, "var/" + d + "/dims01", {x3},
      [](const In& x) {
        return one(tb::var(x[0], {0, 1}));
      },
      [](const RIn& x) {
        return one(R::var(x[0], {0, 1}));
      });
  grad_row(
      v, "std/" + d + "/dims12_keepdim", {x3},
      [](const In& x) {
        return one(tb::std(x[0], {1, 2}, 1, true));
      },
      [](const RIn& x) {
        return one(R::std(x[0], {1, 2}, 1, true));
      });
  grad_row(
      v, "norm/" + d + "/dims02", {x3},
      [](const In& x) {
        return one(tb::norm(x[0], 2, {0, 2}));
      },
      [](const RIn& x) {
        return one(R::norm(x[0], 2, {0, 2}));
      });
  grad_row(
      v, "amax/" + d + "/dims12", {x3},
      [](const In& x) {
        return one(tb::amax(x[0], {1, 2}));
      },
      [](const RIn& x) {
        return one(R::amax(x[0], {1, 2}));
      });
  grad_row(
      v, "logsumexp/" + d + "/dims01_keepdim", {x3},
      [](const In& x) {
        return one(tb::logsumexp(x[0], {0, 1}, true));
      },
      [](const RIn& x) {
        return one(R::logsumexp(x[0], {0, 1}, true));
      });
  grad_row(
      v, "prod/" + d + "/dim2_keepdim", {{{2, 3, 4}, dt, Layout::Strided, Values::NonZero}},
      [](const In& x) { return one(tb::prod(x[0], 2, true)); },
      [](const RIn& x) { return one(R::prod(x[0], 2, true)); });
}

// 0-dim and single-element inputs (sum, prod, max and cumsum of a 0-dim input, norm and
// logsumexp of one element: the value rows "scalar" and "single" above, with `grad` set).
void grad_scalar_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const Input s0{{}, dt};
  grad_row(
      v, "prod/" + d + "/scalar_dim", {s0}, [](const In& x) { return one(tb::prod(x[0], 0)); },
      [](const RIn& x) { return one(R::prod(x[0], 0)); });
  grad_row(
      v, "max/" + d + "/scalar_dim", {s0},
      [](const In& x) {
        auto [a, b] = tb::max(x[0], 0);
        return In{a, b};
      },
      [](const RIn& x) {
        auto [a, b] = R::max(x[0], 0);
        return RIn{a, b};
      });
  // Every reduction that takes a dim list, on a 0-dim input naming dim 0 or -1 (the backward
  // once read sizes[0] of the empty shape).
  for (const int64_t dim : {int64_t(0), int64_t(-1)})
    for (const bool keep : {false, true}) {
      const std::string sfx = std::string("/scalar_dims") + (dim < 0 ? "_neg" : "") + (keep ? "_keepdim" : "");
      const std::vector<int64_t> dl{dim};
      grad_row(
          v, "sum/" + d + sfx, {s0}, [dl, keep](const In& x) { return one(tb::sum(x[0], dl, keep)); },
          [dl, keep](const RIn& x) { return one(R::sum(x[0], dl, keep)); });
      const std::string w = "/" + d + sfx;
      grad_row(
          v, "mean" + w, {s0}, [dl, keep](const In& x) { return one(tb::mean(x[0], dl, keep)); },
          [dl, keep](const RIn& x) { return one(R::mean(x[0], dl, keep)); });
      grad_row(
          v, "var" + w, {s0}, [dl, keep](const In& x) { return one(tb::var(x[0], dl, 0, keep)); },
          [dl, keep](const RIn& x) { return one(R::var(x[0], dl, 0, keep)); });
      grad_row(
          v, "std" + w, {s0}, [dl, keep](const In& x) { return one(tb::std(x[0], dl, 0, keep)); },
          [dl, keep](const RIn& x) { return one(R::std(x[0], dl, 0, keep)); });
      grad_row(
          v, "amax" + w, {s0}, [dl, keep](const In& x) { return one(tb::amax(x[0], dl, keep)); },
          [dl, keep](const RIn& x) { return one(R::amax(x[0], dl, keep)); });
      grad_row(
          v, "logsumexp" + w, {s0}, [dl, keep](const In& x) { return one(tb::logsumexp(x[0], dl, keep)); },
          [dl, keep](const RIn& x) { return one(R::logsumexp(x[0], dl, keep)); });
      grad_row(
          v, "norm" + w, {{{}, dt, Layout::Contiguous, Values::NonZero}},
          [dl, keep](const In& x) { return one(tb::norm(x[0], 2, dl, keep)); },
          [dl, keep](const RIn& x) { return one(R::norm(x[0], 2, dl, keep)); });
    }
  // Constant slices: the mean is exact, so std is exactly 0 and its gradient 0 (sum / n missed by
  // an ulp, leaving std ~1e-17 and a gradient of O(1)). Not gradchecked: std is not smooth at 0.
  for (const double c : {0.1, -7.3}) {
    const std::string n = c > 0 ? "/constant_slices_pos" : "/constant_slices_neg";
    no_gradcheck(grad_row(
        v, "std/" + d + n, {{{5, 4}, dt, Layout::Contiguous, Values::Zeros}},
        [c](const In& x) { return one(tb::std(tb::add(x[0], c), {0}, 1, false)); },
        [c](const RIn& x) { return one(R::std(R::add(x[0], c), {0}, 1, false)); }));
    no_gradcheck(grad_row(
        v, "var/" + d + n, {{{3, 7}, dt, Layout::Transposed, Values::Zeros}},
        [c](const In& x) { return one(tb::var(tb::add(x[0], c), {1}, 0, true)); },
        [c](const RIn& x) { return one(R::var(R::add(x[0], c), {1}, 0, true)); }));
  }
  grad_row(
      v, "var/" + d + "/single_c0", {{{1}, dt}}, [](const In& x) { return one(tb::var(x[0], {0}, 0)); },
      [](const RIn& x) { return one(R::var(x[0], {0}, 0)); });
  // No degrees of freedom on a 0-dim input: PyTorch's whole-reduction rule, inf times the
  // gradient where x is not at its mean -- a NaN x is not (found by opfuzz: log of a negative
  // value, then var with correction 1 gave the engine a NaN gradient, LibTorch -inf).
  no_gradcheck(grad_row(
      v, "var/" + d + "/scalar_dims_c1_nan", {{{}, dt, Layout::Contiguous, Values::Positive}},
      [](const In& x) { return one(tb::var(tb::log(tb::neg(x[0])), {0}, 1)); },
      [](const RIn& x) { return one(R::var(R::log(R::neg(x[0])), {0}, 1)); }));
  // ... and an infinite x is at its mean (PyTorch compares x == mean): NaN, not inf.
  no_gradcheck(grad_row(
      v, "var/" + d + "/scalar_dims_c1_inf", {{{}, dt, Layout::Contiguous, Values::Positive}},
      [](const In& x) { return one(tb::var(tb::exp(tb::mul(x[0], 1e4)), {0}, 1)); },
      [](const RIn& x) { return one(R::var(R::exp(R::mul(x[0], 1e4)), {0}, 1)); }));
}

// Zero-size inputs.
void grad_empty_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const Input e0{{0, 3}, dt};
  grad_row(
      v, "sum/" + d + "/empty", {e0}, [](const In& x) { return one(tb::sum(x[0], {0})); },
      [](const RIn& x) { return one(R::sum(x[0], {0})); });
  grad_row(
      v, "prod/" + d + "/empty", {e0}, [](const In& x) { return one(tb::prod(x[0], 0)); },
      [](const RIn& x) { return one(R::prod(x[0], 0)); });
  grad_row(
      v, "prod/" + d + "/empty_all", {e0}, [](const In& x) { return one(tb::prod(x[0])); },
      [](const RIn& x) { return one(R::prod(x[0])); });
  grad_row(
      v, "cumsum/" + d + "/empty", {e0}, [](const In& x) { return one(tb::cumsum(x[0], 0)); },
      [](const RIn& x) { return one(R::cumsum(x[0], 0)); });
  grad_row(
      v, "amax/" + d + "/empty_rows", {e0}, [](const In& x) { return one(tb::amax(x[0], {1})); },
      [](const RIn& x) { return one(R::amax(x[0], {1})); });
}

// Views taken before the op, and chains of two reductions.
void grad_view_chain_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const Input x234{{2, 3, 4}, dt};
  grad_row(
      v, "sum/" + d + "/view_select_t", {x234}, [](const In& x) { return one(tb::sum(x[0].select(0, 1).t(), {0})); },
      [](const RIn& x) { return one(R::sum(R::t(R::select(x[0], 0, 1)), {0})); });
  grad_row(
      v, "var/" + d + "/view_transpose_narrow", {x234},
      [](const In& x) { return one(tb::var(x[0].transpose(0, 2).narrow(0, 1, 2), {1})); },
      [](const RIn& x) { return one(R::var(R::narrow(R::transpose(x[0], 0, 2), 0, 1, 2), {1})); });
  grad_row(
      v, "max/" + d + "/view_permute", {x234},
      [](const In& x) {
        auto [a, b] = tb::max(x[0].permute({2, 0, 1}), 2);
        return In{a, b};
      },
      [](const RIn& x) {
        auto [a, b] = R::max(R::permute(x[0], {2, 0, 1}), 2);
        return RIn{a, b};
      });
  grad_row(
      v, "cumsum/" + d + "/view_slice", {x234},
      [](const In& x) { return one(tb::cumsum(x[0].slice(2, 0, std::nullopt, 2), 2)); },
      [](const RIn& x) { return one(R::cumsum(R::slice(x[0], 2, 0, std::nullopt, 2), 2)); });
  // Chains of two reductions.
  grad_row(
      v, "chain/" + d + "/logsumexp_mean", {{{3, 4}, dt, Layout::Transposed}},
      [](const In& x) { return one(tb::mean(tb::logsumexp(x[0], {1}))); },
      [](const RIn& x) { return one(R::mean(R::logsumexp(x[0], {1}))); });
  grad_row(
      v, "chain/" + d + "/cumsum_norm", {{{3, 4}, dt}},
      [](const In& x) { return one(tb::norm(tb::cumsum(x[0], 1), 2, {0})); },
      [](const RIn& x) { return one(R::norm(R::cumsum(x[0], 1), 2, {0})); });
  grad_row(
      v, "chain/" + d + "/std_prod", {{{3, 4}, dt, Layout::Strided}},
      [](const In& x) { return one(tb::prod(tb::std(x[0], {1}))); },
      [](const RIn& x) { return one(R::prod(R::std(x[0], {1}))); });
  grad_row(
      v, "chain/" + d + "/amax_sum_twice", {{{3, 4}, dt}},
      [](const In& x) { return one(tb::sum(tb::amax(x[0], {0}, true), {1})); },
      [](const RIn& x) { return one(R::sum(R::amax(x[0], {0}, true), {1})); });
}

}  // namespace

std::vector<OpCase> reduce_cases() {
  std::vector<OpCase> cs;
  sum_mean_prod_rows(cs);
  extrema_rows(cs);
  statistic_rows(cs);
  all_any_rows(cs);
  cumsum_rows(cs);
  error_rows(cs);
  bench_rows(cs);
  bf16_parallel_rows(cs);
  nan_rows(cs);
  column_rows(cs);
  for (DType dt : {DType::Float32, DType::Float64}) {
    grad_layout_rows(cs, dt);
    grad_norm_rows(cs, dt);
    grad_dtype_rows(cs, dt);
    grad_prod_zero_rows(cs, dt);
    grad_tie_rows(cs, dt);
    grad_multi_dim_rows(cs, dt);
    grad_scalar_rows(cs, dt);
    grad_empty_rows(cs, dt);
    grad_view_chain_rows(cs, dt);
  }
  // Under autocast prod is on the float32 list: bf16 inputs compute in float32 (autocast_case.h).
  cs.push_back(autocast_case(
      "prod/bfloat16", {{{6}, DType::BFloat16, Layout::Contiguous, Values::Positive}},
      [](const In& x) { return tb::prod(x[0]); }, [](const RIn& x) { return R::prod(x[0]); }));
  return cs;
}

}  // namespace tb::suites
