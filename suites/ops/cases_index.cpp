// The index family's case table (shape and index ops: cat, stack, split, chunk, repeat,
// index_select, gather, scatter, scatter_add, index_add, masked_fill, masked_select, nonzero,
// topk, sort, tril/triu). Built by loops over dtypes and layouts. Index tensors that must not
// repeat along the scattered dim (plain scatter: which duplicate wins is unspecified) and
// deliberately bad indices are made inside the lambdas, identically on both sides.
#include "engine/autograd/functions.h"
#include "engine/ops/index.h"
#include "reference/index.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace E = tb::ops;
namespace R = tb::ref;
using TV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;

constexpr DType F32 = DType::Float32, F64 = DType::Float64, BF16 = DType::BFloat16, F16 = DType::Float16,
                I64 = DType::Int64, I32 = DType::Int32, BOOL = DType::Bool;
const DType kAll[] = {F32, F64, BF16, F16, I64, I32, BOOL};
const DType kNumeric[] = {F32, F64, BF16, F16, I64, I32};

std::string nm(DType t) { return core::name(t); }
Input in(Shape s, DType t, Layout l = Layout::Contiguous, Values v = Values::Normal) { return {std::move(s), t, l, v, 0}; }
Input idx(Shape s, int64_t hi, DType t = I64, Layout l = Layout::Contiguous) { return {std::move(s), t, l, Values::Index, hi}; }
Input mask(Shape s, Layout l = Layout::Contiguous) { return {std::move(s), BOOL, l, Values::Bool, 0}; }

tb::Tensor ivec(const std::vector<int64_t>& v, const Shape& s) { return from_vector_of<int64_t>(v, s); }
ref::Tensor rvec(const std::vector<int64_t>& v, const Shape& s) { return ref::to_ref(ivec(v, s)); }

// An int64 index of `shape` whose entries along `dim` are distinct values in [0, n).
tb::Tensor perm_index(const Shape& shape, int64_t dim, int64_t n) {
  tb::Tensor t = empty(shape, I64);
  int64_t* p = t.data_ptr<int64_t>();
  const int64_t numel = t.numel();
  int64_t inner = 1;
  for (size_t k = size_t(dim) + 1; k < shape.size(); ++k) inner *= shape[k];
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t j = (i / inner) % shape[size_t(dim)];
    p[i] = (j + 3 * i / (inner * shape[size_t(dim)]) + i % inner) % n;
  }
  return t;
}

void add(std::vector<OpCase>& v, std::string name, std::vector<Input> inputs, EngineFn e, RefFn r,
         Check c = Check::Values) {
  v.push_back(make_case(std::move(name), std::move(inputs), std::move(e), std::move(r), c));
}

void join_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    add(v, "cat/" + d + "/dim0", {in({2, 3}, t), in({4, 3}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::cat({x[0], x[1]}, 0)); }, [](const RV& x) { return one(R::cat({x[0], x[1]}, 0)); });
    add(v, "cat/" + d + "/dim1_strided", {in({3, 2}, t, Layout::Strided), in({3, 5}, t), in({3, 1}, t, Layout::Expanded)},
        [](const TV& x) { return one(tb::cat({x[0], x[1], x[2]}, -1)); },
        [](const RV& x) { return one(R::cat({x[0], x[1], x[2]}, -1)); });
    add(v, "cat/" + d + "/zero_size", {in({0, 3}, t), in({2, 3}, t), in({0, 3}, t)},
        [](const TV& x) { return one(tb::cat({x[0], x[1], x[2]}, 0)); },
        [](const RV& x) { return one(R::cat({x[0], x[1], x[2]}, 0)); });
    add(v, "stack/" + d + "/dim0", {in({2, 3}, t), in({2, 3}, t, Layout::Transposed), in({2, 3}, t, Layout::Strided)},
        [](const TV& x) { return one(tb::stack({x[0], x[1], x[2]}, 0)); },
        [](const RV& x) { return one(R::stack({x[0], x[1], x[2]}, 0)); });
    add(v, "stack/" + d + "/dim_last", {in({3, 1, 2}, t), in({3, 1, 2}, t, Layout::Expanded)},
        [](const TV& x) { return one(tb::stack({x[0], x[1]}, -1)); }, [](const RV& x) { return one(R::stack({x[0], x[1]}, -1)); });
    add(v, "stack/" + d + "/scalars", {in({}, t), in({}, t)},
        [](const TV& x) { return one(tb::stack({x[0], x[1]}, 0)); }, [](const RV& x) { return one(R::stack({x[0], x[1]}, 0)); });
  }
  // Mixed dtypes promote; 1-D size-0 tensors are skipped whatever their shape but still promote.
  add(v, "cat/mixed/int32_bf16_f16", {in({2, 3}, I32), in({1, 3}, BF16), in({2, 3}, F16)},
      [](const TV& x) { return one(tb::cat({x[0], x[1], x[2]})); }, [](const RV& x) { return one(R::cat({x[0], x[1], x[2]})); });
  add(v, "cat/mixed/bool_int64", {in({2}, BOOL), in({3}, I64)},
      [](const TV& x) { return one(tb::cat({x[0], x[1]})); }, [](const RV& x) { return one(R::cat({x[0], x[1]})); });
  add(v, "cat/mixed/legacy_empty", {in({2, 3}, F32), in({0}, F64)},
      [](const TV& x) { return one(tb::cat({x[0], x[1]}, 1)); }, [](const RV& x) { return one(R::cat({x[0], x[1]}, 1)); });
  add(v, "cat/float32/all_legacy_empty", {in({0}, F32), in({0}, F32)},
      [](const TV& x) { return one(tb::cat({x[0], x[1]})); }, [](const RV& x) { return one(R::cat({x[0], x[1]})); });
  add(v, "cat/float32/out_cast", {in({2, 3}, F32), in({1, 3}, F32), in({0}, F64, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[2]; tb::cat_out(o, {x[0], x[1]}); return one(o); },
      [](const RV& x) { ref::Tensor o = x[2]; return one(R::cat_out(o, {x[0], x[1]})); });
  add(v, "stack/float32/out", {in({2, 3}, F32), in({2, 3}, F32), in({2, 2, 3}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[2]; tb::stack_out(o, {x[0], x[1]}); return one(o); },
      [](const RV& x) { ref::Tensor o = x[2]; return one(R::stack_out(o, {x[0], x[1]})); });
  add(v, "cat/float32/error_shape", {in({2, 3}, F32), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::cat({x[0], x[1]}, 0)); }, [](const RV& x) { return one(R::cat({x[0], x[1]}, 0)); }, Check::Error);
  add(v, "cat/float32/error_ndim", {in({2, 3}, F32), in({2, 3, 1}, F32)},
      [](const TV& x) { return one(tb::cat({x[0], x[1]}, 0)); }, [](const RV& x) { return one(R::cat({x[0], x[1]}, 0)); }, Check::Error);
  add(v, "cat/float32/error_0dim", {in({}, F32)},
      [](const TV& x) { return one(tb::cat({x[0]})); }, [](const RV& x) { return one(R::cat({x[0]})); }, Check::Error);
  add(v, "cat/float32/error_dim", {in({2, 3}, F32)},
      [](const TV& x) { return one(tb::cat({x[0]}, 2)); }, [](const RV& x) { return one(R::cat({x[0]}, 2)); }, Check::Error);
  add(v, "cat/float32/error_empty_list", {},
      [](const TV&) { return one(tb::cat({})); }, [](const RV&) { return one(R::cat({})); }, Check::Error);
  add(v, "cat/float32/error_out_dtype", {in({2, 3}, F32), in({0}, I64, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[1]; return one(tb::cat_out(o, {x[0]})); },
      [](const RV& x) { ref::Tensor o = x[1]; return one(R::cat_out(o, {x[0]})); }, Check::Error);
  add(v, "stack/float32/error_shape", {in({2, 3}, F32), in({3, 2}, F32)},
      [](const TV& x) { return one(tb::stack({x[0], x[1]})); }, [](const RV& x) { return one(R::stack({x[0], x[1]})); }, Check::Error);
  add(v, "stack/float32/error_empty_list", {},
      [](const TV&) { return one(tb::stack({})); }, [](const RV&) { return one(R::stack({})); }, Check::Error);
}

void split_cases(std::vector<OpCase>& v) {
  for (DType t : {F32, BF16, I64, BOOL}) {
    const std::string d = nm(t);
    add(v, "split/" + d + "/size2", {in({5, 3}, t)},
        [](const TV& x) { return tb::split(x[0], int64_t(2)); }, [](const RV& x) { return R::split(x[0], 2); }, Check::View);
    add(v, "chunk/" + d + "/uneven", {in({3, 7}, t, Layout::Transposed)},
        [](const TV& x) { return tb::chunk(x[0], 3, 0); }, [](const RV& x) { return R::chunk(x[0], 3, 0); }, Check::View);
  }
  add(v, "split/float32/dim1_strided", {in({4, 5}, F32, Layout::Strided)},
      [](const TV& x) { return tb::split(x[0], int64_t(2), 1); }, [](const RV& x) { return R::split(x[0], 2, 1); }, Check::View);
  add(v, "split/float32/size_larger", {in({3}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(5)); }, [](const RV& x) { return R::split(x[0], 5); }, Check::View);
  add(v, "split/float32/zero_size", {in({0, 3}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(2)); }, [](const RV& x) { return R::split(x[0], 2); }, Check::View);
  add(v, "split/float32/size0_on_empty", {in({0, 3}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(0)); }, [](const RV& x) { return R::split(x[0], 0); }, Check::View);
  add(v, "split/float32/sizes", {in({6, 2}, F32, Layout::Transposed)},
      [](const TV& x) { return tb::split(x[0], std::vector<int64_t>{1, 0, 3, 2}, 0); },
      [](const RV& x) { return R::split_with_sizes(x[0], {1, 0, 3, 2}, 0); }, Check::View);
  add(v, "split/float32/sizes_dim_last", {in({2, 5}, F32, Layout::Expanded)},
      [](const TV& x) { return tb::split_with_sizes(x[0], {2, 3}, -1); },
      [](const RV& x) { return R::split_with_sizes(x[0], {2, 3}, -1); }, Check::View);
  add(v, "chunk/float32/more_chunks_than_size", {in({2, 3}, F32)},
      [](const TV& x) { return tb::chunk(x[0], 5, 1); }, [](const RV& x) { return R::chunk(x[0], 5, 1); }, Check::View);
  add(v, "chunk/float32/six_by_four", {in({6}, F32)},
      [](const TV& x) { return tb::chunk(x[0], 4); }, [](const RV& x) { return R::chunk(x[0], 4); }, Check::View);
  add(v, "chunk/float32/zero_size", {in({0, 3}, F32)},
      [](const TV& x) { return tb::chunk(x[0], 3); }, [](const RV& x) { return R::chunk(x[0], 3); }, Check::View);
  add(v, "split/float32/error_negative", {in({3}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(-1)); }, [](const RV& x) { return R::split(x[0], -1); }, Check::Error);
  add(v, "split/float32/error_zero", {in({3}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(0)); }, [](const RV& x) { return R::split(x[0], 0); }, Check::Error);
  add(v, "split/float32/error_0dim", {in({}, F32)},
      [](const TV& x) { return tb::split(x[0], int64_t(1)); }, [](const RV& x) { return R::split(x[0], 1); }, Check::Error);
  add(v, "split/float32/error_sizes_sum", {in({5}, F32)},
      [](const TV& x) { return tb::split_with_sizes(x[0], {2, 2}); },
      [](const RV& x) { return R::split_with_sizes(x[0], {2, 2}); }, Check::Error);
  add(v, "split/float32/error_sizes_negative", {in({3}, F32)},
      [](const TV& x) { return tb::split_with_sizes(x[0], {4, -1}); },
      [](const RV& x) { return R::split_with_sizes(x[0], {4, -1}); }, Check::Error);
  add(v, "chunk/float32/error_zero_chunks", {in({3}, F32)},
      [](const TV& x) { return tb::chunk(x[0], 0); }, [](const RV& x) { return R::chunk(x[0], 0); }, Check::Error);

  for (DType t : kAll) {
    const std::string d = nm(t);
    add(v, "repeat/" + d + "/2d", {in({2, 3}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::repeat(x[0], {2, 1, 3})); }, [](const RV& x) { return one(R::repeat(x[0], {2, 1, 3})); });
  }
  add(v, "repeat/float32/strided", {in({3, 4}, F32, Layout::Strided)},
      [](const TV& x) { return one(tb::repeat(x[0], {3, 2})); }, [](const RV& x) { return one(R::repeat(x[0], {3, 2})); });
  add(v, "repeat/float32/0dim", {in({}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {})); }, [](const RV& x) { return one(R::repeat(x[0], {})); });
  add(v, "repeat/float32/0dim_to_2d", {in({}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {2, 3})); }, [](const RV& x) { return one(R::repeat(x[0], {2, 3})); });
  add(v, "repeat/float32/zero_repeat", {in({2, 3}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {0, 2})); }, [](const RV& x) { return one(R::repeat(x[0], {0, 2})); });
  add(v, "repeat/float32/zero_size", {in({0, 3}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {2, 2})); }, [](const RV& x) { return one(R::repeat(x[0], {2, 2})); });
  add(v, "repeat/float32/error_fewer_dims", {in({2, 3}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {2})); }, [](const RV& x) { return one(R::repeat(x[0], {2})); }, Check::Error);
  add(v, "repeat/float32/error_negative", {in({3}, F32)},
      [](const TV& x) { return one(tb::repeat(x[0], {-1})); }, [](const RV& x) { return one(R::repeat(x[0], {-1})); }, Check::Error);
}

void triangle_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    for (int64_t k : {0, 1, -2}) {
      const std::string ks = k < 0 ? "m" + std::to_string(-k) : std::to_string(k);
      add(v, "tril/" + d + "/k" + ks, {in({4, 5}, t)},
          [k](const TV& x) { return one(tb::tril(x[0], k)); }, [k](const RV& x) { return one(R::tril(x[0], k)); });
      add(v, "triu/" + d + "/k" + ks, {in({4, 5}, t, Layout::Transposed)},
          [k](const TV& x) { return one(tb::triu(x[0], k)); }, [k](const RV& x) { return one(R::triu(x[0], k)); });
    }
    add(v, "tril/" + d + "/batched_strided", {in({2, 3, 4}, t, Layout::Strided)},
        [](const TV& x) { return one(tb::tril(x[0], 1)); }, [](const RV& x) { return one(R::tril(x[0], 1)); });
  }
  add(v, "triu/float32/batched_expanded", {in({3, 4, 2}, F32, Layout::Expanded)},
      [](const TV& x) { return one(tb::triu(x[0], -1)); }, [](const RV& x) { return one(R::triu(x[0], -1)); });
  add(v, "tril/float32/zero_size", {in({0, 3}, F32)},
      [](const TV& x) { return one(tb::tril(x[0])); }, [](const RV& x) { return one(R::tril(x[0])); });
  // A size-0 dim anywhere (the kernel once divided by the last dim).
  for (const Shape& s : {Shape{3, 0}, Shape{2, 4, 0}, Shape{0, 3, 0}, Shape{2, 0, 3}}) {
    const std::string n = "/zero_size_" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s.back());
    add(v, "tril" + ("/float32" + n), {in(s, F32)}, [](const TV& x) { return one(tb::tril(x[0], 1)); },
        [](const RV& x) { return one(R::tril(x[0], 1)); });
    add(v, "triu" + ("/float64" + n), {in(s, F64, Layout::Transposed)}, [](const TV& x) { return one(tb::triu(x[0], -1)); },
        [](const RV& x) { return one(R::triu(x[0], -1)); });
  }
  add(v, "triu/float32/big_diagonal", {in({3, 3}, F32)},
      [](const TV& x) { return one(tb::triu(x[0], 7)); }, [](const RV& x) { return one(R::triu(x[0], 7)); });
  add(v, "tril/float32/inplace_transposed", {in({4, 3}, F32, Layout::Transposed)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::tril_(a, -1); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::tril_(a, -1); return one(a); });
  add(v, "triu/float64/inplace", {in({2, 4, 3}, F64)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::triu_(a, 1); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::triu_(a, 1); return one(a); });
  add(v, "tril/float32/out", {in({3, 4}, F32), in({3, 4}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[1]; tb::tril_out(o, x[0]); return one(o); },
      [](const RV& x) { ref::Tensor o = x[1]; return one(R::tril_out(o, x[0])); });
  add(v, "triu/float32/out", {in({3, 4}, F32), in({3, 4}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[1]; tb::triu_out(o, x[0], 1); return one(o); },
      [](const RV& x) { ref::Tensor o = x[1]; return one(R::triu_out(o, x[0], 1)); });
  add(v, "tril/float32/error_1d", {in({3}, F32)},
      [](const TV& x) { return one(tb::tril(x[0])); }, [](const RV& x) { return one(R::tril(x[0])); }, Check::Error);
  add(v, "triu/float32/error_0dim", {in({}, F32)},
      [](const TV& x) { return one(tb::triu(x[0])); }, [](const RV& x) { return one(R::triu(x[0])); }, Check::Error);
}

void index_gather_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    add(v, "index_select/" + d + "/dim0", {in({5, 4}, t), idx({7}, 5)},
        [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
        [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
    add(v, "index_select/" + d + "/dim1_transposed_int32", {in({3, 6}, t, Layout::Transposed), idx({4}, 6, I32)},
        [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); },
        [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
    add(v, "gather/" + d + "/dim1", {in({4, 5}, t), idx({4, 3}, 5)},
        [](const TV& x) { return one(tb::gather(x[0], 1, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 1, x[1])); });
    add(v, "gather/" + d + "/dim0_transposed", {in({4, 5}, t, Layout::Transposed), idx({6, 5}, 4, I64, Layout::Strided)},
        [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
    add(v, "scatter/" + d + "/src_dim0", {in({5, 4}, t), in({4, 4}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::scatter(x[0], 0, perm_index({3, 4}, 0, 5), x[1])); },
        [](const RV& x) { return one(R::scatter(x[0], 0, ref::to_ref(perm_index({3, 4}, 0, 5)), x[1])); });
    add(v, "scatter/" + d + "/value_dim1", {in({3, 6}, t, Layout::Strided)},
        [](const TV& x) { return one(tb::scatter(x[0], 1, perm_index({2, 4}, 1, 6), 2.5)); },
        [](const RV& x) { return one(R::scatter(x[0], 1, ref::to_ref(perm_index({2, 4}, 1, 6)), 2.5)); });
    add(v, "scatter_add/" + d + "/dup_indices", {in({4, 5}, t), idx({6, 3}, 4), in({6, 4}, t)},
        [](const TV& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); });
    add(v, "index_add/" + d + "/dim0", {in({5, 4}, t), idx({6}, 5), in({6, 4}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
    // An empty self of 2+ dims is returned before the index is read (PyTorch's CPU kernel).
    add(v, "index_add/" + d + "/empty_self_any_index", {in({0, 3}, t), in({2, 3}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, ivec({0, 7}, {2}), x[1])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, rvec({0, 7}, {2}), x[1])); });
    // Out of place on a transposed self: a fresh row-major result, as PyTorch's (strides compared).
    add(v, "index_add/" + d + "/transposed_self_layout", {in({5, 4}, t, Layout::Transposed), idx({3}, 5), in({3, 4}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::View);
    add(v, "scatter_add/" + d + "/transposed_self_layout", {in({4, 5}, t, Layout::Transposed), idx({2, 5}, 4), in({2, 5}, t)},
        [](const TV& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); }, Check::View);
    add(v, "scatter/" + d + "/transposed_self_layout", {in({4, 5}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::scatter(x[0], 1, perm_index({2, 4}, 1, 5), 1.5)); },
        [](const RV& x) { return one(R::scatter(x[0], 1, ref::to_ref(perm_index({2, 4}, 1, 5)), 1.5)); }, Check::View);
  }
  for (DType t : kNumeric) {
    const std::string d = nm(t);
    add(v, "scatter/" + d + "/reduce_add", {in({4, 5}, t), idx({3, 5}, 4), in({3, 5}, t)},
        [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "add")); },
        [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "add")); });
    add(v, "scatter/" + d + "/reduce_multiply", {in({4, 5}, t), idx({4, 3}, 5), in({4, 3}, t)},
        [](const TV& x) { return one(tb::scatter(x[0], 1, x[1], x[2], "multiply")); },
        [](const RV& x) { return one(R::scatter(x[0], 1, x[1], x[2], "multiply")); });
    add(v, "index_add/" + d + "/dim1_alpha", {in({3, 5}, t, Layout::Strided), idx({4}, 5, I32), in({3, 4}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 1, x[1], x[2], 2)); },
        [](const RV& x) { return one(R::index_add(x[0], 1, x[1], x[2], 2)); });
  }
  // index_select: 0-dim index and self, empty index, zero-size self, out=.
  add(v, "index_select/float32/index_0dim", {in({4, 3}, F32), idx({}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
  add(v, "index_select/float32/self_0dim", {in({}, F32), idx({1}, 1)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
  add(v, "index_select/float32/empty_index", {in({4, 3}, F32), idx({0}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], -1, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], -1, x[1])); });
  add(v, "index_select/float32/zero_size_self", {in({0, 3}, F32), idx({5}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
  add(v, "index_select/float32/3d_middle_expanded", {in({3, 4, 5}, F32, Layout::Expanded), idx({6}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
  add(v, "index_select/float32/out", {in({5, 4}, F32), idx({3}, 5), in({0}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) { tb::Tensor o = x[2]; tb::index_select_out(o, x[0], 0, x[1]); return one(o); },
      [](const RV& x) { ref::Tensor o = x[2]; return one(R::index_select_out(o, x[0], 0, x[1])); });
  {
    OpCase& c = (add(v, "index_select/float32/large", {in({8192, 512}, F32), idx({8192}, 8192)},
                     [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
                     [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }),
                 v.back());
    c.bench = true;
    c.bytes = 2.0 * 8192 * 512 * 4;
  }
  // gather: 0-dim, empty index, index larger than self along dim.
  add(v, "gather/float32/0dim", {in({}, F32), idx({}, 1)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(v, "gather/float32/0dim_self_1d_index", {in({}, F32), idx({3}, 1)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(v, "gather/float32/empty_index", {in({3, 4}, F32), idx({0, 7}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(v, "gather/float32/3d_last_int32", {in({2, 3, 5}, F32, Layout::Transposed), idx({2, 2, 7}, 5, I32)},
      [](const TV& x) { return one(tb::gather(x[0], -1, x[1])); }, [](const RV& x) { return one(R::gather(x[0], -1, x[1])); });
  // scatter: in-place on a transposed view, value with reduce, 0-dim, empty index.
  add(v, "scatter/float32/inplace_transposed", {in({4, 5}, F32, Layout::Transposed), in({4, 3}, F32)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::scatter_(a, 1, perm_index({4, 3}, 1, 5), x[1]); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::scatter_(a, 1, ref::to_ref(perm_index({4, 3}, 1, 5)), x[1]); return one(a); });
  add(v, "scatter/float32/value_reduce_add", {in({4, 5}, F32), idx({6, 5}, 4)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], 1.5, "add")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], 1.5, "add")); });
  add(v, "scatter/bool/reduce_add", {in({4, 5}, BOOL), idx({3, 5}, 4), in({3, 5}, BOOL)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "add")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "add")); });
  add(v, "scatter/float32/0dim", {in({}, F32), idx({}, 1), in({}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); });
  add(v, "scatter/float32/empty_index", {in({3, 4}, F32), idx({0, 4}, 3), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); });
  add(v, "scatter_add/float32/inplace_3d", {in({3, 4, 5}, F32), idx({3, 4, 8}, 5), in({3, 4, 8}, F32, Layout::Strided)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::scatter_add_(a, 2, x[1], x[2]); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::scatter_add_(a, 2, x[1], x[2]); return one(a); });
  // index_add: fractional alpha, in-place on a strided view, 0-dim, empty.
  add(v, "index_add/float32/alpha_half", {in({5, 4}, F32), idx({6}, 5), in({6, 4}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2], 0.5)); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2], 0.5)); });
  add(v, "index_add/float32/inplace_strided", {in({3, 5}, F32, Layout::Strided), idx({7}, 5), in({3, 7}, F32)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::index_add_(a, 1, x[1], x[2], -1); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::index_add_(a, 1, x[1], x[2], -1); return one(a); });
  add(v, "index_add/float32/0dim", {in({}, F32), idx({1}, 1), in({}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
  add(v, "index_add/float32/empty_index", {in({4, 3}, F32), idx({0}, 4), in({0, 3}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
  add(v, "index_add/float32/3d_middle", {in({2, 4, 3}, F32, Layout::Transposed), idx({5}, 4), in({2, 5, 3}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 1, x[1], x[2])); }, [](const RV& x) { return one(R::index_add(x[0], 1, x[1], x[2])); });

  // Bad input: out-of-range and negative indices must raise before anything is written.
  add(v, "index_select/float32/error_out_of_range", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, ivec({0, 3}, {2}))); },
      [](const RV& x) { return one(R::index_select(x[0], 0, rvec({0, 3}, {2}))); }, Check::Error);
  add(v, "index_select/float32/error_negative", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, ivec({-1}, {1}))); },
      [](const RV& x) { return one(R::index_select(x[0], 1, rvec({-1}, {1}))); }, Check::Error);
  add(v, "index_select/float32/error_2d_index", {in({3, 4}, F32), idx({2, 2}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }, Check::Error);
  add(v, "index_select/float32/error_float_index", {in({3, 4}, F32), in({2}, F32)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }, Check::Error);
  add(v, "index_select/float32/error_dim", {in({3, 4}, F32), idx({2}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 2, x[1])); }, [](const RV& x) { return one(R::index_select(x[0], 2, x[1])); }, Check::Error);
  add(v, "gather/float32/error_out_of_range", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::gather(x[0], 1, ivec({0, 4}, {1, 2}))); },
      [](const RV& x) { return one(R::gather(x[0], 1, rvec({0, 4}, {1, 2}))); }, Check::Error);
  add(v, "gather/float32/error_negative", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::gather(x[0], 0, ivec({-1}, {1, 1}))); },
      [](const RV& x) { return one(R::gather(x[0], 0, rvec({-1}, {1, 1}))); }, Check::Error);
  add(v, "gather/float32/error_ndim", {in({3}, F32), idx({1, 1}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); }, Check::Error);
  add(v, "gather/float32/error_index_too_big", {in({3, 4}, F32), idx({2, 5}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); }, [](const RV& x) { return one(R::gather(x[0], 0, x[1])); }, Check::Error);
  add(v, "scatter/float32/error_out_of_range", {in({3, 4}, F32), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, ivec({1, 3}, {1, 2}), x[1])); },
      [](const RV& x) { return one(R::scatter(x[0], 0, rvec({1, 3}, {1, 2}), x[1])); }, Check::Error);
  add(v, "scatter/float32/error_negative_value", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 1, ivec({-2}, {1, 1}), 1.0)); },
      [](const RV& x) { return one(R::scatter(x[0], 1, rvec({-2}, {1, 1}), 1.0)); }, Check::Error);
  add(v, "scatter/float32/error_src_dtype", {in({3, 4}, F32), idx({1, 2}, 3), in({1, 2}, F64)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); }, Check::Error);
  add(v, "scatter/float32/error_index_bigger_than_src", {in({3, 4}, F32), idx({2, 2}, 3), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); }, Check::Error);
  add(v, "scatter/float32/error_reduce_name", {in({3, 4}, F32), idx({1, 2}, 3), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "max")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "max")); }, Check::Error);
  add(v, "scatter_add/float32/error_out_of_range", {in({3, 4}, F32), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter_add(x[0], 1, ivec({1, 4}, {1, 2}), x[1])); },
      [](const RV& x) { return one(R::scatter_add(x[0], 1, rvec({1, 4}, {1, 2}), x[1])); }, Check::Error);
  add(v, "index_add/float32/error_out_of_range", {in({3, 4}, F32), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, ivec({0, 3}, {2}), x[1])); },
      [](const RV& x) { return one(R::index_add(x[0], 0, rvec({0, 3}, {2}), x[1])); }, Check::Error);
  add(v, "index_add/float32/error_negative", {in({3, 4}, F32), in({3, 1}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 1, ivec({-1}, {1}), x[1])); },
      [](const RV& x) { return one(R::index_add(x[0], 1, rvec({-1}, {1}), x[1])); }, Check::Error);
  add(v, "index_add/float32/error_dtype", {in({3, 4}, F32), idx({2}, 3), in({2, 4}, F64)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::Error);
  add(v, "scatter/float32/error_inplace_expanded", {in({2, 3}, F32, Layout::Expanded)},
      [](const TV& x) { tb::Tensor a = x[0]; return one(tb::scatter_(a, 0, ivec({0, 0, 0}, {1, 3}), ones({1, 3}))); },
      [](const RV& x) { ref::Tensor a = x[0]; return one(R::scatter_(a, 0, rvec({0, 0, 0}, {1, 3}), ref::to_ref(ones({1, 3})))); },
      Check::Error);
  add(v, "index_add/float32/error_inplace_expanded", {in({2, 3}, F32, Layout::Expanded), in({1, 3}, F32)},
      [](const TV& x) { tb::Tensor a = x[0]; return one(tb::index_add_(a, 0, ivec({0}, {1}), x[1])); },
      [](const RV& x) { ref::Tensor a = x[0]; return one(R::index_add_(a, 0, rvec({0}, {1}), x[1])); }, Check::Error);
  add(v, "index_add/float32/error_count", {in({3, 4}, F32), idx({3}, 3), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); }, [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::Error);
}

void mask_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    add(v, "masked_fill/" + d + "/same_shape", {in({3, 4}, t), mask({3, 4})},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], -1.5)); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], -1.5)); });
    add(v, "masked_fill/" + d + "/broadcast_mask_transposed", {in({3, 4}, t, Layout::Transposed), mask({4})},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 3.0)); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], 3.0)); });
    add(v, "masked_fill/" + d + "/value_tensor", {in({2, 5}, t, Layout::Strided), mask({2, 5}), in({}, F64)},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], x[2])); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], x[2])); });
    add(v, "masked_select/" + d + "/same_shape", {in({3, 4}, t, Layout::Transposed), mask({3, 4})},
        [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
    add(v, "nonzero/" + d + "/2d", {in({4, 5}, t, Layout::Contiguous, Values::Bool)},
        [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  }
  add(v, "masked_fill/float32/broadcast_self", {in({4}, F32), mask({3, 4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(v, "masked_fill/float32/expanded_mask", {in({3, 4}, F32), mask({3, 4}, Layout::Expanded)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(v, "masked_fill/float32/0dim", {in({}, F32), mask({})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(v, "masked_fill/float32/zero_size", {in({0, 4}, F32), mask({4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(v, "masked_fill/float32/inplace_transposed", {in({3, 4}, F32, Layout::Transposed), mask({3, 1})},
      [](const TV& x) { tb::Tensor a = x[0]; tb::masked_fill_(a, x[1], -7.0); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::masked_fill_(a, x[1], -7.0); return one(a); });
  add(v, "masked_fill/int64/inplace_value_tensor", {in({3, 4}, I64), mask({3, 4}), in({}, I64)},
      [](const TV& x) { tb::Tensor a = x[0]; tb::masked_fill_(a, x[1], x[2]); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; R::masked_fill_(a, x[1], x[2]); return one(a); });
  add(v, "masked_fill/float32/error_int_mask", {in({3}, F32), in({3}, I32)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 1.0)); }, Check::Error);
  add(v, "masked_fill/float32/error_1d_value", {in({3}, F32), mask({3}), in({1}, F32)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], x[2])); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], x[2])); }, Check::Error);
  add(v, "masked_fill/float32/error_inplace_broadcast", {in({3}, F32), mask({2, 3})},
      [](const TV& x) { tb::Tensor a = x[0]; tb::masked_fill_(a, x[1], 1.0); return one(a); },
      [](const RV& x) { ref::Tensor a = x[0]; return one(R::masked_fill_(a, x[1], 1.0)); }, Check::Error);
  add(v, "masked_fill/float32/error_shape", {in({3}, F32), mask({4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); }, [](const RV& x) { return one(R::masked_fill(x[0], x[1], 1.0)); }, Check::Error);
  add(v, "masked_select/float32/broadcast", {in({4}, F32, Layout::Strided), mask({3, 4})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(v, "masked_select/float32/broadcast_mask", {in({3, 4}, F32), mask({3, 1})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(v, "masked_select/float32/zero_size", {in({0, 4}, F32), mask({0, 4})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(v, "masked_select/float32/0dim", {in({}, F32), mask({})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(v, "masked_select/float32/error_int_mask", {in({3}, F32), in({3}, I64)},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); }, [](const RV& x) { return one(R::masked_select(x[0], x[1])); }, Check::Error);
  add(v, "nonzero/float32/3d_transposed", {in({2, 3, 4}, F32, Layout::Transposed, Values::Bool)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(v, "nonzero/int32/signed_values", {in({5, 3}, I32, Layout::Strided)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(v, "nonzero/float32/0dim", {in({}, F32, Layout::Contiguous, Values::Positive)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(v, "nonzero/float32/zero_size", {in({3, 0}, F32)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
}

// topk/unstable sort: ties make the indices implementation-defined, so the engine lambda returns
// the input gathered at its indices (must equal the values); `direct` adds the raw indices too,
// for tie-free inputs (Values::Normal floats).
void order_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    const bool tie_free = t == F32 || t == F64;
    add(v, "sort/" + d + "/stable_last", {in({4, 7}, t)},
        [](const TV& x) { auto [s, i] = tb::sort(x[0], true, -1, false); return TV{s, i}; },
        [](const RV& x) { auto [s, i] = R::sort(x[0], true, -1, false); return RV{s, i}; });
    add(v, "sort/" + d + "/stable_desc_dim0_transposed", {in({6, 3}, t, Layout::Transposed)},
        [](const TV& x) { auto [s, i] = tb::sort(x[0], true, 0, true); return TV{s, i}; },
        [](const RV& x) { auto [s, i] = R::sort(x[0], true, 0, true); return RV{s, i}; });
    add(v, "sort/" + d + "/unstable_strided", {in({3, 9}, t, Layout::Strided)},
        [](const TV& x) { auto [s, i] = tb::sort(x[0], -1, true); return TV{s, tb::gather(x[0], -1, i)}; },
        [](const RV& x) { auto [s, i] = R::sort(x[0], std::nullopt, -1, true); return RV{s, s}; });
    if (t == BOOL) continue;  // topk refuses bool on CPU (error row below)
    add(v, "topk/" + d + "/largest", {in({4, 9}, t)},
        [tie_free](const TV& x) {
          auto [s, i] = tb::topk(x[0], 3);
          TV r{s, tb::gather(x[0], -1, i)};
          if (tie_free) r.push_back(i);
          return r;
        },
        [tie_free](const RV& x) {
          auto [s, i] = R::topk(x[0], 3);
          RV r{s, s};
          if (tie_free) r.push_back(i);
          return r;
        });
    add(v, "topk/" + d + "/smallest_dim0_transposed", {in({7, 3}, t, Layout::Transposed)},
        [tie_free](const TV& x) {
          auto [s, i] = tb::topk(x[0], 4, 0, false);
          TV r{s, tb::gather(x[0], 0, i)};
          if (tie_free) r.push_back(i);
          return r;
        },
        [tie_free](const RV& x) {
          auto [s, i] = R::topk(x[0], 4, 0, false);
          RV r{s, s};
          if (tie_free) r.push_back(i);
          return r;
        });
  }
  // sorted=false leaves the order to the implementation: compare the sorted values.
  add(v, "topk/float32/unsorted", {in({5, 8}, F32, Layout::Strided)},
      [](const TV& x) { auto [s, i] = tb::topk(x[0], 3, -1, true, false); return one(std::get<0>(tb::sort(s, -1, true))); },
      [](const RV& x) { auto [s, i] = R::topk(x[0], 3, -1, true, false); return one(std::get<0>(R::sort(s, true, -1, true))); });
  add(v, "topk/float32/k0", {in({3, 4}, F32)},
      [](const TV& x) { auto [s, i] = tb::topk(x[0], 0); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::topk(x[0], 0); return RV{s, i}; });
  add(v, "topk/float32/k_full", {in({3, 4}, F32)},
      [](const TV& x) { auto [s, i] = tb::topk(x[0], 4); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::topk(x[0], 4); return RV{s, i}; });
  add(v, "topk/float32/zero_size", {in({0, 5}, F32)},
      [](const TV& x) { auto [s, i] = tb::topk(x[0], 2); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::topk(x[0], 2); return RV{s, i}; });
  add(v, "topk/float32/0dim", {in({}, F32)},
      [](const TV& x) { auto [s, i] = tb::topk(x[0], 1); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::topk(x[0], 1); return RV{s, i}; });
  add(v, "topk/float32/error_k_too_big", {in({3, 4}, F32)},
      [](const TV& x) { return one(std::get<0>(tb::topk(x[0], 5))); }, [](const RV& x) { return one(std::get<0>(R::topk(x[0], 5))); }, Check::Error);
  add(v, "topk/float32/error_k_negative", {in({3, 4}, F32)},
      [](const TV& x) { return one(std::get<0>(tb::topk(x[0], -1))); }, [](const RV& x) { return one(std::get<0>(R::topk(x[0], -1))); }, Check::Error);
  add(v, "topk/bool/error_dtype", {in({3, 4}, BOOL)},
      [](const TV& x) { return one(std::get<0>(tb::topk(x[0], 1))); }, [](const RV& x) { return one(std::get<0>(R::topk(x[0], 1))); }, Check::Error);
  add(v, "sort/float32/zero_size", {in({0, 5}, F32)},
      [](const TV& x) { auto [s, i] = tb::sort(x[0], true, 0, false); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::sort(x[0], true, 0, false); return RV{s, i}; });
  add(v, "sort/float32/0dim", {in({}, F32)},
      [](const TV& x) { auto [s, i] = tb::sort(x[0], true, 0, false); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::sort(x[0], true, 0, false); return RV{s, i}; });
  add(v, "sort/float32/3d_middle_expanded", {in({3, 5, 4}, F32, Layout::Expanded)},
      [](const TV& x) { auto [s, i] = tb::sort(x[0], true, 1, true); return TV{s, i}; },
      [](const RV& x) { auto [s, i] = R::sort(x[0], true, 1, true); return RV{s, i}; });
  add(v, "sort/float32/error_dim", {in({3, 4}, F32)},
      [](const TV& x) { return one(std::get<0>(tb::sort(x[0], 2))); }, [](const RV& x) { return one(std::get<0>(R::sort(x[0], std::nullopt, 2))); }, Check::Error);
  {
    OpCase& c = (add(v, "sort/float32/1M", {in({1 << 20}, F32)},
                     [](const TV& x) { auto [s, i] = tb::sort(x[0], true, -1, false); return TV{s, i}; },
                     [](const RV& x) { auto [s, i] = R::sort(x[0], true, -1, false); return RV{s, i}; }),
                 v.back());
    c.bench = true;
    c.bytes = double(1 << 20) * (4 + 4 + 8);
  }
}

void index_mask_order_cases(std::vector<OpCase>& v) {
  mask_cases(v);
  order_cases(v);
}

}  // namespace

std::vector<OpCase> index_cases() {
  std::vector<OpCase> v;
  join_cases(v);
  split_cases(v);
  triangle_cases(v);
  index_gather_cases(v);
  index_mask_order_cases(v);
  return v;
}

}  // namespace tb::suites
