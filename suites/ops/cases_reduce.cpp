// Case table of the reduce family (engine/ops/reduce.h vs reference/reduce.h): every op over a
// set of shapes/dims/layouts (outer, inner and non-adjacent reduced dims, zero-size, 0-dim,
// transposed, strided, expanded) for each dtype PyTorch supports, Check::Error rows where
// LibTorch raises, and the bench rows (16M-element full reductions).
#include "engine/autograd/functions.h"
#include "engine/ops/reduce.h"
#include "reference/reduce.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

using DT = DType;
using EV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;
using DimList = std::vector<int64_t>;

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
      {"inner", {5, 7}, Layout::Contiguous, {1}, false},
      {"outer", {9, 20}, Layout::Contiguous, {0}, true},
      {"middle", {3, 4, 5}, Layout::Contiguous, {-2}, false},
      {"zero_kept", {0, 4}, Layout::Contiguous, {1}, false},
      {"scalar", {}, Layout::Contiguous, {0}, true},
      {"transposed", {6, 9}, Layout::Transposed, {1}, false},
      {"strided", {5, 8}, Layout::Strided, {1}, true},
      {"expanded", {4, 6}, Layout::Expanded, {0}, false},
  };
  return v;
}

std::string nm(const std::string& op, DT d, const std::string& v) { return op + "/" + core::name(d) + "/" + v; }

Input in(const Variant& v, DT d, Values vals = Values::Normal) { return Input{v.shape, d, v.layout, vals}; }

template <typename EF, typename RF>
void add_dims_op(std::vector<OpCase>& cs, const std::string& op, std::span<const DT> dts, EF ef, RF rf,
                 Values vals = Values::Normal, Check check = Check::Values) {
  for (DT d : dts)
    for (const Variant& v : dims_variants()) {
      OpCase c{nm(op, d, v.name), {in(v, d, vals)}, nullptr, nullptr, check};
      c.engine = [ef, v](const EV& x) { return one(ef(x[0], v.dims, v.keepdim)); };
      c.reference = [rf, v](const RV& x) { return one(rf(x[0], v.dims, v.keepdim)); };
      cs.push_back(std::move(c));
    }
}

template <typename EF, typename RF>
void add_dim_op(std::vector<OpCase>& cs, const std::string& op, std::span<const DT> dts, EF ef, RF rf,
                Values vals = Values::Normal) {
  for (DT d : dts)
    for (const Variant& v : dim_variants()) {
      OpCase c{nm(op, d, v.name), {in(v, d, vals)}};
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

}  // namespace

std::vector<OpCase> reduce_cases() {
  std::vector<OpCase> cs;
  std::vector<DT> all_dts(std::begin(kFloats), std::end(kFloats));
  all_dts.insert(all_dts.end(), std::begin(kInts), std::end(kInts));
  std::vector<DT> numeric(std::begin(kFloats), std::end(kFloats));
  numeric.push_back(DT::Int64);
  numeric.push_back(DT::Int32);

  // ---- sum, mean, prod ----
  add_dims_op(cs, "sum", all_dts, [](const tb::Tensor& x, const DimList& d, bool k) { return tb::sum(x, d, k); },
              [](const ref::Tensor& x, const DimList& d, bool k) { return ref::sum(x, d, k); });
  add_dims_op(cs, "mean", kFloats, [](const tb::Tensor& x, const DimList& d, bool k) { return tb::mean(x, d, k); },
              [](const ref::Tensor& x, const DimList& d, bool k) { return ref::mean(x, d, k); });
  add_dim_op(cs, "prod", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::prod(x, d, k)); },
             [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::prod(x, d, k)); });
  // LibTorch multiplies float16 along an outer (non-innermost) dim in float16, rounding every
  // partial product (checked in Python: prod over dim 0 of a (9, 2) half tensor differs from the
  // float-accumulated product by an ulp); the engine accumulates in float. Up to 9 factors here,
  // each rounding worth half an ulp (2^-11): rtol 5e-3. Measured worst: 1.3e-3.
  for (OpCase& c : cs)
    if (c.name.starts_with("prod/float16/")) c.tol = Tolerance{5e-3, 1e-5};
  for (DT d : all_dts) {
    cs.push_back({nm("prod", d, "all"), {Input{{3, 4}, d}}, [](const EV& x) { return one(tb::prod(x[0])); },
                  [](const RV& x) { return one(ref::prod(x[0])); }});
    cs.push_back({nm("sum", d, "full_noargs"), {Input{{4, 9}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::sum(x[0])); }, [](const RV& x) { return one(ref::sum(x[0])); }});
  }
  // dtype= arguments: the input is cast first.
  cs.push_back({"sum/bool/dtype_float32", {Input{{5, 6}, DT::Bool}},
                [](const EV& x) { return one(tb::sum(x[0], {1}, false, DT::Float32)); },
                [](const RV& x) { return one(ref::sum(x[0], {1}, false, DT::Float32)); }});
  cs.push_back({"sum/float32/dtype_float64", {Input{{5, 6}}},
                [](const EV& x) { return one(tb::sum(x[0], DT::Float64)); },
                [](const RV& x) { return one(ref::sum(x[0], DT::Float64)); }});
  cs.push_back({"mean/int64/dtype_float32", {Input{{5, 6}, DT::Int64}},
                [](const EV& x) { return one(tb::mean(x[0], {0}, true, DT::Float32)); },
                [](const RV& x) { return one(ref::mean(x[0], {0}, true, DT::Float32)); }});
  cs.push_back({"prod/int32/dtype_float64", {Input{{5, 6}, DT::Int32}},
                [](const EV& x) { return one(tb::prod(x[0], 1, false, DT::Float64)); },
                [](const RV& x) { return one(ref::prod(x[0], 1, false, DT::Float64)); }});
  // out= variants: out starts as a zero tensor of the result's shape.
  for (DT d : {DT::Float32, DT::Int64}) {
    cs.push_back({nm("sum_out", d, "dim1"), {Input{{4, 7}, d}, Input{{4}, d, Layout::Contiguous, Values::Zeros}},
                  [](const EV& x) { tb::Tensor o = x[1]; return one(tb::sum_out(o, x[0], {1})); },
                  [](const RV& x) { ref::Tensor o = x[1]; return one(ref::sum_out(o, x[0], {1})); }});
  }
  cs.push_back({"mean_out/float32/dim0", {Input{{4, 7}}, Input{{1, 7}, DT::Float32, Layout::Contiguous, Values::Zeros}},
                [](const EV& x) { tb::Tensor o = x[1]; return one(tb::mean_out(o, x[0], {0}, true)); },
                [](const RV& x) { ref::Tensor o = x[1]; return one(ref::mean_out(o, x[0], {0}, true)); }});

  // ---- max, min, amax, amin, argmax, argmin ----
  for (DT d : all_dts) {
    for (const Variant& v : dims_variants()) {
      if (v.shape.size() > 0 && v.name.rfind("zero", 0) == 0) continue;  // error rows below
      cs.push_back({nm("max", d, v.name), {in(v, d)}, [](const EV& x) { return one(tb::max(x[0])); },
                    [](const RV& x) { return one(ref::max(x[0])); }});
      cs.push_back({nm("min", d, v.name), {in(v, d)}, [](const EV& x) { return one(tb::min(x[0])); },
                    [](const RV& x) { return one(ref::min(x[0])); }});
      const DimList dims = v.dims;
      const bool k = v.keepdim;
      cs.push_back({nm("amax", d, v.name), {in(v, d)}, [=](const EV& x) { return one(tb::amax(x[0], dims, k)); },
                    [=](const RV& x) { return one(ref::amax(x[0], dims, k)); }});
      cs.push_back({nm("amin", d, v.name), {in(v, d)}, [=](const EV& x) { return one(tb::amin(x[0], dims, k)); },
                    [=](const RV& x) { return one(ref::amin(x[0], dims, k)); }});
    }
  }
  add_dim_op(cs, "max_dim", all_dts,
             [](const tb::Tensor& x, int64_t d, bool k) { auto [v, i] = tb::max(x, d, k); return EV{v, i}; },
             [](const ref::Tensor& x, int64_t d, bool k) { auto [v, i] = ref::max(x, d, k); return RV{v, i}; });
  add_dim_op(cs, "min_dim", all_dts,
             [](const tb::Tensor& x, int64_t d, bool k) { auto [v, i] = tb::min(x, d, k); return EV{v, i}; },
             [](const ref::Tensor& x, int64_t d, bool k) { auto [v, i] = ref::min(x, d, k); return RV{v, i}; });
  add_dim_op(cs, "argmax", numeric, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::argmax(x, d, k)); },
             [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::argmax(x, d, k)); });
  add_dim_op(cs, "argmin", numeric, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::argmin(x, d, k)); },
             [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::argmin(x, d, k)); });
  for (DT d : numeric) {
    cs.push_back({nm("argmax", d, "flat"), {Input{{6, 5}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::argmax(x[0])); }, [](const RV& x) { return one(ref::argmax(x[0])); }});
    cs.push_back({nm("argmin", d, "flat_keepdim"), {Input{{6, 5}, d}},
                  [](const EV& x) { return one(tb::argmin(x[0], std::nullopt, true)); },
                  [](const RV& x) { return one(ref::argmin(x[0], std::nullopt, true)); }});
  }

  // ---- var, std (correction 0, 1, 2), norm, logsumexp ----
  for (double corr : {1.0, 0.0, 2.0}) {
    const std::string suffix = corr == 1 ? "" : "_corr" + std::to_string(int(corr));
    add_dims_op(cs, "var" + suffix, kFloats,
                [corr](const tb::Tensor& x, const DimList& d, bool k) { return tb::var(x, d, corr, k); },
                [corr](const ref::Tensor& x, const DimList& d, bool k) { return ref::var(x, d, corr, k); });
    if (corr != 2)
      add_dims_op(cs, "std" + suffix, kFloats,
                  [corr](const tb::Tensor& x, const DimList& d, bool k) { return tb::std(x, d, corr, k); },
                  [corr](const ref::Tensor& x, const DimList& d, bool k) { return ref::std(x, d, corr, k); });
  }
  for (double p : {2.0, 1.0, 3.0, 0.0}) {
    const std::string name = p == 2 ? "norm" : "norm_p" + std::to_string(int(p));
    add_dims_op(cs, name, kFloats, [p](const tb::Tensor& x, const DimList& d, bool k) { return tb::norm(x, p, d, k); },
                [p](const ref::Tensor& x, const DimList& d, bool k) { return ref::norm(x, p, d, k); });
    // LibTorch's p-norm accumulates |x|^p in float without cascading: on 3000 elements its
    // measured error vs float64 is ~2e-4 absolute (~1e-7 to 2e-6 relative), the engine's 3e-5.
    for (OpCase& c : cs)
      if (c.name == name + "/float32/long") c.tol = Tolerance{1e-5, 1e-5};
  }
  for (double p : {INFINITY, -INFINITY})
    for (DT d : kFloats)
      for (const Variant& v : dims_variants()) {
        if (v.name.rfind("zero", 0) == 0) continue;
        cs.push_back({nm(p > 0 ? "norm_inf" : "norm_neginf", d, v.name), {in(v, d)},
                      [p, v](const EV& x) { return one(tb::norm(x[0], p, v.dims, v.keepdim)); },
                      [p, v](const RV& x) { return one(ref::norm(x[0], p, v.dims, v.keepdim)); }});
      }
  std::vector<DT> lse_dts(std::begin(kFloats), std::end(kFloats));
  lse_dts.push_back(DT::Int64);
  for (DT d : lse_dts)
    for (const Variant& v : dims_variants()) {
      if (v.dims.empty()) continue;  // LibTorch's logsumexp rejects an empty dim list
      cs.push_back({nm("logsumexp", d, v.name), {in(v, d)},
                    [v](const EV& x) { return one(tb::logsumexp(x[0], v.dims, v.keepdim)); },
                    [v](const RV& x) { return one(ref::logsumexp(x[0], v.dims, v.keepdim)); }});
    }

  // ---- all, any ----
  for (DT d : all_dts) {
    for (Values vals : {Values::Bool, Values::Normal}) {
      const std::string tag = vals == Values::Bool ? "" : "_values";
      cs.push_back({nm("all", d, "full" + tag), {Input{{3, 5}, d, Layout::Transposed, vals}},
                    [](const EV& x) { return one(tb::all(x[0])); }, [](const RV& x) { return one(ref::all(x[0])); }});
      cs.push_back({nm("any", d, "full" + tag), {Input{{3, 5}, d, Layout::Contiguous, vals}},
                    [](const EV& x) { return one(tb::any(x[0])); }, [](const RV& x) { return one(ref::any(x[0])); }});
    }
    cs.push_back({nm("all", d, "empty"), {Input{{0, 3}, d}}, [](const EV& x) { return one(tb::all(x[0])); },
                  [](const RV& x) { return one(ref::all(x[0])); }});
    cs.push_back({nm("any", d, "empty"), {Input{{0, 3}, d}}, [](const EV& x) { return one(tb::any(x[0])); },
                  [](const RV& x) { return one(ref::any(x[0])); }});
  }
  add_dim_op(cs, "all_dim", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::all(x, d, k)); },
             [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::all(x, d, k)); }, Values::Bool);
  add_dim_op(cs, "any_dim", all_dts, [](const tb::Tensor& x, int64_t d, bool k) { return one(tb::any(x, d, k)); },
             [](const ref::Tensor& x, int64_t d, bool k) { return one(ref::any(x, d, k)); }, Values::Bool);

  // ---- cumsum ----
  add_dim_op(cs, "cumsum", all_dts, [](const tb::Tensor& x, int64_t d, bool) { return one(tb::cumsum(x, d)); },
             [](const ref::Tensor& x, int64_t d, bool) { return one(ref::cumsum(x, d)); });
  cs.push_back({"cumsum/int32/dtype_int32", {Input{{4, 6}, DT::Int32}},
                [](const EV& x) { return one(tb::cumsum(x[0], 1, DT::Int32)); },
                [](const RV& x) { return one(ref::cumsum(x[0], 1, DT::Int32)); }});
  cs.push_back({"cumsum/float32/long", {Input{{20000}}}, [](const EV& x) { return one(tb::cumsum(x[0], 0)); },
                [](const RV& x) { return one(ref::cumsum(x[0], 0)); }});
  for (DT d : {DT::Float32, DT::Int64}) {
    cs.push_back({nm("cumsum_", d, "inplace"), {Input{{4, 6}, d}},
                  [](const EV& x) { tb::Tensor t = x[0]; return one(tb::cumsum_(t, 0)); },
                  [](const RV& x) { ref::Tensor t = x[0]; return one(ref::cumsum_(t, 0)); }});
  }

  // ---- errors (both sides must raise) ----
  for (DT d : kInts) {
    cs.push_back(error_case(nm("mean", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::mean(x[0])); },
                            [](const RV& x) { return one(ref::mean(x[0])); }));
    cs.push_back(error_case(nm("var", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::var(x[0], {1})); },
                            [](const RV& x) { return one(ref::var(x[0], {1})); }));
    cs.push_back(error_case(nm("std", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::std(x[0])); },
                            [](const RV& x) { return one(ref::std(x[0])); }));
    cs.push_back(error_case(nm("norm", d, "error_dtype"), Input{{3, 4}, d}, [](const EV& x) { return one(tb::norm(x[0], 2)); },
                            [](const RV& x) { return one(ref::norm(x[0], 2)); }));
  }
  cs.push_back(error_case("argmax/bool/error_dtype", Input{{3, 4}, DT::Bool}, [](const EV& x) { return one(tb::argmax(x[0], 1)); },
                          [](const RV& x) { return one(ref::argmax(x[0], 1)); }));
  cs.push_back(error_case("max/float32/error_empty", Input{{0, 3}}, [](const EV& x) { return one(tb::max(x[0])); },
                          [](const RV& x) { return one(ref::max(x[0])); }));
  cs.push_back(error_case("max_dim/float32/error_empty_dim", Input{{0, 3}},
                          [](const EV& x) { return one(std::get<0>(tb::max(x[0], 0))); },
                          [](const RV& x) { return one(std::get<0>(ref::max(x[0], 0))); }));
  cs.push_back(error_case("amin/float32/error_empty_dim", Input{{3, 0}},
                          [](const EV& x) { return one(tb::amin(x[0], {1})); }, [](const RV& x) { return one(ref::amin(x[0], {1})); }));
  cs.push_back(error_case("argmax/float32/error_empty", Input{{0, 3}}, [](const EV& x) { return one(tb::argmax(x[0])); },
                          [](const RV& x) { return one(ref::argmax(x[0])); }));
  cs.push_back(error_case("norm_inf/float32/error_empty", Input{{0, 3}},
                          [](const EV& x) { return one(tb::norm(x[0], INFINITY)); },
                          [](const RV& x) { return one(ref::norm(x[0], INFINITY)); }));
  cs.push_back(error_case("sum/float32/error_dup_dims", Input{{3, 4}}, [](const EV& x) { return one(tb::sum(x[0], {1, -1})); },
                          [](const RV& x) { return one(ref::sum(x[0], {1, -1})); }));
  cs.push_back(error_case("sum/float32/error_dim_range", Input{{3, 4}}, [](const EV& x) { return one(tb::sum(x[0], {2})); },
                          [](const RV& x) { return one(ref::sum(x[0], {2})); }));
  cs.push_back(error_case("max_dim/float32/error_dim_range", Input{{3, 4}},
                          [](const EV& x) { return one(std::get<1>(tb::max(x[0], -3))); },
                          [](const RV& x) { return one(std::get<1>(ref::max(x[0], -3))); }));
  cs.push_back(error_case("cumsum/float32/error_dim_range", Input{{3, 4}}, [](const EV& x) { return one(tb::cumsum(x[0], 2)); },
                          [](const RV& x) { return one(ref::cumsum(x[0], 2)); }));
  // ---- bench rows: 16M-element full reductions (their correctness rows check the cascade) ----
  constexpr int64_t k16M = 16777216;
  for (DT d : {DT::Float32, DT::BFloat16}) {
    cs.push_back(bench_case(nm("sum", d, "16M"), d, k16M, [](const EV& x) { return one(tb::sum(x[0])); },
                            [](const RV& x) { return one(ref::sum(x[0])); }));
    // 16M standard normals: partial sums reach ~4096, where a float32 ulp is 4.9e-4, and the two
    // summation orders (our pairwise tree, LibTorch's cascade) land a few such ulps apart. Measured
    // against float64 over seeds 1-8: engine error <= 1.1e-3, LibTorch's <= 1.9e-3, their
    // difference <= 2.9e-3; a total near zero makes rtol useless, hence an absolute 1e-2.
    if (d == DT::Float32) cs.back().tol = Tolerance{1.3e-6, 1e-2};
  }
  for (DT d : {DT::Float32, DT::BFloat16}) {
    cs.push_back(bench_case(nm("mean", d, "16M"), d, k16M, [](const EV& x) { return one(tb::mean(x[0])); },
                            [](const RV& x) { return one(ref::mean(x[0])); }));
    cs.push_back(bench_case(nm("max", d, "16M"), d, k16M, [](const EV& x) { return one(tb::max(x[0])); },
                            [](const RV& x) { return one(ref::max(x[0])); }));
  }
  {
    OpCase c{"sum/float32/dim0_4096x4096", {Input{{4096, 4096}}}, [](const EV& x) { return one(tb::sum(x[0], {0})); },
             [](const RV& x) { return one(ref::sum(x[0], {0})); }};
    // Column sums of 4096 float32 values (|partial sums| ~ 64): measured max error vs float64
    // 2.5e-5 for the engine and 3.5e-5 for LibTorch, so they may differ by ~6e-5 > the default.
    c.tol = Tolerance{1.3e-6, 1e-4};
    c.bench = true;
    c.bytes = 4096.0 * 4096 * 4 + 4096.0 * 4;
    c.flops = 4096.0 * 4096;
    cs.push_back(std::move(c));
  }
  // NaN anywhere in a long row must come out of every lane of the vectorised leaves: planted in
  // the first 64-element step, a tail and the second leaf (rows of 5000 floats).
  const auto plant = [](tb::Tensor x) {
    x = x.clone();
    float* p = x.data_ptr<float>();
    for (int64_t r = 0; r < x.size(0); ++r) p[r * x.size(1) + (r * 1237 + 5) % x.size(1)] = NAN;
    return x;
  };
  using Reduction = std::pair<std::function<tb::Tensor(const tb::Tensor&)>, std::function<ref::Tensor(const ref::Tensor&)>>;
  const std::vector<std::pair<std::string, Reduction>> nan_ops = {
      {"sum", {[](auto& x) { return tb::sum(x, {1}); }, [](auto& x) { return ref::sum(x, {1}); }}},
      {"amax", {[](auto& x) { return tb::amax(x, {1}); }, [](auto& x) { return ref::amax(x, {1}); }}},
      {"amin", {[](auto& x) { return tb::amin(x, {1}); }, [](auto& x) { return ref::amin(x, {1}); }}},
      {"norm_inf", {[](auto& x) { return tb::norm(x, INFINITY, {1}); }, [](auto& x) { return ref::norm(x, INFINITY, {1}); }}},
  };
  for (const auto& [name, fns] : nan_ops) {
    cs.push_back({name + "/float32/nan_rows", {{{4, 5000}, DT::Float32}},
                  [plant, f = fns.first](const EV& in) { return one(f(plant(in[0]))); },
                  [plant, f = fns.second](const RV& in) { return one(f(ref::to_ref(plant(ref::from_ref(in[0]))))); }});
  }
  return cs;
}

}  // namespace tb::suites
