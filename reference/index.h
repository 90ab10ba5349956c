// LibTorch counterparts of engine/ops/index.h, one per engine op variant the suites use (no
// LibTorch in this header). In-place and out= variants write the handle they are given.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "reference/tensor.h"

namespace tb::ref {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor cat_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim = 0);
Tensor repeat(const Tensor& self, const Shape& repeats);

Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);
Tensor tril_(Tensor& self, int64_t diagonal = 0);
Tensor triu_(Tensor& self, int64_t diagonal = 0);
Tensor tril_out(Tensor& out, const Tensor& self, int64_t diagonal = 0);
Tensor triu_out(Tensor& out, const Tensor& self, int64_t diagonal = 0);

Tensor masked_fill(const Tensor& self, const Tensor& mask, double value);
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value);
Tensor masked_fill_(Tensor& self, const Tensor& mask, double value);
Tensor masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value);
Tensor masked_select(const Tensor& self, const Tensor& mask);
Tensor nonzero(const Tensor& self);

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
Tensor index_select_out(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce);
Tensor scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1);
Tensor index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1);

std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> stable, int64_t dim = -1,
                                bool descending = false);
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

}  // namespace tb::ref
