// The elementwise family, part 4: the two-tensor rows that exist for their gradients, each also
// checked by value: add, sub, mul, div, pow, maximum, minimum, remainder with broadcasting in every
// direction, through views and chained; clamp with tensor bounds, where, and the in-place binary
// ops (add_, sub_, mul_, div_) on non-leaf tensors, in float32 and float64. Broadcast inputs check
// that the engine sums gradients back to each input's shape; mixed float32/float64 rows check the
// cast back to each input's dtype; tie rows check maximum/minimum split the gradient in half and
// clamp passes it at its bounds. The layouts whose value rows carry the same names (broadcast,
// expanded, 0-dim, empty; tensor clamp bounds; where broadcast/empty; in-place broadcast) are
// gradient rows in cases_elementwise_binary.cpp.
#include <functional>
#include <optional>

#include "reference/views.h"
#include "suites/ops/cases_elementwise.h"

namespace tb::suites {

namespace {

using namespace elementwise_rows;
using TOpt = std::optional<Tn>;
using ROpt = std::optional<RT>;
constexpr Values N = Values::Normal, P = Values::Positive, NZ = Values::NonZero, B = Values::Bool;

struct Binary {
  std::string op, tag;
  std::function<Tn(const Tn&, const Tn&)> f;
  std::function<RT(const RT&, const RT&)> r;
  Values va = N, vb = N;
};

std::vector<Binary> binary_ops() {
  return {
      {"add", "", [](const Tn& a, const Tn& b) { return tb::add(a, b); },
       [](const RT& a, const RT& b) { return R::add(a, b); }},
      {"add", "alpha", [](const Tn& a, const Tn& b) { return tb::add(a, b, -2); },
       [](const RT& a, const RT& b) { return R::add(a, b, -2); }},
      {"sub", "", [](const Tn& a, const Tn& b) { return tb::sub(a, b); },
       [](const RT& a, const RT& b) { return R::sub(a, b); }},
      {"sub", "alpha", [](const Tn& a, const Tn& b) { return tb::sub(a, b, 0.5); },
       [](const RT& a, const RT& b) { return R::sub(a, b, 0.5); }},
      {"mul", "", [](const Tn& a, const Tn& b) { return tb::mul(a, b); },
       [](const RT& a, const RT& b) { return R::mul(a, b); }},
      {"div", "", [](const Tn& a, const Tn& b) { return tb::div(a, b); },
       [](const RT& a, const RT& b) { return R::div(a, b); }, N, NZ},
      {"pow", "", [](const Tn& a, const Tn& b) { return tb::pow(a, b); },
       [](const RT& a, const RT& b) { return R::pow(a, b); }, P, N},
      {"maximum", "", [](const Tn& a, const Tn& b) { return tb::maximum(a, b); },
       [](const RT& a, const RT& b) { return R::maximum(a, b); }},
      {"minimum", "", [](const Tn& a, const Tn& b) { return tb::minimum(a, b); },
       [](const RT& a, const RT& b) { return R::minimum(a, b); }},
      {"remainder", "", [](const Tn& a, const Tn& b) { return tb::remainder(a, b); },
       [](const RT& a, const RT& b) { return R::remainder(a, b); }, N, NZ},
  };
}

struct PairRow {
  const char* name;
  Shape sa;
  Layout la;
  Shape sb;
  Layout lb;
};
// broadcast, expanded, scalar and empty: the value rows of those names (cases_elementwise_binary.cpp).
const std::vector<PairRow> kPairs = {
    {"same", {3, 4}, C, {3, 4}, C},      {"layouts", {3, 4}, Tr, {3, 4}, St},
    {"outer", {3, 1}, C, {2, 1, 4}, St},  // both sides broadcast
    {"scalar_first", {}, C, {2, 3}, Tr}, {"one", {1}, C, {1}, C},
};

std::string prefixed(const std::string& tag, const std::string& variant) {
  return tag.empty() ? variant : tag + "_" + variant;
}

void binary_rows(std::vector<OpCase>& v, const Binary& op, DType dt) {
  const std::string base = op.op + "/" + core::name(dt) + "/";
  auto f = op.f;
  auto r = op.r;
  EngineFn e = [f](const In& x) { return one(f(x[0], x[1])); };
  RefFn re = [r](const RIn& x) { return one(r(x[0], x[1])); };
  for (const PairRow& p : kPairs)
    v.push_back(
        make_grad_case(base + prefixed(op.tag, p.name), {{p.sa, dt, p.la, op.va}, {p.sb, dt, p.lb, op.vb}}, e, re));
  v.push_back(make_grad_case(
      base + prefixed(op.tag, "view"), {{{4, 3}, dt, C, op.va}, {{3, 6}, dt, C, op.vb}},
      [f](const In& x) { return one(f(x[0].t(), x[1].narrow(1, 1, 4))); },
      [r](const RIn& x) { return one(r(R::t(x[0]), R::narrow(x[1], 1, 1, 4))); }));
  v.push_back(make_grad_case(
      base + prefixed(op.tag, "chain"), {{{2, 3}, dt, Tr, op.va}, {{3}, dt, C, op.vb}},
      [f](const In& x) { return one(tb::mul(f(x[0], x[1]), x[1])); },
      [r](const RIn& x) { return one(R::mul(r(x[0], x[1]), x[1])); }));
  // Only one side requires grad.
  OpCase only_b = make_grad_case(base + prefixed(op.tag, "wrt_b"), {{{3, 4}, dt, C, op.va}, {{4}, dt, C, op.vb}}, e,
                                 re);
  only_b.wrt = {1};
  v.push_back(std::move(only_b));
  // float32 with float64: the result is float64, each gradient is cast back to its input's dtype.
  if (dt == DType::Float32)
    v.push_back(make_grad_case(base + prefixed(op.tag, "mixed"),
                               {{{3, 4}, dt, Tr, op.va}, {{4}, DType::Float64, C, op.vb}}, e, re));
}

// maximum/minimum where some elements tie (b is a where() of a): the tied gradient splits in half
// on each side, and a gets both halves back.
void tie_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const std::vector<Input> in = {{{3, 4}, dt, Tr}, {{3, 4}, dt, C}, {{3, 4}, DType::Bool, C, B}};
  v.push_back(make_grad_case(
      "maximum/" + d + "/ties", in, [](const In& x) { return one(tb::maximum(x[0], tb::where(x[2], x[0], x[1]))); },
      [](const RIn& x) { return one(R::maximum(x[0], R::where(x[2], x[0], x[1]))); }));
  v.push_back(make_grad_case(
      "minimum/" + d + "/ties", in, [](const In& x) { return one(tb::minimum(tb::where(x[2], x[0], x[1]), x[0])); },
      [](const RIn& x) { return one(R::minimum(R::where(x[2], x[0], x[1]), x[0])); }));
  // Tensor clamp with min equal to x at some elements: the gradient passes to x there.
  v.push_back(make_grad_case(
      "clamp/" + d + "/tensor_ties", in,
      [](const In& x) { return one(tb::clamp(x[0], TOpt(tb::where(x[2], x[0], x[1])), std::nullopt)); },
      [](const RIn& x) { return one(R::clamp(x[0], ROpt(R::where(x[2], x[0], x[1])), std::nullopt)); }));
}

// pow at a zero base: d/dbase where base = 0 (exponent > 0) and d/dexponent there are 0, and an
// exponent of 0 gives a zero base gradient even where base^-1 is infinite.
void pow_zero_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  v.push_back(make_grad_case(
      "pow/" + d + "/zero_base", {{{3, 4}, dt, Tr, NZ}, {{3, 4}, dt, C, P}},
      [](const In& x) { return one(tb::pow(tb::relu(x[0]), x[1])); },
      [](const RIn& x) { return one(R::pow(R::relu(x[0]), x[1])); }));
  v.push_back(make_grad_case(
      "pow/" + d + "/zero_exponent", {{{3, 4}, dt, C, NZ}, {{4}, dt, C, N}},
      [](const In& x) { return one(tb::pow(tb::relu(x[0]), tb::mul(x[1], 0))); },
      [](const RIn& x) { return one(R::pow(R::relu(x[0]), R::mul(x[1], 0))); }));
}

void clamp_rows(std::vector<OpCase>& v, DType dt) {
  const std::string base = std::string("clamp/") + core::name(dt) + "/";
  // tensor_both, tensor_min, tensor_max: the value rows of those names (cases_elementwise_binary.cpp).
  v.push_back(make_grad_case(
      base + "tensor_broadcast_x", {{{4}, dt, C}, {{3, 1}, dt, C}, {{3, 4}, dt, Ex}},
      [](const In& x) { return one(tb::clamp(x[0], TOpt(x[1]), TOpt(x[2]))); },
      [](const RIn& x) { return one(R::clamp(x[0], ROpt(x[1]), ROpt(x[2]))); }));
  v.push_back(make_grad_case(
      base + "tensor_view", {{{4, 3}, dt, C}, {{3, 6}, dt, C}, {{3, 4}, dt, St}},
      [](const In& x) { return one(tb::clamp(x[0].t(), TOpt(x[1].narrow(1, 0, 4)), TOpt(x[2]))); },
      [](const RIn& x) { return one(R::clamp(R::t(x[0]), ROpt(R::narrow(x[1], 1, 0, 4)), ROpt(x[2]))); }));
  OpCase only_min = make_grad_case(
      base + "tensor_wrt_min", {{{3, 4}, dt, C}, {{3, 4}, dt, C}, {{3, 4}, dt, C}},
      [](const In& x) { return one(tb::clamp(x[0], TOpt(x[1]), TOpt(x[2]))); },
      [](const RIn& x) { return one(R::clamp(x[0], ROpt(x[1]), ROpt(x[2]))); });
  only_min.wrt = {1};
  v.push_back(std::move(only_min));
}

// broadcast and empty: the value rows of those names (cases_elementwise_binary.cpp).
void where_rows(std::vector<OpCase>& v, DType dt) {
  const std::string base = std::string("where/") + core::name(dt) + "/";
  EngineFn e = [](const In& x) { return one(tb::where(x[0], x[1], x[2])); };
  RefFn re = [](const RIn& x) { return one(R::where(x[0], x[1], x[2])); };
  const DType b = DType::Bool;
  v.push_back(make_grad_case(base + "same", {{{3, 4}, b, C, B}, {{3, 4}, dt, Tr}, {{3, 4}, dt, St}}, e, re));
  v.push_back(make_grad_case(base + "broadcast_cond", {{{4}, b, C, B}, {{3, 1}, dt, C}, {{2, 3, 4}, dt, St}}, e, re));
  v.push_back(make_grad_case(base + "scalar_cond", {{{}, b, C, B}, {{2, 3}, dt, C}, {{2, 3}, dt, Tr}}, e, re));
  v.push_back(make_grad_case(
      base + "view", {{{3, 4}, b, C, B}, {{4, 3}, dt, C}, {{3, 6}, dt, C}},
      [](const In& x) { return one(tb::where(x[0], x[1].t(), x[2].narrow(1, 2, 4))); },
      [](const RIn& x) { return one(R::where(x[0], R::t(x[1]), R::narrow(x[2], 1, 2, 4))); }));
  v.push_back(make_grad_case(
      base + "tensor_scalar", {{{3, 4}, b, C, B}, {{3, 4}, dt, St}},
      [](const In& x) { return one(tb::where(x[0], x[1], 0.5)); },
      [](const RIn& x) { return one(R::where(x[0], x[1], 0.5)); }));
  v.push_back(make_grad_case(
      base + "tensor_scalar_broadcast", {{{3, 4}, b, C, B}, {{4}, dt, C}},
      [](const In& x) { return one(tb::mul(tb::where(x[0], x[1], -1), x[1])); },
      [](const RIn& x) { return one(R::mul(R::where(x[0], x[1], -1), x[1])); }));
  if (dt == DType::Float32)
    v.push_back(make_grad_case(base + "mixed", {{{3, 4}, b, C, B}, {{3, 4}, dt, C}, {{4}, DType::Float64, C}}, e, re));
}

// In-place binary ops on a non-leaf (a leaf that requires grad may not be modified in place).
struct InPlaceBinary {
  std::string op;
  std::function<void(Tn&, const Tn&)> f;
  std::function<void(const RT&, const RT&)> r;
  Values vb = N;
};

std::vector<InPlaceBinary> inplace_binary_ops() {
  return {
      {"add_", [](Tn& a, const Tn& b) { tb::add_(a, b, 2); }, [](const RT& a, const RT& b) { R::add_(a, b, 2); }},
      {"sub_", [](Tn& a, const Tn& b) { tb::sub_(a, b, 1.5); }, [](const RT& a, const RT& b) { R::sub_(a, b, 1.5); }},
      {"mul_", [](Tn& a, const Tn& b) { tb::mul_(a, b); }, [](const RT& a, const RT& b) { R::mul_(a, b); }},
      {"div_", [](Tn& a, const Tn& b) { tb::div_(a, b); }, [](const RT& a, const RT& b) { R::div_(a, b); }, NZ},
  };
}

void inplace_binary_rows(std::vector<OpCase>& v, const InPlaceBinary& op, DType dt) {
  const std::string base = op.op + "/" + core::name(dt) + "/";
  auto f = op.f;
  auto r = op.r;
  // self = a * 3 (a non-leaf), then op_(self, b); the output uses a again so both paths count.
  EngineFn e = [f](const In& x) {
    Tn y = tb::mul(x[0], 3);
    f(y, x[1]);
    return one(tb::add(y, x[0]));
  };
  RefFn re = [r](const RIn& x) {
    RT y = R::mul(x[0], 3);
    r(y, x[1]);
    return one(R::add(y, x[0]));
  };
  const struct {
    const char* name;
    Shape sa;
    Layout la;
    Shape sb;
    Layout lb;
  } shapes[] = {{"same", {3, 4}, C, {3, 4}, Tr},      // broadcast: the value row (cases_elementwise_binary.cpp)
                {"tensor_scalar", {}, C, {}, C},      // tensor_: the Scalar-other rows (cases_elementwise_grad.cpp)
                {"scalar_other", {2, 3}, Tr, {}, C},  // hold add_/float32/scalar, .../empty, .../view
                {"tensor_empty", {0, 3}, C, {3}, C}};
  for (const auto& s : shapes)
    v.push_back(make_grad_case(base + s.name, {{s.sa, dt, s.la}, {s.sb, dt, s.lb, op.vb}}, e, re));
  // In place on a view of the non-leaf: CopySlices routes the op's backward to that region.
  v.push_back(make_grad_case(
      base + "tensor_view", {{{3, 4}, dt, Tr}, {{3, 2}, dt, C, op.vb}},
      [f](const In& x) {
        Tn y = tb::mul(x[0], 3);
        Tn w = y.narrow(1, 1, 2);
        f(w, x[1]);
        return one(tb::mul(y, x[0]));
      },
      [r](const RIn& x) {
        RT y = R::mul(x[0], 3);
        r(R::narrow(y, 1, 1, 2), x[1]);
        return one(R::mul(y, x[0]));
      }));
  OpCase only_self = make_grad_case(base + "wrt_self", {{{3, 4}, dt, C}, {{4}, dt, C, op.vb}}, e, re);
  only_self.wrt = {0};
  v.push_back(std::move(only_self));
  OpCase only_other = make_grad_case(base + "wrt_other", {{{3, 4}, dt, C}, {{4}, dt, C, op.vb}}, e, re);
  only_other.wrt = {1};
  v.push_back(std::move(only_other));
  // self float32, other float64: the op computes in float64 and writes float32.
  if (dt == DType::Float32)
    v.push_back(make_grad_case(base + "mixed", {{{3, 4}, dt, C}, {{4}, DType::Float64, C, op.vb}}, e, re));
}

}  // namespace

void elementwise_binary_grad_rows(std::vector<OpCase>& v) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Binary& op : binary_ops()) binary_rows(v, op, dt);
    tie_rows(v, dt);
    pow_zero_rows(v, dt);
    clamp_rows(v, dt);
    where_rows(v, dt);
    for (const InPlaceBinary& op : inplace_binary_ops()) inplace_binary_rows(v, op, dt);
  }
}

}  // namespace tb::suites
