// Shape and index ops: cat, stack, split, chunk, repeat, index_select, gather, scatter,
// scatter_add, index_add, masked_fill, masked_select, nonzero, sort, topk, tril, triu.
// Same names, arguments and semantics as LibTorch's C++ API. Every index argument is validated
// before a kernel writes anything: an out-of-range index is a core::Error, never an out-of-bounds
// access. Kernels: index.cpp (shape and mask ops), cpu/index_gather.cpp (index_select, gather,
// scatter, index_add), cpu/sort.cpp (sort, topk).
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/ops/common.h"

namespace tb::ops {

// ---- joining and splitting (index.cpp) ----
// Inputs of mixed dtypes promote as in PyTorch; 1-D tensors of size 0 are skipped (legacy rule).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor& cat_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor& stack_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of `self`; the last piece may be smaller.
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim = 0);
Tensor repeat(const Tensor& self, const Shape& repeats);

// ---- triangles (index.cpp) ----
Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);
Tensor& tril_(Tensor& self, int64_t diagonal = 0);
Tensor& triu_(Tensor& self, int64_t diagonal = 0);
Tensor& tril_out(Tensor& out, const Tensor& self, int64_t diagonal = 0);
Tensor& triu_out(Tensor& out, const Tensor& self, int64_t diagonal = 0);

// ---- masks (index.cpp) ----
// masked_fill broadcasts self and mask (out-of-place); masked_fill_ needs mask to broadcast to self.
// A tensor value must be 0-dim; it is converted to self's dtype.
Tensor masked_fill(const Tensor& self, const Tensor& mask, double value);
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value);
Tensor masked_select(const Tensor& self, const Tensor& mask);  // 1-D, row-major order
Tensor nonzero(const Tensor& self);                            // (n, ndim) int64

// ---- indexing (cpu/index_gather.cpp) ----
// index: 1-D or 0-D, int64 or int32.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
Tensor& index_select_out(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
// index: same ndim as self, int64 or int32; the result has index's shape.
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad = false);
// reduce: "add" or "multiply" (PyTorch's legacy scatter reduce); empty for plain assignment.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// self[.., index[i], ..] += alpha * source[.., i, ..]
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1);
Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1);

// ---- ordering (cpu/sort.cpp) ----
// (values, int64 indices). NaN sorts above every number, as in PyTorch. The engine's sort is
// always stable, so `stable` only documents intent.
std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> stable, int64_t dim = -1,
                                bool descending = false);
Tensor argsort(const Tensor& self, int64_t dim = -1, bool descending = false);
// Results are always sorted (a valid answer for sorted=false); ties keep the lower index first.
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace tb::ops
