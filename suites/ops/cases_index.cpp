// The index family's case table (shape and index ops: cat, stack, split, chunk, repeat,
// index_select, gather, scatter, scatter_add, index_add, masked_fill, masked_select, nonzero,
// topk, sort, tril/triu). Built by loops over dtypes and layouts. Index tensors that must not
// repeat along the scattered dim (plain scatter: which duplicate wins is unspecified, and finite
// differences would see only the winner) and deliberately bad indices are made inside the
// lambdas, identically on both sides. Rows with `grad` also check the gradients
// (engine/autograd/functions/index.cpp), float32 and float64; the views' rows are in cases_tensor.cpp.
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
namespace E = tb::ops;
namespace R = tb::ref;
using TV = std::vector<tb::Tensor>;
using RV = std::vector<ref::Tensor>;

constexpr DType F32 = DType::Float32, F64 = DType::Float64, BF16 = DType::BFloat16, F16 = DType::Float16,
                I64 = DType::Int64, I32 = DType::Int32, BOOL = DType::Bool;
const DType kAll[] = {F32, F64, BF16, F16, I64, I32, BOOL};
const DType kNumeric[] = {F32, F64, BF16, F16, I64, I32};

std::string nm(DType t) { return core::name(t); }

// The dtypes whose rows also check gradients.
bool differentiable(DType t) { return t == F32 || t == F64; }
Input in(Shape s, DType t, Layout l = Layout::Contiguous, Values v = Values::Normal) {
  return {std::move(s), t, l, v, 0};
}
Input idx(Shape s, int64_t hi, DType t = I64, Layout l = Layout::Contiguous) {
  return {std::move(s), t, l, Values::Index, hi};
}
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

OpCase& add(std::vector<OpCase>& v, std::string name, std::vector<Input> inputs, EngineFn e, RefFn r,
            Check c = Check::Values) {
  v.push_back(make_case(std::move(name), std::move(inputs), std::move(e), std::move(r), c));
  return v.back();
}

void join_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    const bool g = differentiable(t);
    add(
        v, "cat/" + d + "/dim0", {in({2, 3}, t), in({4, 3}, t, Layout::Transposed)},
        [](const TV& x) {
          return one(tb::cat({x[0], x[1]}, 0));
        },
        [](const RV& x) {
          return one(R::cat({x[0], x[1]}, 0));
        })
        .grad = g;
    add(
        v, "cat/" + d + "/dim1_strided",
        {in({3, 2}, t, Layout::Strided), in({3, 5}, t), in({3, 1}, t, Layout::Expanded)},
        [](const TV& x) {
          return one(tb::cat({x[0], x[1], x[2]}, -1));
        },
        [](const RV& x) {
          return one(R::cat({x[0], x[1], x[2]}, -1));
        });
    add(
        v, "cat/" + d + "/zero_size", {in({0, 3}, t), in({2, 3}, t), in({0, 3}, t)},
        [](const TV& x) {
          return one(tb::cat({x[0], x[1], x[2]}, 0));
        },
        [](const RV& x) {
          return one(R::cat({x[0], x[1], x[2]}, 0));
        })
        .grad = g;
    add(
        v, "stack/" + d + "/dim0", {in({2, 3}, t), in({2, 3}, t, Layout::Transposed), in({2, 3}, t, Layout::Strided)},
        [](const TV& x) {
          return one(tb::stack({x[0], x[1], x[2]}, 0));
        },
        [](const RV& x) {
          return one(R::stack({x[0], x[1], x[2]}, 0));
        })
        .grad = g;
    add(
        v, "stack/" + d + "/dim_last", {in({3, 1, 2}, t), in({3, 1, 2}, t, Layout::Expanded)},
        [](const TV& x) {
          return one(tb::stack({x[0], x[1]}, -1));
        },
        [](const RV& x) {
          return one(R::stack({x[0], x[1]}, -1));
        })
        .grad = g;
    add(
        v, "stack/" + d + "/scalars", {in({}, t), in({}, t)},
        [](const TV& x) {
          return one(tb::stack({x[0], x[1]}, 0));
        },
        [](const RV& x) {
          return one(R::stack({x[0], x[1]}, 0));
        });
  }
  // Result layouts (Note [cat's result layout]): channels-last inputs give a channels-last cat and a
  // stack laid out as that cat split, one contiguous input a contiguous cat; sizes, strides and
  // offset compared (Check::View).
  const Layout CL = Layout::ChannelsLast;
  add(
      v, "cat/float32/layout_channels_last_dim1", {in({2, 3, 4, 5}, F32, CL), in({2, 2, 4, 5}, F32, CL)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 1));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 1));
      },
      Check::View)
      .grad = true;
  add(
      v, "cat/float32/layout_channels_last_dim0", {in({1, 3, 4, 5}, F32, CL), in({2, 3, 4, 5}, F32, CL)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 0));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 0));
      },
      Check::View);
  add(
      v, "cat/float32/layout_channels_last_and_contiguous", {in({2, 3, 4, 5}, F32, CL), in({2, 3, 4, 5}, F32)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 1));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 1));
      },
      Check::View);
  add(
      v, "cat/float32/layout_channels_last_3d", {in({2, 3, 2, 3, 4}, F32, CL), in({2, 3, 1, 3, 4}, F32, CL)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 2));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 2));
      },
      Check::View);
  for (int64_t dim = 0; dim <= 4; ++dim)
    add(
        v, "stack/float32/layout_channels_last_dim" + std::to_string(dim),
        {in({2, 3, 4, 5}, F32, CL), in({2, 3, 4, 5}, F32, CL)},
        [dim](const TV& x) {
          return one(tb::stack({x[0], x[1]}, dim));
        },
        [dim](const RV& x) {
          return one(R::stack({x[0], x[1]}, dim));
        },
        Check::View)
        .grad = dim == 1;
  add(
      v, "stack/float32/layout_transposed_dim1",
      {in({3, 4}, F32, Layout::Transposed), in({3, 4}, F32, Layout::Transposed)},
      [](const TV& x) {
        return one(tb::stack({x[0], x[1]}, 1));
      },
      [](const RV& x) {
        return one(R::stack({x[0], x[1]}, 1));
      },
      Check::View);
  // 1-D size-0 inputs, which cat skips: stacked they still give (inputs, 0).
  add(
      v, "stack/float32/empty_1d", {in({0}, F32), in({0}, F32), in({0}, F32)},
      [](const TV& x) {
        return one(tb::stack({x[0], x[1], x[2]}, 0));
      },
      [](const RV& x) {
        return one(R::stack({x[0], x[1], x[2]}, 0));
      },
      Check::View);
  // Mixed dtypes promote; 1-D size-0 tensors are skipped whatever their shape but still promote.
  add(
      v, "cat/mixed/int32_bf16_f16", {in({2, 3}, I32), in({1, 3}, BF16), in({2, 3}, F16)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1], x[2]}));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1], x[2]}));
      });
  add(
      v, "cat/mixed/bool_int64", {in({2}, BOOL), in({3}, I64)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}));
      });
  add(
      v, "cat/mixed/legacy_empty", {in({2, 3}, F32), in({0}, F64)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 1));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 1));
      });
  add(
      v, "cat/float32/all_legacy_empty", {in({0}, F32), in({0}, F32)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}));
      });
  add(
      v, "cat/float32/out_cast", {in({2, 3}, F32), in({1, 3}, F32), in({0}, F64, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[2];
        tb::cat_out(o, {x[0], x[1]});
        return one(o);
      },
      [](const RV& x) {
        ref::Tensor o = x[2];
        return one(R::cat_out(o, {x[0], x[1]}));
      });
  add(
      v, "stack/float32/out", {in({2, 3}, F32), in({2, 3}, F32), in({2, 2, 3}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[2];
        tb::stack_out(o, {x[0], x[1]});
        return one(o);
      },
      [](const RV& x) {
        ref::Tensor o = x[2];
        return one(R::stack_out(o, {x[0], x[1]}));
      });
  add(
      v, "cat/float32/error_shape", {in({2, 3}, F32), in({2, 4}, F32)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 0));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 0));
      },
      Check::Error);
  add(
      v, "cat/float32/error_ndim", {in({2, 3}, F32), in({2, 3, 1}, F32)},
      [](const TV& x) {
        return one(tb::cat({x[0], x[1]}, 0));
      },
      [](const RV& x) {
        return one(R::cat({x[0], x[1]}, 0));
      },
      Check::Error);
  add(
      v, "cat/float32/error_0dim", {in({}, F32)}, [](const TV& x) { return one(tb::cat({x[0]})); },
      [](const RV& x) { return one(R::cat({x[0]})); }, Check::Error);
  add(
      v, "cat/float32/error_dim", {in({2, 3}, F32)}, [](const TV& x) { return one(tb::cat({x[0]}, 2)); },
      [](const RV& x) { return one(R::cat({x[0]}, 2)); }, Check::Error);
  add(
      v, "cat/float32/error_empty_list", {}, [](const TV&) { return one(tb::cat({})); },
      [](const RV&) { return one(R::cat({})); }, Check::Error);
  add(
      v, "cat/float32/error_out_dtype", {in({2, 3}, F32), in({0}, I64, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[1];
        return one(tb::cat_out(o, {x[0]}));
      },
      [](const RV& x) {
        ref::Tensor o = x[1];
        return one(R::cat_out(o, {x[0]}));
      },
      Check::Error);
  add(
      v, "stack/float32/error_shape", {in({2, 3}, F32), in({3, 2}, F32)},
      [](const TV& x) {
        return one(tb::stack({x[0], x[1]}));
      },
      [](const RV& x) {
        return one(R::stack({x[0], x[1]}));
      },
      Check::Error);
  add(
      v, "stack/float32/error_empty_list", {}, [](const TV&) { return one(tb::stack({})); },
      [](const RV&) { return one(R::stack({})); }, Check::Error);
}

void split_cases(std::vector<OpCase>& v) {
  for (DType t : {F32, BF16, I64, BOOL}) {
    const std::string d = nm(t);
    add(
        v, "split/" + d + "/size2", {in({5, 3}, t)}, [](const TV& x) { return tb::split(x[0], int64_t(2)); },
        [](const RV& x) { return R::split(x[0], 2); }, Check::View);
    add(
        v, "chunk/" + d + "/uneven", {in({3, 7}, t, Layout::Transposed)},
        [](const TV& x) { return tb::chunk(x[0], 3, 0); }, [](const RV& x) { return R::chunk(x[0], 3, 0); },
        Check::View);
  }
  add(
      v, "split/float32/dim1_strided", {in({4, 5}, F32, Layout::Strided)},
      [](const TV& x) { return tb::split(x[0], int64_t(2), 1); }, [](const RV& x) { return R::split(x[0], 2, 1); },
      Check::View);
  add(
      v, "split/float32/size_larger", {in({3}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(5)); },
      [](const RV& x) { return R::split(x[0], 5); }, Check::View);
  add(
      v, "split/float32/zero_size", {in({0, 3}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(2)); },
      [](const RV& x) { return R::split(x[0], 2); }, Check::View);
  add(
      v, "split/float32/size0_on_empty", {in({0, 3}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(0)); },
      [](const RV& x) { return R::split(x[0], 0); }, Check::View);
  add(
      v, "split/float32/sizes", {in({6, 2}, F32, Layout::Transposed)},
      [](const TV& x) {
        return tb::split(x[0], std::vector<int64_t>{1, 0, 3, 2}, 0);
      },
      [](const RV& x) {
        return R::split_with_sizes(x[0], {1, 0, 3, 2}, 0);
      },
      Check::View);
  add(
      v, "split/float32/sizes_dim_last", {in({2, 5}, F32, Layout::Expanded)},
      [](const TV& x) {
        return tb::split_with_sizes(x[0], {2, 3}, -1);
      },
      [](const RV& x) {
        return R::split_with_sizes(x[0], {2, 3}, -1);
      },
      Check::View);
  add(
      v, "chunk/float32/more_chunks_than_size", {in({2, 3}, F32)}, [](const TV& x) { return tb::chunk(x[0], 5, 1); },
      [](const RV& x) { return R::chunk(x[0], 5, 1); }, Check::View);
  add(
      v, "chunk/float32/six_by_four", {in({6}, F32)}, [](const TV& x) { return tb::chunk(x[0], 4); },
      [](const RV& x) { return R::chunk(x[0], 4); }, Check::View);
  add(
      v, "chunk/float32/zero_size", {in({0, 3}, F32)}, [](const TV& x) { return tb::chunk(x[0], 3); },
      [](const RV& x) { return R::chunk(x[0], 3); }, Check::View);
  add(
      v, "split/float32/error_negative", {in({3}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(-1)); },
      [](const RV& x) { return R::split(x[0], -1); }, Check::Error);
  add(
      v, "split/float32/error_zero", {in({3}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(0)); },
      [](const RV& x) { return R::split(x[0], 0); }, Check::Error);
  add(
      v, "split/float32/error_0dim", {in({}, F32)}, [](const TV& x) { return tb::split(x[0], int64_t(1)); },
      [](const RV& x) { return R::split(x[0], 1); }, Check::Error);
  add(
      v, "split/float32/error_sizes_sum", {in({5}, F32)},
      [](const TV& x) {
        return tb::split_with_sizes(x[0], {2, 2});
      },
      [](const RV& x) {
        return R::split_with_sizes(x[0], {2, 2});
      },
      Check::Error);
  add(
      v, "split/float32/error_sizes_negative", {in({3}, F32)},
      [](const TV& x) {
        return tb::split_with_sizes(x[0], {4, -1});
      },
      [](const RV& x) {
        return R::split_with_sizes(x[0], {4, -1});
      },
      Check::Error);
  add(
      v, "chunk/float32/error_zero_chunks", {in({3}, F32)}, [](const TV& x) { return tb::chunk(x[0], 0); },
      [](const RV& x) { return R::chunk(x[0], 0); }, Check::Error);

  for (DType t : kAll) {
    const std::string d = nm(t);
    add(
        v, "repeat/" + d + "/2d", {in({2, 3}, t, Layout::Transposed)},
        [](const TV& x) {
          return one(tb::repeat(x[0], {2, 1, 3}));
        },
        [](const RV& x) {
          return one(R::repeat(x[0], {2, 1, 3}));
        });
  }
  add(
      v, "repeat/float32/strided", {in({3, 4}, F32, Layout::Strided)},
      [](const TV& x) {
        return one(tb::repeat(x[0], {3, 2}));
      },
      [](const RV& x) {
        return one(R::repeat(x[0], {3, 2}));
      });
  add(
      v, "repeat/float32/0dim", {in({}, F32)}, [](const TV& x) { return one(tb::repeat(x[0], {})); },
      [](const RV& x) { return one(R::repeat(x[0], {})); });
  add(
      v, "repeat/float32/0dim_to_2d", {in({}, F32)},
      [](const TV& x) {
        return one(tb::repeat(x[0], {2, 3}));
      },
      [](const RV& x) {
        return one(R::repeat(x[0], {2, 3}));
      });
  add(
      v, "repeat/float32/zero_repeat", {in({2, 3}, F32)},
      [](const TV& x) {
        return one(tb::repeat(x[0], {0, 2}));
      },
      [](const RV& x) {
        return one(R::repeat(x[0], {0, 2}));
      })
      .grad = true;
  add(
      v, "repeat/float32/zero_size", {in({0, 3}, F32)},
      [](const TV& x) {
        return one(tb::repeat(x[0], {2, 2}));
      },
      [](const RV& x) {
        return one(R::repeat(x[0], {2, 2}));
      });
  add(
      v, "repeat/float32/error_fewer_dims", {in({2, 3}, F32)}, [](const TV& x) { return one(tb::repeat(x[0], {2})); },
      [](const RV& x) { return one(R::repeat(x[0], {2})); }, Check::Error);
  add(
      v, "repeat/float32/error_negative", {in({3}, F32)}, [](const TV& x) { return one(tb::repeat(x[0], {-1})); },
      [](const RV& x) { return one(R::repeat(x[0], {-1})); }, Check::Error);
}

void triangle_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    for (int64_t k : {0, 1, -2}) {
      const std::string ks = k < 0 ? "m" + std::to_string(-k) : std::to_string(k);
      add(
          v, "tril/" + d + "/k" + ks, {in({4, 5}, t)}, [k](const TV& x) { return one(tb::tril(x[0], k)); },
          [k](const RV& x) { return one(R::tril(x[0], k)); })
          .grad = differentiable(t);
      add(
          v, "triu/" + d + "/k" + ks, {in({4, 5}, t, Layout::Transposed)},
          [k](const TV& x) { return one(tb::triu(x[0], k)); }, [k](const RV& x) { return one(R::triu(x[0], k)); })
          .grad = differentiable(t);
    }
    add(
        v, "tril/" + d + "/batched_strided", {in({2, 3, 4}, t, Layout::Strided)},
        [](const TV& x) { return one(tb::tril(x[0], 1)); }, [](const RV& x) { return one(R::tril(x[0], 1)); });
  }
  add(
      v, "triu/float32/batched_expanded", {in({3, 4, 2}, F32, Layout::Expanded)},
      [](const TV& x) { return one(tb::triu(x[0], -1)); }, [](const RV& x) { return one(R::triu(x[0], -1)); });
  add(
      v, "tril/float32/zero_size", {in({0, 3}, F32)}, [](const TV& x) { return one(tb::tril(x[0])); },
      [](const RV& x) { return one(R::tril(x[0])); });
  // A size-0 dim anywhere (the kernel once divided by the last dim).
  for (const Shape& s : {Shape{3, 0}, Shape{2, 4, 0}, Shape{0, 3, 0}, Shape{2, 0, 3}}) {
    const std::string n = "/zero_size_" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" +
                          std::to_string(s.back());
    add(
        v, "tril" + ("/float32" + n), {in(s, F32)}, [](const TV& x) { return one(tb::tril(x[0], 1)); },
        [](const RV& x) { return one(R::tril(x[0], 1)); });
    add(
        v, "triu" + ("/float64" + n), {in(s, F64, Layout::Transposed)},
        [](const TV& x) { return one(tb::triu(x[0], -1)); }, [](const RV& x) { return one(R::triu(x[0], -1)); });
  }
  add(
      v, "triu/float32/big_diagonal", {in({3, 3}, F32)}, [](const TV& x) { return one(tb::triu(x[0], 7)); },
      [](const RV& x) { return one(R::triu(x[0], 7)); });
  add(
      v, "tril/float32/inplace_transposed", {in({4, 3}, F32, Layout::Transposed)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::tril_(a, -1);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::tril_(a, -1);
        return one(a);
      });
  add(
      v, "triu/float64/inplace", {in({2, 4, 3}, F64)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::triu_(a, 1);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::triu_(a, 1);
        return one(a);
      });
  add(
      v, "tril/float32/out", {in({3, 4}, F32), in({3, 4}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[1];
        tb::tril_out(o, x[0]);
        return one(o);
      },
      [](const RV& x) {
        ref::Tensor o = x[1];
        return one(R::tril_out(o, x[0]));
      });
  add(
      v, "triu/float32/out", {in({3, 4}, F32), in({3, 4}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[1];
        tb::triu_out(o, x[0], 1);
        return one(o);
      },
      [](const RV& x) {
        ref::Tensor o = x[1];
        return one(R::triu_out(o, x[0], 1));
      });
  add(
      v, "tril/float32/error_1d", {in({3}, F32)}, [](const TV& x) { return one(tb::tril(x[0])); },
      [](const RV& x) { return one(R::tril(x[0])); }, Check::Error);
  add(
      v, "triu/float32/error_0dim", {in({}, F32)}, [](const TV& x) { return one(tb::triu(x[0])); },
      [](const RV& x) { return one(R::triu(x[0])); }, Check::Error);
}

void index_gather_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    add(
        v, "index_select/" + d + "/dim0", {in({5, 4}, t), idx({7}, 5)},
        [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
        [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
    add(
        v, "index_select/" + d + "/dim1_transposed_int32", {in({3, 6}, t, Layout::Transposed), idx({4}, 6, I32)},
        [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); },
        [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
    add(
        v, "gather/" + d + "/dim1", {in({4, 5}, t), idx({4, 3}, 5)},
        [](const TV& x) { return one(tb::gather(x[0], 1, x[1])); },
        [](const RV& x) { return one(R::gather(x[0], 1, x[1])); })
        .grad = differentiable(t);
    add(
        v, "gather/" + d + "/dim0_transposed",
        {in({4, 5}, t, Layout::Transposed), idx({6, 5}, 4, I64, Layout::Strided)},
        [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
        [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
    add(
        v, "scatter/" + d + "/src_dim0", {in({5, 4}, t), in({4, 4}, t, Layout::Transposed)},
        [](const TV& x) {
          return one(tb::scatter(x[0], 0, perm_index({3, 4}, 0, 5), x[1]));
        },
        [](const RV& x) {
          return one(R::scatter(x[0], 0, ref::to_ref(perm_index({3, 4}, 0, 5)), x[1]));
        });
    add(
        v, "scatter/" + d + "/value_dim1", {in({3, 6}, t, Layout::Strided)},
        [](const TV& x) {
          return one(tb::scatter(x[0], 1, perm_index({2, 4}, 1, 6), 2.5));
        },
        [](const RV& x) {
          return one(R::scatter(x[0], 1, ref::to_ref(perm_index({2, 4}, 1, 6)), 2.5));
        });
    add(
        v, "scatter_add/" + d + "/dup_indices", {in({4, 5}, t), idx({6, 3}, 4), in({6, 4}, t)},
        [](const TV& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); });
    add(
        v, "index_add/" + d + "/dim0", {in({5, 4}, t), idx({6}, 5), in({6, 4}, t, Layout::Transposed)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
    // Large enough to run in parallel with one outer slice. In place, the columns are split
    // between the threads (1000 = 512 + 488), each summing the repeated rows (50 indices below 40)
    // alone; out of place, rows of 1000 take the one-pass kernel (Note [Out-of-place index_add in
    // one pass]), the threads splitting the result's rows.
    add(
        v, "index_add/" + d + "/column_blocks_dup_indices", {in({40, 1000}, t), idx({50}, 40), in({50, 1000}, t)},
        [](const TV& x) {
          tb::Tensor a = x[0];
          tb::index_add_(a, 0, x[1], x[2]);
          return one(a);
        },
        [](const RV& x) {
          ref::Tensor a = x[0];
          R::index_add_(a, 0, x[1], x[2]);
          return one(a);
        });
    add(
        v, "index_add/" + d + "/one_pass_dup_indices", {in({40, 1000}, t), idx({50}, 40), in({50, 1000}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
    // An empty self of 2+ dims is returned before the index is read (PyTorch's CPU kernel).
    add(
        v, "index_add/" + d + "/empty_self_any_index", {in({0, 3}, t), in({2, 3}, t)},
        [](const TV& x) {
          return one(tb::index_add(x[0], 0, ivec({0, 7}, {2}), x[1]));
        },
        [](const RV& x) {
          return one(R::index_add(x[0], 0, rvec({0, 7}, {2}), x[1]));
        });
    // Out of place on a transposed self: a fresh row-major result, as PyTorch's (strides compared).
    add(
        v, "index_add/" + d + "/transposed_self_layout",
        {in({5, 4}, t, Layout::Transposed), idx({3}, 5), in({3, 4}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::View);
    add(
        v, "scatter_add/" + d + "/transposed_self_layout",
        {in({4, 5}, t, Layout::Transposed), idx({2, 5}, 4), in({2, 5}, t)},
        [](const TV& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
        [](const RV& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); }, Check::View);
    add(
        v, "scatter/" + d + "/transposed_self_layout", {in({4, 5}, t, Layout::Transposed)},
        [](const TV& x) {
          return one(tb::scatter(x[0], 1, perm_index({2, 4}, 1, 5), 1.5));
        },
        [](const RV& x) {
          return one(R::scatter(x[0], 1, ref::to_ref(perm_index({2, 4}, 1, 5)), 1.5));
        },
        Check::View);
  }
  for (DType t : kNumeric) {
    const std::string d = nm(t);
    add(
        v, "scatter/" + d + "/reduce_add", {in({4, 5}, t), idx({3, 5}, 4), in({3, 5}, t)},
        [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "add")); },
        [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "add")); });
    add(
        v, "scatter/" + d + "/reduce_multiply", {in({4, 5}, t), idx({4, 3}, 5), in({4, 3}, t)},
        [](const TV& x) { return one(tb::scatter(x[0], 1, x[1], x[2], "multiply")); },
        [](const RV& x) { return one(R::scatter(x[0], 1, x[1], x[2], "multiply")); });
    add(
        v, "index_add/" + d + "/dim1_alpha", {in({3, 5}, t, Layout::Strided), idx({4}, 5, I32), in({3, 4}, t)},
        [](const TV& x) { return one(tb::index_add(x[0], 1, x[1], x[2], 2)); },
        [](const RV& x) { return one(R::index_add(x[0], 1, x[1], x[2], 2)); });
  }
}

// Edge cases of each: 0-dim, empty index, zero-size self, out=, in place on views, fractional
// alpha, and the index_select benchmark row.
void index_gather_edge_cases(std::vector<OpCase>& v) {
  // index_select: 0-dim index and self, empty index, zero-size self, out=.
  add(
      v, "index_select/float32/index_0dim", {in({4, 3}, F32), idx({}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
  add(
      v, "index_select/float32/self_0dim", {in({}, F32), idx({1}, 1)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); });
  add(
      v, "index_select/float32/empty_index", {in({4, 3}, F32), idx({0}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], -1, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], -1, x[1])); })
      .grad = true;
  add(
      v, "index_select/float32/zero_size_self", {in({0, 3}, F32), idx({5}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
  add(
      v, "index_select/float32/3d_middle_expanded", {in({3, 4, 5}, F32, Layout::Expanded), idx({6}, 4)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 1, x[1])); });
  add(
      v, "index_select/float32/out", {in({5, 4}, F32), idx({3}, 5), in({0}, F32, Layout::Contiguous, Values::Zeros)},
      [](const TV& x) {
        tb::Tensor o = x[2];
        tb::index_select_out(o, x[0], 0, x[1]);
        return one(o);
      },
      [](const RV& x) {
        ref::Tensor o = x[2];
        return one(R::index_select_out(o, x[0], 0, x[1]));
      });
  {
    OpCase& c = (add(
                     v, "index_select/float32/large", {in({8192, 512}, F32), idx({8192}, 8192)},
                     [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
                     [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }),
                 v.back());
    c.bench = true;
    c.bytes = 2.0 * 8192 * 512 * 4;
  }
  // gather: 0-dim, empty index, index larger than self along dim.
  add(
      v, "gather/float32/0dim", {in({}, F32), idx({}, 1)}, [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(
      v, "gather/float32/0dim_self_1d_index", {in({}, F32), idx({3}, 1)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(
      v, "gather/float32/empty_index", {in({3, 4}, F32), idx({0, 7}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], 0, x[1])); });
  add(
      v, "gather/float32/3d_last_int32", {in({2, 3, 5}, F32, Layout::Transposed), idx({2, 2, 7}, 5, I32)},
      [](const TV& x) { return one(tb::gather(x[0], -1, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], -1, x[1])); });
  // scatter: in-place on a transposed view, value with reduce, 0-dim, empty index.
  add(
      v, "scatter/float32/inplace_transposed", {in({4, 5}, F32, Layout::Transposed), in({4, 3}, F32)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::scatter_(a, 1, perm_index({4, 3}, 1, 5), x[1]);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::scatter_(a, 1, ref::to_ref(perm_index({4, 3}, 1, 5)), x[1]);
        return one(a);
      });
  add(
      v, "scatter/float32/value_reduce_add", {in({4, 5}, F32), idx({6, 5}, 4)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], 1.5, "add")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], 1.5, "add")); });
  add(
      v, "scatter/bool/reduce_add", {in({4, 5}, BOOL), idx({3, 5}, 4), in({3, 5}, BOOL)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "add")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "add")); });
  add(
      v, "scatter/float32/0dim", {in({}, F32), idx({}, 1), in({}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); });
  add(
      v, "scatter/float32/empty_index", {in({3, 4}, F32), idx({0, 4}, 3), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); });
  add(
      v, "scatter_add/float32/inplace_3d", {in({3, 4, 5}, F32), idx({3, 4, 8}, 5), in({3, 4, 8}, F32, Layout::Strided)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::scatter_add_(a, 2, x[1], x[2]);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::scatter_add_(a, 2, x[1], x[2]);
        return one(a);
      });
  // index_add: fractional alpha, in-place on a strided view, 0-dim, empty.
  add(
      v, "index_add/float32/alpha_half", {in({5, 4}, F32), idx({6}, 5), in({6, 4}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2], 0.5)); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2], 0.5)); });
  add(
      v, "index_add/float32/inplace_strided", {in({3, 5}, F32, Layout::Strided), idx({7}, 5), in({3, 7}, F32)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::index_add_(a, 1, x[1], x[2], -1);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::index_add_(a, 1, x[1], x[2], -1);
        return one(a);
      });
  add(
      v, "index_add/float32/0dim", {in({}, F32), idx({1}, 1), in({}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
  add(
      v, "index_add/float32/empty_index", {in({4, 3}, F32), idx({0}, 4), in({0, 3}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); });
  add(
      v, "index_add/float32/3d_middle", {in({2, 4, 3}, F32, Layout::Transposed), idx({5}, 4), in({2, 5, 3}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 1, x[1], x[2])); },
      [](const RV& x) { return one(R::index_add(x[0], 1, x[1], x[2])); });
}

// Bad input: out-of-range and negative indices must raise before anything is written.
void index_gather_error_cases(std::vector<OpCase>& v) {
  add(
      v, "index_select/float32/error_out_of_range", {in({3, 4}, F32)},
      [](const TV& x) {
        return one(tb::index_select(x[0], 0, ivec({0, 3}, {2})));
      },
      [](const RV& x) {
        return one(R::index_select(x[0], 0, rvec({0, 3}, {2})));
      },
      Check::Error);
  add(
      v, "index_select/float32/error_negative", {in({3, 4}, F32)},
      [](const TV& x) { return one(tb::index_select(x[0], 1, ivec({-1}, {1}))); },
      [](const RV& x) { return one(R::index_select(x[0], 1, rvec({-1}, {1}))); }, Check::Error);
  add(
      v, "index_select/float32/error_2d_index", {in({3, 4}, F32), idx({2, 2}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }, Check::Error);
  add(
      v, "index_select/float32/error_float_index", {in({3, 4}, F32), in({2}, F32)},
      [](const TV& x) { return one(tb::index_select(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 0, x[1])); }, Check::Error);
  add(
      v, "index_select/float32/error_dim", {in({3, 4}, F32), idx({2}, 3)},
      [](const TV& x) { return one(tb::index_select(x[0], 2, x[1])); },
      [](const RV& x) { return one(R::index_select(x[0], 2, x[1])); }, Check::Error);
  add(
      v, "gather/float32/error_out_of_range", {in({3, 4}, F32)},
      [](const TV& x) {
        return one(tb::gather(x[0], 1, ivec({0, 4}, {1, 2})));
      },
      [](const RV& x) {
        return one(R::gather(x[0], 1, rvec({0, 4}, {1, 2})));
      },
      Check::Error);
  add(
      v, "gather/float32/error_negative", {in({3, 4}, F32)},
      [](const TV& x) {
        return one(tb::gather(x[0], 0, ivec({-1}, {1, 1})));
      },
      [](const RV& x) {
        return one(R::gather(x[0], 0, rvec({-1}, {1, 1})));
      },
      Check::Error);
  add(
      v, "gather/float32/error_ndim", {in({3}, F32), idx({1, 1}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], 0, x[1])); }, Check::Error);
  add(
      v, "gather/float32/error_index_too_big", {in({3, 4}, F32), idx({2, 5}, 3)},
      [](const TV& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RV& x) { return one(R::gather(x[0], 0, x[1])); }, Check::Error);
  add(
      v, "scatter/float32/error_out_of_range", {in({3, 4}, F32), in({1, 2}, F32)},
      [](const TV& x) {
        return one(tb::scatter(x[0], 0, ivec({1, 3}, {1, 2}), x[1]));
      },
      [](const RV& x) {
        return one(R::scatter(x[0], 0, rvec({1, 3}, {1, 2}), x[1]));
      },
      Check::Error);
  add(
      v, "scatter/float32/error_negative_value", {in({3, 4}, F32)},
      [](const TV& x) {
        return one(tb::scatter(x[0], 1, ivec({-2}, {1, 1}), 1.0));
      },
      [](const RV& x) {
        return one(R::scatter(x[0], 1, rvec({-2}, {1, 1}), 1.0));
      },
      Check::Error);
  add(
      v, "scatter/float32/error_src_dtype", {in({3, 4}, F32), idx({1, 2}, 3), in({1, 2}, F64)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); }, Check::Error);
  add(
      v, "scatter/float32/error_index_bigger_than_src", {in({3, 4}, F32), idx({2, 2}, 3), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2])); }, Check::Error);
  add(
      v, "scatter/float32/error_reduce_name", {in({3, 4}, F32), idx({1, 2}, 3), in({1, 2}, F32)},
      [](const TV& x) { return one(tb::scatter(x[0], 0, x[1], x[2], "max")); },
      [](const RV& x) { return one(R::scatter(x[0], 0, x[1], x[2], "max")); }, Check::Error);
  add(
      v, "scatter_add/float32/error_out_of_range", {in({3, 4}, F32), in({1, 2}, F32)},
      [](const TV& x) {
        return one(tb::scatter_add(x[0], 1, ivec({1, 4}, {1, 2}), x[1]));
      },
      [](const RV& x) {
        return one(R::scatter_add(x[0], 1, rvec({1, 4}, {1, 2}), x[1]));
      },
      Check::Error);
  add(
      v, "index_add/float32/error_out_of_range", {in({3, 4}, F32), in({2, 4}, F32)},
      [](const TV& x) {
        return one(tb::index_add(x[0], 0, ivec({0, 3}, {2}), x[1]));
      },
      [](const RV& x) {
        return one(R::index_add(x[0], 0, rvec({0, 3}, {2}), x[1]));
      },
      Check::Error);
  add(
      v, "index_add/float32/error_negative", {in({3, 4}, F32), in({3, 1}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 1, ivec({-1}, {1}), x[1])); },
      [](const RV& x) { return one(R::index_add(x[0], 1, rvec({-1}, {1}), x[1])); }, Check::Error);
  add(
      v, "index_add/float32/error_dtype", {in({3, 4}, F32), idx({2}, 3), in({2, 4}, F64)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::Error);
  add(
      v, "scatter/float32/error_inplace_expanded", {in({2, 3}, F32, Layout::Expanded)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        return one(tb::scatter_(a, 0, ivec({0, 0, 0}, {1, 3}), ones({1, 3})));
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        return one(R::scatter_(a, 0, rvec({0, 0, 0}, {1, 3}), ref::to_ref(ones({1, 3}))));
      },
      Check::Error);
  add(
      v, "index_add/float32/error_inplace_expanded", {in({2, 3}, F32, Layout::Expanded), in({1, 3}, F32)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        return one(tb::index_add_(a, 0, ivec({0}, {1}), x[1]));
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        return one(R::index_add_(a, 0, rvec({0}, {1}), x[1]));
      },
      Check::Error);
  add(
      v, "index_add/float32/error_count", {in({3, 4}, F32), idx({3}, 3), in({2, 4}, F32)},
      [](const TV& x) { return one(tb::index_add(x[0], 0, x[1], x[2])); },
      [](const RV& x) { return one(R::index_add(x[0], 0, x[1], x[2])); }, Check::Error);
}

void mask_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    add(
        v, "masked_fill/" + d + "/same_shape", {in({3, 4}, t), mask({3, 4})},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], -1.5)); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], -1.5)); });
    add(
        v, "masked_fill/" + d + "/broadcast_mask_transposed", {in({3, 4}, t, Layout::Transposed), mask({4})},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 3.0)); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], 3.0)); });
    add(
        v, "masked_fill/" + d + "/value_tensor", {in({2, 5}, t, Layout::Strided), mask({2, 5}), in({}, F64)},
        [](const TV& x) { return one(tb::masked_fill(x[0], x[1], x[2])); },
        [](const RV& x) { return one(R::masked_fill(x[0], x[1], x[2])); });
    add(
        v, "masked_select/" + d + "/same_shape", {in({3, 4}, t, Layout::Transposed), mask({3, 4})},
        [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
        [](const RV& x) { return one(R::masked_select(x[0], x[1])); })
        .grad = differentiable(t);
    add(
        v, "nonzero/" + d + "/2d", {in({4, 5}, t, Layout::Contiguous, Values::Bool)},
        [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  }
  add(
      v, "masked_fill/float32/broadcast_self", {in({4}, F32), mask({3, 4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(
      v, "masked_fill/float32/expanded_mask", {in({3, 4}, F32), mask({3, 4}, Layout::Expanded)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(
      v, "masked_fill/float32/0dim", {in({}, F32), mask({})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(
      v, "masked_fill/float32/zero_size", {in({0, 4}, F32), mask({4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 2.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 2.0)); });
  add(
      v, "masked_fill/float32/inplace_transposed", {in({3, 4}, F32, Layout::Transposed), mask({3, 1})},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::masked_fill_(a, x[1], -7.0);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::masked_fill_(a, x[1], -7.0);
        return one(a);
      });
  add(
      v, "masked_fill/int64/inplace_value_tensor", {in({3, 4}, I64), mask({3, 4}), in({}, I64)},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::masked_fill_(a, x[1], x[2]);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        R::masked_fill_(a, x[1], x[2]);
        return one(a);
      });
  add(
      v, "masked_fill/float32/error_int_mask", {in({3}, F32), in({3}, I32)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 1.0)); }, Check::Error);
  add(
      v, "masked_fill/float32/error_1d_value", {in({3}, F32), mask({3}), in({1}, F32)},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], x[2])); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], x[2])); }, Check::Error);
  add(
      v, "masked_fill/float32/error_inplace_broadcast", {in({3}, F32), mask({2, 3})},
      [](const TV& x) {
        tb::Tensor a = x[0];
        tb::masked_fill_(a, x[1], 1.0);
        return one(a);
      },
      [](const RV& x) {
        ref::Tensor a = x[0];
        return one(R::masked_fill_(a, x[1], 1.0));
      },
      Check::Error);
  add(
      v, "masked_fill/float32/error_shape", {in({3}, F32), mask({4})},
      [](const TV& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); },
      [](const RV& x) { return one(R::masked_fill(x[0], x[1], 1.0)); }, Check::Error);
  add(
      v, "masked_select/float32/broadcast", {in({4}, F32, Layout::Strided), mask({3, 4})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(
      v, "masked_select/float32/broadcast_mask", {in({3, 4}, F32), mask({3, 1})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(
      v, "masked_select/float32/zero_size", {in({0, 4}, F32), mask({0, 4})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RV& x) { return one(R::masked_select(x[0], x[1])); })
      .grad = true;
  add(
      v, "masked_select/float32/0dim", {in({}, F32), mask({})},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RV& x) { return one(R::masked_select(x[0], x[1])); });
  add(
      v, "masked_select/float32/error_int_mask", {in({3}, F32), in({3}, I64)},
      [](const TV& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RV& x) { return one(R::masked_select(x[0], x[1])); }, Check::Error);
  add(
      v, "nonzero/float32/3d_transposed", {in({2, 3, 4}, F32, Layout::Transposed, Values::Bool)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(
      v, "nonzero/int32/signed_values", {in({5, 3}, I32, Layout::Strided)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(
      v, "nonzero/float32/0dim", {in({}, F32, Layout::Contiguous, Values::Positive)},
      [](const TV& x) { return one(tb::nonzero(x[0])); }, [](const RV& x) { return one(R::nonzero(x[0])); });
  add(
      v, "nonzero/float32/zero_size", {in({3, 0}, F32)}, [](const TV& x) { return one(tb::nonzero(x[0])); },
      [](const RV& x) { return one(R::nonzero(x[0])); });
}

// topk/unstable sort: ties make the indices implementation-defined, so the engine lambda returns
// the input gathered at its indices (must equal the values); `direct` adds the raw indices too,
// for tie-free inputs (Values::Normal floats).
void order_cases(std::vector<OpCase>& v) {
  for (DType t : kAll) {
    const std::string d = nm(t);
    const bool tie_free = t == F32 || t == F64;
    add(
        v, "sort/" + d + "/stable_last", {in({4, 7}, t)},
        [](const TV& x) {
          auto [s, i] = tb::sort(x[0], true, -1, false);
          return TV{s, i};
        },
        [](const RV& x) {
          auto [s, i] = R::sort(x[0], true, -1, false);
          return RV{s, i};
        });
    add(
        v, "sort/" + d + "/stable_desc_dim0_transposed", {in({6, 3}, t, Layout::Transposed)},
        [](const TV& x) {
          auto [s, i] = tb::sort(x[0], true, 0, true);
          return TV{s, i};
        },
        [](const RV& x) {
          auto [s, i] = R::sort(x[0], true, 0, true);
          return RV{s, i};
        });
    add(
        v, "sort/" + d + "/unstable_strided", {in({3, 9}, t, Layout::Strided)},
        [](const TV& x) {
          auto [s, i] = tb::sort(x[0], -1, true);
          return TV{s, tb::gather(x[0], -1, i)};
        },
        [](const RV& x) {
          auto [s, i] = R::sort(x[0], std::nullopt, -1, true);
          return RV{s, s};
        });
    // Rows long enough for the radix sort (cpu/sort.cpp: 256 and more), and one row past 32768
    // elements, whose passes are shared by the threads. Integers (in [-5, 5]) and bool are mostly
    // ties, so the indices check stability; floats get -0 and +0 (trunc), +-inf (x / trunc(x)
    // where |x| < 1) and NaN (log of the negatives) beside their ties.
    for (const Shape& s : {Shape{3, 100}, Shape{13400}}) {
      for (const bool desc : {false, true}) {
        const bool f = core::is_floating(t);
        add(
            v, "sort/" + d + (s.size() == 1 ? "/radix_one_row" : "/radix_rows") + (desc ? "_desc" : "_asc"), {in(s, t)},
            [f, desc](const TV& x) {
              const tb::Tensor tr = f ? tb::div(x[0], Scalar(1), std::string("trunc")) : x[0];
              const tb::Tensor y = f ? tb::cat({tr, tb::div(x[0], tr), tb::log(x[0])}, -1)
                                     : tb::cat({x[0], x[0], x[0]}, -1);
              auto [sv, i] = tb::sort(y, true, -1, desc);
              return TV{sv, i};
            },
            [f, desc](const RV& x) {
              const ref::Tensor tr = f ? R::div(x[0], Scalar(1), std::string("trunc")) : x[0];
              const ref::Tensor y = f ? R::cat({tr, R::div(x[0], tr), R::log(x[0])}, -1)
                                      : R::cat({x[0], x[0], x[0]}, -1);
              auto [sv, i] = R::sort(y, true, -1, desc);
              return RV{sv, i};
            });
      }
    }
    if (t == BOOL) continue;  // topk refuses bool on CPU (error row below)
    add(
        v, "topk/" + d + "/largest", {in({4, 9}, t)},
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
        })
        .grad = differentiable(t);
    add(
        v, "topk/" + d + "/smallest_dim0_transposed", {in({7, 3}, t, Layout::Transposed)},
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
  add(
      v, "topk/float32/unsorted", {in({5, 8}, F32, Layout::Strided)},
      [](const TV& x) {
        auto [s, i] = tb::topk(x[0], 3, -1, true, false);
        return one(std::get<0>(tb::sort(s, -1, true)));
      },
      [](const RV& x) {
        auto [s, i] = R::topk(x[0], 3, -1, true, false);
        return one(std::get<0>(R::sort(s, true, -1, true)));
      });
  add(
      v, "topk/float32/k0", {in({3, 4}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::topk(x[0], 0);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::topk(x[0], 0);
        return RV{s, i};
      })
      .grad = true;
  add(
      v, "topk/float32/k_full", {in({3, 4}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::topk(x[0], 4);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::topk(x[0], 4);
        return RV{s, i};
      });
  add(
      v, "topk/float32/zero_size", {in({0, 5}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::topk(x[0], 2);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::topk(x[0], 2);
        return RV{s, i};
      });
  add(
      v, "topk/float32/0dim", {in({}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::topk(x[0], 1);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::topk(x[0], 1);
        return RV{s, i};
      });
  add(
      v, "topk/float32/error_k_too_big", {in({3, 4}, F32)},
      [](const TV& x) { return one(std::get<0>(tb::topk(x[0], 5))); },
      [](const RV& x) { return one(std::get<0>(R::topk(x[0], 5))); }, Check::Error);
  add(
      v, "topk/float32/error_k_negative", {in({3, 4}, F32)},
      [](const TV& x) { return one(std::get<0>(tb::topk(x[0], -1))); },
      [](const RV& x) { return one(std::get<0>(R::topk(x[0], -1))); }, Check::Error);
  add(
      v, "topk/bool/error_dtype", {in({3, 4}, BOOL)}, [](const TV& x) { return one(std::get<0>(tb::topk(x[0], 1))); },
      [](const RV& x) { return one(std::get<0>(R::topk(x[0], 1))); }, Check::Error);
  add(
      v, "sort/float32/zero_size", {in({0, 5}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::sort(x[0], true, 0, false);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::sort(x[0], true, 0, false);
        return RV{s, i};
      });
  add(
      v, "sort/float32/0dim", {in({}, F32)},
      [](const TV& x) {
        auto [s, i] = tb::sort(x[0], true, 0, false);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::sort(x[0], true, 0, false);
        return RV{s, i};
      });
  add(
      v, "sort/float32/3d_middle_expanded", {in({3, 5, 4}, F32, Layout::Expanded)},
      [](const TV& x) {
        auto [s, i] = tb::sort(x[0], true, 1, true);
        return TV{s, i};
      },
      [](const RV& x) {
        auto [s, i] = R::sort(x[0], true, 1, true);
        return RV{s, i};
      });
  add(
      v, "sort/float32/error_dim", {in({3, 4}, F32)}, [](const TV& x) { return one(std::get<0>(tb::sort(x[0], 2))); },
      [](const RV& x) { return one(std::get<0>(R::sort(x[0], std::nullopt, 2))); }, Check::Error);
  {
    OpCase& c = (add(
                     v, "sort/float32/1M", {in({1 << 20}, F32)},
                     [](const TV& x) {
                       auto [s, i] = tb::sort(x[0], true, -1, false);
                       return TV{s, i};
                     },
                     [](const RV& x) {
                       auto [s, i] = R::sort(x[0], true, -1, false);
                       return RV{s, i};
                     }),
                 v.back());
    c.bench = true;
    c.bytes = double(1 << 20) * (4 + 4 + 8);
  }
}

// ---- Gradient rows (float32 and float64): configurations only the gradient check had. ----

using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;
constexpr Layout Tr = Layout::Transposed, St = Layout::Strided, Ex = Layout::Expanded;

// Indices distinct along `dim`: the first k of the argsort of x along dim (x takes no gradient).
tb::Tensor perm(const tb::Tensor& x, int64_t dim, int64_t k) {
  return std::get<1>(tb::sort(x.detach(), dim)).narrow(dim, 0, k);
}
ref::Tensor rperm(const ref::Tensor& x, int64_t dim, int64_t k) {
  return R::narrow(std::get<1>(R::sort(x, true, dim)), dim, 0, k);
}

OpCase& grad_row(std::vector<OpCase>& v, std::string name, std::vector<Input> inputs, EngineFn e, RefFn r) {
  v.push_back(make_grad_case(std::move(name), std::move(inputs), std::move(e), std::move(r)));
  return v.back();
}

// cat and stack (views first, an input twice, one input differentiated), split and chunk (some
// pieces unused, of a non-leaf written in place), repeat.
void join_split_grads(std::vector<OpCase>& v, DType dt) {
  const std::string d = nm(dt);
  grad_row(
      v, "cat/" + d + "/dim_last_three", {in({3, 2}, dt, St), in({3, 4}, dt), in({3, 1}, dt, Ex)},
      [](const In& x) {
        return one(tb::cat({x[0], x[1], x[2]}, -1));
      },
      [](const RIn& x) {
        return one(R::cat({x[0], x[1], x[2]}, -1));
      });
  grad_row(
      v, "cat/" + d + "/skip_empty_1d", {in({2, 3}, dt), in({0}, dt), in({1, 3}, dt)},
      [](const In& x) {
        return one(tb::cat({x[0], x[1], x[2]}, 0));
      },
      [](const RIn& x) {
        return one(R::cat({x[0], x[1], x[2]}, 0));
      });
  // The same input twice, after views: both slabs' gradients accumulate into it.
  grad_row(
      v, "cat/" + d + "/views_twice", {in({3, 4}, dt)},
      [](const In& x) {
        return one(tb::tril(tb::cat({x[0].t().narrow(0, 0, 3), x[0].narrow(1, 1, 3)}, 1)));
      },
      [](const RIn& x) {
        return one(R::tril(R::cat({R::narrow(R::t(x[0]), 0, 0, 3), R::narrow(x[0], 1, 1, 3)}, 1)));
      });
  // Only the second input requires grad.
  grad_row(
      v, "cat/" + d + "/partial_wrt", {in({2, 3}, dt), in({1, 3}, dt, St)},
      [](const In& x) {
        return one(tb::cat({x[0], x[1]}, 0));
      },
      [](const RIn& x) {
        return one(R::cat({x[0], x[1]}, 0));
      })
      .wrt = {1};
  grad_row(
      v, "stack/" + d + "/zero_dim", {in({}, dt), in({}, dt)},
      [](const In& x) {
        return one(tb::stack({x[0], x[1]}));
      },
      [](const RIn& x) {
        return one(R::stack({x[0], x[1]}));
      });
  grad_row(
      v, "stack/" + d + "/zero_size", {in({0, 2}, dt), in({0, 2}, dt)},
      [](const In& x) {
        return one(tb::stack({x[0], x[1]}, 1));
      },
      [](const RIn& x) {
        return one(R::stack({x[0], x[1]}, 1));
      });
  grad_row(
      v, "split/" + d + "/all_pieces", {in({5, 3}, dt, Tr)}, [](const In& x) { return tb::split(x[0], 2, 0); },
      [](const RIn& x) { return R::split(x[0], 2, 0); });
  // Only some pieces reach the loss: the others' regions get a zero gradient.
  grad_row(
      v, "split/" + d + "/some_pieces", {in({3, 7}, dt, St)},
      [](const In& x) {
        auto p = tb::split(x[0], 3, 1);
        return In{tb::mul(p[2], p[2]), tb::sum(p[0], {0})};
      },
      [](const RIn& x) {
        auto p = R::split(x[0], 3, 1);
        return RIn{R::mul(p[2], p[2]), R::sum(p[0], {0})};
      });
  grad_row(
      v, "chunk/" + d + "/dim1", {in({3, 7}, dt)}, [](const In& x) { return tb::chunk(x[0], 3, 1); },
      [](const RIn& x) { return R::chunk(x[0], 3, 1); });
  grad_row(
      v, "chunk/" + d + "/one_piece", {in({6, 2}, dt, Tr)},
      [](const In& x) { return one(tb::chunk(x[0], 3, 0)[1].t()); },
      [](const RIn& x) { return one(R::t(R::chunk(x[0], 3, 0)[1])); });
  // Chunks of a non-leaf written in place before the split (PyTorch refuses in-place writes to
  // the outputs of split/chunk themselves).
  grad_row(
      v, "chunk/" + d + "/of_inplace_nonleaf", {in({4, 3}, dt), in({3}, dt, St)},
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
  grad_row(
      v, "repeat/" + d + "/lead_dim", {in({2, 3}, dt, Tr)},
      [](const In& x) {
        return one(tb::repeat(x[0], {2, 1, 3}));
      },
      [](const RIn& x) {
        return one(R::repeat(x[0], {2, 1, 3}));
      });
  grad_row(
      v, "repeat/" + d + "/expanded", {in({3, 2}, dt, Ex)},
      [](const In& x) {
        return one(tb::repeat(x[0], {2, 2}));
      },
      [](const RIn& x) {
        return one(R::repeat(x[0], {2, 2}));
      });
  grad_row(
      v, "repeat/" + d + "/zero_dim", {in({}, dt)},
      [](const In& x) {
        return one(tb::repeat(x[0], {3, 2}));
      },
      [](const RIn& x) {
        return one(R::repeat(x[0], {3, 2}));
      });
  if (dt == F64)  // float32's is a row of split_cases
    grad_row(
        v, "repeat/" + d + "/zero_repeat", {in({2, 3}, dt)},
        [](const In& x) {
          return one(tb::repeat(x[0], {0, 2}));
        },
        [](const RIn& x) {
          return one(R::repeat(x[0], {0, 2}));
        });
}

// index_select, gather, scatter (distinct indices), scatter_add and index_add (repeated indices).
void index_grads(std::vector<OpCase>& v, DType dt) {
  const std::string d = nm(dt);
  grad_row(
      v, "index_select/" + d + "/dim0_dups", {in({5, 3}, dt, St), idx({7}, 5)},
      [](const In& x) { return one(tb::index_select(x[0], 0, x[1])); },
      [](const RIn& x) { return one(R::index_select(x[0], 0, x[1])); });
  grad_row(
      v, "index_select/" + d + "/dim1_int32", {in({3, 5}, dt, Tr), idx({4}, 5, I32)},
      [](const In& x) { return one(tb::index_select(x[0], -1, x[1])); },
      [](const RIn& x) { return one(R::index_select(x[0], -1, x[1])); });
  if (dt == F64)  // float32's is a row of index_gather_cases
    grad_row(
        v, "index_select/" + d + "/empty_index", {in({4, 3}, dt), idx({0}, 4)},
        [](const In& x) { return one(tb::index_select(x[0], 0, x[1])); },
        [](const RIn& x) { return one(R::index_select(x[0], 0, x[1])); });
  grad_row(
      v, "index_select/" + d + "/view_input", {in({2, 4, 3}, dt), idx({5}, 4)},
      [](const In& x) { return one(tb::index_select(x[0].select(0, 1).transpose(0, 1), 1, x[1])); },
      [](const RIn& x) { return one(R::index_select(R::transpose(R::select(x[0], 0, 1), 0, 1), 1, x[1])); });
  grad_row(
      v, "gather/" + d + "/dim0_smaller", {in({4, 3}, dt, St), idx({6, 2}, 4)},
      [](const In& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RIn& x) { return one(R::gather(x[0], 0, x[1])); });
  grad_row(
      v, "gather/" + d + "/zero_size", {in({4, 3}, dt), idx({0, 3}, 4)},
      [](const In& x) { return one(tb::gather(x[0], 0, x[1])); },
      [](const RIn& x) { return one(R::gather(x[0], 0, x[1])); });
  grad_row(
      v, "scatter/" + d + "/dim1", {in({3, 5}, dt, Tr), in({3, 3}, dt, St), in({3, 5}, dt)},
      [](const In& x) { return one(tb::scatter(x[0], 1, perm(x[2], 1, 3), x[1])); },
      [](const RIn& x) { return one(R::scatter(x[0], 1, rperm(x[2], 1, 3), x[1])); })
      .wrt = {0, 1};
  grad_row(
      v, "scatter/" + d + "/dim0_chain", {in({4, 3}, dt), in({2, 3}, dt, Tr), in({4, 3}, dt)},
      [](const In& x) { return one(tb::mul(tb::scatter(x[0], 0, perm(x[2], 0, 2), x[1]), x[0])); },
      [](const RIn& x) { return one(R::mul(R::scatter(x[0], 0, rperm(x[2], 0, 2), x[1]), x[0])); })
      .wrt = {0, 1};
  grad_row(
      v, "scatter_add/" + d + "/dim1_dups", {in({3, 5}, dt), idx({3, 4}, 5), in({3, 4}, dt, Tr)},
      [](const In& x) { return one(tb::scatter_add(x[0], 1, x[1], x[2])); },
      [](const RIn& x) { return one(R::scatter_add(x[0], 1, x[1], x[2])); });
  grad_row(
      v, "scatter_add/" + d + "/dim0_broadcast_self", {in({4, 3}, dt, Ex), idx({5, 3}, 4), in({5, 3}, dt, St)},
      [](const In& x) { return one(tb::scatter_add(x[0], 0, x[1], x[2])); },
      [](const RIn& x) { return one(R::scatter_add(x[0], 0, x[1], x[2])); });
  grad_row(
      v, "index_add/" + d + "/dim0_alpha", {in({5, 3}, dt, Tr), idx({4}, 5), in({4, 3}, dt)},
      [](const In& x) { return one(tb::index_add(x[0], 0, x[1], x[2], 2.5)); },
      [](const RIn& x) { return one(R::index_add(x[0], 0, x[1], x[2], 2.5)); });
  grad_row(
      v, "index_add/" + d + "/dim1_int32", {in({3, 5}, dt), idx({6}, 5, I32), in({3, 6}, dt, St)},
      [](const In& x) { return one(tb::index_add(x[0], 1, x[1], x[2])); },
      [](const RIn& x) { return one(R::index_add(x[0], 1, x[1], x[2])); });
  grad_row(
      v, "index_add/" + d + "/source_only", {in({4, 2}, dt), idx({3}, 4), in({3, 2}, dt, Tr)},
      [](const In& x) { return one(tb::index_add(x[0], 0, x[1], x[2], -1)); },
      [](const RIn& x) { return one(R::index_add(x[0], 0, x[1], x[2], -1)); })
      .wrt = {2};
}

// masked_fill (broadcasts, in place on a non-leaf and on a view of one), masked_select, sort,
// topk, tril/triu.
void mask_order_grads(std::vector<OpCase>& v, DType dt) {
  const std::string d = nm(dt);
  grad_row(
      v, "masked_fill/" + d + "/mask_broadcast", {in({3, 4}, dt, Tr), mask({4})},
      [](const In& x) { return one(tb::masked_fill(x[0], x[1], -2.0)); },
      [](const RIn& x) { return one(R::masked_fill(x[0], x[1], -2.0)); });
  grad_row(
      v, "masked_fill/" + d + "/self_broadcast", {in({4}, dt), mask({3, 4})},
      [](const In& x) { return one(tb::masked_fill(x[0], x[1], 1.0)); },
      [](const RIn& x) { return one(R::masked_fill(x[0], x[1], 1.0)); });
  grad_row(
      v, "masked_fill/" + d + "/zero_dim", {in({}, dt), mask({})},
      [](const In& x) { return one(tb::masked_fill(x[0], x[1], 3.0)); },
      [](const RIn& x) { return one(R::masked_fill(x[0], x[1], 3.0)); });
  grad_row(
      v, "masked_fill_/" + d + "/nonleaf", {in({3, 4}, dt, St), mask({3, 4})},
      [](const In& x) {
        tb::Tensor y = tb::mul(x[0], x[0]);
        return one(tb::masked_fill_(y, x[1], 0.25));
      },
      [](const RIn& x) {
        ref::Tensor y = R::mul(x[0], x[0]);
        return one(R::masked_fill_(y, x[1], 0.25));
      });
  // In place on a view of a non-leaf (CopySlices): the view's masked region gets zero gradient.
  grad_row(
      v, "masked_fill_/" + d + "/view_of_nonleaf", {in({4, 3}, dt, Tr), mask({3})},
      [](const In& x) {
        tb::Tensor y = tb::add(x[0], 1.0);
        tb::Tensor w = y.narrow(0, 1, 2);
        tb::masked_fill_(w, x[1], -1.0);
        return In{tb::mul(y, x[0]), w};
      },
      [](const RIn& x) {
        ref::Tensor y = R::add(x[0], 1.0);
        ref::Tensor w = R::narrow(y, 0, 1, 2);
        R::masked_fill_(w, x[1], -1.0);
        return RIn{R::mul(y, x[0]), w};
      });
  grad_row(
      v, "masked_select/" + d + "/self_broadcast", {in({4}, dt, St), mask({3, 4})},
      [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
      [](const RIn& x) { return one(R::masked_select(x[0], x[1])); });
  if (dt == F64)  // float32's is a row of mask_cases
    grad_row(
        v, "masked_select/" + d + "/zero_size", {in({0, 3}, dt), mask({0, 3})},
        [](const In& x) { return one(tb::masked_select(x[0], x[1])); },
        [](const RIn& x) { return one(R::masked_select(x[0], x[1])); });
  grad_row(
      v, "sort/" + d + "/dim_last", {in({3, 5}, dt, Tr)},
      [](const In& x) {
        auto [s, i] = tb::sort(x[0]);
        return In{s, i};
      },
      [](const RIn& x) {
        auto [s, i] = R::sort(x[0], true);
        return RIn{s, i};
      });
  grad_row(
      v, "sort/" + d + "/dim0_descending", {in({4, 3}, dt, St)},
      [](const In& x) {
        auto [s, i] = tb::sort(x[0], 0, true);
        return In{s, i};
      },
      [](const RIn& x) {
        auto [s, i] = R::sort(x[0], true, 0, true);
        return RIn{s, i};
      });
  grad_row(
      v, "sort/" + d + "/zero_dim", {in({}, dt)},
      [](const In& x) {
        auto [s, i] = tb::sort(x[0]);
        return In{s, i};
      },
      [](const RIn& x) {
        auto [s, i] = R::sort(x[0], true);
        return RIn{s, i};
      });
  grad_row(
      v, "sort/" + d + "/chain", {in({2, 6}, dt)},
      [](const In& x) { return one(tb::mul(std::get<0>(tb::sort(x[0], 1)).narrow(1, 3, 3), x[0].narrow(1, 0, 3))); },
      [](const RIn& x) {
        return one(R::mul(R::narrow(std::get<0>(R::sort(x[0], true, 1)), 1, 3, 3), R::narrow(x[0], 1, 0, 3)));
      });
  grad_row(
      v, "topk/" + d + "/smallest_dim0", {in({5, 3}, dt, St)},
      [](const In& x) {
        auto [s, i] = tb::topk(x[0], 2, 0, false);
        return In{s, i};
      },
      [](const RIn& x) {
        auto [s, i] = R::topk(x[0], 2, 0, false);
        return RIn{s, i};
      });
  if (dt == F64)  // float32's is a row of order_cases
    grad_row(
        v, "topk/" + d + "/k0", {in({2, 4}, dt)},
        [](const In& x) {
          auto [s, i] = tb::topk(x[0], 0);
          return In{s, i};
        },
        [](const RIn& x) {
          auto [s, i] = R::topk(x[0], 0);
          return RIn{s, i};
        });
  grad_row(
      v, "tril/" + d + "/batched_kneg", {in({2, 3, 4}, dt, St)}, [](const In& x) { return one(tb::tril(x[0], -1)); },
      [](const RIn& x) { return one(R::tril(x[0], -1)); });
  grad_row(
      v, "triu/" + d + "/view_chain", {in({3, 4}, dt, Tr)},
      [](const In& x) { return one(tb::triu(tb::tril(x[0].t(), 1), -1)); },
      [](const RIn& x) { return one(R::triu(R::tril(R::t(x[0]), 1), -1)); });
}

}  // namespace

std::vector<OpCase> index_cases() {
  std::vector<OpCase> v;
  join_cases(v);
  split_cases(v);
  triangle_cases(v);
  index_gather_cases(v);
  index_gather_edge_cases(v);
  index_gather_error_cases(v);
  mask_cases(v);
  order_cases(v);
  for (DType dt : {F32, F64}) {
    join_split_grads(v, dt);
    index_grads(v, dt);
    mask_order_grads(v, dt);
  }
  // Mixed dtypes promote; each input's gradient is cast back to its dtype.
  grad_row(
      v, "cat/float32/promote_float64", {in({2, 3}, F32), in({1, 3}, F64, Tr)},
      [](const In& x) {
        return one(tb::cat({x[0], x[1]}, 0));
      },
      [](const RIn& x) {
        return one(R::cat({x[0], x[1]}, 0));
      });
  return v;
}

}  // namespace tb::suites
