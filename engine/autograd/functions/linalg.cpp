// Backward formulas of the linear-algebra ops (engine/ops/linalg.h). For C = A @ B:
// dA = dC @ B^T, dB = A^T @ dC, computed with the same oneDNN kernels as the forward on
// transposed VIEWS (the gemm kernel reads either memory order, so no transpose is materialised).
// einsum's backward is an einsum per operand: see Note [einsum backward].
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "engine/autograd/autocast.h"
#include "engine/autograd/function.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

namespace {

// The product of all but the last dim: the rows of a folded (rows, K) operand. Not numel / K,
// which loses the rows when K is 0.
int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

// t summed down to `sizes` (leading dims, and dims where sizes has 1), then viewed as `sizes`.
Tensor sum_to(const Tensor& t, const Shape& sizes) {
  if (t.sizes() == sizes) return t;
  const int64_t lead = t.dim() - int64_t(sizes.size());
  DimList dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d < lead || (sizes[size_t(d - lead)] == 1 && t.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? t : ops::sum(t, dims, /*keepdim=*/true);
  return r.reshape(sizes);
}

Tensor mT(const Tensor& t) { return t.transpose(-1, -2); }

}  // namespace

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_lower(a_in), b = autocast_lower(b_in);
  Tensor out = kernel([&] { return ops::mm(a, b); });
  record("mm", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::mm(g[0], ctx.saved(1).t()) : Tensor(),
                      ctx.needs_grad(1) ? ops::mm(ctx.saved(0).t(), g[0]) : Tensor()};
  });
  return out;
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_lower(a_in), b = autocast_lower(b_in);
  Tensor out = kernel([&] { return ops::bmm(a, b); });
  record("bmm", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::bmm(g[0], mT(ctx.saved(1))) : Tensor(),
                      ctx.needs_grad(1) ? ops::bmm(mT(ctx.saved(0)), g[0]) : Tensor()};
  });
  return out;
}

Tensor dot(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::dot(a, b); });
  record("dot", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::mul(g[0], ctx.saved(1)) : Tensor(),
                      ctx.needs_grad(1) ? ops::mul(g[0], ctx.saved(0)) : Tensor()};
  });
  return out;
}

// torch.matmul is composite in PyTorch: 1-D operands get a unit dim, batch dims broadcast, and a
// (*, M, K) @ (K, N) product is folded into one (rows, K) @ (K, N) gemm. The gradients mirror
// that: a broadcast batch operand's gradient is summed over the batch, and in the folded case
// dB is one (K, rows) @ (rows, N) gemm.
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_lower(a_in), b = autocast_lower(b_in);
  Tensor out = kernel([&] { return ops::matmul(a, b); });
  record("matmul", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& grads) {
    const Tensor a = ctx.saved(0), b = ctx.saved(1);
    const Tensor& g = grads[0];
    if (a.dim() == 1 && b.dim() == 1)
      return TensorList{ctx.needs_grad(0) ? ops::mul(g, b) : Tensor(), ctx.needs_grad(1) ? ops::mul(g, a) : Tensor()};
    const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
    const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
    const Tensor g2 = a.dim() == 1 ? g.unsqueeze(-2) : b.dim() == 1 ? g.unsqueeze(-1) : g;
    Tensor da, db;
    if (ctx.needs_grad(0)) da = sum_to(ops::matmul(g2, mT(b2)), a2.sizes()).view(a.sizes());
    if (ctx.needs_grad(1)) {
      if (b2.dim() == 2 && a2.dim() > 2) {
        const int64_t K = a2.size(-1), N = g2.size(-1), rows = leading_rows(a2);
        const Tensor af = a2.reshape({rows, K}), gf = g2.reshape({rows, N});
        db = ops::mm(af.t(), gf).view(b.sizes());
      } else {
        db = sum_to(ops::matmul(mT(a2), g2), b2.sizes()).view(b.sizes());
      }
    }
    return TensorList{da, db};
  });
  return out;
}

Tensor addmm(const Tensor& self_in, const Tensor& a_in, const Tensor& b_in, double beta, double alpha) {
  const Tensor self = autocast_lower(self_in), a = autocast_lower(a_in), b = autocast_lower(b_in);
  Tensor out = kernel([&] { return ops::addmm(self, a, b, beta, alpha); });
  record("addmm", {self, a, b}, {out}, {a, b}, [beta, alpha](BackwardContext& ctx, const TensorList& g) {
    auto scaled = [](const Tensor& t, double s) { return s == 1 ? t : ops::mul(t, Scalar(s)); };
    return TensorList{ctx.needs_grad(0) ? scaled(g[0], beta) : Tensor(),
                      ctx.needs_grad(1) ? scaled(ops::mm(g[0], ctx.saved(1).t()), alpha) : Tensor(),
                      ctx.needs_grad(2) ? scaled(ops::mm(ctx.saved(0).t(), g[0]), alpha) : Tensor()};
  });
  return out;
}

// The hot ops of the MLP/GPT benchmarks. Over the flattened rows of x, with gz the gradient of
// the product (for linear_relu: g where the output is > 0, relu's backward from its output):
//   dX = gz @ W           (rows, out) @ (out, in)
//   dW = gz^T @ X         (out, rows) @ (rows, in): gz^T is a column-major view, read as is
//   dB = sum_rows gz      summed in the same pass that masks gz (ops::linear_grad_prep)
// Each product is one gemm into a fresh contiguous buffer.
namespace {

// grad: the node's incoming gradient. When the engine's gradient list is its only holder (no hook
// or retain_grad kept it: Function nodes receive their gradients by move), relu's mask is applied
// in place, so the backward holds one gradient-sized buffer less at its peak.
// mask: linear_relu's packed relu mask (ops::relu_mask), undefined for linear.
// wide: which of (x, weight, bias) autocast narrowed from float32 to bfloat16 (Note [Autocast
// gradients in float32]): their gradients come out of the products in float32.
struct Widened {
  bool x = false, weight = false, bias = false;
};

TensorList linear_backward(BackwardContext& ctx, const Tensor& grad, const Tensor& mask, Widened wide) {
  const Tensor x = ctx.saved(0), w = ctx.saved(1);
  const int64_t in = w.size(1), outf = w.size(0), rows = leading_rows(x);
  const bool alone = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1;
  const Tensor g2 = grad.reshape({rows, outf});
  const ops::LinearGradPrep p = ops::linear_grad_prep(g2, mask, ctx.needs_grad(2), alone, wide.bias);
  Tensor dx, dw;
  if (ctx.needs_grad(0)) dx = (wide.x ? ops::mm_float32(p.grad_in, w) : ops::mm(p.grad_in, w)).view(x.sizes());
  if (ctx.needs_grad(1)) {
    dw = ctx.grad_buffer(1);  // Note [Gradient buffers]: e.g. DDP's bucket slot
    const Tensor xr = x.reshape({rows, in});
    if (wide.weight) dw = ops::mm_float32(p.grad_in.t(), xr, dw);
    else if (dw.defined()) ops::mm_out(dw, p.grad_in.t(), xr);
    else dw = ops::mm(p.grad_in.t(), xr);
  }
  return TensorList{dx, dw, p.bias_grad};
}

// Note [Autocast gradients in float32]
// Under bfloat16 autocast, LibTorch's linear multiplies bfloat16 casts of its float32 inputs (the
// master weight, its bias, a float32 activation), so each such input's gradient is produced in
// bfloat16 and converted back by the cast's backward: a bfloat16 buffer written, read and widened
// into a float32 one per weight and step (0.32 ms, 4% of the MLP's bfloat16 train step on a Zen 4 host).
// Here linear and linear_relu record the float32 inputs themselves and produce their gradients in
// float32 straight from the products' float32 accumulators (Note [Widening bfloat16 products] in
// ops/cpu/linalg_gemm.cpp; the bias's row sums likewise), into DDP's bucket slot where one is
// offered (Note [Gradient buffers]), as Megatron-LM's gradient-accumulation fusion writes weight
// gradients into float32 main_grad. The difference from LibTorch is one bfloat16 rounding fewer
// per gradient. float16 autocast keeps LibTorch's float16 gradients: a GradScaler must see the
// overflow they can have.
struct AutocastInputs {
  Tensor x, weight, bias;  // what the product reads: bfloat16 casts under autocast
  TensorList recorded;     // what the graph's edges lead to
  Widened wide;
};

AutocastInputs autocast_linear_inputs(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  AutocastInputs r{autocast_lower(x_in), autocast_lower(weight_in), autocast_lower(bias_in), {}, {}};
  auto widened = [](const Tensor& in, const Tensor& cast) {
    return in.defined() && cast.dtype() == DType::BFloat16 && in.dtype() == DType::Float32;
  };
  r.wide = {widened(x_in, r.x), widened(weight_in, r.weight), widened(bias_in, r.bias)};
  r.recorded = {r.wide.x ? x_in : r.x, r.wide.weight ? weight_in : r.weight, r.wide.bias ? bias_in : r.bias};
  return r;
}

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const AutocastInputs in = autocast_linear_inputs(x_in, weight_in, bias_in);
  Tensor out = kernel([&] { return ops::linear(in.x, in.weight, in.bias); });
  record("linear", in.recorded, {out}, {in.x, in.weight}, [wide = in.wide](BackwardContext& ctx, const TensorList& g) {
    return linear_backward(ctx, g[0], Tensor(), wide);
  });
  return out;
}

// Saves the relu mask packed to bits rather than the output: the output's last user is then the
// next layer (which saves it as its input), so the backward of this layer -- where the weight
// gradient is allocated -- does not hold it, and the step's peak stays that of linear + relu.
Tensor linear_relu(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const AutocastInputs in = autocast_linear_inputs(x_in, weight_in, bias_in);
  const Tensor &x = in.x, &weight = in.weight;
  Tensor out = kernel([&] { return ops::linear_relu(x, weight, in.bias); });
  if (!grad_mode_enabled() || !any_requires_grad(in.recorded)) return out;
  const Tensor mask = kernel([&] { return ops::relu_mask(out.reshape({leading_rows(out), out.size(-1)})); });
  // relu(linear) saves relu's output, so an in-place write to it fails the backward; the witness
  // (an empty tensor sharing out's version counter) keeps that check without holding out.
  Tensor witness = empty({0}, out.dtype());
  witness.impl()->version = out.impl()->version;
  record("linear_relu", in.recorded, {out}, {x, weight, mask, witness},
         [wide = in.wide](BackwardContext& ctx, const TensorList& g) {
           (void)ctx.saved(3);  // raises if the output was modified in place
           return linear_backward(ctx, g[0], ctx.saved(2), wide);
         });
  return out;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::outer(a, b); });
  record("outer", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    // out[i, j] = a[i] * b[j]: da = g @ b, db = g^T @ a (as sums, since dtypes may differ).
    return TensorList{ctx.needs_grad(0) ? ops::sum(ops::mul(g[0], ctx.saved(1).unsqueeze(0)), {1}) : Tensor(),
                      ctx.needs_grad(1) ? ops::sum(ops::mul(g[0], ctx.saved(0).unsqueeze(1)), {0}) : Tensor()};
  });
  return out;
}

// ---- einsum ----
// Note [einsum backward]
// With every "..." expanded into fresh letters, operand i's gradient is the einsum of the output
// gradient (output labels) with the other operands, whose output is operand i's labels:
//   - a label only operand i carries (summed in the forward) is absent from every source, so it
//     is computed without it and broadcast (expanded) afterwards;
//   - a size-1 dim of operand i that broadcast against a bigger size is summed (left out of the
//     gradient einsum's output, then unsqueezed); other operands' broadcast size-1 dims are
//     squeezed away, as they are constant along that label;
//   - a label repeated in operand i (a diagonal) is computed once and written into the diagonal
//     of a zero tensor of operand i's shape.
namespace {

struct EinsumPlan {
  std::vector<std::string> terms;  // per operand, one letter per dim (ellipsis expanded)
  std::string out;
  int64_t size[128] = {};  // broadcast size of each label
};

std::string strip_spaces(const std::string& s) {
  std::string r;
  for (char c : s)
    if (c != ' ') r += c;
  return r;
}

bool is_label(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

EinsumPlan plan_einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const std::string eq = strip_spaces(equation);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> raw;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    raw.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  TB_CHECK(raw.size() == operands.size(), "einsum", "the equation has ", raw.size(), " operand terms but ",
           operands.size(), " operands were given");
  // Fresh letters for ellipsis dims: the ones the equation does not use.
  std::string fresh;
  for (char c = 'A'; c <= 'z'; ++c)
    if (is_label(c) && eq.find(c) == std::string::npos) fresh += c;
  auto letters_of = [](const std::string& t) {
    return int64_t(std::count_if(t.begin(), t.end(), [](char c) { return is_label(c); }));
  };
  int64_t E = 0;
  for (size_t i = 0; i < raw.size(); ++i)
    if (raw[i].find("...") != std::string::npos) E = std::max(E, operands[i].dim() - letters_of(raw[i]));
  TB_CHECK(E <= int64_t(fresh.size()), "einsum", "backward: not enough unused letters for ", E, " ellipsis dims");
  auto expand = [&](const std::string& t, int64_t e) {
    const size_t at = t.find("...");
    if (at == std::string::npos) return t;
    return t.substr(0, at) + fresh.substr(size_t(E - e), size_t(e)) + t.substr(at + 3);
  };
  EinsumPlan p;
  for (size_t i = 0; i < raw.size(); ++i) {
    p.terms.push_back(
        expand(raw[i], raw[i].find("...") == std::string::npos ? 0 : operands[i].dim() - letters_of(raw[i])));
    TB_CHECK(int64_t(p.terms[i].size()) == operands[i].dim(), "einsum", "backward: term '", raw[i],
             "' does not match operand ", i, " of shape ", core::to_string(operands[i].sizes()));
  }
  if (arrow != std::string::npos) {
    p.out = expand(eq.substr(arrow + 2), E);
  } else {
    // Implicit output: the ellipsis dims, then the labels used exactly once, in letter order.
    p.out = fresh.substr(0, size_t(E));
    std::string once;
    for (char c = 'A'; c <= 'z'; ++c) {
      if (!is_label(c)) continue;
      int n = 0;
      for (const std::string& t : raw) n += int(std::count(t.begin(), t.end(), c));
      if (n == 1) once += c;
    }
    p.out += once;
  }
  for (int64_t& s : p.size) s = -1;
  for (size_t i = 0; i < p.terms.size(); ++i)
    for (size_t d = 0; d < p.terms[i].size(); ++d) {
      int64_t& s = p.size[size_t(p.terms[i][d])];
      const int64_t here = operands[i].size(int64_t(d));
      if (s == -1 || s == 1) s = here;
    }
  return p;
}

// Operand i's dim d broadcasts: size 1 against a bigger label size.
bool broadcast_dim(const EinsumPlan& p, const Tensor& t, const std::string& term, size_t d) {
  return t.size(int64_t(d)) == 1 && p.size[size_t(term[d])] != 1;
}

Tensor einsum_grad(const EinsumPlan& p, const Tensor& g, const std::vector<Tensor>& ops_in, size_t i) {
  const Tensor& x = ops_in[i];
  const std::string& term = p.terms[i];
  // Sources: the output gradient and the other operands without their broadcast dims.
  std::string eq = p.out, available = p.out;
  std::vector<Tensor> sources = {g};
  for (size_t j = 0; j < ops_in.size(); ++j) {
    if (j == i) continue;
    Tensor t = ops_in[j];
    std::string tj;
    for (size_t d = p.terms[j].size(); d-- > 0;) {
      if (broadcast_dim(p, ops_in[j], p.terms[j], d)) t = t.squeeze(int64_t(d));
      else tj.insert(tj.begin(), p.terms[j][d]);
    }
    eq += "," + tj;
    available += tj;
    sources.push_back(t);
  }
  // Operand i's distinct labels; those to compute (`target`) and the shape to broadcast into.
  std::string uniq, target;
  Shape ushape;
  for (size_t d = 0; d < term.size(); ++d) {
    if (uniq.find(term[d]) != std::string::npos) continue;
    uniq += term[d];
    const bool bcast = broadcast_dim(p, x, term, d);
    ushape.push_back(bcast ? 1 : x.size(int64_t(d)));
    if (!bcast && available.find(term[d]) != std::string::npos) target += term[d];
  }
  Tensor r = sources.size() == 1 && target == p.out ? g : ops::einsum(eq + "->" + target, sources);
  // Unsqueeze the labels that were not computed, then broadcast to the distinct-label shape.
  Shape rshape;
  for (size_t k = 0; k < uniq.size(); ++k) rshape.push_back(target.find(uniq[k]) != std::string::npos ? ushape[k] : 1);
  Tensor u = r.reshape(rshape).expand(ushape);
  if (uniq.size() == term.size()) return u;
  // Repeated labels: write u into the diagonal of a zero tensor of x's shape.
  Tensor buf = zeros(x.sizes(), g.dtype());
  Shape strides(uniq.size(), 0);
  for (size_t d = 0; d < term.size(); ++d) strides[uniq.find(term[d])] += buf.stride(int64_t(d));
  Tensor diag = buf.as_strided(ushape, strides, 0);
  diag.copy_(u);
  return buf;
}

}  // namespace

namespace {

// Whether LibTorch's einsum would reach a matrix product (bmm, which autocast lowers) for this
// equation: a label of two or more operands that the output lacks is summed by a product of a
// pair. Otherwise einsum is a permute, a diagonal, a sum or an elementwise product ("ij->ji",
// "ij->j", "i,j->ij", "ij,ij->ij"), none on autocast's list, which stay in their inputs' dtype.
bool einsum_contracts(const std::string& equation) {
  const size_t arrow = equation.find("->");
  const std::string inputs = equation.substr(0, arrow);
  std::map<char, int> operands_with, uses;  // per label: operands naming it, and every use
  std::set<char> in_this;
  for (size_t i = 0; i <= inputs.size(); ++i) {
    if (i == inputs.size() || inputs[i] == ',') {
      for (char c : in_this) ++operands_with[c];
      in_this.clear();
    } else if (std::isalpha(static_cast<unsigned char>(inputs[i]))) {
      in_this.insert(inputs[i]);
      ++uses[inputs[i]];
    }
  }
  for (const auto& [label, n] : operands_with) {
    // Implicit output (no "->"): the labels used once.
    const bool in_output = arrow == std::string::npos ? uses[label] == 1
                                                      : equation.find(label, arrow + 2) != std::string::npos;
    if (n >= 2 && !in_output) return true;
  }
  return false;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands_in) {
  std::vector<Tensor> operands;
  const bool lower = einsum_contracts(equation);
  for (const Tensor& t : operands_in) operands.push_back(lower ? autocast_lower(t) : t);
  Tensor out = kernel([&] { return ops::einsum(equation, operands); });
  record("einsum", operands, {out}, operands,
         [equation, n = operands.size()](BackwardContext& ctx, const TensorList& g) {
           std::vector<Tensor> in;
           for (size_t i = 0; i < n; ++i) in.push_back(ctx.saved(i));
           const EinsumPlan p = plan_einsum(equation, in);
           TensorList grads(n);
           for (size_t i = 0; i < n; ++i)
             if (ctx.needs_grad(i)) grads[i] = einsum_grad(p, g[0], in, i);
           return grads;
         });
  return out;
}

}  // namespace tb
