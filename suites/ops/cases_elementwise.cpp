// The elementwise family's case table (engine/ops/elementwise.h and
// engine/autograd/functions/elementwise.cpp vs reference/elementwise.h). Rows are built by loops:
// every op over every dtype it supports, in awkward layouts (transposed, strided with offset,
// expanded with stride 0, 0-dim, a zero-size dim, odd sizes, one size past the parallel grain),
// with broadcasting, mixed dtypes, in-place and out= forms, and Check::Error rows wherever LibTorch
// raises. The float32/float64 rows of differentiable ops are also gradient rows (`grad`), with
// extra rows for one element, a view taken inside the op and a chain with a second op; the fused
// activations also in bfloat16 and past the parallel grain. The 16M rows at the end are the
// benchmarks.
#include <functional>

#include "suites/ops/cases_elementwise.h"

#include "reference/loss.h"
#include "reference/views.h"

namespace tb::suites {

namespace {

using namespace elementwise_rows;

bool is_float(DType d) { return core::is_floating(d); }

// ------------------------------------------------------------------ unary ops
enum class UKind {
  FloatMath,     // any dtype; integers and bool compute in float32 (so in place on them raises)
  Numeric,       // dtype-preserving; bool raises
  FloatingOnly,  // floating dtypes only
  Any,           // any dtype, dtype-preserving (sign) or bool result (logical_not, predicates)
};

struct UnarySpec {
  std::string name, variant;  // case name: name/dtype/variant+layout
  std::function<Tn(const Tn&)> f;
  std::function<Tn&(Tn&)> fi;             // in place (may be empty)
  std::function<Tn&(Tn&, const Tn&)> fo;  // out= (may be empty)
  std::function<RT(const RT&)> r, ri;
  std::function<RT(const RT&, const RT&)> ro;
  UKind kind = UKind::FloatMath;
  Values values = Values::Normal;
  bool bool_result = false;
  bool out_transposed = true;  // see gelu below
  // Differentiable forms (tb::autograd): with them the float32/float64 rows of kGradShapes, and
  // the extra rows of grad_unary_rows, are also gradient rows.
  std::function<Tn(const Tn&)> g;
  std::function<void(Tn&)> gi;        // in place
  std::optional<Values> grad_values;  // inputs of the gradient rows, when not `values`
  bool hot = false;                   // fused backward kernel: gradient rows also past kParallelGrain and in bfloat16
};

struct UShape {
  const char* name;
  Shape shape;
  Layout layout;
};
const std::vector<UShape> kUnaryShapes = {
    {"contig", {5, 7}, C}, {"transposed", {6, 9}, Tr}, {"strided", {4, 11}, St}, {"expanded", {3, 5}, Ex},
    {"scalar", {}, C},     {"empty", {0, 3}, C},       {"odd", {1031}, C},
};

// The unary shapes whose float32/float64 rows are also gradient rows (of specs with `g`).
bool grad_shape(const std::string& name) {
  return name == "contig" || name == "transposed" || name == "strided" || name == "expanded" || name == "scalar" ||
         name == "empty";
}

}  // namespace

void elementwise_rows::grad_unary_rows(std::vector<OpCase>& v, const std::string& base,
                                       const std::function<Tn(const Tn&)>& g, const std::function<RT(const RT&)>& r,
                                       DType d, Values vals) {
  auto row = [&](const char* name, Input in, EngineFn e, RefFn rf) {
    v.push_back(make_grad_case(base + name, {std::move(in)}, std::move(e), std::move(rf)));
  };
  row(
      "one", {{1}, d, C, vals}, [g](const In& x) { return one(g(x[0])); }, [r](const RIn& x) { return one(r(x[0])); });
  // A view taken inside the lambda: the gradient must land in the right elements of x.
  row(
      "view", {{4, 5}, d, C, vals}, [g](const In& x) { return one(g(x[0].t().narrow(0, 1, 3))); },
      [r](const RIn& x) { return one(r(R::narrow(R::t(x[0]), 0, 1, 3))); });
  // Chained with mul: x reaches the output along two paths.
  row(
      "chain", {{2, 3, 4}, d, Tr, vals}, [g](const In& x) { return one(tb::mul(g(x[0]), x[0])); },
      [r](const RIn& x) { return one(R::mul(r(x[0]), x[0])); });
}

void elementwise_rows::grad_inplace_rows(std::vector<OpCase>& v, const std::string& base,
                                         const std::function<void(Tn&)>& f, const std::function<RT(const RT&)>& r,
                                         DType d, Values vals, const char* skip) {
  struct Shaped {
    const char* name;
    Shape shape;
    Layout layout;
  };
  // No expanded layout: a clone of an expanded tensor is dense on both sides, nothing new.
  const Shaped shapes[] = {{"contig", {5, 7}, C},   {"transposed", {6, 9}, Tr},
                           {"strided", {3, 5}, St}, {"scalar", {}, C},
                           {"one", {1}, C},         {"empty", {0, 3}, C}};
  for (const Shaped& sh : shapes) {
    if (skip && sh.name == std::string(skip)) continue;
    v.push_back(make_grad_case(
        base + sh.name, {{sh.shape, d, sh.layout, vals}},
        [f](const In& x) {
          Tn y = x[0].clone();
          f(y);
          return one(y);
        },
        [r](const RIn& x) { return one(r(R::clone(x[0]))); }));
  }
  // In place on a view of a non-leaf: the base's history is rewritten (CopySlices).
  v.push_back(make_grad_case(
      base + "view", {{{3, 4}, d, Tr, vals}},
      [f](const In& x) {
        Tn y = tb::mul(x[0], 2);
        Tn w = y.narrow(1, 1, 2);
        f(w);
        return one(tb::mul(y, x[0]));
      },
      [r](const RIn& x) {
        RT y = R::mul(x[0], 2);
        r(R::narrow(y, 1, 1, 2));
        return one(R::mul(y, x[0]));
      }));
}

namespace {

bool unary_supports(UKind k, DType d) {
  switch (k) {
    case UKind::Numeric: return d != DType::Bool;
    case UKind::FloatingOnly: return is_float(d);
    default: return true;
  }
}
DType unary_result(const UnarySpec& s, DType d) {
  if (s.bool_result) return DType::Bool;
  return s.kind == UKind::FloatMath ? O::to_float_dtype(d) : d;
}

void unary_rows(std::vector<OpCase>& v, const UnarySpec& s) {
  for (DType d : kAll) {
    const std::string base = s.name + "/" + dn(d) + "/" + s.variant;
    auto f = s.f;
    auto r = s.r;
    EngineFn e = [f](const In& in) { return one(f(in[0])); };
    RefFn rf = [r](const RIn& in) { return one(r(in[0])); };
    if (!unary_supports(s.kind, d)) {
      add_row(v, base + "error", {{{5, 7}, d, C, s.values}}, e, rf, Check::Error);
      continue;
    }
    auto g = s.g;
    EngineFn eg = [g](const In& in) { return one(g(in[0])); };
    const Values gv = s.grad_values.value_or(s.values);
    // A value row, which is also a gradient row when `grad`.
    auto row = [&](const std::string& name, Shape shape, Layout l, bool grad) {
      add_row(v, name, {{std::move(shape), d, l, grad ? gv : s.values}}, grad ? eg : e, rf);
      v.back().grad = grad;
    };
    for (const UShape& sh : kUnaryShapes)
      row(base + sh.name, sh.shape, sh.layout,
          g && ((grad_dtype(d) && grad_shape(sh.name)) ||
                (s.hot && d == DType::BFloat16 && std::string_view(sh.name) == "strided")));
    if (d == DType::Float32 || d == DType::BFloat16)  // past kParallelGrain: the two-thread split
      row(base + "large", {70001}, C, g && s.hot);
    if (g && grad_dtype(d)) grad_unary_rows(v, base, g, r, d, gv);
    const DType rd = unary_result(s, d);
    if (s.fi) {
      auto fi = s.fi;
      auto ri = s.ri;
      EngineFn ei = [fi](const In& in) {
        Tn x = in[0];
        fi(x);
        return one(x);
      };
      RefFn rfi = [ri](const RIn& in) { return one(ri(in[0])); };
      const std::string ib = s.name + "_/" + dn(d) + "/" + s.variant;
      // The result must be castable to self's dtype (exp_ of an int tensor raises).
      if (core::category(rd) > core::category(d)) {
        add_row(v, ib + "error", {{{5, 7}, d, C, s.values}}, ei, rfi, Check::Error);
      } else if (s.gi && grad_dtype(d)) {
        // Gradient rows too: in place on a clone (a leaf that requires grad may not be modified).
        grad_inplace_rows(v, ib, s.gi, s.ri, d, s.grad_values.value_or(s.values));
        if (d == DType::Float32) add_row(v, ib + "expanded_error", {{{3, 5}, d, Ex, s.values}}, ei, rfi, Check::Error);
      } else {
        add_row(v, ib + "contig", {{{5, 7}, d, C, s.values}}, ei, rfi);
        add_row(v, ib + "transposed", {{{6, 9}, d, Tr, s.values}}, ei, rfi);
        if (d == DType::Float32)  // writing through an expanded self is an error
          add_row(v, ib + "expanded_error", {{{3, 5}, d, Ex, s.values}}, ei, rfi, Check::Error);
      }
    }
    if (s.fo) {
      auto fo = s.fo;
      auto ro = s.ro;
      EngineFn eo = [fo](const In& in) {
        Tn o = in[1];
        fo(o, in[0]);
        return one(o);
      };
      RefFn rfo = [ro](const RIn& in) { return one(ro(in[1], in[0])); };
      const std::string ob = s.name + "_out/" + dn(d) + "/" + s.variant;
      add_row(v, ob + "contig", {{{5, 7}, d, C, s.values}, {{5, 7}, rd, C, Values::Zeros}}, eo, rfo);
      if (s.out_transposed)
        add_row(v, ob + "transposed_out", {{{6, 9}, d, C, s.values}, {{6, 9}, rd, Tr, Values::Zeros}}, eo, rfo);
      add_row(v, ob + "resize", {{{5, 7}, d, C, s.values}, {{0}, rd, C, Values::Zeros}}, eo, rfo);
      if (d == DType::Float32 && !s.bool_result) {
        // Only the float-promoting ops (exp, ...) cast into out; neg, abs, sign and the
        // activations require out's dtype to be the input's, as in LibTorch.
        add_row(v, ob + "cast_f64", {{{5, 7}, d, C, s.values}, {{5, 7}, DType::Float64, C, Values::Zeros}}, eo, rfo,
                s.kind == UKind::FloatMath ? Check::Values : Check::Error);
        add_row(v, ob + "int_error", {{{5, 7}, d, C, s.values}, {{5, 7}, DType::Int32, C, Values::Zeros}}, eo, rfo,
                Check::Error);
      }
    }
  }
}

std::vector<UnarySpec> unary_specs() {
  using U = UKind;
  std::vector<UnarySpec> u;
  auto full = [&](std::string n, Tn (*f)(const Tn&), Tn& (*fi)(Tn&), Tn& (*fo)(Tn&, const Tn&), RT (*r)(const RT&),
                  RT (*ri)(const RT&), RT (*ro)(const RT&, const RT&), U k, Values val = Values::Normal) {
    UnarySpec s;
    s.name = std::move(n), s.f = f, s.fi = fi, s.fo = fo, s.r = r, s.ri = ri, s.ro = ro, s.kind = k, s.values = val;
    u.push_back(std::move(s));
  };
  // The differentiable forms of the last spec added.
  auto grad = [&](Tn (*g)(const Tn&), Tn& (*gi)(Tn&) = nullptr) {
    u.back().g = g;
    if (gi) u.back().gi = [gi](Tn& x) { gi(x); };
  };
  full("exp", tb::exp, tb::exp_, tb::exp_out, R::exp, R::exp_, R::exp_out, U::FloatMath);
  grad(tb::exp, tb::exp_);
  full("expm1", tb::expm1, tb::expm1_, tb::expm1_out, R::expm1, R::expm1_, R::expm1_out, U::FloatMath);
  grad(tb::expm1);
  full("log", tb::log, tb::log_, tb::log_out, R::log, R::log_, R::log_out, U::FloatMath, Values::Positive);
  grad(tb::log);
  full("log1p", tb::log1p, tb::log1p_, tb::log1p_out, R::log1p, R::log1p_, R::log1p_out, U::FloatMath,
       Values::Positive);
  grad(tb::log1p);
  full("sqrt", tb::sqrt, tb::sqrt_, tb::sqrt_out, R::sqrt, R::sqrt_, R::sqrt_out, U::FloatMath, Values::Positive);
  grad(tb::sqrt);
  full("rsqrt", tb::rsqrt, tb::rsqrt_, tb::rsqrt_out, R::rsqrt, R::rsqrt_, R::rsqrt_out, U::FloatMath,
       Values::Positive);
  grad(tb::rsqrt);
  full("reciprocal", tb::reciprocal, tb::reciprocal_, tb::reciprocal_out, R::reciprocal, R::reciprocal_,
       R::reciprocal_out, U::FloatMath, Values::NonZero);
  grad(tb::reciprocal);
  full("sin", tb::sin, tb::sin_, tb::sin_out, R::sin, R::sin_, R::sin_out, U::FloatMath);
  grad(tb::sin);
  full("cos", tb::cos, tb::cos_, tb::cos_out, R::cos, R::cos_, R::cos_out, U::FloatMath);
  grad(tb::cos);
  full("tanh", tb::tanh, tb::tanh_, tb::tanh_out, R::tanh, R::tanh_, R::tanh_out, U::FloatMath);
  grad(tb::tanh, tb::tanh_);
  full("sigmoid", tb::sigmoid, tb::sigmoid_, tb::sigmoid_out, R::sigmoid, R::sigmoid_, R::sigmoid_out, U::FloatMath);
  grad(tb::sigmoid, tb::sigmoid_);
  full("neg", tb::neg, tb::neg_, tb::neg_out, R::neg, R::neg_, R::neg_out, U::Numeric);
  grad(tb::neg, tb::neg_);
  full("abs", tb::abs, tb::abs_, tb::abs_out, R::abs, R::abs_, R::abs_out, U::Numeric);
  grad(tb::abs);
  full("sign", tb::sign, tb::sign_, tb::sign_out, R::sign, R::sign_, R::sign_out, U::Any);
  grad(tb::sign);
  full("logical_not", tb::logical_not, tb::logical_not_, tb::logical_not_out, R::logical_not, R::logical_not_,
       R::logical_not_out, U::Any);
  u.back().bool_result = true;
  full("relu", tb::relu, tb::relu_, nullptr, R::relu, R::relu_, nullptr, U::Numeric);
  grad(tb::relu, tb::relu_);
  full("silu", tb::silu, tb::silu_, tb::silu_out, R::silu, R::silu_, R::silu_out, U::FloatingOnly);
  grad(tb::silu);
  for (std::string mode : {"none", "tanh"}) {
    UnarySpec s;
    s.name = "gelu", s.variant = mode + "_", s.kind = U::FloatingOnly;
    // LibTorch 2.x's gelu_out(approximate="none") leaves a non-contiguous out untouched (all
    // zeros, checked in Python), so that row would test LibTorch's bug, not the engine.
    s.out_transposed = mode != "none";
    s.f = [mode](const Tn& x) { return tb::gelu(x, mode); };
    s.fi = [mode](Tn& x) -> Tn& { return tb::gelu_(x, mode); };
    s.fo = [mode](Tn& o, const Tn& x) -> Tn& { return tb::gelu_out(o, x, mode); };
    s.r = [mode](const RT& x) { return R::gelu(x, mode); };
    s.ri = [mode](const RT& x) { return R::gelu_(x, mode); };
    s.ro = [mode](const RT& o, const RT& x) { return R::gelu_out(o, x, mode); };
    // The gradient rows of gelu "none" are named gelu/<dtype>/<layout> (cases_elementwise_grad.cpp).
    if (mode == "tanh") s.g = [](const Tn& x) { return tb::gelu(x, "tanh"); }, s.hot = true;
    u.push_back(std::move(s));
  }
  {
    UnarySpec s;  // default beta/threshold, and beta 2 / threshold 1 so both branches are taken
    s.name = "softplus", s.kind = U::FloatingOnly;
    s.f = [](const Tn& x) { return tb::softplus(x); };
    s.fo = [](Tn& o, const Tn& x) -> Tn& { return tb::softplus_out(o, x); };
    s.r = [](const RT& x) { return R::softplus(x); };
    s.ro = [](const RT& o, const RT& x) { return R::softplus_out(o, x); };
    s.g = [](const Tn& x) { return tb::softplus(x); }, s.hot = true;
    u.push_back(s);
    s.g = nullptr, s.hot = false;  // beta 2 / threshold 1 has gradient rows of its own (beta2_th1)
    s.variant = "beta2_";
    s.f = [](const Tn& x) { return tb::softplus(x, 2, 1); };
    s.fo = [](Tn& o, const Tn& x) -> Tn& { return tb::softplus_out(o, x, 2, 1.0); };
    s.r = [](const RT& x) { return R::softplus(x, 2, 1); };
    s.ro = [](const RT& o, const RT& x) { return R::softplus_out(o, x, 2, 1.0); };
    u.push_back(std::move(s));
  }
  for (auto [n, f, r] : {std::tuple{"isnan", &tb::isnan, &R::isnan}, std::tuple{"isinf", &tb::isinf, &R::isinf},
                         std::tuple{"isfinite", &tb::isfinite, &R::isfinite}}) {
    UnarySpec s;
    s.name = n, s.f = f, s.r = r, s.kind = U::Any, s.bool_result = true;
    u.push_back(std::move(s));
  }
  for (UnarySpec& k : u) {
    // NonZero keeps finite differences off the kink at 0.
    if (k.name == "abs" || k.name == "sign" || k.name == "relu") k.grad_values = Values::NonZero;
    if (k.name == "tanh" || k.name == "sigmoid" || k.name == "relu" || k.name == "silu") k.hot = true;
  }
  return u;
}

// Rows whose inputs need NaN or infinity: made inside the op (log of negatives, x / 0).
void special_unary_rows(std::vector<OpCase>& v) {
  for (DType d : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const std::vector<Input> nan_in = {{{5, 7}, d}};
    const std::vector<Input> inf_in = {{{5, 7}, d}, {{5, 7}, d, C, Values::Zeros}};
    auto add_nan = [&](const std::string& n, std::function<Tn(const Tn&)> f, std::function<RT(const RT&)> r) {
      add_row(
          v, n + "/" + dn(d) + "/nan", nan_in, [f](const In& in) { return one(f(tb::log(in[0]))); },
          [r](const RIn& in) { return one(r(R::log(in[0]))); });
      add_row(
          v, n + "/" + dn(d) + "/inf", inf_in, [f](const In& in) { return one(f(tb::div(in[0], in[1]))); },
          [r](const RIn& in) { return one(r(R::div(in[0], in[1]))); });
    };
    add_nan("isnan", tb::isnan, R::isnan);
    add_nan("isinf", tb::isinf, R::isinf);
    add_nan("isfinite", tb::isfinite, R::isfinite);
    add_nan("sign", tb::sign, R::sign);
    add_nan("relu", tb::relu, R::relu);
    add_nan("sigmoid", tb::sigmoid, R::sigmoid);
    add_nan("logical_not", tb::logical_not, R::logical_not);
  }
  // Output layout (TensorIterator's rule): results follow the inputs' dense stride order, so
  // sizes, strides and offset are compared (Check::View) -- a later .view() then works on both
  // sides or on neither.
  for (DType d : {DType::Float32, DType::Int64}) {
    const std::string t = dn(d);
    add_row(
        v, "neg/" + t + "/layout_transposed", {{{3, 4, 5}, d, Tr}}, [](const In& in) { return one(tb::neg(in[0])); },
        [](const RIn& in) { return one(R::neg(in[0])); }, Check::View);
    add_row(
        v, "abs/" + t + "/layout_permuted", {{{3, 4, 5}, d}},
        [](const In& in) {
          return one(tb::abs(in[0].permute({2, 0, 1})));
        },
        [](const RIn& in) {
          return one(R::abs(R::permute(in[0], {2, 0, 1})));
        },
        Check::View);
    add_row(
        v, "add/" + t + "/layout_permuted_broadcast", {{{3, 4, 5}, d}, {{4}, d}},
        [](const In& in) {
          return one(tb::add(in[0].permute({2, 0, 1}), in[1]));
        },
        [](const RIn& in) {
          return one(R::add(R::permute(in[0], {2, 0, 1}), in[1]));
        },
        Check::View);
    add_row(
        v, "mul/" + t + "/layout_contiguous_first", {{{4, 5}, d}, {{4, 5}, d, Tr}},
        [](const In& in) { return one(tb::mul(in[0], in[1])); },
        [](const RIn& in) { return one(R::mul(in[0], in[1])); }, Check::View);
    add_row(
        v, "mul/" + t + "/layout_transposed_first", {{{4, 5}, d, Tr}, {{4, 5}, d}},
        [](const In& in) { return one(tb::mul(in[0], in[1])); },
        [](const RIn& in) { return one(R::mul(in[0], in[1])); }, Check::View);
    add_row(
        v, "maximum/" + t + "/layout_strided_transposed", {{{4, 6}, d, St}},
        [](const In& in) { return one(tb::maximum(in[0].t(), in[0].t())); },
        [](const RIn& in) { return one(R::maximum(R::t(in[0]), R::t(in[0]))); }, Check::View);
    add_row(
        v, "where/" + t + "/layout_transposed", {{{3, 4}, DType::Bool, Tr, Values::Bool}, {{3, 4}, d, Tr}, {{4}, d}},
        [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
        [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); }, Check::View);
  }
  // mse_loss without a reduction is one fused kernel, laid out as TensorIterator lays out (a - b)^2
  // (it was always contiguous: the opfuzz run of 2026-12-06 found .view() differ after it).
  for (DType d : {DType::Float32, DType::Float64}) {
    const std::string t = dn(d);
    add_row(
        v, "mse_loss/" + t + "/layout_transposed_both", {{{4, 5}, d, Tr}, {{4, 5}, d, Tr}},
        [](const In& in) { return one(tb::mse_loss(in[0], in[1], "none")); },
        [](const RIn& in) { return one(R::mse_loss(in[0], in[1], "none")); }, Check::View);
    add_row(
        v, "mse_loss/" + t + "/layout_permuted_first", {{{2, 3, 4}, d}, {{4, 2, 3}, d}},
        [](const In& in) {
          return one(tb::mse_loss(in[0].permute({2, 0, 1}), in[1], "none"));
        },
        [](const RIn& in) {
          return one(R::mse_loss(R::permute(in[0], {2, 0, 1}), in[1], "none"));
        },
        Check::View);
  }
  // Note [Result layouts]: TensorIterator's fast setup (same-shaped tensor operands: contiguous,
  // channels-last, or equal dense strides) against its reorder path (a wrapped Scalar operand or
  // broadcasting). Inputs with size-1 dims whose strides are not the canonical ones tell them
  // apart: cl (1,2,1,2) strides (1,1,2,2) is channels-last contiguous, co (1,2,1,2) strides
  // (1,2,1,1) contiguous; the strides of the result feed later layout-sensitive ops (pad).
  for (DType d : {DType::Float32, DType::Int64}) {
    const std::string t = dn(d);
    const Input cl_in{{2, 1, 2, 1}, d}, co_in{{2, 2, 1, 1}, d};
    const auto cl = [](const tb::Tensor& x) { return x.permute({3, 2, 1, 0}); };
    const auto co = [](const tb::Tensor& x) { return x.permute({2, 0, 3, 1}); };
    const auto rcl = [](const R::Tensor& x) { return R::permute(x, {3, 2, 1, 0}); };
    const auto rco = [](const R::Tensor& x) { return R::permute(x, {2, 0, 3, 1}); };
    add_row(
        v, "neg/" + t + "/layout_channels_last_odd_size1", {cl_in},
        [=](const In& in) { return one(tb::neg(cl(in[0]))); }, [=](const RIn& in) { return one(R::neg(rcl(in[0]))); },
        Check::View);
    add_row(
        v, "clamp/" + t + "/layout_channels_last_odd_size1", {cl_in},
        [=](const In& in) { return one(tb::clamp(cl(in[0]), -1, 1)); },
        [=](const RIn& in) { return one(R::clamp(rcl(in[0]), -1, 1)); }, Check::View);
    add_row(
        v, "mul/" + t + "/layout_scalar_channels_last_odd_size1", {cl_in},
        [=](const In& in) { return one(tb::mul(cl(in[0]), 2)); },
        [=](const RIn& in) { return one(R::mul(rcl(in[0]), 2)); }, Check::View);
    add_row(
        v, "neg/" + t + "/layout_contiguous_odd_size1", {co_in}, [=](const In& in) { return one(tb::neg(co(in[0]))); },
        [=](const RIn& in) { return one(R::neg(rco(in[0]))); }, Check::View);
    add_row(
        v, "add/" + t + "/layout_scalar_contiguous_odd_size1", {co_in},
        [=](const In& in) { return one(tb::add(co(in[0]), 1)); },
        [=](const RIn& in) { return one(R::add(rco(in[0]), 1)); }, Check::View);
    add_row(
        v, "gt/" + t + "/layout_scalar_contiguous_odd_size1", {co_in},
        [=](const In& in) { return one(tb::gt(co(in[0]), 0)); },
        [=](const RIn& in) { return one(R::gt(rco(in[0]), 0)); }, Check::View);
    add_row(
        v, "add/" + t + "/layout_contiguous_unequal_size1_strides", {co_in, {{1, 2, 1, 2}, d}},
        [=](const In& in) { return one(tb::add(co(in[0]), in[1])); },
        [=](const RIn& in) { return one(R::add(rco(in[0]), in[1])); }, Check::View);
    add_row(
        v, "where/" + t + "/layout_scalar_contiguous_odd_size1", {co_in},
        [=](const In& in) { return one(tb::where(tb::gt(co(in[0]), 0), co(in[0]), 3)); },
        [=](const RIn& in) { return one(R::where(R::gt(rco(in[0]), 0), rco(in[0]), 3)); }, Check::View);
    // The condition of a comparison with a Scalar keeps x's size-1 strides, which then order the
    // broadcast result (found by opfuzz: .view(4) worked on the engine's result only).
    add_row(
        v, "where/" + t + "/layout_broadcast_odd_size1", {{{2, 1}, d}, {{1, 1, 2}, d}},
        [](const In& in) {
          return one(tb::where(tb::gt(in[0].t(), 0), in[0].t(), in[1].permute({2, 0, 1})));
        },
        [](const RIn& in) {
          return one(R::where(R::gt(R::t(in[0]), 0), R::t(in[0]), R::permute(in[1], {2, 0, 1})));
        },
        Check::View);
  }
  add_row(
      v, "pow/float32/layout_scalar_base_channels_last", {{{2, 1, 2, 1}}},
      [](const In& in) {
        return one(tb::pow(2, in[0].permute({3, 2, 1, 0})));
      },
      [](const RIn& in) {
        return one(R::pow(2, R::permute(in[0], {3, 2, 1, 0})));
      },
      Check::View);
  add_row(
      v, "exp/float64/layout_permuted_int_input", {{{2, 3, 4}, DType::Int32}},
      [](const In& in) {
        return one(tb::exp(in[0].permute({1, 2, 0})));
      },
      [](const RIn& in) {
        return one(R::exp(R::permute(in[0], {1, 2, 0})));
      },
      Check::View);
  add_row(
      v, "gelu/float32/bad_mode", {{{5, 7}}}, [](const In& in) { return one(tb::gelu(in[0], "erf")); },
      [](const RIn& in) { return one(R::gelu(in[0], "erf")); }, Check::Error);
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> v;
  for (const UnarySpec& s : unary_specs()) unary_rows(v, s);
  special_unary_rows(v);
  elementwise_binary_rows(v);
  elementwise_grad_rows(v);
  elementwise_binary_grad_rows(v);
  return v;
}

}  // namespace tb::suites
