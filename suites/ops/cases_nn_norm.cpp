// Case table of the nn_norm family (engine/ops/nn_norm.h vs reference/nn_norm.h): softmax and
// log_softmax along inner/outer/middle dims, layer_norm and group_norm with and without affine parameters,
// batch_norm in training (running stats returned as extra outputs, so their in-place update is
// checked) and evaluation mode; Check::Error rows where LibTorch raises; bench rows on
// (4096, 1024) rows. Rows with `grad` also check the gradients (engine/autograd/functions/nn_norm.cpp),
// float32 and float64, with rows that take views first and rows that chain two ops.
#include <limits>

#include "engine/autograd/functions.h"
#include "engine/ops/nn_norm.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/nn_norm.h"
#include "reference/views.h"
#include "suites/ops/autocast_case.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using DT = DType;
using EV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;

const DT kFloats[] = {DT::Float32, DT::Float64, DT::BFloat16, DT::Float16};

std::string nm(const std::string& op, DT d, const std::string& v) { return op + "/" + core::name(d) + "/" + v; }

// The dtypes whose rows also check gradients.
bool differentiable(DT d) { return d == DT::Float32 || d == DT::Float64; }

tb::Tensor opt(const EV& x, int i) { return i >= 0 ? x[size_t(i)] : tb::Tensor(); }
ref::Tensor opt(const RV& x, int i) { return i >= 0 ? x[size_t(i)] : ref::Tensor(); }

OpCase& grad_row(std::vector<OpCase>& cs, std::string name, std::vector<Input> in, EngineFn e, RefFn r) {
  cs.push_back(make_grad_case(std::move(name), std::move(in), std::move(e), std::move(r)));
  return cs.back();
}

struct SoftVariant {
  std::string name;
  Shape shape;
  Layout layout;
  int64_t dim;
};

const std::vector<SoftVariant> kSoftVariants = {
    {"inner", {4, 7}, Layout::Contiguous, 1},       {"outer", {5, 6}, Layout::Contiguous, 0},
    {"middle", {3, 4, 5}, Layout::Contiguous, -2},  {"long_row", {2, 1500}, Layout::Contiguous, -1},
    {"zero_rows", {0, 5}, Layout::Contiguous, 1},   {"zero_dim", {4, 0}, Layout::Contiguous, 1},
    {"scalar", {}, Layout::Contiguous, 0},          {"single", {1}, Layout::Contiguous, 0},
    {"transposed", {6, 9}, Layout::Transposed, -1}, {"strided", {5, 8}, Layout::Strided, 1},
    {"expanded", {3, 6}, Layout::Expanded, 0},
};

// softmax_causal's reference: LibTorch's softmax of the scores with j > i filled with -inf (the
// mask is triu of ones shaped like the scores, so LibTorch raises where there is no (L, S));
// masked entries get zero gradient.
ref::Tensor ref_softmax_causal(const ref::Tensor& x) {
  const ref::Tensor mask = ref::ne(ref::triu(ref::ones_like(x), 1), 0);
  return ref::softmax(ref::masked_fill(x, mask, -std::numeric_limits<double>::infinity()), -1);
}

// (batch, heads, L, S) scores: square, fewer queries than keys, more queries than keys (rows past
// S see every key), a transposed view, empty.
const std::vector<SoftVariant> kCausalVariants = {
    {"square", {2, 3, 5, 5}, Layout::Contiguous, -1},   {"wide", {3, 4, 7}, Layout::Contiguous, -1},
    {"tall", {7, 4}, Layout::Contiguous, -1},           {"transposed", {2, 6, 6}, Layout::Transposed, -1},
    {"long_row", {2, 40, 300}, Layout::Contiguous, -1}, {"zero_size", {0, 3, 3}, Layout::Contiguous, -1},
};

void add_softmax(std::vector<OpCase>& cs) {
  for (DT d : kFloats)
    for (const SoftVariant& v : kSoftVariants) {
      const int64_t dim = v.dim;
      cs.push_back({nm("softmax", d, v.name),
                    {Input{v.shape, d, v.layout}},
                    [dim](const EV& x) { return one(tb::softmax(x[0], dim)); },
                    [dim](const RV& x) { return one(ref::softmax(x[0], dim)); }});
      cs.back().grad = differentiable(d);
      cs.push_back({nm("log_softmax", d, v.name),
                    {Input{v.shape, d, v.layout}},
                    [dim](const EV& x) { return one(tb::log_softmax(x[0], dim)); },
                    [dim](const RV& x) { return one(ref::log_softmax(x[0], dim)); }});
      cs.back().grad = differentiable(d);
    }
  for (DT d : {DT::BFloat16, DT::Int64}) {
    cs.push_back({nm("softmax", d, "dtype_float32"),
                  {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::softmax(x[0], 1, DT::Float32)); },
                  [](const RV& x) { return one(ref::softmax(x[0], 1, DT::Float32)); }});
    cs.push_back({nm("log_softmax", d, "dtype_float64"),
                  {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::log_softmax(x[0], 0, DT::Float64)); },
                  [](const RV& x) { return one(ref::log_softmax(x[0], 0, DT::Float64)); }});
  }
  for (DT d : {DT::Int64, DT::Int32, DT::Bool}) {
    cs.push_back({nm("softmax", d, "error_dtype"),
                  {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::softmax(x[0], 1)); },
                  [](const RV& x) { return one(ref::softmax(x[0], 1)); },
                  Check::Error});
    cs.push_back({nm("log_softmax", d, "error_dtype"),
                  {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::log_softmax(x[0], 1)); },
                  [](const RV& x) { return one(ref::log_softmax(x[0], 1)); },
                  Check::Error});
  }
  for (DT d : kFloats)
    for (const SoftVariant& v : kCausalVariants) {
      cs.push_back({nm("softmax_causal", d, v.name),
                    {Input{v.shape, d, v.layout}},
                    [](const EV& x) { return one(tb::softmax_causal(x[0])); },
                    [](const RV& x) { return one(ref_softmax_causal(x[0])); }});
      cs.back().grad = differentiable(d);
    }
  cs.push_back({"softmax_causal/float32/error_1d",
                {Input{{5}}},
                [](const EV& x) { return one(tb::softmax_causal(x[0])); },
                [](const RV& x) { return one(ref_softmax_causal(x[0])); },
                Check::Error});
  cs.push_back({"softmax/float32/error_dim",
                {Input{{4, 7}}},
                [](const EV& x) { return one(tb::softmax(x[0], 2)); },
                [](const RV& x) { return one(ref::softmax(x[0], 2)); },
                Check::Error});
}

// Gradient rows of softmax and log_softmax: an empty row, views first, a chain, the dtype argument.
void add_softmax_grads(std::vector<OpCase>& cs, DT dt) {
  const std::string d = core::name(dt);
  grad_row(
      cs, "softmax/" + d + "/zero_size", {{{0, 4}, dt}}, [](const EV& x) { return one(tb::softmax(x[0], 1)); },
      [](const RV& x) { return one(R::softmax(x[0], 1)); });
  grad_row(
      cs, "log_softmax/" + d + "/zero_size", {{{0, 4}, dt}}, [](const EV& x) { return one(tb::log_softmax(x[0], 1)); },
      [](const RV& x) { return one(R::log_softmax(x[0], 1)); });
  // A view first: the first slice, transposed, along its (now) leading dim.
  grad_row(
      cs, "softmax/" + d + "/view", {{{2, 3, 4}, dt}},
      [](const EV& x) { return one(tb::softmax(x[0].select(0, 0).transpose(0, 1), 0)); },
      [](const RV& x) { return one(R::softmax(R::transpose(R::select(x[0], 0, 0), 0, 1), 0)); });
  grad_row(
      cs, "log_softmax/" + d + "/view", {{{4, 6}, dt}},
      [](const EV& x) { return one(tb::log_softmax(x[0].narrow(1, 1, 4).t(), -1)); },
      [](const RV& x) { return one(R::log_softmax(R::t(R::narrow(x[0], 1, 1, 4)), -1)); });
  // Chains: softmax of a log_softmax (each backward fed by the other's gradient).
  grad_row(
      cs, "softmax/" + d + "/chain_log_softmax", {{{3, 4}, dt, Layout::Transposed}},
      [](const EV& x) { return one(tb::softmax(tb::log_softmax(x[0], 0), 1)); },
      [](const RV& x) { return one(R::softmax(R::log_softmax(x[0], 0), 1)); });
  // dtype argument: the input is cast first, the gradient comes back in the input's dtype.
  const DType other = dt == DType::Float32 ? DType::Float64 : DType::Float32;
  grad_row(
      cs, "softmax/" + d + "/dtype_" + core::name(other), {{{3, 4}, dt}},
      [other](const EV& x) { return one(tb::softmax(x[0], 1, other)); },
      [other](const RV& x) { return one(R::softmax(x[0], 1, other)); })
      .gradcheck = dt != DType::Float64;  // a float32 forward: too coarse for finite differences
  grad_row(
      cs, "log_softmax/" + d + "/dtype_" + core::name(other), {{{3, 4}, dt}},
      [other](const EV& x) { return one(tb::log_softmax(x[0], 0, other)); },
      [other](const RV& x) { return one(R::log_softmax(x[0], 0, other)); })
      .gradcheck = dt != DType::Float64;  // as above
}

void add_layer_norm(std::vector<OpCase>& cs) {
  for (DT d : kFloats) {
    const bool g = differentiable(d);
    cs.push_back({nm("layer_norm", d, "affine"),
                  {Input{{4, 10}, d}, Input{{10}, d}, Input{{10}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {10}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {10}, x[1], x[2])); }});
    cs.back().grad = g;
    cs.push_back({nm("layer_norm", d, "2d_shape"),
                  {Input{{2, 3, 8}, d}, Input{{3, 8}, d}, Input{{3, 8}, d}},
                  [](const EV& x) {
                    return one(tb::layer_norm(x[0], {3, 8}, x[1], x[2], 1e-3));
                  },
                  [](const RV& x) {
                    return one(ref::layer_norm(x[0], {3, 8}, x[1], x[2], 1e-3));
                  }});
    cs.back().grad = g;
    cs.push_back({nm("layer_norm", d, "no_affine"),
                  {Input{{5, 7}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {7})); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {7})); }});
    cs.push_back({nm("layer_norm", d, "weight_only_strided"),
                  {Input{{3, 9}, d, Layout::Strided}, Input{{9}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {9}, x[1])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {9}, x[1])); }});
    cs.back().grad = g;
    cs.push_back({nm("layer_norm", d, "long_row"),
                  {Input{{2, 3000}, d}, Input{{3000}, d}, Input{{3000}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {3000}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {3000}, x[1], x[2])); }});
    cs.push_back({nm("layer_norm", d, "zero_rows"),
                  {Input{{0, 6}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {6}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {6}, x[1], x[2])); }});
    cs.back().grad = g;
    cs.push_back({nm("layer_norm", d, "single"),
                  {Input{{1}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {1})); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {1})); }});
    cs.back().grad = g;
    // One element normalises to exactly 0; LibTorch's rounding of a bf16/f16 mean is amplified
    // by rstd = 1/sqrt(eps) ~ 316 (measured 1.2e-5 vs the exact 0).
    if (d == DT::Float16 || d == DT::BFloat16) cs.back().tol = Tolerance{default_tolerance(d).rtol, 1e-4};
  }
  cs.push_back({"layer_norm/float32/error_shape",
                {Input{{4, 10}}},
                [](const EV& x) { return one(tb::layer_norm(x[0], {9})); },
                [](const RV& x) { return one(ref::layer_norm(x[0], {9})); },
                Check::Error});
  cs.push_back({"layer_norm/float32/error_weight",
                {Input{{4, 10}}, Input{{9}}},
                [](const EV& x) { return one(tb::layer_norm(x[0], {10}, x[1])); },
                [](const RV& x) { return one(ref::layer_norm(x[0], {10}, x[1])); },
                Check::Error});
}

// Gradient rows of layer_norm: the affine parameters one at a time, an expanded input, a view
// first with a larger eps, and a chain into log_softmax (the GPT head's pattern).
void add_layer_norm_grads(std::vector<OpCase>& cs, DT dt) {
  const std::string d = core::name(dt);
  struct Row {
    std::string name;
    Shape shape, ns;
    Layout layout;
    bool w, b;
  };
  const std::vector<Row> rows = {
      {"no_affine_transposed", {5, 4}, {4}, Layout::Transposed, false, false},
      {"bias_only", {2, 3, 5}, {5}, Layout::Contiguous, false, true},
      {"expanded", {3, 5}, {5}, Layout::Expanded, true, true},
  };
  for (const Row& r : rows) {
    std::vector<Input> in = {{r.shape, dt, r.layout}};
    const int wi = r.w ? int(in.size()) : -1;
    if (r.w) in.push_back({r.ns, dt});
    const int bi = r.b ? int(in.size()) : -1;
    if (r.b) in.push_back({r.ns, dt});
    const Shape ns = r.ns;
    grad_row(
        cs, "layer_norm/" + d + "/" + r.name, in,
        [=](const EV& x) { return one(tb::layer_norm(x[0], ns, opt(x, wi), opt(x, bi))); },
        [=](const RV& x) { return one(R::layer_norm(x[0], ns, opt(x, wi), opt(x, bi))); });
  }
  grad_row(
      cs, "layer_norm/" + d + "/view_eps", {{{6, 4}, dt}, {{6}, dt}, {{6}, dt}},
      [](const EV& x) { return one(tb::layer_norm(x[0].t(), {6}, x[1], x[2], 1e-2)); },
      [](const RV& x) { return one(R::layer_norm(R::t(x[0]), {6}, x[1], x[2], 1e-2)); });
  grad_row(
      cs, "layer_norm/" + d + "/chain_log_softmax", {{{3, 7}, dt}, {{7}, dt}, {{7}, dt}},
      [](const EV& x) { return one(tb::log_softmax(tb::layer_norm(x[0], {7}, x[1], x[2]), -1)); },
      [](const RV& x) { return one(R::log_softmax(R::layer_norm(x[0], {7}, x[1], x[2]), -1)); });
  if (dt == DType::Float32) {
    // A GPT-width row: 256 values per statistic.
    grad_row(
        cs, "layer_norm/" + d + "/wide", {{{8, 256}, dt}, {{256}, dt}, {{256}, dt}},
        [](const EV& x) { return one(tb::layer_norm(x[0], {256}, x[1], x[2])); },
        [](const RV& x) { return one(R::layer_norm(x[0], {256}, x[1], x[2])); });
  }
}

// group_norm: x (N, C, *), weight and bias (C).
void add_group_norm(std::vector<OpCase>& cs) {
  for (DT d : kFloats) {
    const bool g = differentiable(d);
    // Constant groups (and rows) normalise to exactly 0 (PyTorch centres x - mean); the folded
    // x * a + b left ulp(x * rstd) ~ 1e-3 behind. With weight and bias PyTorch folds them itself
    // (an error of ulp(x * rstd * w)), so the affine row uses a value whose products are exact.
    cs.push_back({nm("group_norm", d, "constant_groups"),
                  {Input{{2, 6, 5}, d}},
                  [](const EV& x) { return one(tb::group_norm(tb::add(tb::mul(x[0], 0.0), 37.3), 3)); },
                  [](const RV& x) { return one(ref::group_norm(ref::add(ref::mul(x[0], 0.0), 37.3), 3)); }});
    cs.push_back({nm("group_norm", d, "constant_groups_affine"),
                  {Input{{2, 6, 5}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(tb::add(tb::mul(x[0], 0.0), 0.5), 3, x[1], x[2])); },
                  [](const RV& x) { return one(ref::group_norm(ref::add(ref::mul(x[0], 0.0), 0.5), 3, x[1], x[2])); }});
    cs.push_back(
        {nm("layer_norm", d, "constant_rows"),
         {Input{{4, 7}, d}, Input{{7}, d}, Input{{7}, d}},
         [](const EV& x) { return one(tb::layer_norm(tb::add(tb::mul(x[0], 0.0), -21.7), {7}, x[1], x[2])); },
         [](const RV& x) { return one(ref::layer_norm(ref::add(ref::mul(x[0], 0.0), -21.7), {7}, x[1], x[2])); }});
    cs.push_back({nm("group_norm", d, "affine"),
                  {Input{{2, 6, 5}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 3, x[1], x[2])); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 3, x[1], x[2])); }});
    cs.back().grad = g;
    cs.push_back({nm("group_norm", d, "4d_strided"),
                  {Input{{2, 4, 3, 6}, d, Layout::Strided}, Input{{4}, d}, Input{{4}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1], x[2], 1e-3)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 2, x[1], x[2], 1e-3)); }});
    cs.back().grad = g;
    cs.push_back({nm("group_norm", d, "no_affine_transposed"),
                  {Input{{3, 4, 5}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 1)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 1)); }});
    cs.push_back({nm("group_norm", d, "per_channel"),
                  {Input{{4, 6, 3}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 6, x[1])); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 6, x[1])); }});
    cs.back().grad = g;
    // A channels-last input gives a channels-last result (strides compared), also where size-1
    // dims leave the layout ambiguous and PyTorch's stride heuristic decides (Note [Channels-last
    // by strides]); 5-D: channels-last-3d.
    for (const auto& [tag, shape] : {std::pair<const char*, Shape>{"channels_last", {2, 4, 3, 5}},
                                     {"channels_last_ambiguous", {1, 2, 2, 1}},
                                     {"channels_last_3d", {2, 4, 2, 3, 2}}}) {
      cs.push_back({nm("group_norm", d, tag),
                    {Input{shape, d, Layout::ChannelsLast}, Input{{shape[1]}, d}, Input{{shape[1]}, d}},
                    [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1], x[2], 1e-3)); },
                    [](const RV& x) { return one(ref::group_norm(x[0], 2, x[1], x[2], 1e-3)); },
                    Check::View});
      cs.back().grad = g;
    }
    cs.push_back({nm("group_norm", d, "zero_batch"),
                  {Input{{0, 4, 3}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 2)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 2)); }});
  }
  cs.push_back({"group_norm/float32/error_groups",
                {Input{{2, 6, 3}}},
                [](const EV& x) { return one(tb::group_norm(x[0], 4)); },
                [](const RV& x) { return one(ref::group_norm(x[0], 4)); },
                Check::Error});
  cs.push_back({"group_norm/float32/error_weight",
                {Input{{2, 6, 3}}, Input{{4}}},
                [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1])); },
                [](const RV& x) { return one(ref::group_norm(x[0], 2, x[1])); },
                Check::Error});
  cs.push_back({"group_norm/float32/error_1d",
                {Input{{6}}},
                [](const EV& x) { return one(tb::group_norm(x[0], 2)); },
                [](const RV& x) { return one(ref::group_norm(x[0], 2)); },
                Check::Error});
}

// Gradient rows of group_norm: one group, a 2-D input, constant groups, a view first.
void add_group_norm_grads(std::vector<OpCase>& cs, DT dt) {
  const std::string d = core::name(dt);
  grad_row(
      cs, "group_norm/" + d + "/one_group", {{{3, 4, 2}, dt, Layout::Transposed}},
      [](const EV& x) { return one(tb::group_norm(x[0], 1)); },
      [](const RV& x) { return one(R::group_norm(x[0], 1)); });
  grad_row(
      cs, "group_norm/" + d + "/2d", {{{4, 6}, dt}, {{6}, dt}, {{6}, dt}},
      [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1], x[2])); },
      [](const RV& x) { return one(R::group_norm(x[0], 2, x[1], x[2])); });
  // Constant groups: the gradient through (x - mean) * rstd with var exactly 0 (the folded
  // x * a + b form left x - mean ~ ulp, and the gradient after it off by O(1)). No gradcheck: rstd
  // is 1/sqrt(eps) there, too steep for finite differences.
  for (const double c : {37.3, -2.25}) {
    OpCase& k = grad_row(
        cs, "group_norm/" + d + "/constant_groups_" + (c > 0 ? "pos" : "neg"),
        {{{2, 6, 5}, dt, Layout::Contiguous, Values::Zeros}},
        [c](const EV& x) { return one(tb::group_norm(tb::add(x[0], c), 3)); },
        [c](const RV& x) { return one(R::group_norm(R::add(x[0], c), 3)); });
    k.gradcheck = false;
    // LibTorch's float32 backward forms sum(g x) - mean * sum(g), which cancels for a constant
    // group (3e-5 relative measured at 37.3): wider than grad_tolerance, far below the O(1) fault.
    if (dt == DType::Float32) k.grad_tol = Tolerance{2e-4, 2e-4};
  }
  grad_row(
      cs, "group_norm/" + d + "/view_weight_only", {{{3, 2, 4}, dt}, {{4}, dt}},
      [](const EV& x) { return one(tb::group_norm(x[0].transpose(1, 2), 2, x[1], {}, 1e-3)); },
      [](const RV& x) { return one(R::group_norm(R::transpose(x[0], 1, 2), 2, x[1], {}, 1e-3)); });
}

// batch_norm: inputs x, running_mean, running_var (positive), weight, bias. The running stats are
// buffers: gradient rows differentiate x, weight and bias only.
void add_batch_norm(std::vector<OpCase>& cs) {
  struct BnVariant {
    std::string name;
    Shape shape;
    Layout layout;
    bool training;
    bool grad = false;
  };
  const std::vector<BnVariant> bn = {
      {"train_2d", {8, 3}, Layout::Contiguous, true, true},
      {"train_4d", {4, 3, 5, 5}, Layout::Contiguous, true},
      {"train_3d_transposed", {4, 6, 3}, Layout::Transposed, true},
      {"eval_4d", {2, 3, 4, 4}, Layout::Contiguous, false},
      {"eval_strided", {3, 4, 5}, Layout::Strided, false},
  };
  for (DT d : {DT::Float32, DT::Float64, DT::BFloat16})
    for (const BnVariant& v : bn) {
      const int64_t C = v.shape[1];
      const bool tr = v.training;
      const DT sd = d == DT::BFloat16 ? DT::Float32 : d;  // stats in float, as nn.BatchNorm keeps them
      cs.push_back({nm("batch_norm", d, v.name),
                    {Input{v.shape, d, v.layout}, Input{{C}, sd}, Input{{C}, sd, Layout::Contiguous, Values::Positive},
                     Input{{C}, sd}, Input{{C}, sd}},
                    [tr](const EV& x) {
                      return EV{tb::batch_norm(x[0], x[1], x[2], x[3], x[4], tr, 0.1, 1e-5), x[1], x[2]};
                    },
                    [tr](const RV& x) {
                      return RV{ref::batch_norm(x[0], x[1], x[2], x[3], x[4], tr, 0.1, 1e-5), x[1], x[2]};
                    }});
      cs.back().grad = v.grad && differentiable(d);
      if (cs.back().grad) cs.back().wrt = {0, 3, 4};
    }
  cs.push_back({"batch_norm/float32/train_no_stats_no_affine",
                {Input{{6, 4, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }});
  cs.back().grad = true;
  cs.push_back({"batch_norm/float32/train_momentum",
                {Input{{5, 2}}, Input{{2}}, Input{{2}, DT::Float32, Layout::Contiguous, Values::Positive}},
                [](const EV& x) {
                  return EV{tb::batch_norm(x[0], x[1], x[2], {}, {}, true, 0.3, 1e-3), x[1], x[2]};
                },
                [](const RV& x) {
                  return RV{ref::batch_norm(x[0], x[1], x[2], {}, {}, true, 0.3, 1e-3), x[1], x[2]};
                }});
  cs.push_back({"batch_norm/float32/zero_batch",
                {Input{{0, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }});
  cs.push_back({"batch_norm/float32/error_one_value",
                {Input{{1, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                Check::Error});
  cs.push_back({"batch_norm/float32/error_weight_size",
                {Input{{4, 3}}, Input{{2}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, x[1], {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, x[1], {}, true, 0.1, 1e-5)); },
                Check::Error});
  cs.push_back({"batch_norm/int64/error_dtype",
                {Input{{4, 3}, DT::Int64}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                Check::Error});
}

// Gradient rows of batch_norm: awkward layouts, running stats and affine parameters optional,
// evaluation mode, and a view first with a chain into log_softmax.
void add_batch_norm_grads(std::vector<OpCase>& cs, DT dt) {
  const std::string d = core::name(dt);
  struct Row {
    std::string name;
    Shape shape;
    Layout layout;
    bool training, stats, affine;
  };
  std::vector<Row> rows = {
      {"train_4d_transposed", {3, 2, 2, 3}, Layout::Transposed, true, true, true},
      {"train_3d_strided", {2, 3, 4}, Layout::Strided, true, true, true},
      {"eval_3d", {4, 3, 2}, Layout::Contiguous, false, true, true},
      {"eval_no_affine_transposed", {3, 4, 2}, Layout::Transposed, false, true, false},
  };
  // float32's is a row of add_batch_norm.
  if (dt == DType::Float64)
    rows.push_back({"train_no_stats_no_affine", {4, 3, 2}, Layout::Contiguous, true, false, false});
  for (const Row& r : rows) {
    const int64_t C = r.shape[1];
    const bool tr = r.training, st = r.stats, af = r.affine;
    std::vector<Input> in = {
        {r.shape, dt, r.layout}, {{C}, dt}, {{C}, dt, Layout::Contiguous, Values::Positive}, {{C}, dt}, {{C}, dt}};
    grad_row(
        cs, "batch_norm/" + d + "/" + r.name, in,
        [=](const EV& x) {
          tb::Tensor rm = st ? x[1] : tb::Tensor(), rv = st ? x[2] : tb::Tensor();
          tb::Tensor y = tb::batch_norm(x[0], rm, rv, af ? x[3] : tb::Tensor(), af ? x[4] : tb::Tensor(), tr, 0.1,
                                        1e-5);
          return st ? EV{y, x[1], x[2]} : EV{y};
        },
        [=](const RV& x) {
          ref::Tensor rm = st ? x[1] : ref::Tensor(), rv = st ? x[2] : ref::Tensor();
          ref::Tensor y = R::batch_norm(x[0], rm, rv, af ? x[3] : ref::Tensor(), af ? x[4] : ref::Tensor(), tr, 0.1,
                                        1e-5);
          return st ? RV{y, x[1], x[2]} : RV{y};
        })
        .wrt = af ? std::vector<size_t>{0, 3, 4} : std::vector<size_t>{0};
  }
  grad_row(
      cs, "batch_norm/" + d + "/view_chain", {{{5, 3}, dt}, {{3}, dt}, {{3}, dt}},
      [](const EV& x) {
        return one(tb::log_softmax(tb::batch_norm(x[0].t().t(), {}, {}, x[1], x[2], true, 0.1, 1e-3), 1));
      },
      [](const RV& x) {
        return one(R::log_softmax(R::batch_norm(R::t(R::t(x[0])), {}, {}, x[1], x[2], true, 0.1, 1e-3), 1));
      });
}

// Bench rows: (4096, 1024) rows.
void add_bench(std::vector<OpCase>& cs) {
  const double rows_elems = 4096.0 * 1024;
  for (DT d : {DT::Float32, DT::BFloat16}) {
    OpCase c{nm("softmax", d, "rows"),
             {Input{{4096, 1024}, d}},
             [](const EV& x) { return one(tb::softmax(x[0], -1)); },
             [](const RV& x) { return one(ref::softmax(x[0], -1)); }};
    c.bench = true;
    c.bytes = 2 * rows_elems * double(core::itemsize(d));
    c.flops = 4 * rows_elems;
    cs.push_back(std::move(c));
  }
  for (DT d : {DT::Float32, DT::BFloat16}) {
    OpCase c{nm("layer_norm", d, "rows"),
             {Input{{4096, 1024}, d}, Input{{1024}, d}, Input{{1024}, d}},
             [](const EV& x) { return one(tb::layer_norm(x[0], {1024}, x[1], x[2])); },
             [](const RV& x) { return one(ref::layer_norm(x[0], {1024}, x[1], x[2])); }};
    c.bench = true;
    const double isz = double(core::itemsize(d));
    c.bytes = 2 * rows_elems * isz + 2 * 1024 * isz;
    c.flops = 8 * rows_elems;
    cs.push_back(std::move(c));
  }
}

// layer_norm's bfloat16 backward where it runs on every thread (2048 x 32 >= kParallelGrain): the
// weight and bias gradients are sums over the 2048 rows, kept per thread in float32, merged and
// rounded to bfloat16 once. The reference is LibTorch's layer_norm in float32 on the same bfloat16
// values, its output and gradients rounded once to bfloat16 (autograd through the casts), not
// LibTorch's own bfloat16 kernel: that one adds each row into per-thread weight and bias gradient
// buffers of the input's dtype (aten/src/ATen/native/cpu/layer_norm_kernel.cpp), rounding every
// partial sum to bfloat16 (torch 2.11, 2048 x 32 standard normals: 3-6.5 off float64 on gradients
// of ~100, different at 1 and 2 threads), where the engine's are within one rounding (0.23 on 139).
// bfloat16's gradient tolerances.
void add_bf16_parallel(std::vector<OpCase>& cs) {
  const DT b = DT::BFloat16, f = DT::Float32;
  grad_row(
      cs, "layer_norm/bfloat16/rows_parallel", {{{2048, 32}, b}, {{32}, b}, {{32}, b}},
      [](const EV& x) { return one(tb::layer_norm(x[0], {32}, x[1], x[2])); },
      [=](const RV& x) { return one(R::to(R::layer_norm(R::to(x[0], f), {32}, R::to(x[1], f), R::to(x[2], f)), b)); });
}

}  // namespace

std::vector<OpCase> nn_norm_cases() {
  std::vector<OpCase> cs;
  add_softmax(cs);
  add_layer_norm(cs);
  add_group_norm(cs);
  add_batch_norm(cs);
  add_bench(cs);
  add_bf16_parallel(cs);
  for (DT dt : {DT::Float32, DT::Float64}) {
    add_softmax_grads(cs, dt);
    add_layer_norm_grads(cs, dt);
    add_group_norm_grads(cs, dt);
    add_batch_norm_grads(cs, dt);
  }
  // Under autocast softmax is on no list: it keeps its input's dtype (see autocast_case.h).
  cs.push_back(autocast_case(
      "softmax/bfloat16", {{{4, 9}, DT::BFloat16}}, [](const EV& x) { return tb::softmax(x[0], 1); },
      [](const RV& x) { return R::softmax(x[0], 1); }));
  return cs;
}

}  // namespace tb::suites
