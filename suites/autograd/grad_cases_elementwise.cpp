#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/linalg.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/autograd/grad_case.h"

namespace tb::suites {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

std::vector<GradCase> grad_elementwise_cases() {
  std::vector<GradCase> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = core::name(dt);
    v.push_back(make_grad_case("add/" + d + "/broadcast", {{{3, 4}, dt, Layout::Transposed}, {{4}, dt}},
                               [](const In& x) { return one(A::add(x[0], x[1], 2)); },
                               [](const RIn& x) { return one(R::add(x[0], x[1], 2)); }));
    v.push_back(make_grad_case("mul/" + d + "/broadcast", {{{3, 4}, dt, Layout::Strided}, {{3, 1}, dt}},
                               [](const In& x) { return one(A::sum(A::mul(x[0], x[1]), {1})); },
                               [](const RIn& x) { return one(R::sum(R::mul(x[0], x[1]), {1})); }));
    v.push_back(make_grad_case("mm/" + d + "/view", {{{5, 3}, dt, Layout::Transposed}, {{5, 4}, dt}},
                               [](const In& x) { return one(A::mm(x[0].t().transpose(0, 1).t(), x[1].narrow(1, 1, 3).reshape({5, 3}))); },
                               [](const RIn& x) { return one(R::mm(R::transpose(x[0], 0, 1), R::narrow(x[1], 1, 1, 3))); }));
  }
  return v;
}

}  // namespace tb::suites
