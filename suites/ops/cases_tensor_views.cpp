// The tensor family, part 2: differentiable rows (`grad` set) of Tensor's own view and copy
// methods (differentiable through the hooks of engine/autograd/variable.cpp; backward in
// engine/autograd/node.cpp, Note [View backward]): view, reshape (view and copy paths), transpose,
// t, permute, expand, narrow, select, slice, squeeze/unsqueeze, flatten/unflatten, as_strided,
// contiguous, clone, to, copy_, chains of views, and in-place ops on views of non-leaf tensors
// (CopySlices), in float32 and float64. Each row is checked by value, by gradient against LibTorch
// autograd and (float64) by finite differences. Part 1 (cases_tensor.cpp): the layout checks of
// every view, casts, creation ops and errors, and the table function.
#include "engine/autograd/functions.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
using EFn = std::function<tb::Tensor(const tb::Tensor&)>;
using RFn = std::function<ref::Tensor(const ref::Tensor&)>;

constexpr Layout C = Layout::Contiguous, Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;

struct Table {
  std::vector<OpCase> v;
  OpCase& add(std::string name, std::vector<Input> inputs, EngineFn e, RefFn r) {
    v.push_back(make_grad_case(std::move(name), std::move(inputs), std::move(e), std::move(r)));
    return v.back();
  }
  // A row whose single output is a view (or copy) of its single input.
  OpCase& unary(std::string name, Input input, EFn e, RFn r) {
    return add(
        std::move(name), {std::move(input)}, [e](const In& x) { return one(e(x[0])); },
        [r](const RIn& x) { return one(r(x[0])); });
  }
};

void view_rows(Table& t, DType dt, const std::string& d) {
  auto in = [dt](Shape s, Layout l = C) { return Input{std::move(s), dt, l, Values::Normal, 0}; };
  t.unary(
      "view/" + d + "/contiguous", in({3, 4}),
      [](const tb::Tensor& x) {
        return x.view({2, 6});
      },
      [](const ref::Tensor& x) {
        return R::view(x, {2, 6});
      });
  t.unary(
      "view/" + d + "/transposed_split", in({3, 4}, Tr),
      [](const tb::Tensor& x) {
        return x.view({3, 2, 2});
      },
      [](const ref::Tensor& x) {
        return R::view(x, {3, 2, 2});
      });
  t.unary(
      "reshape/" + d + "/view_path", in({3, 4}),
      [](const tb::Tensor& x) {
        return x.reshape({4, -1});
      },
      [](const ref::Tensor& x) {
        return R::reshape(x, {4, -1});
      });
  t.unary(
      "reshape/" + d + "/copy_path", in({3, 4}, Tr), [](const tb::Tensor& x) { return x.reshape({12}); },
      [](const ref::Tensor& x) { return R::reshape(x, {12}); });
  t.add(
      "reshape/" + d + "/copy_path_chain", {in({2, 3, 4}, St), in({2, 12})},
      [](const In& x) {
        return one(tb::mul(x[0].reshape({2, 12}), x[1]));
      },
      [](const RIn& x) {
        return one(R::mul(R::reshape(x[0], {2, 12}), x[1]));
      });
  t.unary(
      "reshape/" + d + "/zero_size", in({0, 3}),
      [](const tb::Tensor& x) {
        return x.reshape({3, 0});
      },
      [](const ref::Tensor& x) {
        return R::reshape(x, {3, 0});
      });
  t.unary(
      "transpose/" + d + "/3d", in({2, 3, 4}, St), [](const tb::Tensor& x) { return x.transpose(0, 2); },
      [](const ref::Tensor& x) { return R::transpose(x, 0, 2); });
  t.unary(
      "t/" + d + "/2d", in({3, 4}, Tr), [](const tb::Tensor& x) { return x.t(); },
      [](const ref::Tensor& x) { return R::t(x); });
  t.unary(
      "t/" + d + "/1d", in({4}, St), [](const tb::Tensor& x) { return x.t(); },
      [](const ref::Tensor& x) { return R::t(x); });
  t.unary(
      "permute/" + d + "/3d", in({2, 3, 4}, Tr),
      [](const tb::Tensor& x) {
        return x.permute({2, 0, 1});
      },
      [](const ref::Tensor& x) {
        return R::permute(x, {2, 0, 1});
      });
  t.unary(
      "expand/" + d + "/new_dims", in({3, 1}),
      [](const tb::Tensor& x) {
        return x.expand({2, 3, 4});
      },
      [](const ref::Tensor& x) {
        return R::expand(x, {2, 3, 4});
      });
  t.unary(
      "expand/" + d + "/minus1_strided", in({1, 4}, St),
      [](const tb::Tensor& x) {
        return x.expand({3, -1});
      },
      [](const ref::Tensor& x) {
        return R::expand(x, {3, -1});
      });
  t.unary(
      "expand/" + d + "/zero_dim", in({}),
      [](const tb::Tensor& x) {
        return x.expand({2, 3});
      },
      [](const ref::Tensor& x) {
        return R::expand(x, {2, 3});
      });
  t.unary(
      "narrow/" + d + "/dim1", in({4, 5}, Tr), [](const tb::Tensor& x) { return x.narrow(1, 1, 3); },
      [](const ref::Tensor& x) { return R::narrow(x, 1, 1, 3); });
  t.unary(
      "narrow/" + d + "/negative_start", in({4, 5}, St), [](const tb::Tensor& x) { return x.narrow(0, -2, 2); },
      [](const ref::Tensor& x) { return R::narrow(x, 0, -2, 2); });
  t.unary(
      "select/" + d + "/dim0", in({3, 4}), [](const tb::Tensor& x) { return x.select(0, 1); },
      [](const ref::Tensor& x) { return R::select(x, 0, 1); });
  t.unary(
      "select/" + d + "/to_zero_dim", in({4}, St), [](const tb::Tensor& x) { return x.select(0, -1); },
      [](const ref::Tensor& x) { return R::select(x, 0, -1); });
  t.unary(
      "slice/" + d + "/step2", in({6, 5}), [](const tb::Tensor& x) { return x.slice(0, 1, 6, 2); },
      [](const ref::Tensor& x) { return R::slice(x, 0, 1, 6, 2); });
  t.unary(
      "slice/" + d + "/step3_open", in({4, 7}, Tr),
      [](const tb::Tensor& x) { return x.slice(1, std::nullopt, std::nullopt, 3); },
      [](const ref::Tensor& x) { return R::slice(x, 1, std::nullopt, std::nullopt, 3); });
  t.unary(
      "slice/" + d + "/clamped", in({5, 3}, St), [](const tb::Tensor& x) { return x.slice(0, -3, 100); },
      [](const ref::Tensor& x) { return R::slice(x, 0, -3, 100, 1); });
  t.unary(
      "slice/" + d + "/empty", in({5, 3}), [](const tb::Tensor& x) { return x.slice(0, 4, 2); },
      [](const ref::Tensor& x) { return R::slice(x, 0, 4, 2, 1); });
  t.unary(
      "squeeze/" + d + "/all", in({3, 1, 4, 1}), [](const tb::Tensor& x) { return x.squeeze(); },
      [](const ref::Tensor& x) { return R::squeeze(x); });
  t.unary(
      "squeeze/" + d + "/dim", in({3, 1, 4}, Tr), [](const tb::Tensor& x) { return x.squeeze(-2); },
      [](const ref::Tensor& x) { return R::squeeze(x, -2); });
  t.unary(
      "unsqueeze/" + d + "/front", in({3, 4}, Tr), [](const tb::Tensor& x) { return x.unsqueeze(0); },
      [](const ref::Tensor& x) { return R::unsqueeze(x, 0); });
  t.unary(
      "unsqueeze/" + d + "/back", in({3, 4}, St), [](const tb::Tensor& x) { return x.unsqueeze(-1); },
      [](const ref::Tensor& x) { return R::unsqueeze(x, -1); });
  t.unary(
      "flatten/" + d + "/from1", in({2, 3, 4}, St), [](const tb::Tensor& x) { return x.flatten(1); },
      [](const ref::Tensor& x) { return R::flatten(x, 1, -1); });
  t.unary(
      "flatten/" + d + "/all_transposed", in({3, 4}, Tr), [](const tb::Tensor& x) { return x.flatten(); },
      [](const ref::Tensor& x) { return R::flatten(x, 0, -1); });
  t.unary(
      "unflatten/" + d + "/dim1", in({2, 12}),
      [](const tb::Tensor& x) {
        return x.unflatten(1, {3, -1});
      },
      [](const ref::Tensor& x) {
        return R::unflatten(x, 1, {3, -1});
      });
  t.unary(
      "as_strided/" + d + "/contiguous", in({4, 5}),
      [](const tb::Tensor& x) {
        return x.as_strided({3, 2}, {5, 2}, 1);
      },
      [](const ref::Tensor& x) {
        return R::as_strided(x, {3, 2}, {5, 2}, 1);
      });
  t.unary(
      "as_strided/" + d + "/no_offset", in({3, 4}),
      [](const tb::Tensor& x) {
        return x.as_strided({2, 2}, {1, 4});
      },
      [](const ref::Tensor& x) {
        return R::as_strided(x, {2, 2}, {1, 4}, std::nullopt);
      });
  // float32: the value rows of cases_tensor.cpp carry contiguous/transposed and clone/strided,
  // clone/expanded.
  const bool f64 = dt == DType::Float64;
  if (f64)
    t.unary(
        "contiguous/" + d + "/transposed", in({3, 4}, Tr), [](const tb::Tensor& x) { return x.contiguous(); },
        [](const ref::Tensor& x) { return R::contiguous(x); });
  t.add(
      "contiguous/" + d + "/already", {in({3, 4})}, [](const In& x) { return one(tb::mul(x[0].contiguous(), x[0])); },
      [](const RIn& x) { return one(R::mul(R::contiguous(x[0]), x[0])); });
  if (f64) {
    t.unary(
        "clone/" + d + "/strided", in({3, 4}, St), [](const tb::Tensor& x) { return x.clone(); },
        [](const ref::Tensor& x) { return R::clone(x); });
    t.unary(
        "clone/" + d + "/expanded", in({3, 4}, Ex), [](const tb::Tensor& x) { return x.clone(); },
        [](const ref::Tensor& x) { return R::clone(x); });
  }
  t.add(
      "to/" + d + "/same_dtype", {in({3, 4}, Tr)}, [dt](const In& x) { return one(tb::mul(x[0].to(dt), x[0])); },
      [dt](const RIn& x) { return one(R::mul(R::to(x[0], dt), x[0])); });
}

void copy_rows(Table& t, DType dt, const std::string& d) {
  auto in = [dt](Shape s, Layout l = C) { return Input{std::move(s), dt, l, Values::Normal, 0}; };
  t.add(
      "copy_/" + d + "/into_fresh", {in({3, 4}, Tr)},
      [dt](const In& x) {
        tb::Tensor y = zeros({3, 4}, dt);
        y.copy_(x[0]);
        return one(y);
      },
      [dt](const RIn& x) {
        ref::Tensor y = R::zeros({3, 4}, dt);
        return one(R::copy_(y, x[0]));
      });
  // Broadcast source: its gradient is summed over the broadcast dims.
  t.add(
      "copy_/" + d + "/broadcast_into_fresh", {in({4}, St)},
      [dt](const In& x) {
        tb::Tensor y = zeros({3, 4}, dt);
        y.copy_(x[0]);
        return one(y);
      },
      [dt](const RIn& x) {
        ref::Tensor y = R::zeros({3, 4}, dt);
        return one(R::copy_(y, x[0]));
      });
  t.add(
      "copy_/" + d + "/into_nonleaf", {in({3, 4}), in({4}, St)},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        y.copy_(x[1]);
        return one(tb::mul(y, x[0]));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        R::copy_(y, x[1]);
        return one(R::mul(y, x[0]));
      });
  // CopySlices: a copy into a view of a non-leaf; the overwritten region's old gradient is 0.
  t.add(
      "copy_/" + d + "/into_view_of_nonleaf", {in({4, 3}), in({2, 3}, Tr)},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        y.narrow(0, 1, 2).copy_(x[1]);
        return one(tb::mul(y, x[0]));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        ref::Tensor v = R::narrow(y, 0, 1, 2);
        R::copy_(v, x[1]);
        return one(R::mul(y, x[0]));
      });
  t.add(
      "copy_/" + d + "/into_view_of_view", {in({3, 4, 2}, St), in({2}, C)},
      [](const In& x) {
        tb::Tensor y = tb::add(x[0], 1.0);
        y.select(2, 1).transpose(0, 1).narrow(0, 1, 2).select(1, 2).copy_(x[1]);
        return one(tb::mul(y, y));
      },
      [](const RIn& x) {
        ref::Tensor y = R::add(x[0], 1.0);
        ref::Tensor v = R::select(R::narrow(R::transpose(R::select(y, 2, 1), 0, 1), 0, 1, 2), 1, 2);
        R::copy_(v, x[1]);
        return one(R::mul(y, y));
      });
}

// Every view op on a leaf that is itself expanded (dim 0 broadcast, stride 0): the gradient
// lands in the leaf's index space, as PyTorch's per-op formulas put it (it was lost, partial, or
// refused as "a view of an overlapping tensor").
void expanded_leaf_rows(Table& t, DType dt, const std::string& d) {
  const Input ex{{3, 4}, dt, Ex, Values::Normal, 0};
  const Input ex3{{3, 1, 4}, dt, Ex, Values::Normal, 0};
  const std::string p = "/" + d + "/expanded_leaf";
  t.unary(
      "transpose" + p, ex, [](const tb::Tensor& x) { return x.transpose(0, 1); },
      [](const ref::Tensor& x) { return R::transpose(x, 0, 1); });
  t.unary(
      "t" + p, ex, [](const tb::Tensor& x) { return x.t(); }, [](const ref::Tensor& x) { return R::t(x); });
  t.unary(
      "permute" + p, ex3,
      [](const tb::Tensor& x) {
        return x.permute({2, 0, 1});
      },
      [](const ref::Tensor& x) {
        return R::permute(x, {2, 0, 1});
      });
  t.unary(
      "reshape" + p, ex,
      [](const tb::Tensor& x) {
        return x.reshape({3, 2, 2});
      },
      [](const ref::Tensor& x) {
        return R::reshape(x, {3, 2, 2});
      });
  t.unary(
      "view" + p, ex,
      [](const tb::Tensor& x) {
        return x.view({3, 2, 2});
      },
      [](const ref::Tensor& x) {
        return R::view(x, {3, 2, 2});
      });
  t.unary(
      "expand" + p, ex,
      [](const tb::Tensor& x) {
        return x.expand({2, 3, 4});
      },
      [](const ref::Tensor& x) {
        return R::expand(x, {2, 3, 4});
      });
  t.unary(
      "narrow" + p, ex, [](const tb::Tensor& x) { return x.narrow(0, 1, 2); },
      [](const ref::Tensor& x) { return R::narrow(x, 0, 1, 2); });
  t.unary(
      "select" + p, ex, [](const tb::Tensor& x) { return x.select(1, 2); },
      [](const ref::Tensor& x) { return R::select(x, 1, 2); });
  t.unary(
      "slice" + p, ex, [](const tb::Tensor& x) { return x.slice(0, 1, 3, 1).slice(1, 0, 4, 2); },
      [](const ref::Tensor& x) { return R::slice(R::slice(x, 0, 1, 3, 1), 1, 0, 4, 2); });
  t.unary(
      "squeeze" + p, ex3, [](const tb::Tensor& x) { return x.squeeze(1); },
      [](const ref::Tensor& x) { return R::squeeze(x, 1); });
  t.unary(
      "squeeze" + p + "_all", ex3, [](const tb::Tensor& x) { return x.squeeze(); },
      [](const ref::Tensor& x) { return R::squeeze(x); });
  t.unary(
      "unsqueeze" + p, ex, [](const tb::Tensor& x) { return x.unsqueeze(1); },
      [](const ref::Tensor& x) { return R::unsqueeze(x, 1); });
  t.unary(
      "flatten" + p, ex3, [](const tb::Tensor& x) { return x.flatten(0, 1); },
      [](const ref::Tensor& x) { return R::flatten(x, 0, 1); });
  t.unary(
      "flatten" + p + "_same_dim", ex, [](const tb::Tensor& x) { return x.flatten(1, 1); },
      [](const ref::Tensor& x) { return R::flatten(x, 1, 1); });
  t.unary(
      "split" + p, ex, [](const tb::Tensor& x) { return tb::split(x, 2, 0)[1]; },
      [](const ref::Tensor& x) { return R::split(x, 2, 0)[1]; });
  // An in-place op on an empty view of an expanded tensor writes nothing: the gradient passes.
  t.unary(
      "mul_" + p + "_empty_inplace_view", Input{{1, 4}, dt, C, Values::Normal, 0},
      [](const tb::Tensor& x) {
        tb::Tensor y = tb::mul(x, 1.5).expand({3, 4});
        tb::Tensor v = y.narrow(0, 0, 0);
        tb::mul_(v, 2.0);
        return y;
      },
      [](const ref::Tensor& x) {
        ref::Tensor y = R::expand(R::mul(x, 1.5), {3, 4});
        ref::Tensor v = R::narrow(y, 0, 0, 0);
        R::mul_inplace(v, 2.0);
        return y;
      });
  t.unary(
      "view_chain" + p, ex, [](const tb::Tensor& x) { return x.t().narrow(0, 1, 2).unsqueeze(0).flatten(); },
      [](const ref::Tensor& x) { return R::flatten(R::unsqueeze(R::narrow(R::t(x), 0, 1, 2), 0), 0, -1); });
}

void chain_rows(Table& t, DType dt, const std::string& d) {
  auto in = [dt](Shape s, Layout l = C) { return Input{std::move(s), dt, l, Values::Normal, 0}; };
  t.add(
      "view_chain/" + d + "/reshape_narrow_expand", {in({2, 3, 4}, St)},
      [](const In& x) {
        tb::Tensor v = x[0].transpose(0, 1).reshape({3, 8}).narrow(1, 2, 4).unsqueeze(0).expand({2, 3, 4});
        return one(tb::mul(v, v));
      },
      [](const RIn& x) {
        ref::Tensor v = R::expand(R::unsqueeze(R::narrow(R::reshape(R::transpose(x[0], 0, 1), {3, 8}), 1, 2, 4), 0),
                                  {2, 3, 4});
        return one(R::mul(v, v));
      });
  t.unary(
      "view_chain/" + d + "/select_transpose_slice", in({2, 4, 3}, Tr),
      [](const tb::Tensor& x) { return x.select(0, 0).transpose(0, 1).slice(1, 1, std::nullopt, 2).flatten(); },
      [](const ref::Tensor& x) {
        return R::flatten(R::slice(R::transpose(R::select(x, 0, 0), 0, 1), 1, 1, std::nullopt, 2), 0, -1);
      });
  // Two views of one leaf reach the loss: their gradients accumulate.
  t.add(
      "view_chain/" + d + "/two_views", {in({4, 4})},
      [](const In& x) { return one(tb::mul(x[0].t().narrow(0, 0, 2), x[0].slice(0, 1, 4, 2))); },
      [](const RIn& x) { return one(R::mul(R::narrow(R::t(x[0]), 0, 0, 2), R::slice(x[0], 0, 1, 4, 2))); });
  t.add(
      "view_chain/" + d + "/views_of_nonleaf", {in({3, 4}, Tr), in({4, 3})},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[1].t());
        return one(y.unsqueeze(1).expand({3, 2, 4}).permute({2, 1, 0}).reshape({8, 3}));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], R::t(x[1]));
        return one(R::reshape(R::permute(R::expand(R::unsqueeze(y, 1), {3, 2, 4}), {2, 1, 0}), {8, 3}));
      });

  // In-place ops on views of non-leaf tensors (CopySlices).
  t.add(
      "inplace_view/" + d + "/add_narrow", {in({4, 3}, St), in({2, 3})},
      [](const In& x) {
        tb::Tensor y = tb::add(x[0], 0.0);
        tb::Tensor v = y.narrow(0, 1, 2);
        tb::add_(v, tb::mul(x[1], x[1]), 2);
        return one(tb::mul(y, x[0]));
      },
      [](const RIn& x) {
        ref::Tensor y = R::add(x[0], 0.0);
        R::add_(R::narrow(y, 0, 1, 2), R::mul(x[1], x[1]), 2);
        return one(R::mul(y, x[0]));
      });
  // The brief's example: y = x * 1; y.narrow(0, 1, 2).mul_(2) (scalar) and mul_ by a tensor.
  t.add(
      "inplace_view/" + d + "/mul_scalar_narrow", {in({4, 3}, Tr)},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], 1);
        tb::Tensor v = y.narrow(0, 1, 2);
        tb::mul_(v, 2);
        return one(tb::mul(y, x[0]));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], 1);
        R::mul_(R::narrow(y, 0, 1, 2), 2);
        return one(R::mul(y, x[0]));
      });
  t.add(
      "inplace_view/" + d + "/mul_tensor_slice", {in({5, 3}), in({3}, St)},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        tb::Tensor v = y.slice(0, 0, 5, 2);
        tb::mul_(v, x[1]);
        return In{y, v};
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        ref::Tensor v = R::slice(y, 0, 0, 5, 2);
        R::mul_(v, x[1]);
        return RIn{y, v};
      });
  // The in-place view and its base both reach the loss.
  t.add(
      "inplace_view/" + d + "/view_and_base_out", {in({3, 4}, Tr), in({3})},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        tb::Tensor v = y.select(1, 2);
        tb::add_(v, x[1]);
        return In{y, tb::mul(v, x[1])};
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        ref::Tensor v = R::select(y, 1, 2);
        R::add_(v, x[1]);
        return RIn{y, R::mul(v, x[1])};
      });
  // A view taken before an in-place op on a sibling view of the same base: PyTorch regenerates
  // its history from the base's new one, so it sees the write.
  t.add(
      "inplace_view/" + d + "/stale_sibling_view", {in({4, 3}), in({3})},
      [](const In& x) {
        tb::Tensor y = tb::add(x[0], 0.0);
        tb::Tensor whole = y.t();
        tb::Tensor row = y.select(0, 1);
        tb::add_(row, tb::mul(x[1], x[1]));
        return one(tb::mul(whole, whole));
      },
      [](const RIn& x) {
        ref::Tensor y = R::add(x[0], 0.0);
        ref::Tensor whole = R::t(y);
        ref::Tensor row = R::select(y, 0, 1);
        R::add_(row, R::mul(x[1], x[1]));
        return one(R::mul(whole, whole));
      });
  // Two successive in-place ops on views of one base (add saves nothing: a saved view of the base
  // would be invalidated by the second write, in PyTorch too).
  t.add(
      "inplace_view/" + d + "/twice", {in({4, 3}), in({4}, St)},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        tb::Tensor c0 = y.select(1, 0);
        tb::add_(c0, x[1], -1);
        tb::Tensor c2 = y.slice(1, 2, 3).squeeze(1);
        c2.copy_(tb::add(c0, x[1]));
        return one(tb::mul(y, x[0]));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        ref::Tensor c0 = R::select(y, 1, 0);
        R::add_(c0, x[1], -1);
        ref::Tensor c2 = R::squeeze(R::slice(y, 1, 2, 3, 1), 1);
        R::copy_(c2, R::add(c0, x[1]));
        return one(R::mul(y, x[0]));
      });
}

}  // namespace

std::vector<OpCase> tensor_view_grad_rows() {
  Table t;
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = core::name(dt);
    view_rows(t, dt, d);
    copy_rows(t, dt, d);
    chain_rows(t, dt, d);
    expanded_leaf_rows(t, dt, d);
  }
  // The gradient of a cast is cast back to the input's dtype.
  t.unary(
      "to/float32/to_float64", {{3, 4}, DType::Float32, Tr}, [](const tb::Tensor& x) { return x.to(DType::Float64); },
      [](const ref::Tensor& x) { return R::to(x, DType::Float64); });
  // No gradcheck: finite differences of a float32 output cannot resolve a 1e-6 step.
  t.unary(
       "to/float64/to_float32", {{3, 4}, DType::Float64, St}, [](const tb::Tensor& x) { return x.to(DType::Float32); },
       [](const ref::Tensor& x) { return R::to(x, DType::Float32); })
      .gradcheck = false;
  t.add(
       "copy_/float64/cast_into_float32", {{{3, 4}, DType::Float64, Tr}},
       [](const In& x) {
         tb::Tensor y = zeros({2, 3, 4}, DType::Float32);
         y.copy_(x[0]);
         return one(y);
       },
       [](const RIn& x) {
         ref::Tensor y = R::zeros({2, 3, 4}, DType::Float32);
         return one(R::copy_(y, x[0]));
       })
      .gradcheck = false;  // float32 output: see to/float64/to_float32
  return std::move(t.v);
}

}  // namespace tb::suites
