// Gradient table of the normalisation family (engine/autograd/functions/nn_norm.cpp): softmax and
// log_softmax along inner/outer/middle dims and awkward layouts, layer_norm and group_norm with
// and without affine parameters, batch_norm in training (running stats updated in place and
// returned as extra outputs, which need no gradient) and evaluation mode; rows that take views
// first and rows that chain two ops.
#include <limits>

#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/nn_norm.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

tb::Tensor opt(const In& x, int i) { return i >= 0 ? x[size_t(i)] : tb::Tensor(); }
ref::Tensor opt(const RIn& x, int i) { return i >= 0 ? x[size_t(i)] : ref::Tensor(); }

struct SoftRow {
  std::string name;
  Shape shape;
  Layout layout;
  int64_t dim;
};

void softmax_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const std::vector<SoftRow> rows = {
      {"inner", {3, 5}, Layout::Contiguous, 1},  {"outer", {4, 3}, Layout::Transposed, 0},
      {"middle", {2, 3, 4}, Layout::Strided, 1}, {"expanded", {3, 5}, Layout::Expanded, -1},
      {"single", {1}, Layout::Contiguous, 0},    {"scalar", {}, Layout::Contiguous, 0},
      {"zero_size", {0, 4}, Layout::Contiguous, 1},
  };
  for (const SoftRow& r : rows) {
    const int64_t dim = r.dim;
    v.push_back(make_grad_case("softmax/" + d + "/" + r.name, {{r.shape, dt, r.layout}},
                               [dim](const In& x) { return one(tb::softmax(x[0], dim)); },
                               [dim](const RIn& x) { return one(R::softmax(x[0], dim)); }));
    v.push_back(make_grad_case("log_softmax/" + d + "/" + r.name, {{r.shape, dt, r.layout}},
                               [dim](const In& x) { return one(tb::log_softmax(x[0], dim)); },
                               [dim](const RIn& x) { return one(R::log_softmax(x[0], dim)); }));
  }
  // softmax_causal against LibTorch's softmax of the scores masked with -inf above the diagonal:
  // masked entries get zero gradient.
  auto ref_causal = [](const ref::Tensor& x) {
    const Shape sz = x.sizes();
    const ref::Tensor mask = R::triu(R::ones({sz[sz.size() - 2], sz.back()}, DType::Bool), 1);
    return R::softmax(R::masked_fill(x, mask, -std::numeric_limits<double>::infinity()), -1);
  };
  for (const SoftRow& r : std::vector<SoftRow>{{"square", {2, 4, 4}, Layout::Contiguous, -1},
                                               {"wide", {3, 5}, Layout::Transposed, -1},
                                               {"tall", {5, 3}, Layout::Contiguous, -1}})
    v.push_back(make_grad_case("softmax_causal/" + d + "/" + r.name, {{r.shape, dt, r.layout}},
                               [](const In& x) { return one(tb::softmax_causal(x[0])); },
                               [ref_causal](const RIn& x) { return one(ref_causal(x[0])); }));
  // A view first: the first slice, transposed, along its (now) leading dim.
  v.push_back(make_grad_case("softmax/" + d + "/view", {{{2, 3, 4}, dt}},
                             [](const In& x) { return one(tb::softmax(x[0].select(0, 0).transpose(0, 1), 0)); },
                             [](const RIn& x) { return one(R::softmax(R::transpose(R::select(x[0], 0, 0), 0, 1), 0)); }));
  v.push_back(make_grad_case("log_softmax/" + d + "/view", {{{4, 6}, dt}},
                             [](const In& x) { return one(tb::log_softmax(x[0].narrow(1, 1, 4).t(), -1)); },
                             [](const RIn& x) { return one(R::log_softmax(R::t(R::narrow(x[0], 1, 1, 4)), -1)); }));
  // Chains: softmax of a log_softmax (each backward fed by the other's gradient).
  v.push_back(make_grad_case("softmax/" + d + "/chain_log_softmax", {{{3, 4}, dt, Layout::Transposed}},
                             [](const In& x) { return one(tb::softmax(tb::log_softmax(x[0], 0), 1)); },
                             [](const RIn& x) { return one(R::softmax(R::log_softmax(x[0], 0), 1)); }));
  // dtype argument: the input is cast first, the gradient comes back in the input's dtype.
  const DType other = dt == DType::Float32 ? DType::Float64 : DType::Float32;
  v.push_back(make_grad_case("softmax/" + d + "/dtype_" + core::name(other), {{{3, 4}, dt}},
                             [other](const In& x) { return one(tb::softmax(x[0], 1, other)); },
                             [other](const RIn& x) { return one(R::softmax(x[0], 1, other)); }));
  if (dt == DType::Float64) v.back().gradcheck = false;  // a float32 forward: too coarse for finite differences
  v.push_back(make_grad_case("log_softmax/" + d + "/dtype_" + core::name(other), {{{3, 4}, dt}},
                             [other](const In& x) { return one(tb::log_softmax(x[0], 0, other)); },
                             [other](const RIn& x) { return one(R::log_softmax(x[0], 0, other)); }));
  if (dt == DType::Float64) v.back().gradcheck = false;  // a float32 forward: too coarse for finite differences
}

void layer_norm_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  struct Row {
    std::string name;
    Shape shape, ns;
    Layout layout;
    bool w, b;
  };
  const std::vector<Row> rows = {
      {"affine", {4, 6}, {6}, Layout::Contiguous, true, true},
      {"no_affine_transposed", {5, 4}, {4}, Layout::Transposed, false, false},
      {"weight_only_strided", {3, 8}, {8}, Layout::Strided, true, false},
      {"bias_only", {2, 3, 5}, {5}, Layout::Contiguous, false, true},
      {"2d_shape", {2, 3, 4}, {3, 4}, Layout::Contiguous, true, true},
      {"expanded", {3, 5}, {5}, Layout::Expanded, true, true},
      {"single", {1}, {1}, Layout::Contiguous, true, true},
      {"zero_rows", {0, 5}, {5}, Layout::Contiguous, true, true},
  };
  for (const Row& r : rows) {
    std::vector<Input> in = {{r.shape, dt, r.layout}};
    const int wi = r.w ? int(in.size()) : -1;
    if (r.w) in.push_back({r.ns, dt});
    const int bi = r.b ? int(in.size()) : -1;
    if (r.b) in.push_back({r.ns, dt});
    const Shape ns = r.ns;
    v.push_back(make_grad_case("layer_norm/" + d + "/" + r.name, in,
                               [=](const In& x) { return one(tb::layer_norm(x[0], ns, opt(x, wi), opt(x, bi))); },
                               [=](const RIn& x) { return one(R::layer_norm(x[0], ns, opt(x, wi), opt(x, bi))); }));
  }
  // A view first, a larger eps, and a chain into log_softmax (the GPT head's pattern).
  v.push_back(make_grad_case("layer_norm/" + d + "/view_eps", {{{6, 4}, dt}, {{6}, dt}, {{6}, dt}},
                             [](const In& x) { return one(tb::layer_norm(x[0].t(), {6}, x[1], x[2], 1e-2)); },
                             [](const RIn& x) { return one(R::layer_norm(R::t(x[0]), {6}, x[1], x[2], 1e-2)); }));
  v.push_back(make_grad_case("layer_norm/" + d + "/chain_log_softmax", {{{3, 7}, dt}, {{7}, dt}, {{7}, dt}},
                             [](const In& x) { return one(tb::log_softmax(tb::layer_norm(x[0], {7}, x[1], x[2]), -1)); },
                             [](const RIn& x) { return one(R::log_softmax(R::layer_norm(x[0], {7}, x[1], x[2]), -1)); }));
  if (dt == DType::Float32) {
    // A GPT-width row: 256 values per statistic.
    v.push_back(make_grad_case("layer_norm/" + d + "/wide", {{{8, 256}, dt}, {{256}, dt}, {{256}, dt}},
                               [](const In& x) { return one(tb::layer_norm(x[0], {256}, x[1], x[2])); },
                               [](const RIn& x) { return one(R::layer_norm(x[0], {256}, x[1], x[2])); }));
  }
}

void group_norm_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  struct Row {
    std::string name;
    Shape shape;
    int64_t groups;
    Layout layout;
    bool affine;
  };
  const std::vector<Row> rows = {
      {"affine", {2, 4, 3}, 2, Layout::Contiguous, true},
      {"4d_strided", {2, 6, 2, 4}, 3, Layout::Strided, true},
      {"one_group", {3, 4, 2}, 1, Layout::Transposed, false},
      {"per_channel", {2, 3, 5}, 3, Layout::Contiguous, true},
      {"2d", {4, 6}, 2, Layout::Contiguous, true},
  };
  for (const Row& r : rows) {
    const int64_t C = r.shape[1], G = r.groups;
    std::vector<Input> in = {{r.shape, dt, r.layout}};
    if (r.affine) in.insert(in.end(), {Input{{C}, dt}, Input{{C}, dt}});
    const int wi = r.affine ? 1 : -1, bi = r.affine ? 2 : -1;
    v.push_back(make_grad_case("group_norm/" + d + "/" + r.name, in,
                               [=](const In& x) { return one(tb::group_norm(x[0], G, opt(x, wi), opt(x, bi))); },
                               [=](const RIn& x) { return one(R::group_norm(x[0], G, opt(x, wi), opt(x, bi))); }));
  }
  // Constant groups: the gradient through (x - mean) * rstd with var exactly 0 (the folded
  // x * a + b form left x - mean ~ ulp, and the gradient after it off by O(1)). No gradcheck: rstd
  // is 1/sqrt(eps) there, too steep for finite differences.
  for (const double c : {37.3, -2.25}) {
    OpCase k = make_grad_case("group_norm/" + d + "/constant_groups_" + (c > 0 ? "pos" : "neg"),
                                {{{2, 6, 5}, dt, Layout::Contiguous, Values::Zeros}},
                                [c](const In& x) { return one(tb::group_norm(tb::add(x[0], c), 3)); },
                                [c](const RIn& x) { return one(R::group_norm(R::add(x[0], c), 3)); });
    k.gradcheck = false;
    // LibTorch's float32 backward forms sum(g x) - mean * sum(g), which cancels for a constant
    // group (3e-5 relative measured at 37.3): wider than grad_tolerance, far below the O(1) fault.
    if (dt == DType::Float32) k.grad_tol = Tolerance{2e-4, 2e-4};
    v.push_back(std::move(k));
  }
  v.push_back(make_grad_case("group_norm/" + d + "/view_weight_only", {{{3, 2, 4}, dt}, {{4}, dt}},
                             [](const In& x) { return one(tb::group_norm(x[0].transpose(1, 2), 2, x[1], {}, 1e-3)); },
                             [](const RIn& x) { return one(R::group_norm(R::transpose(x[0], 1, 2), 2, x[1], {}, 1e-3)); }));
}

void batch_norm_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  struct Row {
    std::string name;
    Shape shape;
    Layout layout;
    bool training, stats, affine;
  };
  const std::vector<Row> rows = {
      {"train_2d", {6, 3}, Layout::Contiguous, true, true, true},
      {"train_4d_transposed", {3, 2, 2, 3}, Layout::Transposed, true, true, true},
      {"train_3d_strided", {2, 3, 4}, Layout::Strided, true, true, true},
      {"train_no_stats_no_affine", {4, 3, 2}, Layout::Contiguous, true, false, false},
      {"eval_3d", {4, 3, 2}, Layout::Contiguous, false, true, true},
      {"eval_no_affine_transposed", {3, 4, 2}, Layout::Transposed, false, true, false},
  };
  for (const Row& r : rows) {
    const int64_t C = r.shape[1];
    const bool tr = r.training, st = r.stats, af = r.affine;
    // Inputs: x, running_mean, running_var (positive), weight, bias; stats and affine optional.
    std::vector<Input> in = {{r.shape, dt, r.layout}, {{C}, dt}, {{C}, dt, Layout::Contiguous, Values::Positive},
                             {{C}, dt}, {{C}, dt}};
    OpCase c = make_grad_case(
        "batch_norm/" + d + "/" + r.name, in,
        [=](const In& x) {
          tb::Tensor rm = st ? x[1] : tb::Tensor(), rv = st ? x[2] : tb::Tensor();
          tb::Tensor y = tb::batch_norm(x[0], rm, rv, af ? x[3] : tb::Tensor(), af ? x[4] : tb::Tensor(), tr, 0.1, 1e-5);
          return st ? In{y, x[1], x[2]} : In{y};
        },
        [=](const RIn& x) {
          ref::Tensor rm = st ? x[1] : ref::Tensor(), rv = st ? x[2] : ref::Tensor();
          ref::Tensor y = R::batch_norm(x[0], rm, rv, af ? x[3] : ref::Tensor(), af ? x[4] : ref::Tensor(), tr, 0.1, 1e-5);
          return st ? RIn{y, x[1], x[2]} : RIn{y};
        });
    c.wrt = af ? std::vector<size_t>{0, 3, 4} : std::vector<size_t>{0};  // running stats are buffers
    v.push_back(std::move(c));
  }
  // A view first (channels from the last dim) and a chain into log_softmax.
  OpCase c = make_grad_case(
      "batch_norm/" + d + "/view_chain", {{{5, 3}, dt}, {{3}, dt}, {{3}, dt}},
      [](const In& x) { return one(tb::log_softmax(tb::batch_norm(x[0].t().t(), {}, {}, x[1], x[2], true, 0.1, 1e-3), 1)); },
      [](const RIn& x) { return one(R::log_softmax(R::batch_norm(R::t(R::t(x[0])), {}, {}, x[1], x[2], true, 0.1, 1e-3), 1)); });
  v.push_back(std::move(c));
}

}  // namespace

std::vector<OpCase> grad_nn_norm_cases() {
  std::vector<OpCase> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    softmax_rows(v, dt);
    layer_norm_rows(v, dt);
    group_norm_rows(v, dt);
    batch_norm_rows(v, dt);
  }
  return v;
}

}  // namespace tb::suites
