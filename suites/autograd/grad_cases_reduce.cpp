// Gradient cases of the reductions (engine/autograd/functions/reduce.cpp): every reduction in
// float32 and float64, over contiguous, transposed, strided and expanded inputs, with keepdim,
// dtype arguments, ties (max/min/amax/amin split evenly), zeros (prod), zero vectors (norm),
// 0-dim and zero-size inputs, views taken before the op, and chains of two reductions.
#include <cmath>

#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/autograd/grad_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

struct LayoutName {
  Layout layout;
  const char* name;
};
constexpr LayoutName kLayouts[] = {{Layout::Contiguous, "contig"},
                                   {Layout::Transposed, "transposed"},
                                   {Layout::Strided, "strided"},
                                   {Layout::Expanded, "expanded"}};

// Rows whose values are small integers (ties on purpose) sit at non-differentiable points: the
// LibTorch comparison checks the tie rule, finite differences cannot.
GradCase& no_gradcheck(GradCase& c) {
  c.gradcheck = false;
  return c;
}

}  // namespace

std::vector<GradCase> grad_reduce_cases() {
  std::vector<GradCase> v;
  auto row = [&v](std::string name, std::vector<Input> in, EngineFn e, RefFn r) -> GradCase& {
    v.push_back(make_grad_case(std::move(name), std::move(in), std::move(e), std::move(r)));
    return v.back();
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = core::name(dt);
    const DType wide = dt == DType::Float32 ? DType::Float64 : DType::Float32;
    for (const LayoutName& l : kLayouts) {
      const std::string ln = l.name;
      const Input x34{{3, 4}, dt, l.layout};
      row("sum/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::sum(x[0])); },
          [](const RIn& x) { return one(R::sum(x[0])); });
      row("sum/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::sum(x[0], {1})); },
          [](const RIn& x) { return one(R::sum(x[0], {1})); });
      row("mean/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::mean(x[0])); },
          [](const RIn& x) { return one(R::mean(x[0])); });
      row("mean/" + d + "/dim0_keepdim_" + ln, {x34}, [](const In& x) { return one(tb::mean(x[0], {0}, true)); },
          [](const RIn& x) { return one(R::mean(x[0], {0}, true)); });
      const Input nz{{3, 4}, dt, l.layout, Values::NonZero};
      row("prod/" + d + "/all_" + ln, {nz}, [](const In& x) { return one(tb::prod(x[0])); },
          [](const RIn& x) { return one(R::prod(x[0])); });
      row("prod/" + d + "/dim1_" + ln, {nz}, [](const In& x) { return one(tb::prod(x[0], 1)); },
          [](const RIn& x) { return one(R::prod(x[0], 1)); });
      // Expanded rows repeat values along dim 0: ties, so no finite differences there.
      const bool distinct = l.layout != Layout::Expanded;
      row("max/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::max(x[0])); },
          [](const RIn& x) { return one(R::max(x[0])); })
          .gradcheck = distinct;
      row("min/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::min(x[0])); },
          [](const RIn& x) { return one(R::min(x[0])); })
          .gradcheck = distinct;
      row("max/" + d + "/dim1_" + ln, {x34},
          [](const In& x) { auto [a, b] = tb::max(x[0], 1); return In{a, b}; },
          [](const RIn& x) { auto [a, b] = R::max(x[0], 1); return RIn{a, b}; });
      row("min/" + d + "/dim0_keepdim_" + ln, {x34},
          [](const In& x) { auto [a, b] = tb::min(x[0], 0, true); return In{a, b}; },
          [](const RIn& x) { auto [a, b] = R::min(x[0], 0, true); return RIn{a, b}; })
          .gradcheck = distinct;
      row("amax/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::amax(x[0], {1})); },
          [](const RIn& x) { return one(R::amax(x[0], {1})); });
      row("amin/" + d + "/all_keepdim_" + ln, {x34}, [](const In& x) { return one(tb::amin(x[0], {}, true)); },
          [](const RIn& x) { return one(R::amin(x[0], {}, true)); })
          .gradcheck = distinct;
      row("var/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::var(x[0])); },
          [](const RIn& x) { return one(R::var(x[0])); });
      row("var/" + d + "/dim1_c0_" + ln, {x34}, [](const In& x) { return one(tb::var(x[0], {1}, 0)); },
          [](const RIn& x) { return one(R::var(x[0], {1}, 0)); });
      row("std/" + d + "/all_" + ln, {x34}, [](const In& x) { return one(tb::std(x[0])); },
          [](const RIn& x) { return one(R::std(x[0])); });
      row("std/" + d + "/dim0_keepdim_c2_" + ln, {{{5, 4}, dt, l.layout}},
          [](const In& x) { return one(tb::std(x[0], {0}, 2, true)); },
          [](const RIn& x) { return one(R::std(x[0], {0}, 2, true)); });
      row("logsumexp/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::logsumexp(x[0], {1})); },
          [](const RIn& x) { return one(R::logsumexp(x[0], {1})); });
      row("cumsum/" + d + "/dim1_" + ln, {x34}, [](const In& x) { return one(tb::cumsum(x[0], 1)); },
          [](const RIn& x) { return one(R::cumsum(x[0], 1)); });
      row("cumsum/" + d + "/dim0_" + ln, {x34}, [](const In& x) { return one(tb::cumsum(x[0], -2)); },
          [](const RIn& x) { return one(R::cumsum(x[0], -2)); });
    }
    // norm: every kind of p, over all dims and over one dim.
    for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, double(INFINITY), -double(INFINITY)}) {
      const std::string pn = std::isinf(p) ? (p > 0 ? "inf" : "neg_inf") : std::to_string(p).substr(0, 3);
      row("norm/" + d + "/p" + pn + "_all", {{{3, 4}, dt, Layout::Transposed, Values::NonZero}},
          [p](const In& x) { return one(tb::norm(x[0], p)); }, [p](const RIn& x) { return one(R::norm(x[0], p)); });
      row("norm/" + d + "/p" + pn + "_dim1_keepdim", {{{3, 5}, dt, Layout::Strided, Values::NonZero}},
          [p](const In& x) { return one(tb::norm(x[0], p, {1}, true)); },
          [p](const RIn& x) { return one(R::norm(x[0], p, {1}, true)); });
    }
    // A zero vector: the gradient is zero (masked), as PyTorch (finite differences agree: 0).
    for (double p : {2.0, 1.0, 3.0, 1.5, 0.5, double(INFINITY)}) {
      const std::string pn = std::isinf(p) ? "inf" : std::to_string(p).substr(0, 3);
      row("norm/" + d + "/p" + pn + "_zero_vector", {{{2, 3}, dt, Layout::Contiguous, Values::Zeros}},
          [p](const In& x) { return one(tb::norm(x[0], p, {1})); }, [p](const RIn& x) { return one(R::norm(x[0], p, {1})); })
          .gradcheck = p >= 1;  // p < 1: |x|^p is not differentiable at 0 (finite differences blow up)
    }
    // dtype arguments: the gradient comes back in the input's dtype. The float64 rows compute in
    // float32, so finite differences at eps = 1e-6 would only see float32 rounding: no gradcheck.
    const bool exact = dt == DType::Float32;
    row("sum/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::sum(x[0], {0}, false, wide)); },
        [wide](const RIn& x) { return one(R::sum(x[0], {0}, false, wide)); })
        .gradcheck = exact;
    row("sum/" + d + "/all_dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::sum(x[0], wide)); },
        [wide](const RIn& x) { return one(R::sum(x[0], wide)); })
        .gradcheck = exact;
    row("mean/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::mean(x[0], {1}, true, wide)); },
        [wide](const RIn& x) { return one(R::mean(x[0], {1}, true, wide)); })
        .gradcheck = exact;
    row("prod/" + d + "/dtype", {{{3, 4}, dt, Layout::Contiguous, Values::NonZero}},
        [wide](const In& x) { return one(tb::prod(x[0], 0, true, wide)); },
        [wide](const RIn& x) { return one(R::prod(x[0], 0, true, wide)); })
        .gradcheck = exact;
    row("cumsum/" + d + "/dtype", {{{3, 4}, dt}}, [wide](const In& x) { return one(tb::cumsum(x[0], 1, wide)); },
        [wide](const RIn& x) { return one(R::cumsum(x[0], 1, wide)); })
        .gradcheck = exact;
    // prod with zeros: x * m where m holds small integers (0 included), so slices have none, one
    // or several zeros; m itself needs no gradient.
    for (int64_t hi : {2, 4, 9}) {
      const std::string h = std::to_string(hi);
      const std::vector<Input> in = {{{4, 5}, dt, Layout::Transposed}, {{4, 5}, dt, Layout::Contiguous, Values::Index, hi}};
      row("prod/" + d + "/zeros_all_m" + h, in, [](const In& x) { return one(tb::prod(tb::mul(x[0], x[1]))); },
          [](const RIn& x) { return one(R::prod(R::mul(x[0], x[1]))); })
          .wrt = {0};
      row("prod/" + d + "/zeros_dim0_m" + h, in, [](const In& x) { return one(tb::prod(tb::mul(x[0], x[1]), 0)); },
          [](const RIn& x) { return one(R::prod(R::mul(x[0], x[1]), 0)); })
          .wrt = {0};
    }
    // Exactly one zero in the whole tensor: x - x[0, 0] (exact at (0, 0)).
    row("prod/" + d + "/one_zero", {{{3, 4}, dt, Layout::Transposed}},
        [](const In& x) { return one(tb::prod(tb::add(x[0], x[0].narrow(0, 0, 1).narrow(1, 0, 1), -1))); },
        [](const RIn& x) { return one(R::prod(R::add(x[0], R::narrow(R::narrow(x[0], 0, 0, 1), 1, 0, 1), -1))); });
    row("prod/" + d + "/one_zero_dim1", {{{3, 4}, dt}},
        [](const In& x) { return one(tb::prod(tb::add(x[0], x[0].narrow(1, 2, 1), -1), 1)); },
        [](const RIn& x) { return one(R::prod(R::add(x[0], R::narrow(x[0], 1, 2, 1), -1), 1)); });
    // Ties: small integers as values.
    const Input ties{{3, 4}, dt, Layout::Transposed, Values::Index, 3};
    no_gradcheck(row("max/" + d + "/ties", {ties}, [](const In& x) { return one(tb::max(x[0])); },
                     [](const RIn& x) { return one(R::max(x[0])); }));
    no_gradcheck(row("min/" + d + "/ties", {ties}, [](const In& x) { return one(tb::min(x[0])); },
                     [](const RIn& x) { return one(R::min(x[0])); }));
    no_gradcheck(row("amax/" + d + "/ties_dim0", {ties}, [](const In& x) { return one(tb::amax(x[0], {0})); },
                     [](const RIn& x) { return one(R::amax(x[0], {0})); }));
    no_gradcheck(row("amin/" + d + "/ties_all", {ties}, [](const In& x) { return one(tb::amin(x[0])); },
                     [](const RIn& x) { return one(R::amin(x[0])); }));
    no_gradcheck(row("norm/" + d + "/inf_ties", {ties}, [](const In& x) { return one(tb::norm(x[0], INFINITY, {1})); },
                     [](const RIn& x) { return one(R::norm(x[0], INFINITY, {1})); }));
    no_gradcheck(row("max/" + d + "/dim_ties", {ties},
                     [](const In& x) { auto [a, b] = tb::max(x[0], 0); return In{a, b}; },
                     [](const RIn& x) { auto [a, b] = R::max(x[0], 0); return RIn{a, b}; }));
    // 3-D, several dims.
    const Input x3{{2, 3, 4}, dt, Layout::Strided};
    row("sum/" + d + "/dims02_keepdim", {x3}, [](const In& x) { return one(tb::sum(x[0], {0, -1}, true)); },
        [](const RIn& x) { return one(R::sum(x[0], {0, -1}, true)); });
    row("mean/" + d + "/dims02", {x3}, [](const In& x) { return one(tb::mean(x[0], {2, 0})); },
        [](const RIn& x) { return one(R::mean(x[0], {2, 0})); });
    row("var/" + d + "/dims01", {x3}, [](const In& x) { return one(tb::var(x[0], {0, 1})); },
        [](const RIn& x) { return one(R::var(x[0], {0, 1})); });
    row("std/" + d + "/dims12_keepdim", {x3}, [](const In& x) { return one(tb::std(x[0], {1, 2}, 1, true)); },
        [](const RIn& x) { return one(R::std(x[0], {1, 2}, 1, true)); });
    row("norm/" + d + "/dims02", {x3}, [](const In& x) { return one(tb::norm(x[0], 2, {0, 2})); },
        [](const RIn& x) { return one(R::norm(x[0], 2, {0, 2})); });
    row("amax/" + d + "/dims12", {x3}, [](const In& x) { return one(tb::amax(x[0], {1, 2})); },
        [](const RIn& x) { return one(R::amax(x[0], {1, 2})); });
    row("logsumexp/" + d + "/dims01_keepdim", {x3}, [](const In& x) { return one(tb::logsumexp(x[0], {0, 1}, true)); },
        [](const RIn& x) { return one(R::logsumexp(x[0], {0, 1}, true)); });
    row("prod/" + d + "/dim2_keepdim", {{{2, 3, 4}, dt, Layout::Strided, Values::NonZero}},
        [](const In& x) { return one(tb::prod(x[0], 2, true)); }, [](const RIn& x) { return one(R::prod(x[0], 2, true)); });
    // 0-dim and single-element inputs.
    const Input s0{{}, dt};
    row("sum/" + d + "/scalar", {s0}, [](const In& x) { return one(tb::sum(x[0])); },
        [](const RIn& x) { return one(R::sum(x[0])); });
    row("prod/" + d + "/scalar", {s0}, [](const In& x) { return one(tb::prod(x[0])); },
        [](const RIn& x) { return one(R::prod(x[0])); });
    row("prod/" + d + "/scalar_dim", {s0}, [](const In& x) { return one(tb::prod(x[0], 0)); },
        [](const RIn& x) { return one(R::prod(x[0], 0)); });
    row("max/" + d + "/scalar", {s0}, [](const In& x) { return one(tb::max(x[0])); },
        [](const RIn& x) { return one(R::max(x[0])); });
    row("max/" + d + "/scalar_dim", {s0}, [](const In& x) { auto [a, b] = tb::max(x[0], 0); return In{a, b}; },
        [](const RIn& x) { auto [a, b] = R::max(x[0], 0); return RIn{a, b}; });
    row("cumsum/" + d + "/scalar", {s0}, [](const In& x) { return one(tb::cumsum(x[0], 0)); },
        [](const RIn& x) { return one(R::cumsum(x[0], 0)); });
    // Every reduction that takes a dim list, on a 0-dim input naming dim 0 or -1 (the backward
    // once read sizes[0] of the empty shape).
    for (const int64_t dim : {int64_t(0), int64_t(-1)})
      for (const bool keep : {false, true}) {
        const std::string v = std::string("/scalar_dims") + (dim < 0 ? "_neg" : "") + (keep ? "_keepdim" : "");
        const std::vector<int64_t> dl{dim};
        row("sum/" + d + v, {s0}, [dl, keep](const In& x) { return one(tb::sum(x[0], dl, keep)); },
            [dl, keep](const RIn& x) { return one(R::sum(x[0], dl, keep)); });
        const std::string w = "/" + d + v;
        row("mean" + w, {s0}, [dl, keep](const In& x) { return one(tb::mean(x[0], dl, keep)); },
            [dl, keep](const RIn& x) { return one(R::mean(x[0], dl, keep)); });
        row("var" + w, {s0}, [dl, keep](const In& x) { return one(tb::var(x[0], dl, 0, keep)); },
            [dl, keep](const RIn& x) { return one(R::var(x[0], dl, 0, keep)); });
        row("std" + w, {s0}, [dl, keep](const In& x) { return one(tb::std(x[0], dl, 0, keep)); },
            [dl, keep](const RIn& x) { return one(R::std(x[0], dl, 0, keep)); });
        row("amax" + w, {s0}, [dl, keep](const In& x) { return one(tb::amax(x[0], dl, keep)); },
            [dl, keep](const RIn& x) { return one(R::amax(x[0], dl, keep)); });
        row("logsumexp" + w, {s0}, [dl, keep](const In& x) { return one(tb::logsumexp(x[0], dl, keep)); },
            [dl, keep](const RIn& x) { return one(R::logsumexp(x[0], dl, keep)); });
        row("norm" + w, {{{}, dt, Layout::Contiguous, Values::NonZero}},
            [dl, keep](const In& x) { return one(tb::norm(x[0], 2, dl, keep)); },
            [dl, keep](const RIn& x) { return one(R::norm(x[0], 2, dl, keep)); });
      }
    // Constant slices: the mean is exact, so std is exactly 0 and its gradient 0 (sum / n missed by
    // an ulp, leaving std ~1e-17 and a gradient of O(1)). Not gradchecked: std is not smooth at 0.
    for (const double c : {0.1, -7.3}) {
      const std::string n = c > 0 ? "/constant_slices_pos" : "/constant_slices_neg";
      no_gradcheck(row("std/" + d + n, {{{5, 4}, dt, Layout::Contiguous, Values::Zeros}},
                       [c](const In& x) { return one(tb::std(tb::add(x[0], c), {0}, 1, false)); },
                       [c](const RIn& x) { return one(R::std(R::add(x[0], c), {0}, 1, false)); }));
      no_gradcheck(row("var/" + d + n, {{{3, 7}, dt, Layout::Transposed, Values::Zeros}},
                       [c](const In& x) { return one(tb::var(tb::add(x[0], c), {1}, 0, true)); },
                       [c](const RIn& x) { return one(R::var(R::add(x[0], c), {1}, 0, true)); }));
    }
    row("norm/" + d + "/single", {{{1}, dt, Layout::Contiguous, Values::NonZero}},
        [](const In& x) { return one(tb::norm(x[0], 3)); }, [](const RIn& x) { return one(R::norm(x[0], 3)); });
    row("logsumexp/" + d + "/single", {{{1, 1}, dt}}, [](const In& x) { return one(tb::logsumexp(x[0], {1})); },
        [](const RIn& x) { return one(R::logsumexp(x[0], {1})); });
    row("var/" + d + "/single_c0", {{{1}, dt}}, [](const In& x) { return one(tb::var(x[0], {0}, 0)); },
        [](const RIn& x) { return one(R::var(x[0], {0}, 0)); });
    // Zero-size inputs.
    const Input e0{{0, 3}, dt};
    row("sum/" + d + "/empty", {e0}, [](const In& x) { return one(tb::sum(x[0], {0})); },
        [](const RIn& x) { return one(R::sum(x[0], {0})); });
    row("prod/" + d + "/empty", {e0}, [](const In& x) { return one(tb::prod(x[0], 0)); },
        [](const RIn& x) { return one(R::prod(x[0], 0)); });
    row("prod/" + d + "/empty_all", {e0}, [](const In& x) { return one(tb::prod(x[0])); },
        [](const RIn& x) { return one(R::prod(x[0])); });
    row("cumsum/" + d + "/empty", {e0}, [](const In& x) { return one(tb::cumsum(x[0], 0)); },
        [](const RIn& x) { return one(R::cumsum(x[0], 0)); });
    row("amax/" + d + "/empty_rows", {e0}, [](const In& x) { return one(tb::amax(x[0], {1})); },
        [](const RIn& x) { return one(R::amax(x[0], {1})); });
    // Views taken before the op.
    const Input x234{{2, 3, 4}, dt};
    row("sum/" + d + "/view_select_t", {x234}, [](const In& x) { return one(tb::sum(x[0].select(0, 1).t(), {0})); },
        [](const RIn& x) { return one(R::sum(R::t(R::select(x[0], 0, 1)), {0})); });
    row("var/" + d + "/view_transpose_narrow", {x234},
        [](const In& x) { return one(tb::var(x[0].transpose(0, 2).narrow(0, 1, 2), {1})); },
        [](const RIn& x) { return one(R::var(R::narrow(R::transpose(x[0], 0, 2), 0, 1, 2), {1})); });
    row("max/" + d + "/view_permute", {x234},
        [](const In& x) { auto [a, b] = tb::max(x[0].permute({2, 0, 1}), 2); return In{a, b}; },
        [](const RIn& x) { auto [a, b] = R::max(R::permute(x[0], {2, 0, 1}), 2); return RIn{a, b}; });
    row("cumsum/" + d + "/view_slice", {x234},
        [](const In& x) { return one(tb::cumsum(x[0].slice(2, 0, std::nullopt, 2), 2)); },
        [](const RIn& x) { return one(R::cumsum(R::slice(x[0], 2, 0, std::nullopt, 2), 2)); });
    // Chains of two reductions.
    row("chain/" + d + "/logsumexp_mean", {{{3, 4}, dt, Layout::Transposed}},
        [](const In& x) { return one(tb::mean(tb::logsumexp(x[0], {1}))); },
        [](const RIn& x) { return one(R::mean(R::logsumexp(x[0], {1}))); });
    row("chain/" + d + "/cumsum_norm", {{{3, 4}, dt}}, [](const In& x) { return one(tb::norm(tb::cumsum(x[0], 1), 2, {0})); },
        [](const RIn& x) { return one(R::norm(R::cumsum(x[0], 1), 2, {0})); });
    row("chain/" + d + "/std_prod", {{{3, 4}, dt, Layout::Strided}},
        [](const In& x) { return one(tb::prod(tb::std(x[0], {1}))); },
        [](const RIn& x) { return one(R::prod(R::std(x[0], {1}))); });
    row("chain/" + d + "/amax_sum_twice", {{{3, 4}, dt}},
        [](const In& x) { return one(tb::sum(tb::amax(x[0], {0}, true), {1})); },
        [](const RIn& x) { return one(R::sum(R::amax(x[0], {0}, true), {1})); });
  }
  return v;
}

}  // namespace tb::suites
