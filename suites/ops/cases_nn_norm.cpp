// Case table of the nn_norm family (engine/ops/nn_norm.h vs reference/nn_norm.h): softmax and
// log_softmax along inner/outer/middle dims, layer_norm and group_norm with and without affine parameters,
// batch_norm in training (running stats returned as extra outputs, so their in-place update is
// checked) and evaluation mode; Check::Error rows where LibTorch raises; bench rows on
// (4096, 1024) rows.
#include <limits>

#include "engine/autograd/functions.h"
#include "engine/ops/nn_norm.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/nn_norm.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

using DT = DType;
using EV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;

const DT kFloats[] = {DT::Float32, DT::Float64, DT::BFloat16, DT::Float16};

std::string nm(const std::string& op, DT d, const std::string& v) { return op + "/" + core::name(d) + "/" + v; }

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
// mask is triu of ones shaped like the scores, so LibTorch raises where there is no (L, S)).
ref::Tensor ref_softmax_causal(const ref::Tensor& x) {
  const ref::Tensor mask = ref::ne(ref::triu(ref::ones_like(x), 1), 0);
  return ref::softmax(ref::masked_fill(x, mask, -std::numeric_limits<double>::infinity()), -1);
}

// (batch, heads, L, S) scores: square, fewer queries than keys, more queries than keys (rows past
// S see every key), a transposed view, empty.
const std::vector<SoftVariant> kCausalVariants = {
    {"square", {2, 3, 5, 5}, Layout::Contiguous, -1}, {"wide", {3, 4, 7}, Layout::Contiguous, -1},
    {"tall", {7, 4}, Layout::Contiguous, -1},         {"transposed", {2, 6, 6}, Layout::Transposed, -1},
    {"long_row", {2, 40, 300}, Layout::Contiguous, -1}, {"zero_size", {0, 3, 3}, Layout::Contiguous, -1},
};

}  // namespace

std::vector<OpCase> nn_norm_cases() {
  std::vector<OpCase> cs;
  // ---- softmax, log_softmax ----
  for (DT d : kFloats)
    for (const SoftVariant& v : kSoftVariants) {
      const int64_t dim = v.dim;
      cs.push_back({nm("softmax", d, v.name), {Input{v.shape, d, v.layout}},
                    [dim](const EV& x) { return one(tb::softmax(x[0], dim)); },
                    [dim](const RV& x) { return one(ref::softmax(x[0], dim)); }});
      cs.push_back({nm("log_softmax", d, v.name), {Input{v.shape, d, v.layout}},
                    [dim](const EV& x) { return one(tb::log_softmax(x[0], dim)); },
                    [dim](const RV& x) { return one(ref::log_softmax(x[0], dim)); }});
    }
  for (DT d : {DT::BFloat16, DT::Int64}) {
    cs.push_back({nm("softmax", d, "dtype_float32"), {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::softmax(x[0], 1, DT::Float32)); },
                  [](const RV& x) { return one(ref::softmax(x[0], 1, DT::Float32)); }});
    cs.push_back({nm("log_softmax", d, "dtype_float64"), {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::log_softmax(x[0], 0, DT::Float64)); },
                  [](const RV& x) { return one(ref::log_softmax(x[0], 0, DT::Float64)); }});
  }
  for (DT d : {DT::Int64, DT::Int32, DT::Bool}) {
    cs.push_back({nm("softmax", d, "error_dtype"), {Input{{4, 7}, d}}, [](const EV& x) { return one(tb::softmax(x[0], 1)); },
                  [](const RV& x) { return one(ref::softmax(x[0], 1)); }, Check::Error});
    cs.push_back({nm("log_softmax", d, "error_dtype"), {Input{{4, 7}, d}},
                  [](const EV& x) { return one(tb::log_softmax(x[0], 1)); },
                  [](const RV& x) { return one(ref::log_softmax(x[0], 1)); }, Check::Error});
  }
  for (DT d : kFloats)
    for (const SoftVariant& v : kCausalVariants)
      cs.push_back({nm("softmax_causal", d, v.name), {Input{v.shape, d, v.layout}},
                    [](const EV& x) { return one(tb::softmax_causal(x[0])); },
                    [](const RV& x) { return one(ref_softmax_causal(x[0])); }});
  cs.push_back({"softmax_causal/float32/error_1d", {Input{{5}}}, [](const EV& x) { return one(tb::softmax_causal(x[0])); },
                [](const RV& x) { return one(ref_softmax_causal(x[0])); }, Check::Error});
  cs.push_back({"softmax/float32/error_dim", {Input{{4, 7}}}, [](const EV& x) { return one(tb::softmax(x[0], 2)); },
                [](const RV& x) { return one(ref::softmax(x[0], 2)); }, Check::Error});

  // ---- layer_norm ----
  for (DT d : kFloats) {
    cs.push_back({nm("layer_norm", d, "affine"), {Input{{4, 10}, d}, Input{{10}, d}, Input{{10}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {10}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {10}, x[1], x[2])); }});
    cs.push_back({nm("layer_norm", d, "2d_shape"), {Input{{2, 3, 8}, d}, Input{{3, 8}, d}, Input{{3, 8}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {3, 8}, x[1], x[2], 1e-3)); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {3, 8}, x[1], x[2], 1e-3)); }});
    cs.push_back({nm("layer_norm", d, "no_affine"), {Input{{5, 7}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {7})); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {7})); }});
    cs.push_back({nm("layer_norm", d, "weight_only_strided"), {Input{{3, 9}, d, Layout::Strided}, Input{{9}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {9}, x[1])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {9}, x[1])); }});
    cs.push_back({nm("layer_norm", d, "long_row"), {Input{{2, 3000}, d}, Input{{3000}, d}, Input{{3000}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {3000}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {3000}, x[1], x[2])); }});
    cs.push_back({nm("layer_norm", d, "zero_rows"), {Input{{0, 6}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {6}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {6}, x[1], x[2])); }});
    cs.push_back({nm("layer_norm", d, "single"), {Input{{1}, d}},
                  [](const EV& x) { return one(tb::layer_norm(x[0], {1})); },
                  [](const RV& x) { return one(ref::layer_norm(x[0], {1})); }});
    // One element normalises to exactly 0; LibTorch's rounding of a bf16/f16 mean is amplified
    // by rstd = 1/sqrt(eps) ~ 316 (measured 1.2e-5 vs the exact 0).
    if (d == DT::Float16 || d == DT::BFloat16) cs.back().tol = Tolerance{default_tolerance(d).rtol, 1e-4};
  }
  cs.push_back({"layer_norm/float32/error_shape", {Input{{4, 10}}}, [](const EV& x) { return one(tb::layer_norm(x[0], {9})); },
                [](const RV& x) { return one(ref::layer_norm(x[0], {9})); }, Check::Error});
  cs.push_back({"layer_norm/float32/error_weight", {Input{{4, 10}}, Input{{9}}},
                [](const EV& x) { return one(tb::layer_norm(x[0], {10}, x[1])); },
                [](const RV& x) { return one(ref::layer_norm(x[0], {10}, x[1])); }, Check::Error});

  // ---- group_norm: x (N, C, *), weight and bias (C) ----
  for (DT d : kFloats) {
    // Constant groups (and rows) normalise to exactly 0 (PyTorch centres x - mean); the folded
    // x * a + b left ulp(x * rstd) ~ 1e-3 behind. With weight and bias PyTorch folds them itself
    // (an error of ulp(x * rstd * w)), so the affine row uses a value whose products are exact.
    cs.push_back({nm("group_norm", d, "constant_groups"), {Input{{2, 6, 5}, d}},
                  [](const EV& x) { return one(tb::group_norm(tb::add(tb::mul(x[0], 0.0), 37.3), 3)); },
                  [](const RV& x) { return one(ref::group_norm(ref::add(ref::mul(x[0], 0.0), 37.3), 3)); }});
    cs.push_back({nm("group_norm", d, "constant_groups_affine"), {Input{{2, 6, 5}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(tb::add(tb::mul(x[0], 0.0), 0.5), 3, x[1], x[2])); },
                  [](const RV& x) { return one(ref::group_norm(ref::add(ref::mul(x[0], 0.0), 0.5), 3, x[1], x[2])); }});
    cs.push_back({nm("layer_norm", d, "constant_rows"), {Input{{4, 7}, d}, Input{{7}, d}, Input{{7}, d}},
                  [](const EV& x) { return one(tb::layer_norm(tb::add(tb::mul(x[0], 0.0), -21.7), {7}, x[1], x[2])); },
                  [](const RV& x) { return one(ref::layer_norm(ref::add(ref::mul(x[0], 0.0), -21.7), {7}, x[1], x[2])); }});
    cs.push_back({nm("group_norm", d, "affine"), {Input{{2, 6, 5}, d}, Input{{6}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 3, x[1], x[2])); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 3, x[1], x[2])); }});
    cs.push_back({nm("group_norm", d, "4d_strided"), {Input{{2, 4, 3, 6}, d, Layout::Strided}, Input{{4}, d}, Input{{4}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1], x[2], 1e-3)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 2, x[1], x[2], 1e-3)); }});
    cs.push_back({nm("group_norm", d, "no_affine_transposed"), {Input{{3, 4, 5}, d, Layout::Transposed}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 1)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 1)); }});
    cs.push_back({nm("group_norm", d, "per_channel"), {Input{{4, 6, 3}, d}, Input{{6}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 6, x[1])); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 6, x[1])); }});
    cs.push_back({nm("group_norm", d, "zero_batch"), {Input{{0, 4, 3}, d}},
                  [](const EV& x) { return one(tb::group_norm(x[0], 2)); },
                  [](const RV& x) { return one(ref::group_norm(x[0], 2)); }});
  }
  cs.push_back({"group_norm/float32/error_groups", {Input{{2, 6, 3}}}, [](const EV& x) { return one(tb::group_norm(x[0], 4)); },
                [](const RV& x) { return one(ref::group_norm(x[0], 4)); }, Check::Error});
  cs.push_back({"group_norm/float32/error_weight", {Input{{2, 6, 3}}, Input{{4}}},
                [](const EV& x) { return one(tb::group_norm(x[0], 2, x[1])); },
                [](const RV& x) { return one(ref::group_norm(x[0], 2, x[1])); }, Check::Error});
  cs.push_back({"group_norm/float32/error_1d", {Input{{6}}}, [](const EV& x) { return one(tb::group_norm(x[0], 2)); },
                [](const RV& x) { return one(ref::group_norm(x[0], 2)); }, Check::Error});

  // ---- batch_norm: inputs x, running_mean, running_var (positive), weight, bias ----
  struct BnVariant {
    std::string name;
    Shape shape;
    Layout layout;
    bool training;
  };
  const std::vector<BnVariant> bn = {
      {"train_2d", {8, 3}, Layout::Contiguous, true},        {"train_4d", {4, 3, 5, 5}, Layout::Contiguous, true},
      {"train_3d_transposed", {4, 6, 3}, Layout::Transposed, true}, {"eval_4d", {2, 3, 4, 4}, Layout::Contiguous, false},
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
                    [tr](const EV& x) { return EV{tb::batch_norm(x[0], x[1], x[2], x[3], x[4], tr, 0.1, 1e-5), x[1], x[2]}; },
                    [tr](const RV& x) { return RV{ref::batch_norm(x[0], x[1], x[2], x[3], x[4], tr, 0.1, 1e-5), x[1], x[2]}; }});
    }
  cs.push_back({"batch_norm/float32/train_no_stats_no_affine", {Input{{6, 4, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }});
  cs.push_back({"batch_norm/float32/train_momentum", {Input{{5, 2}}, Input{{2}}, Input{{2}, DT::Float32, Layout::Contiguous, Values::Positive}},
                [](const EV& x) { return EV{tb::batch_norm(x[0], x[1], x[2], {}, {}, true, 0.3, 1e-3), x[1], x[2]}; },
                [](const RV& x) { return RV{ref::batch_norm(x[0], x[1], x[2], {}, {}, true, 0.3, 1e-3), x[1], x[2]}; }});
  cs.push_back({"batch_norm/float32/zero_batch", {Input{{0, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }});
  cs.push_back({"batch_norm/float32/error_one_value", {Input{{1, 3}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }, Check::Error});
  cs.push_back({"batch_norm/float32/error_weight_size", {Input{{4, 3}}, Input{{2}}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, x[1], {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, x[1], {}, true, 0.1, 1e-5)); }, Check::Error});
  cs.push_back({"batch_norm/int64/error_dtype", {Input{{4, 3}, DT::Int64}},
                [](const EV& x) { return one(tb::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); },
                [](const RV& x) { return one(ref::batch_norm(x[0], {}, {}, {}, {}, true, 0.1, 1e-5)); }, Check::Error});

  // ---- bench rows: (4096, 1024) rows ----
  const double rows_elems = 4096.0 * 1024;
  for (DT d : {DT::Float32, DT::BFloat16}) {
    OpCase c{nm("softmax", d, "rows"), {Input{{4096, 1024}, d}}, [](const EV& x) { return one(tb::softmax(x[0], -1)); },
             [](const RV& x) { return one(ref::softmax(x[0], -1)); }};
    c.bench = true;
    c.bytes = 2 * rows_elems * double(core::itemsize(d));
    c.flops = 4 * rows_elems;
    cs.push_back(std::move(c));
  }
  for (DT d : {DT::Float32, DT::BFloat16}) {
    OpCase c{nm("layer_norm", d, "rows"), {Input{{4096, 1024}, d}, Input{{1024}, d}, Input{{1024}, d}},
             [](const EV& x) { return one(tb::layer_norm(x[0], {1024}, x[1], x[2])); },
             [](const RV& x) { return one(ref::layer_norm(x[0], {1024}, x[1], x[2])); }};
    c.bench = true;
    const double isz = double(core::itemsize(d));
    c.bytes = 2 * rows_elems * isz + 2 * 1024 * isz;
    c.flops = 8 * rows_elems;
    cs.push_back(std::move(c));
  }
  return cs;
}

}  // namespace tb::suites
