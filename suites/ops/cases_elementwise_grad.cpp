// The elementwise family, part 3: the rows that exist for their gradients (engine/autograd/
// functions/elementwise.cpp vs LibTorch autograd), each also checked by value. The one-tensor ops
// whose value rows are named differently (gelu "none", softplus beta 2 / threshold 1) and the
// tensor-scalar forms of add/sub/mul/div/pow/clamp (which differentiate like unary ops), in
// float32 and float64 in every layout of kLayouts (contiguous, transposed, strided, expanded, 0-dim,
// one element, zero-size), through a view taken inside the engine lambda and chained with a second
// op; in-place tensor-scalar ops; the fused activations and in-place ops past kParallelGrain. The
// unary ops with value rows of the same names carry their gradients there (cases_elementwise.cpp).
#include <functional>
#include <map>
#include <tuple>
#include <set>

#include "reference/views.h"
#include "suites/ops/cases_elementwise.h"

namespace tb::suites {

namespace {

using namespace elementwise_rows;
using SOpt = std::optional<Scalar>;

// One op of one tensor: the case name is op/dtype/[tag_]variant.
struct Unary {
  std::string op, tag;
  std::function<Tn(const Tn&)> f;
  std::function<RT(const RT&)> r;
  Values values = Values::Normal;
};

struct LayoutRow {
  const char* name;
  Shape shape;
  Layout layout;
};
const std::vector<LayoutRow> kLayouts = {
    {"contig", {3, 4}, C},    {"transposed", {4, 5}, Tr}, {"strided", {3, 5}, St},
    {"expanded", {3, 4}, Ex}, {"scalar", {}, C},          {"one", {1}, C},
    {"empty", {0, 3}, C},
};

std::vector<Unary> unary_ops() {
  const Values P = Values::Positive, NZ = Values::NonZero, N = Values::Normal;
  // The other one-tensor ops are differentiable value rows of cases_elementwise.cpp.
  return {
      {"gelu", "", [](const Tn& x) { return tb::gelu(x); }, [](const RT& x) { return R::gelu(x); }, N},
      // beta * x crosses the threshold for about a third of the elements: both branches.
      {"softplus", "beta2_th1", [](const Tn& x) { return tb::softplus(x, 2, 1); },
       [](const RT& x) { return R::softplus(x, 2, 1); }, N},
      // Tensor-scalar forms.
      {"add", "scalar", [](const Tn& x) { return tb::add(x, 2.5, 2); }, [](const RT& x) { return R::add(x, 2.5, 2); },
       N},
      {"sub", "scalar", [](const Tn& x) { return tb::sub(x, 1.5, -3); }, [](const RT& x) { return R::sub(x, 1.5, -3); },
       N},
      {"mul", "scalar", [](const Tn& x) { return tb::mul(x, -1.75); }, [](const RT& x) { return R::mul(x, -1.75); }, N},
      {"mul", "intscalar", [](const Tn& x) { return tb::mul(x, 3); }, [](const RT& x) { return R::mul(x, 3); }, N},
      {"div", "scalar", [](const Tn& x) { return tb::div(x, -2.5); }, [](const RT& x) { return R::div(x, -2.5); }, N},
      {"pow", "square", [](const Tn& x) { return tb::pow(x, 2); }, [](const RT& x) { return R::pow(x, 2); }, N},
      {"pow", "cube", [](const Tn& x) { return tb::pow(x, 3.0); }, [](const RT& x) { return R::pow(x, 3.0); }, N},
      {"pow", "half", [](const Tn& x) { return tb::pow(x, 0.5); }, [](const RT& x) { return R::pow(x, 0.5); }, P},
      {"pow", "neg1_5", [](const Tn& x) { return tb::pow(x, -1.5); }, [](const RT& x) { return R::pow(x, -1.5); }, P},
      {"pow", "neg1", [](const Tn& x) { return tb::pow(x, -1); }, [](const RT& x) { return R::pow(x, -1); }, NZ},
      {"pow", "one", [](const Tn& x) { return tb::pow(x, 1); }, [](const RT& x) { return R::pow(x, 1); }, N},
      // Exponent 0: the gradient is zero, even at x = 0 where x^-1 is infinite.
      {"pow", "zero", [](const Tn& x) { return tb::pow(tb::relu(x), Scalar(0)); },
       [](const RT& x) { return R::pow(R::relu(x), Scalar(0)); }, NZ},
      {"pow", "base2_5", [](const Tn& x) { return tb::pow(2.5, x); }, [](const RT& x) { return R::pow(2.5, x); }, N},
      {"pow", "base0_5", [](const Tn& x) { return tb::pow(0.5, x); }, [](const RT& x) { return R::pow(0.5, x); }, N},
      // Base 0: the gradient is 0 where the exponent is >= 0.
      {"pow", "base0", [](const Tn& x) { return tb::pow(Scalar(0), x); },
       [](const RT& x) { return R::pow(Scalar(0), x); }, P},
      {"clamp", "both", [](const Tn& x) { return tb::clamp(x, SOpt(-0.5), SOpt(0.5)); },
       [](const RT& x) { return R::clamp(x, SOpt(-0.5), SOpt(0.5)); }, N},
      {"clamp", "min", [](const Tn& x) { return tb::clamp(x, SOpt(-0.25), std::nullopt); },
       [](const RT& x) { return R::clamp(x, SOpt(-0.25), std::nullopt); }, N},
      {"clamp", "max", [](const Tn& x) { return tb::clamp(x, std::nullopt, SOpt(0.25)); },
       [](const RT& x) { return R::clamp(x, std::nullopt, SOpt(0.25)); }, N},
      // min > max: the result is max everywhere and no gradient reaches x.
      {"clamp", "crossed", [](const Tn& x) { return tb::clamp(x, SOpt(0.5), SOpt(-0.5)); },
       [](const RT& x) { return R::clamp(x, SOpt(0.5), SOpt(-0.5)); }, N},
      {"clamp", "int_bounds", [](const Tn& x) { return tb::clamp(x, SOpt(-1), SOpt(1)); },
       [](const RT& x) { return R::clamp(x, SOpt(-1), SOpt(1)); }, N},
  };
}

// In-place tensor-scalar ops, run on a clone (a leaf that requires grad may not be modified in
// place). exp_, tanh_, sigmoid_, relu_ and neg_ are value rows of cases_elementwise.cpp.
struct InPlace {
  std::string op;
  std::function<void(Tn&)> f;
  std::function<RT(const RT&)> r;
  Values values = Values::Normal;
};

std::vector<InPlace> inplace_ops() {
  return {
      {"add_", [](Tn& x) { tb::add_(x, 1.5, -2); }, [](const RT& x) { return R::add_(x, 1.5, -2); }},
      {"mul_", [](Tn& x) { tb::mul_(x, -2.5); }, [](const RT& x) { return R::mul_(x, -2.5); }},
      {"div_", [](Tn& x) { tb::div_(x, 3); }, [](const RT& x) { return R::div_(x, 3); }},
      {"clamp_", [](Tn& x) { tb::clamp_(x, SOpt(-0.5), SOpt(0.5)); },
       [](const RT& x) { return R::clamp_(x, SOpt(-0.5), SOpt(0.5)); }},
      {"clamp_", [](Tn& x) { tb::clamp_(x, SOpt(0.1), std::nullopt); },
       [](const RT& x) { return R::clamp_(x, SOpt(0.1), std::nullopt); }},
  };
}

std::string prefixed(const std::string& tag, const std::string& variant) {
  return tag.empty() ? variant : tag + "_" + variant;
}

void unary_rows(std::vector<OpCase>& v, const Unary& u, DType dt) {
  const std::string base = u.op + "/" + core::name(dt) + "/";
  auto f = u.f;
  auto r = u.r;
  for (const LayoutRow& l : kLayouts)
    if (l.name != std::string("one"))
      v.push_back(make_grad_case(
          base + prefixed(u.tag, l.name), {{l.shape, dt, l.layout, u.values}},
          [f](const In& x) { return one(f(x[0])); }, [r](const RIn& x) { return one(r(x[0])); }));
  grad_unary_rows(v, base + prefixed(u.tag, ""), f, r, dt, u.values);
}

// The activations with fused backward kernels, past kParallelGrain (the threaded, vectorised
// path) in float32 and bfloat16, and bfloat16 in a strided layout (of the ops here; the others
// have them in cases_elementwise.cpp).
void hot_rows(std::vector<OpCase>& v) {
  const std::set<std::string> hot = {"relu", "gelu", "silu", "sigmoid", "tanh", "softplus"};
  for (const Unary& u : unary_ops()) {
    if (!hot.count(u.op)) continue;
    auto f = u.f;
    auto r = u.r;
    EngineFn e = [f](const In& x) { return one(f(x[0])); };
    RefFn re = [r](const RIn& x) { return one(r(x[0])); };
    for (DType dt : {DType::Float32, DType::BFloat16}) {
      const std::string base = u.op + "/" + core::name(dt) + "/";
      v.push_back(make_grad_case(base + prefixed(u.tag, "large"), {{{257, 300}, dt, C, u.values}}, e, re));
      if (dt == DType::BFloat16)
        v.push_back(make_grad_case(base + prefixed(u.tag, "strided"), {{{5, 7}, dt, St, u.values}}, e, re));
    }
  }
  // In-place forms on the large path (their other rows: cases_elementwise.cpp).
  using InPlaceLarge = std::tuple<const char*, std::function<void(Tn&)>, std::function<RT(const RT&)>, Values>;
  for (const InPlaceLarge& p :
       {InPlaceLarge{"relu_", [](Tn& x) { tb::relu_(x); }, [](const RT& x) { return R::relu_(x); }, Values::NonZero},
        InPlaceLarge{"tanh_", [](Tn& x) { tb::tanh_(x); }, [](const RT& x) { return R::tanh_(x); }, Values::Normal},
        InPlaceLarge{"sigmoid_", [](Tn& x) { tb::sigmoid_(x); }, [](const RT& x) { return R::sigmoid_(x); },
                     Values::Normal}}) {
    auto f = std::get<1>(p);
    auto r = std::get<2>(p);
    v.push_back(make_grad_case(
        std::string(std::get<0>(p)) + "/float32/large", {{{257, 300}, DType::Float32, C, std::get<3>(p)}},
        [f](const In& x) {
          Tn y = x[0].clone();
          f(y);
          return one(y);
        },
        [r](const RIn& x) { return one(r(R::clone(x[0]))); }));
  }
}

}  // namespace

void elementwise_grad_rows(std::vector<OpCase>& v) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Unary& u : unary_ops()) unary_rows(v, u, dt);
    std::map<std::string, int> seen;
    for (const InPlace& p : inplace_ops()) {
      const int k = seen[p.op]++;
      const std::string base = p.op + "/" + core::name(dt) + "/" + (k ? std::to_string(k) + "_" : "");
      // Rows of the same name elsewhere carry this gradient check: the tensor forms' contig rows of
      // add_, mul_ and div_ (cases_elementwise_binary.cpp), and clamp_/float32/scalar there.
      const char* merged = p.op != "clamp_" ? "contig" : (k == 0 && dt == DType::Float32 ? "scalar" : nullptr);
      grad_inplace_rows(v, base, p.f, p.r, dt, p.values, merged);
    }
  }
  hot_rows(v);
}

}  // namespace tb::suites
