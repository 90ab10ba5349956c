// The elementwise family's gradient table, part 1 (engine/autograd/functions/elementwise.cpp vs
// LibTorch autograd): the one-tensor ops (unary math, activations, and the tensor-scalar forms of
// add/sub/mul/div/pow/clamp/where, which differentiate like unary ops) and the in-place unary ops.
// Every op runs over float32 and float64 in every layout of kLayouts (contiguous, transposed,
// strided, expanded, 0-dim, one element, zero-size), through a view taken inside the engine
// lambda, and chained with a second op. Part 2 (grad_cases_elementwise_binary.cpp): two-tensor
// ops, tensor clamp bounds, where, and the in-place binary ops.
#include <functional>
#include <map>
#include <set>

#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/views.h"
#include "suites/autograd/grad_case.h"

namespace tb::suites {

std::vector<GradCase> grad_elementwise_binary_cases();  // grad_cases_elementwise_binary.cpp

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using Tn = tb::Tensor;
using RT = ref::Tensor;
using ops::Scalar;
using SOpt = std::optional<Scalar>;
constexpr Layout C = Layout::Contiguous, Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;

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
  return {
      {"exp", "", [](const Tn& x) { return tb::exp(x); }, [](const RT& x) { return R::exp(x); }, N},
      {"expm1", "", [](const Tn& x) { return tb::expm1(x); }, [](const RT& x) { return R::expm1(x); }, N},
      {"log", "", [](const Tn& x) { return tb::log(x); }, [](const RT& x) { return R::log(x); }, P},
      {"log1p", "", [](const Tn& x) { return tb::log1p(x); }, [](const RT& x) { return R::log1p(x); }, P},
      {"sqrt", "", [](const Tn& x) { return tb::sqrt(x); }, [](const RT& x) { return R::sqrt(x); }, P},
      {"rsqrt", "", [](const Tn& x) { return tb::rsqrt(x); }, [](const RT& x) { return R::rsqrt(x); }, P},
      {"reciprocal", "", [](const Tn& x) { return tb::reciprocal(x); }, [](const RT& x) { return R::reciprocal(x); },
       NZ},
      {"sin", "", [](const Tn& x) { return tb::sin(x); }, [](const RT& x) { return R::sin(x); }, N},
      {"cos", "", [](const Tn& x) { return tb::cos(x); }, [](const RT& x) { return R::cos(x); }, N},
      {"tanh", "", [](const Tn& x) { return tb::tanh(x); }, [](const RT& x) { return R::tanh(x); }, N},
      {"sigmoid", "", [](const Tn& x) { return tb::sigmoid(x); }, [](const RT& x) { return R::sigmoid(x); }, N},
      {"neg", "", [](const Tn& x) { return tb::neg(x); }, [](const RT& x) { return R::neg(x); }, N},
      // NonZero keeps finite differences off the kink at 0.
      {"abs", "", [](const Tn& x) { return tb::abs(x); }, [](const RT& x) { return R::abs(x); }, NZ},
      {"sign", "", [](const Tn& x) { return tb::sign(x); }, [](const RT& x) { return R::sign(x); }, NZ},
      {"relu", "", [](const Tn& x) { return tb::relu(x); }, [](const RT& x) { return R::relu(x); }, NZ},
      {"gelu", "", [](const Tn& x) { return tb::gelu(x); }, [](const RT& x) { return R::gelu(x); }, N},
      {"gelu", "tanh", [](const Tn& x) { return tb::gelu(x, "tanh"); }, [](const RT& x) { return R::gelu(x, "tanh"); },
       N},
      {"silu", "", [](const Tn& x) { return tb::silu(x); }, [](const RT& x) { return R::silu(x); }, N},
      {"softplus", "", [](const Tn& x) { return tb::softplus(x); }, [](const RT& x) { return R::softplus(x); }, N},
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

// In-place unary ops, run on a clone (a leaf that requires grad may not be modified in place).
struct InPlace {
  std::string op;
  std::function<void(Tn&)> f;
  std::function<void(const RT&)> r;
  Values values = Values::Normal;
};

std::vector<InPlace> inplace_ops() {
  return {
      {"exp_", [](Tn& x) { tb::exp_(x); }, [](const RT& x) { R::exp_(x); }},
      {"tanh_", [](Tn& x) { tb::tanh_(x); }, [](const RT& x) { R::tanh_(x); }},
      {"sigmoid_", [](Tn& x) { tb::sigmoid_(x); }, [](const RT& x) { R::sigmoid_(x); }},
      {"relu_", [](Tn& x) { tb::relu_(x); }, [](const RT& x) { R::relu_(x); }, Values::NonZero},
      {"neg_", [](Tn& x) { tb::neg_(x); }, [](const RT& x) { R::neg_(x); }},
      {"add_", [](Tn& x) { tb::add_(x, 1.5, -2); }, [](const RT& x) { R::add_(x, 1.5, -2); }},
      {"mul_", [](Tn& x) { tb::mul_(x, -2.5); }, [](const RT& x) { R::mul_(x, -2.5); }},
      {"div_", [](Tn& x) { tb::div_(x, 3); }, [](const RT& x) { R::div_(x, 3); }},
      {"clamp_", [](Tn& x) { tb::clamp_(x, SOpt(-0.5), SOpt(0.5)); },
       [](const RT& x) { R::clamp_(x, SOpt(-0.5), SOpt(0.5)); }},
      {"clamp_", [](Tn& x) { tb::clamp_(x, SOpt(0.1), std::nullopt); },
       [](const RT& x) { R::clamp_(x, SOpt(0.1), std::nullopt); }},
  };
}

std::string prefixed(const std::string& tag, const std::string& variant) {
  return tag.empty() ? variant : tag + "_" + variant;
}

void unary_rows(std::vector<GradCase>& v, const Unary& u, DType dt) {
  const std::string base = u.op + "/" + core::name(dt) + "/";
  auto f = u.f;
  auto r = u.r;
  for (const LayoutRow& l : kLayouts)
    v.push_back(make_grad_case(
        base + prefixed(u.tag, l.name), {{l.shape, dt, l.layout, u.values}}, [f](const In& x) { return one(f(x[0])); },
        [r](const RIn& x) { return one(r(x[0])); }));
  // A view taken inside the lambda: the gradient must land in the right elements of x.
  v.push_back(make_grad_case(
      base + prefixed(u.tag, "view"), {{{4, 5}, dt, C, u.values}},
      [f](const In& x) { return one(f(x[0].t().narrow(0, 1, 3))); },
      [r](const RIn& x) { return one(r(R::narrow(R::t(x[0]), 0, 1, 3))); }));
  // Chained with mul: x reaches the output along two paths.
  v.push_back(make_grad_case(
      base + prefixed(u.tag, "chain"), {{{2, 3, 4}, dt, Tr, u.values}},
      [f](const In& x) { return one(tb::mul(f(x[0]), x[0])); },
      [r](const RIn& x) { return one(R::mul(r(x[0]), x[0])); }));
}

void inplace_rows(std::vector<GradCase>& v, const InPlace& p, DType dt, int k) {
  const std::string base = p.op + "/" + core::name(dt) + "/" + (k ? std::to_string(k) + "_" : "");
  auto f = p.f;
  auto r = p.r;
  for (const LayoutRow& l : kLayouts) {
    if (l.layout == Ex) continue;  // a clone of an expanded tensor is dense in both, nothing new
    v.push_back(make_grad_case(
        base + l.name, {{l.shape, dt, l.layout, p.values}},
        [f](const In& x) {
          Tn y = x[0].clone();
          f(y);
          return one(y);
        },
        [r](const RIn& x) {
          RT y = R::clone(x[0]);
          r(y);
          return one(y);
        }));
  }
  // In place on a view of a non-leaf: the base's history is rewritten (CopySlices).
  v.push_back(make_grad_case(
      base + "view", {{{3, 4}, dt, Tr, p.values}},
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

// The activations with fused backward kernels, past kParallelGrain (the threaded, vectorised
// path) in float32 and bfloat16, and bfloat16 in a strided layout.
void hot_rows(std::vector<GradCase>& v) {
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
  // In-place forms on the large path.
  for (const InPlace& p : inplace_ops()) {
    if (p.op != "relu_" && p.op != "tanh_" && p.op != "sigmoid_") continue;
    auto f = p.f;
    auto r = p.r;
    v.push_back(make_grad_case(
        p.op + "/float32/large", {{{257, 300}, DType::Float32, C, p.values}},
        [f](const In& x) {
          Tn y = x[0].clone();
          f(y);
          return one(y);
        },
        [r](const RIn& x) {
          RT y = R::clone(x[0]);
          r(y);
          return one(y);
        }));
  }
}

}  // namespace

std::vector<GradCase> grad_elementwise_cases() {
  std::vector<GradCase> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Unary& u : unary_ops()) unary_rows(v, u, dt);
    std::map<std::string, int> seen;
    for (const InPlace& p : inplace_ops()) inplace_rows(v, p, dt, seen[p.op]++);
  }
  hot_rows(v);
  std::vector<GradCase> binary = grad_elementwise_binary_cases();
  v.insert(v.end(), std::make_move_iterator(binary.begin()), std::make_move_iterator(binary.end()));
  return v;
}

}  // namespace tb::suites
