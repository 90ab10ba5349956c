// The gradient table of the shape and index ops (engine/autograd/functions/index.cpp): cat,
// stack, split, chunk, repeat, index_select, gather, scatter, scatter_add, index_add,
// masked_fill(_), masked_select, sort, topk, tril, triu. The views' rows (Tensor's own view and
// copy methods) are in grad_cases_views.cpp and join this table.
// Plain scatter's index must not repeat along the scattered dim (which duplicate wins is
// unspecified, and finite differences would see only the winner): it is made inside the lambdas
// as a slice of argsort of a float input that takes no gradient, identically on both sides.
#include "engine/autograd/functions.h"
#include "engine/ops/index.h"
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

constexpr DType I64 = DType::Int64, I32 = DType::Int32;
constexpr Layout C = Layout::Contiguous, Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;

Input in(Shape s, DType t, Layout l = C) { return {std::move(s), t, l, Values::Normal, 0}; }
Input idx(Shape s, int64_t hi, DType t = I64) { return {std::move(s), t, C, Values::Index, hi}; }
Input mask(Shape s) { return {std::move(s), DType::Bool, C, Values::Bool, 0}; }

// Indices distinct along `dim`: the first k of the argsort of x along dim.
tb::Tensor perm(const tb::Tensor& x, int64_t dim, int64_t k) {
  return std::get<1>(tb::sort(x.detach(), dim)).narrow(dim, 0, k);
}
ref::Tensor rperm(const ref::Tensor& x, int64_t dim, int64_t k) {
  return R::narrow(std::get<1>(R::sort(x, true, dim)), dim, 0, k);
}

struct Table {
  std::vector<OpCase> v;
  OpCase& add(std::string name, std::vector<Input> inputs, EngineFn e, RefFn r) {
    v.push_back(make_grad_case(std::move(name), std::move(inputs), std::move(e), std::move(r)));
    return v.back();
  }
};

void join_rows(Table& t, DType dt, const std::string& d) {
  t.add("cat/" + d + "/dim0", {in({2, 3}, dt, Tr), in({4, 3}, dt)},
        [](const In& x) { return one(tb::cat({x[0], x[1]}, 0)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1]}, 0)); });
  t.add("cat/" + d + "/dim_last_three", {in({3, 2}, dt, St), in({3, 4}, dt), in({3, 1}, dt, Ex)},
        [](const In& x) { return one(tb::cat({x[0], x[1], x[2]}, -1)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1], x[2]}, -1)); });
  t.add("cat/" + d + "/skip_empty_1d", {in({2, 3}, dt), in({0}, dt), in({1, 3}, dt)},
        [](const In& x) { return one(tb::cat({x[0], x[1], x[2]}, 0)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1], x[2]}, 0)); });
  t.add("cat/" + d + "/zero_size", {in({0, 3}, dt), in({2, 3}, dt, Tr)},
        [](const In& x) { return one(tb::cat({x[0], x[1]}, 0)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1]}, 0)); });
  // The same input twice, after views: both slabs' gradients accumulate into it.
  t.add("cat/" + d + "/views_twice", {in({3, 4}, dt)},
        [](const In& x) { return one(tb::tril(tb::cat({x[0].t().narrow(0, 0, 3), x[0].narrow(1, 1, 3)}, 1))); },
        [](const RIn& x) { return one(R::tril(R::cat({R::narrow(R::t(x[0]), 0, 0, 3), R::narrow(x[0], 1, 1, 3)}, 1))); });
  // Only the second input requires grad.
  t.add("cat/" + d + "/partial_wrt", {in({2, 3}, dt), in({1, 3}, dt, St)},
        [](const In& x) { return one(tb::cat({x[0], x[1]}, 0)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1]}, 0)); })
      .wrt = {1};

  t.add("stack/" + d + "/dim0", {in({2, 3}, dt, Tr), in({2, 3}, dt, St)},
        [](const In& x) { return one(tb::stack({x[0], x[1]}, 0)); },
        [](const RIn& x) { return one(R::stack({x[0], x[1]}, 0)); });
  t.add("stack/" + d + "/dim_last", {in({2, 3}, dt), in({2, 3}, dt, Ex), in({2, 3}, dt)},
        [](const In& x) { return one(tb::stack({x[0], x[1], x[2]}, -1)); },
        [](const RIn& x) { return one(R::stack({x[0], x[1], x[2]}, -1)); });
  t.add("stack/" + d + "/zero_dim", {in({}, dt), in({}, dt)},
        [](const In& x) { return one(tb::stack({x[0], x[1]})); },
        [](const RIn& x) { return one(R::stack({x[0], x[1]})); });
  t.add("stack/" + d + "/zero_size", {in({0, 2}, dt), in({0, 2}, dt)},
        [](const In& x) { return one(tb::stack({x[0], x[1]}, 1)); },
        [](const RIn& x) { return one(R::stack({x[0], x[1]}, 1)); });

  t.add("split/" + d + "/all_pieces", {in({5, 3}, dt, Tr)},
        [](const In& x) { return tb::split(x[0], 2, 0); },
        [](const RIn& x) { return R::split(x[0], 2, 0); });
  // Only some pieces reach the loss: the others' regions get a zero gradient.
  t.add("split/" + d + "/some_pieces", {in({3, 7}, dt, St)},
        [](const In& x) {
          auto p = tb::split(x[0], 3, 1);
          return In{tb::mul(p[2], p[2]), tb::sum(p[0], {0})};
        },
        [](const RIn& x) {
          auto p = R::split(x[0], 3, 1);
          return RIn{R::mul(p[2], p[2]), R::sum(p[0], {0})};
        });
  t.add("chunk/" + d + "/dim1", {in({3, 7}, dt)},
        [](const In& x) { return tb::chunk(x[0], 3, 1); },
        [](const RIn& x) { return R::chunk(x[0], 3, 1); });
  t.add("chunk/" + d + "/one_piece", {in({6, 2}, dt, Tr)},
        [](const In& x) { return one(tb::chunk(x[0], 3, 0)[1].t()); },
        [](const RIn& x) { return one(R::t(R::chunk(x[0], 3, 0)[1])); });
  // Chunks of a non-leaf written in place before the split (PyTorch refuses in-place writes to
  // the outputs of split/chunk themselves).
  t.add("chunk/" + d + "/of_inplace_nonleaf", {in({4, 3}, dt), in({3}, dt, St)},
        [](const In& x) {
          tb::Tensor y = tb::add(x[0], 0.5);
          tb::Tensor row = y.select(0, 2);
          tb::add_(row, x[1], 2);
          auto c = tb::chunk(y, 2, 0);
          return In{tb::mul(c[1], c[1]), c[0]};
        },
        [](const RIn& x) {
          ref::Tensor y = R::add(x[0], 0.5);
          R::add_(R::select(y, 0, 2), x[1], 2);
          auto c = R::chunk(y, 2, 0);
          return RIn{R::mul(c[1], c[1]), c[0]};
        });
  t.add("repeat/" + d + "/lead_dim", {in({2, 3}, dt, Tr)},
        [](const In& x) { return one(tb::repeat(x[0], {2, 1, 3})); },
        [](const RIn& x) { return one(R::repeat(x[0], {2, 1, 3})); });
  t.add("repeat/" + d + "/expanded", {in({3, 2}, dt, Ex)},
        [](const In& x) { return one(tb::repeat(x[0], {2, 2})); },
        [](const RIn& x) { return one(R::repeat(x[0], {2, 2})); });
  t.add("repeat/" + d + "/zero_dim", {in({}, dt)},
        [](const In& x) { return one(tb::repeat(x[0], {3, 2})); },
        [](const RIn& x) { return one(R::repeat(x[0], {3, 2})); });
  t.add("repeat/" + d + "/zero_repeat", {in({2, 3}, dt)},
        [](const In& x) { return one(tb::repeat(x[0], {0, 2})); },
        [](const RIn& x) { return one(R::repeat(x[0], {0, 2})); });
}

void index_rows(Table& t, DType dt, const std::string& d) {
  t.add("index_select/" + d + "/dim0_dups", {in({5, 3}, dt, St), idx({7}, 5)},
        [](const In& x) { return one(tb::index_select(x[0], 0, x[1])); },
        [](const RIn& x) { return one(R::index_select(x[0], 0, x[1])); });
  t.add("index_select/" + d + "/dim1_int32", {in({3, 5}, dt, Tr), idx({4}, 5, I32)},
        [](const In& x) { return one(tb::index_select(x[0], -1, x[1])); },
        [](const RIn& x) { return one(R::index_select(x[0], -1, x[1])); });
  t.add("index_select/" + d + "/empty_index", {in({4, 3}, dt), idx({0}, 4)},
        [](const In& x) { return one(tb::index_select(x[0], 0, x[1])); },
        [](const RIn& x) { return one(R::index_select(x[0], 0, x[1])); });
  t.add("index_select/" + d + "/view_input", {in({2, 4, 3}, dt), idx({5}, 4)},
        [](const In& x) { return one(tb::index_select(x[0].select(0, 1).transpose(0, 1), 1, x[1])); },
        [](const RIn& x) { return one(R::index_select(R::transpose(R::select(x[0], 0, 1), 0, 1), 1, x[1])); });

  t.add("gather/" + d + "/dim1", {in({3, 5}, dt, Tr), idx({3, 4}, 5)},
        [](const In& x) { return one(tb::gather(x[0], 1, x[1])); },
        [](const RIn& x) { return one(R::gather(x[0], 1, x[1])); });
  t.add("gather/" + d + "/dim0_smaller", {in({4, 3}, dt, St), idx({6, 2}, 4)},
        [](const In& x) { return one(tb::gather(x[0], 0, x[1])); },
        [](const RIn& x) { return one(R::gather(x[0], 0, x[1])); });
  t.add("gather/" + d + "/zero_size", {in({4, 3}, dt), idx({0, 3}, 4)},
        [](const In& x) { return one(tb::gather(x[0], 0, x[1])); },
        [](const RIn& x) { return one(R::gather(x[0], 0, x[1])); });

  t.add("scatter/" + d + "/dim1", {in({3, 5}, dt, Tr), in({3, 3}, dt, St), in({3, 5}, dt)},
        [](const In& x) { return one(tb::scatter(x[0], 1, perm(x[2], 1, 3), x[1])); },
        [](const RIn& x) { return one(R::scatter(x[0], 1, rperm(x[2], 1, 3), x[1])); })
      .wrt = {0, 1};
  t.add("scatter/" + d + "/dim0_chain", {in({4, 3}, dt), in({2, 3}, dt, Tr), in({4, 3}, dt)},
        [](const In& x) { return one(tb::mul(tb::scatter(x[0], 0, perm(x[2], 0, 2), x[1]), x[0])); },
        [](const RIn& x) { return one(R::mul(R::scatter(x[0], 0, rperm(x[2], 0, 2), x[1]), x[0])); })
      .wrt = {0, 1};

  t.add("scatter_add/" + d + "/dim1_dups", {in({3, 5}, dt), idx({3, 4}, 5), in({3, 4}, dt, Tr)},
        [](const In& x) { return one(tb::scatter_add(x[0], 1, x[1], x[2])); },
        [](const RIn& x) { return one(R::scatter_add(x[0], 1, x[1], x[2])); });
  t.add("scatter_add/" + d + "/dim0_broadcast_self", {in({4, 3}, dt, Ex), idx({5, 3}, 4), in({5, 3}, dt, St)},
        [](const In& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
        [](const RIn& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); });

  t.add("index_add/" + d + "/dim0_alpha", {in({5, 3}, dt, Tr), idx({4}, 5), in({4, 3}, dt)},
        [](const In& x) { return one(tb::index_add(x[0], 0, x[1], x[2], 2.5)); },
        [](const RIn& x) { return one(R::index_add(x[0], 0, x[1], x[2], 2.5)); });
  t.add("index_add/" + d + "/dim1_int32", {in({3, 5}, dt), idx({6}, 5, I32), in({3, 6}, dt, St)},
        [](const In& x) { return one(tb::index_add(x[0], 1, x[1], x[2])); },
        [](const RIn& x) { return one(R::index_add(x[0], 1, x[1], x[2])); });
  t.add("index_add/" + d + "/source_only", {in({4, 2}, dt), idx({3}, 4), in({3, 2}, dt, Tr)},
        [](const In& x) { return one(tb::index_add(x[0], 0, x[1], x[2], -1)); },
        [](const RIn& x) { return one(R::index_add(x[0], 0, x[1], x[2], -1)); })
      .wrt = {2};
}

void mask_order_rows(Table& t, DType dt, const std::string& d) {
  t.add("masked_fill/" + d + "/mask_broadcast", {in({3, 4}, dt, Tr), mask({4})},
        [](const In& x) { return one(tb::masked_fill(x[0], x[1], -2.0)); },
        [](const RIn& x) { return one(R::masked_fill(x[0], x[1], -2.0)); });
  t.add("masked_fill/" + d + "/self_broadcast", {in({4}, dt), mask({3, 4})},
        [](const In& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); },
        [](const RIn& x) { return one(R::masked_fill(x[0], x[1], 1.0)); });
  t.add("masked_fill/" + d + "/zero_dim", {in({}, dt), mask({})},
        [](const In& x) { return one(tb::masked_fill(x[0], x[1], 3.0)); },
        [](const RIn& x) { return one(R::masked_fill(x[0], x[1], 3.0)); });
  t.add("masked_fill_/" + d + "/nonleaf", {in({3, 4}, dt, St), mask({3, 4})},
        [](const In& x) {
          tb::Tensor y = tb::mul(x[0], x[0]);
          return one(tb::masked_fill_(y, x[1], 0.25));
        },
        [](const RIn& x) {
          ref::Tensor y = R::mul(x[0], x[0]);
          return one(R::masked_fill_(y, x[1], 0.25));
        });
  // In place on a view of a non-leaf (CopySlices): the view's masked region gets zero gradient.
  t.add("masked_fill_/" + d + "/view_of_nonleaf", {in({4, 3}, dt, Tr), mask({3})},
        [](const In& x) {
          tb::Tensor y = tb::add(x[0], 1.0);
          tb::Tensor v = y.narrow(0, 1, 2);
          tb::masked_fill_(v, x[1], -1.0);
          return In{tb::mul(y, x[0]), v};
        },
        [](const RIn& x) {
          ref::Tensor y = R::add(x[0], 1.0);
          ref::Tensor v = R::narrow(y, 0, 1, 2);
          R::masked_fill_(v, x[1], -1.0);
          return RIn{R::mul(y, x[0]), v};
        });

  t.add("masked_select/" + d + "/same_shape", {in({3, 4}, dt, Tr), mask({3, 4})},
        [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
        [](const RIn& x) { return one(R::masked_select(x[0], x[1])); });
  t.add("masked_select/" + d + "/self_broadcast", {in({4}, dt, St), mask({3, 4})},
        [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
        [](const RIn& x) { return one(R::masked_select(x[0], x[1])); });
  t.add("masked_select/" + d + "/zero_size", {in({0, 3}, dt), mask({0, 3})},
        [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
        [](const RIn& x) { return one(R::masked_select(x[0], x[1])); });

  t.add("sort/" + d + "/dim_last", {in({3, 5}, dt, Tr)},
        [](const In& x) { auto [v, i] = tb::sort(x[0]); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::sort(x[0], true); return RIn{v, i}; });
  t.add("sort/" + d + "/dim0_descending", {in({4, 3}, dt, St)},
        [](const In& x) { auto [v, i] = tb::sort(x[0], 0, true); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::sort(x[0], true, 0, true); return RIn{v, i}; });
  t.add("sort/" + d + "/zero_dim", {in({}, dt)},
        [](const In& x) { auto [v, i] = tb::sort(x[0]); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::sort(x[0], true); return RIn{v, i}; });
  t.add("sort/" + d + "/chain", {in({2, 6}, dt)},
        [](const In& x) { return one(tb::mul(std::get<0>(tb::sort(x[0], 1)).narrow(1, 3, 3), x[0].narrow(1, 0, 3))); },
        [](const RIn& x) {
          return one(R::mul(R::narrow(std::get<0>(R::sort(x[0], true, 1)), 1, 3, 3), R::narrow(x[0], 1, 0, 3)));
        });

  t.add("topk/" + d + "/largest", {in({3, 6}, dt, Tr)},
        [](const In& x) { auto [v, i] = tb::topk(x[0], 3); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::topk(x[0], 3); return RIn{v, i}; });
  t.add("topk/" + d + "/smallest_dim0", {in({5, 3}, dt, St)},
        [](const In& x) { auto [v, i] = tb::topk(x[0], 2, 0, false); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::topk(x[0], 2, 0, false); return RIn{v, i}; });
  t.add("topk/" + d + "/k0", {in({2, 4}, dt)},
        [](const In& x) { auto [v, i] = tb::topk(x[0], 0); return In{v, i}; },
        [](const RIn& x) { auto [v, i] = R::topk(x[0], 0); return RIn{v, i}; });

  t.add("tril/" + d + "/k0", {in({4, 5}, dt, Tr)},
        [](const In& x) { return one(tb::tril(x[0])); },
        [](const RIn& x) { return one(R::tril(x[0])); });
  t.add("tril/" + d + "/batched_kneg", {in({2, 3, 4}, dt, St)},
        [](const In& x) { return one(tb::tril(x[0], -1)); },
        [](const RIn& x) { return one(R::tril(x[0], -1)); });
  t.add("triu/" + d + "/k1", {in({5, 4}, dt)},
        [](const In& x) { return one(tb::triu(x[0], 1)); },
        [](const RIn& x) { return one(R::triu(x[0], 1)); });
  t.add("triu/" + d + "/view_chain", {in({3, 4}, dt, Tr)},
        [](const In& x) { return one(tb::triu(tb::tril(x[0].t(), 1), -1)); },
        [](const RIn& x) { return one(R::triu(R::tril(R::t(x[0]), 1), -1)); });
}

}  // namespace

std::vector<OpCase> grad_index_cases() {
  Table t;
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = core::name(dt);
    join_rows(t, dt, d);
    index_rows(t, dt, d);
    mask_order_rows(t, dt, d);
  }
  // Mixed dtypes promote; each input's gradient is cast back to its dtype.
  t.add("cat/float32/promote_float64", {in({2, 3}, DType::Float32), in({1, 3}, DType::Float64, Tr)},
        [](const In& x) { return one(tb::cat({x[0], x[1]}, 0)); },
        [](const RIn& x) { return one(R::cat({x[0], x[1]}, 0)); });
  return std::move(t.v);
}

}  // namespace tb::suites
