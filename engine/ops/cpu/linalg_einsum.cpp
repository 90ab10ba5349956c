// einsum: parse the equation into integer labels, take diagonals for labels repeated within an
// operand, then contract operands pairwise, left to right, each step one batched gemm:
//   A -> (batch, a-only kept, contracted), B -> (batch, contracted, b-only kept).
// A label that only one side carries and that is not kept is summed by giving the other side a
// stride-0 dim of that size, so summation is a contraction too (a lone operand is paired with a
// 0-dim one). Labels of size 1 broadcast against the other operand's size, as in PyTorch.
#include <algorithm>
#include <array>

#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/linalg.h"

namespace tb::ops {

namespace {

constexpr const char* kOp = "einsum";
constexpr int kEllipsis = 52;  // labels 0..51 are letters (A-Z then a-z, PyTorch's order), 52+ ellipsis dims

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  throw Error(kOp, std::string("invalid subscript '") + c + "': subscripts must be letters in [a-zA-Z]");
}

// One term of the equation: letter labels with at most one ellipsis (-1) among them.
std::vector<int> parse_term(const std::string& s) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ' ') continue;
    if (c == '.') {
      TB_CHECK(s.compare(i, 3, "...") == 0 && !seen_ellipsis, kOp,
               "found '.' that is not part of a single ellipsis ('...') in term '", s, "'");
      seen_ellipsis = true;
      labels.push_back(-1);
      i += 2;
      continue;
    }
    labels.push_back(letter_label(c));
  }
  return labels;
}

struct Term {
  Tensor t;
  std::vector<int> labels;  // one per dim of t, unique after take_diagonals
};

// Repeated labels within one operand: a view whose dim for that label walks the diagonal.
Term take_diagonals(const Tensor& t, const std::vector<int>& labels, size_t index) {
  Term r;
  Shape sizes, strides;
  for (size_t d = 0; d < labels.size(); ++d) {
    auto it = std::find(r.labels.begin(), r.labels.end(), labels[d]);
    if (it == r.labels.end()) {
      r.labels.push_back(labels[d]);
      sizes.push_back(t.size(int64_t(d)));
      strides.push_back(t.stride(int64_t(d)));
    } else {
      const size_t k = size_t(it - r.labels.begin());
      TB_CHECK(sizes[k] == t.size(int64_t(d)), kOp, "subscript is repeated for operand ", index,
               " but the sizes don't match, ", sizes[k], " != ", t.size(int64_t(d)));
      strides[k] += t.stride(int64_t(d));
    }
  }
  r.t = r.labels.size() == labels.size() ? t : make_view(t, sizes, strides, t.storage_offset());
  return r;
}

int64_t label_size(const Term& x, int label) {
  auto it = std::find(x.labels.begin(), x.labels.end(), label);
  return it == x.labels.end() ? -1 : x.t.size(int64_t(it - x.labels.begin()));
}

void append_broadcast_dim(Term& x, int label, int64_t size) {
  Shape s = x.t.sizes();
  s.push_back(size);
  x.t = x.t.unsqueeze(x.t.dim()).expand(s);
  x.labels.push_back(label);
}

void broadcast_label(Term& x, int label, int64_t size) {
  Shape s = x.t.sizes();
  s[size_t(std::find(x.labels.begin(), x.labels.end(), label) - x.labels.begin())] = size;
  x.t = x.t.expand(s);
}

// Contracts a and b, keeping the labels for which keep[label] is set.
Term contract(Term a, Term b, const std::vector<bool>& keep) {
  for (int l : std::vector<int>(a.labels)) {  // sizes of shared labels: equal, or one side broadcasts
    const int64_t sa = label_size(a, l), sb = label_size(b, l);
    if (sb < 0 || sa == sb) continue;
    TB_CHECK(sa == 1 || sb == 1, kOp, "operands do not broadcast with remapped shapes (original->remapped): size ", sa,
             " vs ", sb);
    if (sa == 1) broadcast_label(a, l, sb);
    else broadcast_label(b, l, sa);
  }
  std::vector<int> batch, a_only, b_only, summed;
  for (int l : std::vector<int>(a.labels)) {
    const bool in_b = label_size(b, l) >= 0;
    if (in_b) (keep[size_t(l)] ? batch : summed).push_back(l);
    else if (keep[size_t(l)]) a_only.push_back(l);
    else {
      append_broadcast_dim(b, l, label_size(a, l));
      summed.push_back(l);
    }
  }
  for (int l : std::vector<int>(b.labels)) {
    if (label_size(a, l) >= 0) continue;
    if (keep[size_t(l)]) b_only.push_back(l);
    else {
      append_broadcast_dim(a, l, label_size(b, l));
      summed.push_back(l);
    }
  }
  auto dims_of = [](const Term& x, std::initializer_list<const std::vector<int>*> groups) {
    Shape p;
    for (auto* g : groups)
      for (int l : *g) p.push_back(int64_t(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin()));
    return p;
  };
  auto prod = [&](const Term& x, const std::vector<int>& g) {
    int64_t n = 1;
    for (int l : g) n *= label_size(x, l);
    return n;
  };
  const int64_t nb = prod(a, batch), m = prod(a, a_only), k = prod(a, summed), n = prod(b, b_only);
  Tensor a3 = a.t.permute(dims_of(a, {&batch, &a_only, &summed})).reshape({nb, m, k});
  Tensor b3 = b.t.permute(dims_of(b, {&batch, &summed, &b_only})).reshape({nb, k, n});
  TB_CHECK(a3.dtype() != DType::Bool, kOp, "contraction not implemented for dtype bool");
  Tensor out = empty({nb, m, n}, a3.dtype());
  cpu::gemm_batched(out, a3, b3);
  Term r;
  Shape shape;
  for (auto* g : {&batch, &a_only})
    for (int l : *g) shape.push_back(label_size(a, l));
  for (int l : b_only) shape.push_back(label_size(b, l));
  r.labels = batch;
  r.labels.insert(r.labels.end(), a_only.begin(), a_only.end());
  r.labels.insert(r.labels.end(), b_only.begin(), b_only.end());
  r.t = out.view(shape);
  return r;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const BareKernel bare("einsum", operands);
  TB_CHECK(!operands.empty(), kOp, "must provide at least one operand");
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  TB_CHECK(terms.size() == operands.size(), kOp, "the equation has ", terms.size(), " terms but ", operands.size(),
           " operands were given");
  for (const Tensor& t : operands)
    TB_CHECK(t.dtype() == operands[0].dtype(), kOp, "expected all operands to have the same dtype, got ",
             core::name(operands[0].dtype()), " and ", core::name(t.dtype()));

  // Ellipsis dims align from the right across operands: the last one is label kEllipsis + E - 1.
  int64_t n_ell = 0;
  std::vector<int64_t> ell_of(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool has_ell = std::count(terms[i].begin(), terms[i].end(), -1) > 0;
    const int64_t letters = int64_t(terms[i].size()) - (has_ell ? 1 : 0);
    TB_CHECK(has_ell ? operands[i].dim() >= letters : operands[i].dim() == letters, kOp,
             "the number of subscripts in the equation (", letters, ") does not match the number of dimensions (",
             operands[i].dim(), ") for operand ", i, has_ell ? "" : " and no ellipsis was given");
    ell_of[i] = has_ell ? operands[i].dim() - letters : 0;
    n_ell = std::max(n_ell, ell_of[i]);
  }
  std::vector<Term> ops;
  std::array<int, kEllipsis> letter_count{};
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int> labels;
    for (int l : terms[i]) {
      if (l >= 0) {
        labels.push_back(l);
        ++letter_count[size_t(l)];
        continue;
      }
      for (int64_t e = 0; e < ell_of[i]; ++e) labels.push_back(kEllipsis + int(n_ell - ell_of[i] + e));
    }
    ops.push_back(take_diagonals(operands[i], labels, i));
  }

  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    for (int l : parse_term(equation.substr(arrow + 2))) {
      if (l < 0) {
        for (int64_t e = 0; e < n_ell; ++e) out_labels.push_back(kEllipsis + int(e));
        continue;
      }
      TB_CHECK(letter_count[size_t(l)] > 0, kOp, "output subscript ", char(l < 26 ? 'A' + l : 'a' + l - 26),
               " does not appear in the equation for any input operand");
      TB_CHECK(std::count(out_labels.begin(), out_labels.end(), l) == 0, kOp, "output subscript ",
               char(l < 26 ? 'A' + l : 'a' + l - 26), " appears more than once in the output");
      out_labels.push_back(l);
    }
  } else {  // implicit output: the ellipsis dims, then letters used exactly once, in label order
    for (int64_t e = 0; e < n_ell; ++e) out_labels.push_back(kEllipsis + int(e));
    for (int l = 0; l < kEllipsis; ++l)
      if (letter_count[size_t(l)] == 1) out_labels.push_back(l);
  }

  const size_t n_labels = size_t(kEllipsis + n_ell);
  std::vector<bool> in_output(n_labels, false);
  for (int l : out_labels) in_output[size_t(l)] = true;

  Term acc = ops[0];
  if (ops.size() == 1) {
    const bool needs_sum = std::any_of(acc.labels.begin(), acc.labels.end(),
                                       [&](int l) { return !in_output[size_t(l)]; });
    if (needs_sum) acc = contract(acc, Term{ones({}, acc.t.dtype()), {}}, in_output);
  }
  for (size_t i = 1; i < ops.size(); ++i) {
    std::vector<bool> keep = in_output;
    for (size_t j = i + 1; j < ops.size(); ++j)
      for (int l : ops[j].labels) keep[size_t(l)] = true;
    acc = contract(acc, ops[i], keep);
  }
  Shape perm;
  for (int l : out_labels) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    perm.push_back(int64_t(it - acc.labels.begin()));
  }
  return acc.t.permute(perm);
}

}  // namespace tb::ops
