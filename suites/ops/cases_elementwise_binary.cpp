// The elementwise family's case table, part 2: binary arithmetic, comparisons and logical ops
// (same-dtype rows over every dtype and layout pair, mixed dtypes, 0-dim vs dimensioned, scalars,
// in place, out=), clamp, where, and the 16M benchmark rows. The float32/float64 rows of the
// differentiable ops in grad_pair() layouts, their in-place rows and the tensor clamp and where
// rows are also gradient rows (`grad`). Part 1 (unary ops) and the table function are in
// cases_elementwise.cpp; the rows that exist for their gradients in
// cases_elementwise_binary_grad.cpp.
#include <map>
#include <functional>

#include "suites/ops/cases_elementwise.h"

#include "reference/views.h"

namespace tb::suites {

namespace {

using namespace elementwise_rows;

using BinFn = std::function<Tn(const Tn&, const Tn&)>;
using BinRef = std::function<RT(const RT&, const RT&)>;

struct BinarySpec {
  std::string name, variant;
  BinFn f;
  std::function<Tn&(Tn&, const Tn&)> fi;
  std::function<Tn&(Tn&, const Tn&, const Tn&)> fo;
  std::function<Tn(const Tn&, const Scalar&)> fs;
  BinRef r, ri;
  std::function<RT(const RT&, const RT&, const RT&)> ro;
  std::function<RT(const RT&, const Scalar&)> rs;
  Values va = Values::Normal, vb = Values::Normal;
  // Whether LibTorch raises for these input dtypes (the second may stand for a scalar's dtype).
  std::function<bool(DType, DType)> raises = [](DType, DType) { return false; };
  // Result dtype for same-dtype inputs d.
  std::function<DType(DType)> result = [](DType d) { return d; };
  std::vector<Scalar> scalars;  // scalar second operands tried
  // Integer division by zero raises: no mixed rows with a (random, often zero) bool divisor.
  bool zero_divisor_raises = false;
  // Differentiable forms (tb::autograd): with them the float32/float64 rows of grad_pair() and the
  // in-place rows are also gradient rows.
  BinFn g;
  std::function<void(Tn&, const Tn&)> gi;
};

struct Pair {
  const char* name;
  Shape sa;
  Layout la;
  Shape sb;
  Layout lb;
};
const std::vector<Pair> kPairs = {
    {"contig", {5, 7}, C, {5, 7}, C},       {"broadcast", {4, 1, 6}, C, {5, 6}, C},
    {"transposed", {6, 9}, Tr, {6, 9}, Tr}, {"strided", {4, 11}, St, {4, 11}, C},
    {"expanded", {3, 5}, Ex, {3, 5}, Tr},   {"scalar", {}, C, {}, C},
    {"dim_0d", {5, 7}, C, {}, C},           {"empty", {0, 3}, C, {1, 3}, C},
    {"odd", {1031}, C, {1031}, St},
};
// The pairs whose float32/float64 rows are also gradient rows (of specs with `g`); the other
// layouts of the gradient table are in cases_elementwise_binary_grad.cpp.
bool grad_pair(const std::string& name) {
  return name == "broadcast" || name == "expanded" || name == "scalar" || name == "dim_0d" || name == "empty";
}

// An in-place binary row with gradients: self is a non-leaf (a * 3; a leaf that requires grad may
// not be modified in place) and the output uses a again, so both paths count.
void add_inplace_grad_row(std::vector<OpCase>& v, std::string name, std::vector<Input> in,
                          std::function<void(Tn&, const Tn&)> f, std::function<RT(const RT&, const RT&)> r) {
  v.push_back(make_grad_case(
      std::move(name), std::move(in),
      [f](const In& x) {
        Tn y = tb::mul(x[0], 3);
        f(y, x[1]);
        return one(tb::add(y, x[0]));
      },
      [r](const RIn& x) {
        RT y = R::mul(x[0], 3);
        r(y, x[1]);
        return one(R::add(y, x[0]));
      }));
}

const std::vector<std::pair<DType, DType>> kMixed = {
    {DType::Int32, DType::Int64},     {DType::Int64, DType::Float32},   {DType::BFloat16, DType::Float16},
    {DType::Float32, DType::Float64}, {DType::Bool, DType::Int32},      {DType::BFloat16, DType::Float32},
    {DType::Int32, DType::Bool},      {DType::Float16, DType::Float32},
};

void binary_rows(std::vector<OpCase>& v, const BinarySpec& s) {
  auto f = s.f;
  auto r = s.r;
  EngineFn e = [f](const In& in) { return one(f(in[0], in[1])); };
  RefFn rf = [r](const RIn& in) { return one(r(in[0], in[1])); };
  for (DType d : kAll) {
    const std::string base = s.name + "/" + dn(d) + "/" + s.variant;
    if (s.raises(d, d)) {
      add_row(v, base + "error", {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}}, e, rf, Check::Error);
      continue;
    }
    auto g = s.g;
    for (const Pair& p : kPairs) {
      const bool grad = g && grad_dtype(d) && grad_pair(p.name);
      add_row(v, base + p.name, {{p.sa, d, p.la, s.va}, {p.sb, d, p.lb, s.vb}},
              grad ? EngineFn([g](const In& in) { return one(g(in[0], in[1])); }) : e, rf);
      v.back().grad = grad;
    }
    if (d == DType::Float32 || d == DType::Int64)  // past kParallelGrain: the two-thread split
      add_row(v, base + "large", {{{70001}, d, C, s.va}, {{70001}, d, C, s.vb}}, e, rf);
    std::map<std::string, int> scalar_kinds;  // pow has several scalars of one kind: _1, _2 keep names unique
    for (const Scalar& sc : s.scalars) {
      if (!s.fs) break;
      auto fs = s.fs;
      auto rs = s.rs;
      std::string sn = sc.is_float() ? "scalar_float" : sc.is_bool() ? "scalar_bool" : "scalar_int";
      if (const int k = scalar_kinds[sn]++) sn.append("_").append(std::to_string(k));
      add_row(
          v, base + sn, {{{5, 7}, d, Tr, s.va}}, [fs, sc](const In& in) { return one(fs(in[0], sc)); },
          [rs, sc](const RIn& in) { return one(rs(in[0], sc)); },
          s.raises(d, sc.dtype()) ? Check::Error : Check::Values);
    }
    const DType rd = s.result(d);
    if (s.fi) {
      auto fi = s.fi;
      auto ri = s.ri;
      EngineFn ei = [fi](const In& in) {
        Tn x = in[0];
        fi(x, in[1]);
        return one(x);
      };
      RefFn rfi = [ri](const RIn& in) { return one(ri(in[0], in[1])); };
      const std::string ib = s.name + "_/" + dn(d) + "/" + s.variant;
      if (core::category(rd) > core::category(d)) {
        add_row(v, ib + "error", {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}}, ei, rfi, Check::Error);
      } else if (s.gi && grad_dtype(d)) {
        add_inplace_grad_row(v, ib + "contig", {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}}, s.gi, s.ri);
        add_inplace_grad_row(v, ib + "broadcast", {{{4, 5, 6}, d, Tr, s.va}, {{5, 1}, d, C, s.vb}}, s.gi, s.ri);
        add_row(v, ib + "shape_error", {{{5, 1}, d, C, s.va}, {{5, 6}, d, C, s.vb}}, ei, rfi, Check::Error);
      } else {
        add_row(v, ib + "contig", {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}}, ei, rfi);
        add_row(v, ib + "broadcast", {{{4, 5, 6}, d, Tr, s.va}, {{5, 1}, d, C, s.vb}}, ei, rfi);
        add_row(v, ib + "shape_error", {{{5, 1}, d, C, s.va}, {{5, 6}, d, C, s.vb}}, ei, rfi, Check::Error);
      }
    }
    if (s.fo) {
      auto fo = s.fo;
      auto ro = s.ro;
      EngineFn eo = [fo](const In& in) {
        Tn o = in[2];
        fo(o, in[0], in[1]);
        return one(o);
      };
      RefFn rfo = [ro](const RIn& in) { return one(ro(in[2], in[0], in[1])); };
      const std::string ob = s.name + "_out/" + dn(d) + "/" + s.variant;
      add_row(v, ob + "contig", {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}, {{5, 7}, rd, C, Values::Zeros}}, eo, rfo);
      add_row(v, ob + "broadcast", {{{4, 1, 6}, d, C, s.va}, {{5, 6}, d, St, s.vb}, {{4, 5, 6}, rd, Tr, Values::Zeros}},
              eo, rfo);
      add_row(v, ob + "resize", {{{5, 7}, d, C, s.va}, {{7}, d, C, s.vb}, {{0}, rd, C, Values::Zeros}}, eo, rfo);
      // A non-empty out of the wrong shape is resized too (LibTorch warns, it does not raise).
      add_row(v, ob + "resize_nonempty", {{{5, 7}, d, C, s.va}, {{7}, d, C, s.vb}, {{3, 2}, rd, C, Values::Zeros}}, eo,
              rfo);
      if (d == DType::Float32) {
        add_row(v, ob + "cast_f64",
                {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}, {{5, 7}, DType::Float64, C, Values::Zeros}}, eo, rfo);
        if (rd != DType::Bool)
          add_row(v, ob + "int_error",
                  {{{5, 7}, d, C, s.va}, {{5, 7}, d, C, s.vb}, {{5, 7}, DType::Int32, C, Values::Zeros}}, eo, rfo,
                  Check::Error);
      }
    }
  }
  for (auto [da, db] : kMixed) {
    if (s.zero_divisor_raises && db == DType::Bool) continue;
    const std::string base = s.name + "/" + dn(da) + "_" + dn(db) + "/" + s.variant;
    const Check ck = s.raises(da, db) ? Check::Error : Check::Values;
    add_row(v, base + "mixed", {{{5, 7}, da, C, s.va}, {{5, 7}, db, Tr, s.vb}}, e, rf, ck);
    // A 0-dim tensor of a higher category still decides the dtype; of the same category it does not.
    add_row(v, base + "mixed_0d", {{{5, 7}, da, C, s.va}, {{}, db, C, s.vb}}, e, rf, ck);
  }
}

bool has_bool(DType a, DType b) { return a == DType::Bool || b == DType::Bool; }
bool both_bool(DType a, DType b) { return a == DType::Bool && b == DType::Bool; }

std::vector<BinarySpec> binary_specs() {
  std::vector<BinarySpec> b;
  {
    BinarySpec s;
    s.name = "add";
    s.f = [](const Tn& x, const Tn& y) { return tb::add(x, y); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::add_(x, y); };
    s.fo = [](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::add_out(o, x, y); };
    s.fs = [](const Tn& x, const Scalar& c) { return tb::add(x, c); };
    s.r = [](const RT& x, const RT& y) { return R::add(x, y); };
    s.ri = [](const RT& x, const RT& y) { return R::add_(x, y); };
    s.ro = [](const RT& o, const RT& x, const RT& y) { return R::add_out(o, x, y); };
    s.rs = [](const RT& x, const Scalar& c) { return R::add(x, c); };
    s.scalars = {Scalar(2), Scalar(2.5), Scalar(true)};
    s.g = [](const Tn& x, const Tn& y) { return tb::add(x, y); };
    s.gi = [](Tn& x, const Tn& y) { tb::add_(x, y); };
    b.push_back(s);
    // alpha: a + 2 * b (an integer alpha works on every dtype but bool)
    s.variant = "alpha_";
    s.f = [](const Tn& x, const Tn& y) { return tb::add(x, y, 2); };
    s.r = [](const RT& x, const RT& y) { return R::add(x, y, 2); };
    s.g = [](const Tn& x, const Tn& y) { return tb::add(x, y, 2); };
    s.gi = [](Tn& x, const Tn& y) { tb::add_(x, y, 2); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::add_(x, y, 2); };
    s.ri = [](const RT& x, const RT& y) { return R::add_(x, y, 2); };
    s.fo = nullptr;
    s.fs = [](const Tn& x, const Scalar& c) { return tb::add(x, c, 3); };
    s.rs = [](const RT& x, const Scalar& c) { return R::add(x, c, 3); };
    s.scalars = {Scalar(2), Scalar(2.5)};
    b.push_back(std::move(s));
  }
  {
    BinarySpec s;
    s.name = "sub";
    s.raises = has_bool;
    s.f = [](const Tn& x, const Tn& y) { return tb::sub(x, y); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::sub_(x, y); };
    s.fo = [](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::sub_out(o, x, y); };
    s.fs = [](const Tn& x, const Scalar& c) { return tb::sub(x, c); };
    s.r = [](const RT& x, const RT& y) { return R::sub(x, y); };
    s.ri = [](const RT& x, const RT& y) { return R::sub_(x, y); };
    s.ro = [](const RT& o, const RT& x, const RT& y) { return R::sub_out(o, x, y); };
    s.rs = [](const RT& x, const Scalar& c) { return R::sub(x, c); };
    s.scalars = {Scalar(2), Scalar(2.5), Scalar(true)};
    s.g = [](const Tn& x, const Tn& y) { return tb::sub(x, y); };
    s.gi = [](Tn& x, const Tn& y) { tb::sub_(x, y); };
    b.push_back(s);
    s.variant = "alpha_";
    // alpha 2: alpha * b is exact in bf16/f16. LibTorch rounds alpha * b to bf16 on its scalar
    // (non-contiguous) path but not on its vector path, so another alpha makes it disagree with
    // itself by an ulp of alpha * b where a - alpha * b cancels.
    s.f = [](const Tn& x, const Tn& y) { return tb::sub(x, y, 2); };
    s.r = [](const RT& x, const RT& y) { return R::sub(x, y, 2); };
    s.g = [](const Tn& x, const Tn& y) { return tb::sub(x, y, 2); };
    s.fi = nullptr, s.fo = nullptr, s.fs = nullptr, s.gi = nullptr;
    b.push_back(std::move(s));
  }
  {
    BinarySpec s;
    s.name = "mul";
    s.f = [](const Tn& x, const Tn& y) { return tb::mul(x, y); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::mul_(x, y); };
    s.fo = [](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::mul_out(o, x, y); };
    s.fs = [](const Tn& x, const Scalar& c) { return tb::mul(x, c); };
    s.r = [](const RT& x, const RT& y) { return R::mul(x, y); };
    s.ri = [](const RT& x, const RT& y) { return R::mul_(x, y); };
    s.ro = [](const RT& o, const RT& x, const RT& y) { return R::mul_out(o, x, y); };
    s.rs = [](const RT& x, const Scalar& c) { return R::mul(x, c); };
    s.scalars = {Scalar(3), Scalar(0.1), Scalar(true)};
    s.g = [](const Tn& x, const Tn& y) { return tb::mul(x, y); };
    s.gi = [](Tn& x, const Tn& y) { tb::mul_(x, y); };
    b.push_back(std::move(s));
  }
  for (std::optional<std::string> mode :
       {std::optional<std::string>{}, std::optional<std::string>{"trunc"}, std::optional<std::string>{"floor"}}) {
    BinarySpec s;
    s.name = "div";
    s.variant = mode ? *mode + "_" : "";
    s.vb = Values::NonZero;
    if (mode) s.raises = both_bool, s.zero_divisor_raises = true;
    else s.result = [](DType d) { return O::to_float_dtype(d); };
    s.f = [mode](const Tn& x, const Tn& y) { return tb::div(x, y, mode); };
    s.fi = [mode](Tn& x, const Tn& y) -> Tn& { return tb::div_(x, y, mode); };
    s.fo = [mode](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::div_out(o, x, y, mode); };
    s.fs = [mode](const Tn& x, const Scalar& c) { return tb::div(x, c, mode); };
    s.r = [mode](const RT& x, const RT& y) { return R::div(x, y, mode); };
    s.ri = [mode](const RT& x, const RT& y) { return R::div_(x, y, mode); };
    s.ro = [mode](const RT& o, const RT& x, const RT& y) { return R::div_out(o, x, y, mode); };
    s.rs = [mode](const RT& x, const Scalar& c) { return R::div(x, c, mode); };
    s.scalars = {Scalar(-3), Scalar(0.7)};
    if (!mode) {
      s.g = [](const Tn& x, const Tn& y) { return tb::div(x, y); };
      s.gi = [](Tn& x, const Tn& y) { tb::div_(x, y); };
    }
    b.push_back(s);
    // Negative divisors (NonZero integers are positive): a / -b.
    s.variant += "negdiv_";
    s.f = [mode](const Tn& x, const Tn& y) { return tb::div(x, tb::neg(y), mode); };
    s.r = [mode](const RT& x, const RT& y) { return R::div(x, R::neg(y), mode); };
    s.raises = [mode](DType a, DType b) { return b == DType::Bool || (mode && both_bool(a, b)); };
    s.fi = nullptr, s.fo = nullptr, s.fs = nullptr, s.g = nullptr, s.gi = nullptr;
    b.push_back(std::move(s));
  }
  {
    BinarySpec s;
    s.name = "remainder";
    s.vb = Values::NonZero;
    s.zero_divisor_raises = true;
    s.raises = both_bool;
    s.f = [](const Tn& x, const Tn& y) { return tb::remainder(x, y); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::remainder_(x, y); };
    s.fo = [](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::remainder_out(o, x, y); };
    s.fs = [](const Tn& x, const Scalar& c) { return tb::remainder(x, c); };
    s.r = [](const RT& x, const RT& y) { return R::remainder(x, y); };
    s.ri = [](const RT& x, const RT& y) { return R::remainder_(x, y); };
    s.ro = [](const RT& o, const RT& x, const RT& y) { return R::remainder_out(o, x, y); };
    s.rs = [](const RT& x, const Scalar& c) { return R::remainder(x, c); };
    s.scalars = {Scalar(-3), Scalar(1.5)};
    s.g = [](const Tn& x, const Tn& y) { return tb::remainder(x, y); };
    b.push_back(s);
    s.variant = "negdiv_";
    s.f = [](const Tn& x, const Tn& y) { return tb::remainder(x, tb::neg(y)); };
    s.r = [](const RT& x, const RT& y) { return R::remainder(x, R::neg(y)); };
    s.raises = [](DType, DType b) { return b == DType::Bool; };
    s.fi = nullptr, s.fo = nullptr, s.fs = nullptr, s.g = nullptr;
    b.push_back(std::move(s));
  }
  {
    BinarySpec s;
    s.name = "pow";
    s.va = Values::Positive;  // float bases > 0 keep fractional powers real
    s.raises = both_bool;
    s.f = [](const Tn& x, const Tn& y) { return tb::pow(x, y); };
    s.fi = [](Tn& x, const Tn& y) -> Tn& { return tb::pow_(x, y); };
    s.fo = [](Tn& o, const Tn& x, const Tn& y) -> Tn& { return tb::pow_out(o, x, y); };
    s.fs = [](const Tn& x, const Scalar& c) { return tb::pow(x, c); };
    s.r = [](const RT& x, const RT& y) { return R::pow(x, y); };
    s.ri = [](const RT& x, const RT& y) { return R::pow_(x, y); };
    s.ro = [](const RT& o, const RT& x, const RT& y) { return R::pow_out(o, x, y); };
    s.rs = [](const RT& x, const Scalar& c) { return R::pow(x, c); };
    s.scalars = {Scalar(2), Scalar(3), Scalar(0.5), Scalar(-1.0), Scalar(1.7)};
    s.g = [](const Tn& x, const Tn& y) { return tb::pow(x, y); };
    b.push_back(s);
    // Integer bases of either sign with exponents in [-5, 5] (negative powers give 0 or +-1).
    s.variant = "signed_", s.va = Values::Normal, s.fi = nullptr, s.fo = nullptr, s.fs = nullptr, s.g = nullptr;
    b.push_back(std::move(s));
  }
  for (bool is_max : {true, false}) {
    BinarySpec s;
    s.name = is_max ? "maximum" : "minimum";
    s.f = [is_max](const Tn& x, const Tn& y) { return is_max ? tb::maximum(x, y) : tb::minimum(x, y); };
    s.fo = [is_max](Tn& o, const Tn& x, const Tn& y) -> Tn& {
      return is_max ? tb::maximum_out(o, x, y) : tb::minimum_out(o, x, y);
    };
    s.r = [is_max](const RT& x, const RT& y) { return is_max ? R::maximum(x, y) : R::minimum(x, y); };
    s.ro = [is_max](const RT& o, const RT& x, const RT& y) {
      return is_max ? R::maximum_out(o, x, y) : R::minimum_out(o, x, y);
    };
    s.g = [is_max](const Tn& x, const Tn& y) { return is_max ? tb::maximum(x, y) : tb::minimum(x, y); };
    b.push_back(std::move(s));
  }
  using CmpFns =
      std::tuple<const char*, Tn (*)(const Tn&, const Tn&), Tn (*)(const Tn&, const Scalar&), Tn& (*)(Tn&, const Tn&),
                 Tn& (*)(Tn&, const Tn&, const Tn&), RT (*)(const RT&, const RT&), RT (*)(const RT&, const Scalar&),
                 RT (*)(const RT&, const RT&), RT (*)(const RT&, const RT&, const RT&)>;
  for (const CmpFns& c : {CmpFns{"eq", tb::eq, tb::eq, tb::eq_, tb::eq_out, R::eq, R::eq, R::eq_, R::eq_out},
                          CmpFns{"ne", tb::ne, tb::ne, tb::ne_, tb::ne_out, R::ne, R::ne, R::ne_, R::ne_out},
                          CmpFns{"lt", tb::lt, tb::lt, tb::lt_, tb::lt_out, R::lt, R::lt, R::lt_, R::lt_out},
                          CmpFns{"le", tb::le, tb::le, tb::le_, tb::le_out, R::le, R::le, R::le_, R::le_out},
                          CmpFns{"gt", tb::gt, tb::gt, tb::gt_, tb::gt_out, R::gt, R::gt, R::gt_, R::gt_out},
                          CmpFns{"ge", tb::ge, tb::ge, tb::ge_, tb::ge_out, R::ge, R::ge, R::ge_, R::ge_out}}) {
    BinarySpec s;
    s.name = std::get<0>(c);
    s.f = std::get<1>(c), s.fs = std::get<2>(c), s.fi = std::get<3>(c), s.fo = std::get<4>(c);
    s.r = std::get<5>(c), s.rs = std::get<6>(c), s.ri = std::get<7>(c), s.ro = std::get<8>(c);
    s.result = [](DType) { return DType::Bool; };
    s.scalars = {Scalar(1), Scalar(0.1), Scalar(false)};
    b.push_back(s);
    // Equal elements on purpose: a against itself and a rounded copy.
    s.variant = "self_", s.fi = nullptr, s.fo = nullptr, s.fs = nullptr;
    auto f = s.f;
    auto r = s.r;
    s.f = [f](const Tn& x, const Tn&) { return f(x, x); };
    s.r = [r](const RT& x, const RT&) { return r(x, x); };
    b.push_back(std::move(s));
  }
  using LogicFns =
      std::tuple<const char*, Tn (*)(const Tn&, const Tn&), Tn& (*)(Tn&, const Tn&), Tn& (*)(Tn&, const Tn&, const Tn&),
                 RT (*)(const RT&, const RT&), RT (*)(const RT&, const RT&), RT (*)(const RT&, const RT&, const RT&)>;
  for (const LogicFns& c : {LogicFns{"logical_and", tb::logical_and, tb::logical_and_, tb::logical_and_out,
                                     R::logical_and, R::logical_and_, R::logical_and_out},
                            LogicFns{"logical_or", tb::logical_or, tb::logical_or_, tb::logical_or_out, R::logical_or,
                                     R::logical_or_, R::logical_or_out},
                            LogicFns{"logical_xor", tb::logical_xor, tb::logical_xor_, tb::logical_xor_out,
                                     R::logical_xor, R::logical_xor_, R::logical_xor_out}}) {
    BinarySpec s;
    s.name = std::get<0>(c);
    s.f = std::get<1>(c), s.fi = std::get<2>(c), s.fo = std::get<3>(c);
    s.r = std::get<4>(c), s.ri = std::get<5>(c), s.ro = std::get<6>(c);
    s.result = [](DType) { return DType::Bool; };
    b.push_back(std::move(s));
  }
  return b;
}

// Rows that do not fit the generic loop: alpha and rounding-mode errors, integer division by
// zero, NaN propagation, a scalar base.
void special_binary_rows(std::vector<OpCase>& v) {
  const DType f32 = DType::Float32, i64 = DType::Int64;
  auto row = [&](std::string name, std::vector<Input> in, BinFn f, BinRef r, Check ck = Check::Values) {
    add_row(
        v, std::move(name), std::move(in), [f](const In& x) { return one(f(x[0], x[1])); },
        [r](const RIn& x) { return one(r(x[0], x[1])); }, ck);
  };
  const std::vector<Input> ii = {{{5, 7}, i64}, {{5, 7}, i64}}, ff = {{{5, 7}, f32}, {{5, 7}, f32}};
  const std::vector<Input> bb = {{{5, 7}, DType::Bool}, {{5, 7}, DType::Bool}};
  row(
      "add/float32/alpha_float", ff, [](auto& a, auto& b) { return tb::add(a, b, 2.5); },
      [](auto& a, auto& b) { return R::add(a, b, 2.5); });
  row(
      "sub/float64/alpha_float", {{{5, 7}, DType::Float64}, {{5, 7}, DType::Float64}},
      [](auto& a, auto& b) { return tb::sub(a, b, -0.5); }, [](auto& a, auto& b) { return R::sub(a, b, -0.5); });
  row(
      "add/int64/alpha_float_error", ii, [](auto& a, auto& b) { return tb::add(a, b, 2.5); },
      [](auto& a, auto& b) { return R::add(a, b, 2.5); }, Check::Error);
  row(
      "add/int32/alpha_bool_error", {{{5, 7}, DType::Int32}, {{5, 7}, DType::Int32}},
      [](auto& a, auto& b) { return tb::add(a, b, true); }, [](auto& a, auto& b) { return R::add(a, b, true); },
      Check::Error);
  row(
      "add/bool/alpha_bool", bb, [](auto& a, auto& b) { return tb::add(a, b, true); },
      [](auto& a, auto& b) { return R::add(a, b, true); });
  row(
      "add/float32/shape_error", {{{5, 7}, f32}, {{5, 6}, f32}}, [](auto& a, auto& b) { return tb::add(a, b); },
      [](auto& a, auto& b) { return R::add(a, b); }, Check::Error);
  row(
      "mul/int32/shape_error", {{{2, 3}, DType::Int32}, {{3, 2}, DType::Int32}},
      [](auto& a, auto& b) { return tb::mul(a, b); }, [](auto& a, auto& b) { return R::mul(a, b); }, Check::Error);
  row(
      "div/float32/bad_mode", ff, [](auto& a, auto& b) { return tb::div(a, b, "round"); },
      [](auto& a, auto& b) { return R::div(a, b, std::string("round")); }, Check::Error);
  const std::vector<Input> iz = {{{5, 7}, i64}, {{5, 7}, i64, C, Values::Zeros}};
  for (const char* m : {"trunc", "floor"}) {
    const std::string mode = m;
    row(
        "div/int64/" + mode + "_zero_error", iz, [mode](auto& a, auto& b) { return tb::div(a, b, mode); },
        [mode](auto& a, auto& b) { return R::div(a, b, mode); }, Check::Error);
    row(
        "div/int32/" + mode + "_scalar_zero_error", {{{5, 7}, DType::Int32}, {{1}, i64}},
        [mode](auto& a, auto&) { return tb::div(a, 0, mode); }, [mode](auto& a, auto&) { return R::div(a, 0, mode); },
        Check::Error);
  }
  row(
      "div/int64/true_zero", iz, [](auto& a, auto& b) { return tb::div(a, b); },
      [](auto& a, auto& b) { return R::div(a, b); });
  row(
      "div/float32/floor_zero", {{{5, 7}, f32}, {{5, 7}, f32, C, Values::Zeros}},
      [](auto& a, auto& b) { return tb::div(a, b, "floor"); }, [](auto& a, auto& b) { return R::div(a, b, "floor"); });
  row(
      "remainder/int64/zero_error", iz, [](auto& a, auto& b) { return tb::remainder(a, b); },
      [](auto& a, auto& b) { return R::remainder(a, b); }, Check::Error);
  row(
      "remainder/int64/scalar_zero_error", ii, [](auto& a, auto&) { return tb::remainder(a, 0); },
      [](auto& a, auto&) { return R::remainder(a, 0); }, Check::Error);
  row(
      "remainder/float32/zero", {{{5, 7}, f32}, {{5, 7}, f32, C, Values::Zeros}},
      [](auto& a, auto& b) { return tb::remainder(a, b); }, [](auto& a, auto& b) { return R::remainder(a, b); });
  row(
      "pow/int64/scalar_neg_error", ii, [](auto& a, auto&) { return tb::pow(a, -1); },
      [](auto& a, auto&) { return R::pow(a, -1); }, Check::Error);
  row(
      "pow/bool/scalar_int", bb, [](auto& a, auto&) { return tb::pow(a, 2); },
      [](auto& a, auto&) { return R::pow(a, 2); });
  for (DType d : {f32, DType::Float64, DType::BFloat16, i64, DType::Int32}) {
    row(
        "pow/" + dn(d) + "/scalar_base", {{{5, 7}, d}, {{1}, d}}, [](auto& a, auto&) { return tb::pow(2, a); },
        [](auto& a, auto&) { return R::pow(2, a); });
    row(
        "pow/" + dn(d) + "/scalar_base_float", {{{5, 7}, d}, {{1}, d}}, [](auto& a, auto&) { return tb::pow(1.5, a); },
        [](auto& a, auto&) { return R::pow(1.5, a); });
  }
  // NaN propagation: log of the negative entries of a.
  for (DType d : {f32, DType::BFloat16, DType::Float64}) {
    const std::vector<Input> in = {{{5, 7}, d}, {{5, 7}, d}};
    row(
        "maximum/" + dn(d) + "/nan", in, [](auto& a, auto& b) { return tb::maximum(tb::log(a), b); },
        [](auto& a, auto& b) { return R::maximum(R::log(a), b); });
    row(
        "minimum/" + dn(d) + "/nan", in, [](auto& a, auto& b) { return tb::minimum(b, tb::log(a)); },
        [](auto& a, auto& b) { return R::minimum(b, R::log(a)); });
    row(
        "eq/" + dn(d) + "/nan", in,
        [](auto& a, auto&) {
          auto l = tb::log(a);
          return tb::eq(l, l);
        },
        [](auto& a, auto&) {
          auto l = R::log(a);
          return R::eq(l, l);
        });
    row(
        "logical_and/" + dn(d) + "/nan", in, [](auto& a, auto& b) { return tb::logical_and(tb::log(a), b); },
        [](auto& a, auto& b) { return R::logical_and(R::log(a), b); });
  }
}

// ------------------------------------------------------------------ clamp, where
void clamp_where_rows(std::vector<OpCase>& v) {
  using OS = std::optional<Scalar>;
  using OT = std::optional<Tn>;
  using ORT = std::optional<RT>;
  struct ScalarBounds {
    const char* name;
    OS lo, hi;
  };
  const std::vector<ScalarBounds> bounds = {{"both_int", -2, 2},           {"both_float", -0.5, 0.5},
                                            {"min_only", 0, std::nullopt}, {"max_only", std::nullopt, 1},
                                            {"inverted", 1, -1},           {"none_error", std::nullopt, std::nullopt}};
  for (DType d : kAll) {
    for (const ScalarBounds& bd : bounds) {
      const OS lo = bd.lo, hi = bd.hi;
      const std::string nm = bd.name;
      const Check ck = nm == "none_error" ? Check::Error : Check::Values;
      add_row(
          v, "clamp/" + dn(d) + "/" + nm, {{{6, 9}, d, Tr}},
          [lo, hi](const In& in) { return one(tb::clamp(in[0], lo, hi)); },
          [lo, hi](const RIn& in) { return one(R::clamp(in[0], lo, hi)); }, ck);
      if (ck == Check::Error) continue;
      add_row(
          v, "clamp/" + dn(d) + "/" + nm + "_scalar", {{{}, d}},
          [lo, hi](const In& in) { return one(tb::clamp(in[0], lo, hi)); },
          [lo, hi](const RIn& in) { return one(R::clamp(in[0], lo, hi)); });
    }
    // Tensor bounds, broadcast: x (4, 5), lo (5), hi (4, 1).
    const std::vector<Input> in3 = {{{4, 5}, d, C}, {{5}, d, St}, {{4, 1}, d, C}};
    const Check both_ck = d == DType::Bool ? Check::Error : Check::Values;
    // float32/float64: also gradient rows (the differentiable clamp and where).
    const bool grad = grad_dtype(d);
    add_row(
        v, "clamp/" + dn(d) + "/tensor_both", in3,
        grad ? EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(in[1]), OT(in[2]))); })
             : EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(in[1]), OT(in[2]))); }),
        [](const RIn& in) { return one(R::clamp(in[0], ORT(in[1]), ORT(in[2]))); }, both_ck);
    v.back().grad = grad;
    add_row(v, "clamp/" + dn(d) + "/tensor_min", in3,
            grad ? EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(in[1]), OT())); })
                 : EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(in[1]), OT())); }),
            [](const RIn& in) { return one(R::clamp(in[0], ORT(in[1]), ORT())); });
    v.back().grad = grad;
    add_row(v, "clamp/" + dn(d) + "/tensor_max", in3,
            grad ? EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(), OT(in[2]))); })
                 : EngineFn([](const In& in) { return one(tb::clamp(in[0], OT(), OT(in[2]))); }),
            [](const RIn& in) { return one(R::clamp(in[0], ORT(), ORT(in[2]))); });
    v.back().grad = grad;
    // where: cond (4, 1, 6), a (5, 6), b (4, 5, 1).
    const std::vector<Input> w = {{{4, 1, 6}, DType::Bool, C, Values::Bool}, {{5, 6}, d, Tr}, {{4, 5, 1}, d, C}};
    const EngineFn where_e = grad ? EngineFn([](const In& in) { return one(tb::where(in[0], in[1], in[2])); })
                                  : EngineFn([](const In& in) { return one(tb::where(in[0], in[1], in[2])); });
    add_row(v, "where/" + dn(d) + "/broadcast", w, where_e,
            [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); });
    v.back().grad = grad;
    add_row(
        v, "where/" + dn(d) + "/contig", {{{5, 7}, DType::Bool, St, Values::Bool}, {{5, 7}, d}, {{5, 7}, d}},
        [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
        [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); });
    add_row(v, "where/" + dn(d) + "/empty", {{{0, 3}, DType::Bool, C, Values::Bool}, {{3}, d}, {{}, d}}, where_e,
            [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); });
    v.back().grad = grad;
    add_row(
        v, "where/" + dn(d) + "/scalar_float", {{{5, 7}, DType::Bool, C, Values::Bool}, {{5, 7}, d, Ex}},
        [](const In& in) { return one(tb::where(in[0], in[1], 2.5)); },
        [](const RIn& in) { return one(R::where(in[0], in[1], 2.5)); });
    add_row(
        v, "where/" + dn(d) + "/scalar_int", {{{5, 7}, DType::Bool, C, Values::Bool}, {{5, 7}, d}},
        [](const In& in) { return one(tb::where(in[0], in[1], 3)); },
        [](const RIn& in) { return one(R::where(in[0], in[1], 3)); });
  }
  const DType f32 = DType::Float32;
  add_row(
      v, "clamp/float32/nan", {{{5, 7}, f32}}, [](const In& in) { return one(tb::clamp(tb::log(in[0]), -0.5, 0.5)); },
      [](const RIn& in) { return one(R::clamp(R::log(in[0]), -0.5, 0.5)); });
  add_row(
      v, "clamp/float32/tensor_nan", {{{5, 7}, f32}, {{7}, f32}, {{5, 1}, f32}},
      [](const In& in) { return one(tb::clamp(in[0], OT(tb::log(in[1])), OT(in[2]))); },
      [](const RIn& in) { return one(R::clamp(in[0], ORT(R::log(in[1])), ORT(in[2]))); });
  add_row(
      v, "clamp/int32_int64_float32/tensor_mixed", {{{4, 5}, DType::Int32}, {{5}, DType::Int64}, {{}, f32}},
      [](const In& in) { return one(tb::clamp(in[0], OT(in[1]), OT(in[2]))); },
      [](const RIn& in) { return one(R::clamp(in[0], ORT(in[1]), ORT(in[2]))); });
  // Also a gradient row: in place on a clone (a leaf that requires grad may not be modified).
  v.push_back(make_grad_case(
      "clamp_/float32/scalar", {{{6, 9}, f32, Tr}},
      [](const In& in) {
        Tn x = in[0].clone();
        tb::clamp_(x, -0.5, 0.5);
        return one(x);
      },
      [](const RIn& in) { return one(R::clamp_(R::clone(in[0]), -0.5, 0.5)); }));
  add_row(
      v, "clamp_/int32/float_bound_error", {{{6, 9}, DType::Int32}},
      [](const In& in) {
        Tn x = in[0];
        tb::clamp_(x, 0.5);
        return one(x);
      },
      [](const RIn& in) { return one(R::clamp_(in[0], 0.5)); }, Check::Error);
  add_row(
      v, "clamp_/float32/tensor", {{{4, 5}, f32}, {{5}, f32}, {{4, 1}, f32}},
      [](const In& in) {
        Tn x = in[0];
        tb::clamp_(x, OT(in[1]), OT(in[2]));
        return one(x);
      },
      [](const RIn& in) { return one(R::clamp_(in[0], ORT(in[1]), ORT(in[2]))); });
  add_row(
      v, "clamp_out/float32/scalar", {{{6, 9}, f32, Tr}, {{6, 9}, f32, C, Values::Zeros}},
      [](const In& in) {
        Tn o = in[1];
        tb::clamp_out(o, in[0], -1, 0.5);
        return one(o);
      },
      [](const RIn& in) { return one(R::clamp_out(in[1], in[0], -1, 0.5)); });
  add_row(
      v, "clamp_out/float32/tensor",
      {{{4, 5}, f32}, {{5}, f32}, {{4, 1}, f32}, {{4, 5}, DType::Float64, C, Values::Zeros}},
      [](const In& in) {
        Tn o = in[3];
        tb::clamp_out(o, in[0], OT(in[1]), OT(in[2]));
        return one(o);
      },
      [](const RIn& in) { return one(R::clamp_out(in[3], in[0], ORT(in[1]), ORT(in[2]))); });
  add_row(
      v, "where/int64_float32/mixed", {{{5, 7}, DType::Bool, C, Values::Bool}, {{5, 7}, DType::Int64}, {{}, f32}},
      [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
      [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); });
  add_row(
      v, "where/bfloat16_float16/mixed",
      {{{5, 7}, DType::Bool, C, Values::Bool}, {{5, 7}, DType::BFloat16}, {{5, 7}, DType::Float16}},
      [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
      [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); });
  add_row(
      v, "where/float32/cond_int_error", {{{5, 7}, DType::Int64}, {{5, 7}, f32}, {{5, 7}, f32}},
      [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
      [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); }, Check::Error);
  add_row(
      v, "where/float32/shape_error", {{{5, 7}, DType::Bool, C, Values::Bool}, {{5, 6}, f32}, {{5, 7}, f32}},
      [](const In& in) { return one(tb::where(in[0], in[1], in[2])); },
      [](const RIn& in) { return one(R::where(in[0], in[1], in[2])); }, Check::Error);
  add_row(
      v, "where_out/float32/broadcast",
      {{{4, 1, 6}, DType::Bool, C, Values::Bool}, {{5, 6}, f32}, {{4, 5, 1}, f32}, {{4, 5, 6}, f32, Tr, Values::Zeros}},
      [](const In& in) {
        Tn o = in[3];
        tb::where_out(o, in[0], in[1], in[2]);
        return one(o);
      },
      [](const RIn& in) { return one(R::where_out(in[3], in[0], in[1], in[2])); });
}

// ------------------------------------------------------------------ benchmarks
// 16M elements, contiguous; bytes = read + written. out= forms write into a preallocated buffer.
void bench_rows(std::vector<OpCase>& v) {
  const int64_t n = int64_t(1) << 24;
  auto bench = [&](std::string name, std::vector<Input> in, EngineFn e, RefFn r, double bytes, double flops) {
    add_row(v, std::move(name), std::move(in), std::move(e), std::move(r));
    v.back().bench = true;
    v.back().bytes = bytes;
    v.back().flops = flops;
  };
  for (DType d : {DType::Float32, DType::BFloat16}) {
    const double isz = double(core::itemsize(d));
    const std::string dt = dn(d);
    const std::vector<Input> ab = {{{n}, d}, {{n}, d}, {{n}, d, C, Values::Zeros}};
    bench(
        "add/" + dt + "/16M", ab,
        [](const In& in) {
          Tn o = in[2];
          tb::add_out(o, in[0], in[1]);
          return one(o);
        },
        [](const RIn& in) { return one(R::add_out(in[2], in[0], in[1])); }, 3 * isz * double(n), double(n));
    bench(
        "gelu/" + dt + "/16M", {{{n}, d}, {{n}, d, C, Values::Zeros}},
        [](const In& in) {
          Tn o = in[1];
          tb::gelu_out(o, in[0]);
          return one(o);
        },
        [](const RIn& in) { return one(R::gelu_out(in[1], in[0])); }, 2 * isz * double(n), 0);
    bench(
        "mul/" + dt + "/16M", ab,
        [](const In& in) {
          Tn o = in[2];
          tb::mul_out(o, in[0], in[1]);
          return one(o);
        },
        [](const RIn& in) { return one(R::mul_out(in[2], in[0], in[1])); }, 3 * isz * double(n), double(n));
    // exp and log: SLEEF's vector functions on both sides (Note [Vector math from SLEEF]).
    bench(
        "exp/" + dt + "/16M", {{{n}, d}, {{n}, d, C, Values::Zeros}},
        [](const In& in) {
          Tn o = in[1];
          tb::exp_out(o, in[0]);
          return one(o);
        },
        [](const RIn& in) { return one(R::exp_out(in[1], in[0])); }, 2 * isz * double(n), 0);
    bench(
        "log/" + dt + "/16M", {{{n}, d, C, Values::Positive}, {{n}, d, C, Values::Zeros}},
        [](const In& in) {
          Tn o = in[1];
          tb::log_out(o, in[0]);
          return one(o);
        },
        [](const RIn& in) { return one(R::log_out(in[1], in[0])); }, 2 * isz * double(n), 0);
    // LibTorch has no relu out=: both sides allocate (from their caching allocators).
    bench(
        "relu/" + dt + "/16M", {{{n}, d}}, [](const In& in) { return one(tb::relu(in[0])); },
        [](const RIn& in) { return one(R::relu(in[0])); }, 2 * isz * double(n), double(n));
  }
}

}  // namespace

void elementwise_binary_rows(std::vector<OpCase>& v) {
  for (const BinarySpec& s : binary_specs()) binary_rows(v, s);
  special_binary_rows(v);
  clamp_where_rows(v);
  bench_rows(v);
}

}  // namespace tb::suites
