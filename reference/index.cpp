// LibTorch one-liners for reference/index.h.
#include "reference/index.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
std::vector<torch::Tensor> unwrap(const std::vector<Tensor>& ts) {
  std::vector<torch::Tensor> r;
  for (const Tensor& t : ts) r.push_back(T(t));
  return r;
}
std::vector<Tensor> wrap_all(const std::vector<torch::Tensor>& ts) {
  std::vector<Tensor> r;
  for (const torch::Tensor& t : ts) r.push_back(wrap(t));
  return r;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  return guarded("cat", [&] { return wrap(torch::cat(unwrap(ts), dim)); });
}
Tensor cat_out(Tensor& out, const std::vector<Tensor>& ts, int64_t dim) {
  return guarded("cat_out", [&] {
    torch::Tensor o = T(out);
    torch::cat_out(o, unwrap(ts), dim);
    return wrap(o);
  });
}
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  return guarded("stack", [&] { return wrap(torch::stack(unwrap(ts), dim)); });
}
Tensor stack_out(Tensor& out, const std::vector<Tensor>& ts, int64_t dim) {
  return guarded("stack_out", [&] {
    torch::Tensor o = T(out);
    torch::stack_out(o, unwrap(ts), dim);
    return wrap(o);
  });
}
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  return guarded("split", [&] { return wrap_all(torch::split(T(self), split_size, dim)); });
}
std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& sizes, int64_t dim) {
  return guarded("split_with_sizes", [&] { return wrap_all(torch::split_with_sizes(T(self), sizes, dim)); });
}
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  return guarded("chunk", [&] { return wrap_all(torch::chunk(T(self), chunks, dim)); });
}
Tensor repeat(const Tensor& self, const Shape& repeats) {
  return guarded("repeat", [&] { return wrap(T(self).repeat(repeats)); });
}

Tensor tril(const Tensor& self, int64_t k) {
  return guarded("tril", [&] { return wrap(torch::tril(T(self), k)); });
}
Tensor triu(const Tensor& self, int64_t k) {
  return guarded("triu", [&] { return wrap(torch::triu(T(self), k)); });
}
Tensor tril_(Tensor& self, int64_t k) {
  return guarded("tril_", [&] { return wrap(T(self).tril_(k)); });
}
Tensor triu_(Tensor& self, int64_t k) {
  return guarded("triu_", [&] { return wrap(T(self).triu_(k)); });
}
Tensor tril_out(Tensor& out, const Tensor& self, int64_t k) {
  return guarded("tril_out", [&] {
    torch::Tensor o = T(out);
    torch::tril_out(o, T(self), k);
    return wrap(o);
  });
}
Tensor triu_out(Tensor& out, const Tensor& self, int64_t k) {
  return guarded("triu_out", [&] {
    torch::Tensor o = T(out);
    torch::triu_out(o, T(self), k);
    return wrap(o);
  });
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, double value) {
  return guarded("masked_fill", [&] { return wrap(torch::masked_fill(T(self), T(mask), value)); });
}
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return guarded("masked_fill", [&] { return wrap(torch::masked_fill(T(self), T(mask), T(value))); });
}
Tensor masked_fill_(Tensor& self, const Tensor& mask, double value) {
  return guarded("masked_fill_", [&] { return wrap(T(self).masked_fill_(T(mask), value)); });
}
Tensor masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value) {
  return guarded("masked_fill_", [&] { return wrap(T(self).masked_fill_(T(mask), T(value))); });
}
Tensor masked_select(const Tensor& self, const Tensor& mask) {
  return guarded("masked_select", [&] { return wrap(torch::masked_select(T(self), T(mask))); });
}
Tensor nonzero(const Tensor& self) {
  return guarded("nonzero", [&] { return wrap(torch::nonzero(T(self))); });
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  return guarded("index_select", [&] { return wrap(torch::index_select(T(self), dim, T(index))); });
}
Tensor index_select_out(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  return guarded("index_select_out", [&] {
    torch::Tensor o = T(out);
    torch::index_select_out(o, T(self), dim, T(index));
    return wrap(o);
  });
}
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  return guarded("gather", [&] { return wrap(torch::gather(T(self), dim, T(index))); });
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return guarded("scatter", [&] { return wrap(torch::scatter(T(self), dim, T(index), T(src))); });
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value) {
  return guarded("scatter", [&] { return wrap(torch::scatter(T(self), dim, T(index), value)); });
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  return guarded("scatter", [&] { return wrap(torch::scatter(T(self), dim, T(index), T(src), reduce)); });
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce) {
  return guarded("scatter", [&] { return wrap(torch::scatter(T(self), dim, T(index), value, reduce)); });
}
Tensor scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return guarded("scatter_", [&] { return wrap(T(self).scatter_(dim, T(index), T(src))); });
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return guarded("scatter_add", [&] { return wrap(torch::scatter_add(T(self), dim, T(index), T(src))); });
}
Tensor scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return guarded("scatter_add_", [&] { return wrap(T(self).scatter_add_(dim, T(index), T(src))); });
}
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  return guarded("index_add", [&] { return wrap(torch::index_add(T(self), dim, T(index), T(source), alpha)); });
}
Tensor index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  return guarded("index_add_", [&] { return wrap(T(self).index_add_(dim, T(index), T(source), alpha)); });
}

std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending) {
  return guarded("sort", [&] {
    auto [v, i] = torch::sort(T(self), stable, dim, descending);
    return std::tuple<Tensor, Tensor>{wrap(v), wrap(i)};
  });
}
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  return guarded("topk", [&] {
    auto [v, i] = torch::topk(T(self), k, dim, largest, sorted);
    return std::tuple<Tensor, Tensor>{wrap(v), wrap(i)};
  });
}

}  // namespace tb::ref
