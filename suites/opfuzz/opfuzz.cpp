// The differential op fuzz suite. A composition is an input (shape with dims of size 0 and 1,
// 0-dim; contiguous, transposed, strided with an offset and a step, expanded with stride 0, or
// permuted; float64 or float32) that requires grad, followed by 3-8 ops drawn from the vocabulary
// below (elementwise unary and broadcasting binary ops, reductions with dim lists and keepdim,
// every view op, matmul/linear, softmax, norms, losses, tril/triu, index ops, padding, in-place
// ops on views). Every op's parameters are drawn from its step's seed against the current shape,
// so dropping a step leaves the others meaningful. Engine and LibTorch run each op on the same
// bytes (ref::to_ref), and must agree on:
//   - errors: LibTorch raises exactly where the engine raises a core::Error (never another
//     exception, never a crash);
//   - shapes, dtypes and values (suites/ops/tolerance.h, widened for a chain of ops), unless
//     LibTorch's own values move as far under rounding-sized input noise (Note [Ill-conditioned
//     compositions]: counted in the metric ill_conditioned, not failed), and unless LibTorch's
//     value is a known defect of its own (Note [LibTorch's value defects]: not compared);
//   - layout: the result can be .view()ed the same ways on both sides;
//   - whether the result requires grad, and the input's gradient after backward of
//     sum(result * w) for a random w (an undefined gradient counts as zeros).
// A failing composition is shrunk (steps dropped, dims shrunk, layout made plain) and printed as
// a C++ snippet with its seed; a crash prints the composition it was running before the signal
// kills the process.
//
// Budget: TRAINBENCH_OPFUZZ_BUDGET = "<compositions>" | "<seconds>s" | "<compositions>,<seconds>s"
// (default "2000,60s": whichever ends first; 2000 take ~5 s on 2 cores), split over 10 batches. TRAINBENCH_SEED shifts every
// seed; TRAINBENCH_OPFUZZ_SEED=<seed> reruns one composition (the seed a failure prints).
#include "suites/opfuzz/opfuzz.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "engine/autograd/functions.h"
#include "engine/core/env.h"
#include "engine/autograd/grad_mode.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/linalg.h"
#include "reference/loss.h"
#include "reference/nn.h"
#include "reference/nn_norm.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using ETensor = tb::Tensor;
using RTensor = tb::ref::Tensor;
using DimList = std::vector<int64_t>;

// ---- randomness and text ----

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return n <= 0 ? 0 : int64_t(next() % uint64_t(n)); }
  bool pct(int p) { return below(100) < p; }
};

template <typename... Ts>
std::string str(const Ts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// ---- inputs ----

enum class Lay { Contiguous, Transposed, Strided, Expanded, Permuted };
const char* lay_name(Lay l) {
  switch (l) {
    case Lay::Contiguous: return "Contiguous";
    case Lay::Transposed: return "Transposed";
    case Lay::Strided: return "Strided";
    case Lay::Expanded: return "Expanded";
    default: return "Permuted";
  }
}

// Standard normal values of `shape` in layout `lay` (a view of a plain tensor that does not
// require grad): Transposed swaps the last two dims, Strided takes every other element of the
// last dim from offset 1, Expanded broadcasts dim 0 from size 1, Permuted a random permutation.
ETensor fuzz_tensor(const Shape& shape, DType dt, Lay lay, uint64_t seed) {
  A::NoGradGuard no_grad;
  core::Generator gen(seed);
  const int64_t nd = int64_t(shape.size());
  auto base = [&](const Shape& s) { return randn(s, DType::Float64, &gen).to(dt); };
  if (lay == Lay::Transposed && nd >= 2) {
    Shape s = shape;
    std::swap(s[size_t(nd - 1)], s[size_t(nd - 2)]);
    return base(s).transpose(-1, -2);
  }
  if (lay == Lay::Strided && nd >= 1) {
    Shape s = shape;
    s.back() = 2 * s.back() + 1;
    return base(s).slice(-1, 1, std::nullopt, 2);
  }
  if (lay == Lay::Expanded && nd >= 1) {
    Shape s = shape;
    s[0] = 1;
    return base(s).expand(shape);
  }
  if (lay == Lay::Permuted && nd >= 2) {
    Rng g(seed ^ 0x51ED2701ull);
    Shape perm = Shape(size_t(nd));
    for (int64_t d = 0; d < nd; ++d) perm[size_t(d)] = d;
    for (int64_t d = nd - 1; d > 0; --d) std::swap(perm[size_t(d)], perm[size_t(g.below(d + 1))]);
    Shape s = Shape(size_t(nd)), inv = Shape(size_t(nd));
    for (int64_t d = 0; d < nd; ++d) s[size_t(d)] = shape[size_t(perm[size_t(d)])], inv[size_t(perm[size_t(d)])] = d;
    return base(s).permute(inv);
  }
  return base(shape);
}

std::string tensor_text(const Shape& s, DType dt, Lay lay, uint64_t seed) {
  return str("fuzz_tensor(", list(s), ", DType::", dt == DType::Float64 ? "Float64" : "Float32",
             ", Lay::", lay_name(lay), ", ", hex(seed), ")");
}

// A second operand: both sides' copies and its text.
struct Extra {
  ETensor e;
  RTensor r;
  std::string text;
};

Extra extra(const Shape& s, DType dt, Rng& g) {
  const Lay lay = Lay(g.below(5));
  const uint64_t seed = g.next();
  Extra x{fuzz_tensor(s, dt, lay, seed), {}, tensor_text(s, dt, lay, seed)};
  x.r = R::to_ref(x.e);
  return x;
}

// int64 values in [0, hi) (hi 0: empty index), of `shape`.
Extra index_extra(const Shape& s, int64_t hi, Rng& g) {
  const uint64_t seed = g.next();
  core::Generator gen(seed);
  Extra x{hi > 0 ? randint(0, hi, s, DType::Int64, &gen) : zeros(s, DType::Int64),
          {},
          str("fuzz_index(", list(s), ", ", hi, ", ", hex(seed), ")")};
  x.r = R::to_ref(x.e);
  return x;
}

// ---- the op vocabulary ----

// One step made concrete against the current shape: the engine and LibTorch lines and the C++
// text of the engine line (y is the running value).
struct Op {
  std::string text;
  std::function<ETensor(const ETensor&)> engine;
  std::function<RTensor(const RTensor&)> ref;
  // Whether LibTorch's result on this input is a LibTorch defect, not behaviour to match (Note
  // [LibTorch's value defects]); null for ops without a known one.
  bool (*ref_defect)(const RTensor& in) = nullptr;
};
using Maker = bool (*)(const Shape& s, DType dt, Rng& g, Op& op);  // false: not applicable here

int64_t nd_of(const Shape& s) { return int64_t(s.size()); }

// A dim of an nd-dim tensor (0-dim tensors take 0 or -1), negative half the time.
int64_t pick_dim(const Shape& s, Rng& g) {
  const int64_t nd = std::max<int64_t>(nd_of(s), 1);
  const int64_t d = g.below(nd);
  return g.pct(50) ? d - nd : d;
}

// A non-empty list of distinct dims.
DimList pick_dims(const Shape& s, Rng& g) {
  const int64_t nd = std::max<int64_t>(nd_of(s), 1);
  DimList dims;
  for (int64_t d = 0; d < nd; ++d)
    if (g.pct(45)) dims.push_back(g.pct(30) ? d - nd : d);
  if (dims.empty()) dims.push_back(pick_dim(s, g));
  return dims;
}

// A shape `s` broadcasts with: some dims set to 1, leading dims dropped or one added.
Shape broadcast_partner(const Shape& s, Rng& g) {
  if (g.pct(10)) return {};
  Shape b = s;
  for (int64_t& v : b)
    if (g.pct(30)) v = 1;
  if (!b.empty() && g.pct(25)) b.erase(b.begin());
  if (g.pct(15)) b.insert(b.begin(), 2);
  return b;
}

const char* kUnaryNames[] = {"exp", "tanh", "sigmoid", "relu",     "gelu", "silu",
                             "neg", "abs",  "sin",     "softplus", "log",  "sqrt"};

// Note [LibTorch's value defects]
// torch 2.11's float32 and bfloat16 gelu (approximate "none") returns NaN at +inf (checked in
// Python: float64 and the tanh form give +inf, the limit, as the engine does). The fuzzer meets it
// through logsumexp over an empty dim (-inf) then abs or neg. A composition whose gelu gets +inf
// in those dtypes is not compared, as libtorch_defect() skips LibTorch's defective errors.
bool gelu_of_posinf(const RTensor& in) {
  const ETensor x = R::from_ref(in);
  if (x.dtype() != DType::Float32 && x.dtype() != DType::BFloat16) return false;
  const ETensor d = x.to(DType::Float64).contiguous();
  const double* v = d.data_ptr<double>();
  for (int64_t i = 0; i < d.numel(); ++i)
    if (v[i] == INFINITY) return true;
  return false;
}

bool mk_unary(const Shape&, DType, Rng& g, Op& op) {
  const int k = int(g.below(12));
  op.text = str("y = A::", kUnaryNames[k], "(y);");
  using EF = ETensor (*)(const ETensor&);
  using RF = RTensor (*)(const RTensor&);
  static const EF ef[] = {
      [](const ETensor& x) { return tb::exp(x); },     [](const ETensor& x) { return tb::tanh(x); },
      [](const ETensor& x) { return tb::sigmoid(x); }, [](const ETensor& x) { return tb::relu(x); },
      [](const ETensor& x) { return tb::gelu(x); },    [](const ETensor& x) { return tb::silu(x); },
      [](const ETensor& x) { return tb::neg(x); },     [](const ETensor& x) { return tb::abs(x); },
      [](const ETensor& x) { return tb::sin(x); },     [](const ETensor& x) { return tb::softplus(x); },
      [](const ETensor& x) { return tb::log(x); },     [](const ETensor& x) { return tb::sqrt(x); }};
  static const RF rf[] = {
      [](const RTensor& x) { return R::exp(x); },     [](const RTensor& x) { return R::tanh(x); },
      [](const RTensor& x) { return R::sigmoid(x); }, [](const RTensor& x) { return R::relu(x); },
      [](const RTensor& x) { return R::gelu(x); },    [](const RTensor& x) { return R::silu(x); },
      [](const RTensor& x) { return R::neg(x); },     [](const RTensor& x) { return R::abs(x); },
      [](const RTensor& x) { return R::sin(x); },     [](const RTensor& x) { return R::softplus(x); },
      [](const RTensor& x) { return R::log(x); },     [](const RTensor& x) { return R::sqrt(x); }};
  op.engine = ef[k];
  op.ref = rf[k];
  if (std::string(kUnaryNames[k]) == "gelu") op.ref_defect = gelu_of_posinf;
  return true;
}

bool mk_binary(const Shape& s, DType dt, Rng& g, Op& op) {
  const int k = int(g.below(6));
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  Extra b = extra(broadcast_partner(s, g), dt, g);
  const bool swap = g.pct(30);
  op.text = swap ? str("y = A::", names[k], "(", b.text, ", y);") : str("y = A::", names[k], "(y, ", b.text, ");");
  op.engine = [k, b, swap](const ETensor& y) {
    const ETensor& l = swap ? b.e : y;
    const ETensor& r = swap ? y : b.e;
    switch (k) {
      case 0: return tb::add(l, r);
      case 1: return tb::sub(l, r);
      case 2: return tb::mul(l, r);
      case 3: return tb::div(l, r);
      case 4: return tb::maximum(l, r);
      default: return tb::minimum(l, r);
    }
  };
  op.ref = [k, b, swap](const RTensor& y) {
    const RTensor& l = swap ? b.r : y;
    const RTensor& r = swap ? y : b.r;
    switch (k) {
      case 0: return R::add(l, r);
      case 1: return R::sub(l, r);
      case 2: return R::mul(l, r);
      case 3: return R::div(l, r);
      case 4: return R::maximum(l, r);
      default: return R::minimum(l, r);
    }
  };
  return true;
}

bool mk_scalar(const Shape&, DType, Rng& g, Op& op) {
  const int k = int(g.below(4));
  static const char* texts[] = {"y = tb::mul(y, 2.5);", "y = tb::add(y, -0.75);", "y = tb::pow(y, 2);",
                                "y = tb::clamp(y, -0.5, 0.7);"};
  op.text = texts[k];
  op.engine = [k](const ETensor& y) {
    switch (k) {
      case 0: return tb::mul(y, 2.5);
      case 1: return tb::add(y, -0.75);
      case 2: return tb::pow(y, 2);
      default: return tb::clamp(y, ops::Scalar(-0.5), ops::Scalar(0.7));
    }
  };
  op.ref = [k](const RTensor& y) {
    switch (k) {
      case 0: return R::mul(y, 2.5);
      case 1: return R::add(y, -0.75);
      case 2: return R::pow(y, 2);
      default: return R::clamp(y, std::optional<R::Scalar>(-0.5), std::optional<R::Scalar>(0.7));
    }
  };
  return true;
}

bool mk_where(const Shape& s, DType dt, Rng& g, Op& op) {
  Extra b = extra(broadcast_partner(s, g), dt, g);
  op.text = str("y = tb::where(tb::gt(y, 0.0), y, ", b.text, ");");
  op.engine = [b](const ETensor& y) { return tb::where(tb::gt(y, 0.0), y, b.e); };
  op.ref = [b](const RTensor& y) { return R::where(R::gt(y, 0.0), y, b.r); };
  return true;
}

bool mk_reduce(const Shape& s, DType, Rng& g, Op& op) {
  const int k = int(g.below(8));
  static const char* names[] = {"sum", "mean", "amax", "amin", "logsumexp", "norm", "var", "std"};
  const DimList dims = pick_dims(s, g);
  const bool keep = g.pct(40);
  const double corr = double(g.below(2));
  std::string extra_arg = k == 5 ? "2.0, " : "";
  std::string tail = k >= 6 ? str(", ", corr, ", ", keep) : str(", ", keep);
  op.text = str("y = A::", names[k], "(y, ", extra_arg, list(dims), tail, ");");
  op.engine = [k, dims, keep, corr](const ETensor& y) {
    switch (k) {
      case 0: return tb::sum(y, dims, keep);
      case 1: return tb::mean(y, dims, keep);
      case 2: return tb::amax(y, dims, keep);
      case 3: return tb::amin(y, dims, keep);
      case 4: return tb::logsumexp(y, dims, keep);
      case 5: return tb::norm(y, 2.0, dims, keep);
      case 6: return tb::var(y, dims, corr, keep);
      default: return tb::std(y, dims, corr, keep);
    }
  };
  op.ref = [k, dims, keep, corr](const RTensor& y) {
    switch (k) {
      case 0: return R::sum(y, dims, keep);
      case 1: return R::mean(y, dims, keep);
      case 2: return R::amax(y, dims, keep);
      case 3: return R::amin(y, dims, keep);
      case 4: return R::logsumexp(y, dims, keep);
      case 5: return R::norm(y, 2.0, dims, keep);
      case 6: return R::var(y, dims, corr, keep);
      default: return R::std(y, dims, corr, keep);
    }
  };
  return true;
}

bool mk_reduce_dim(const Shape& s, DType, Rng& g, Op& op) {
  const int k = int(g.below(5));
  const int64_t d = pick_dim(s, g);
  const bool keep = g.pct(40);
  static const char* texts[] = {"std::get<0>(tb::max(y, %d, %k))", "std::get<0>(tb::min(y, %d, %k))",
                                "tb::prod(y, %d, %k)", "tb::cumsum(y, %d)", "tb::sum(y)"};
  std::string t = texts[k];
  if (auto p = t.find("%d"); p != std::string::npos) t.replace(p, 2, std::to_string(d));
  if (auto p = t.find("%k"); p != std::string::npos) t.replace(p, 2, keep ? "true" : "false");
  op.text = "y = " + t + ";";
  op.engine = [k, d, keep](const ETensor& y) {
    switch (k) {
      case 0: return std::get<0>(tb::max(y, d, keep));
      case 1: return std::get<0>(tb::min(y, d, keep));
      case 2: return tb::prod(y, d, keep);
      case 3: return tb::cumsum(y, d);
      default: return tb::sum(y);
    }
  };
  op.ref = [k, d, keep](const RTensor& y) {
    switch (k) {
      case 0: return std::get<0>(R::max(y, d, keep));
      case 1: return std::get<0>(R::min(y, d, keep));
      case 2: return R::prod(y, d, keep);
      case 3: return R::cumsum(y, d);
      default: return R::sum(y);
    }
  };
  return true;
}

// A shape of the same numel: all flat, a dim split in two, two neighbours merged, or a -1.
Shape reshaped(const Shape& s, Rng& g) {
  const int64_t n = core::checked_numel(s, "opfuzz");
  const int64_t nd = nd_of(s);
  switch (g.below(4)) {
    case 0: return {n};
    case 1:
      if (nd >= 1) {
        const int64_t d = g.below(nd);
        for (int64_t f : {2, 3})
          if (s[size_t(d)] % f == 0 && s[size_t(d)] > 0) {
            Shape r = s;
            r[size_t(d)] /= f;
            r.insert(r.begin() + d + 1, f);
            return r;
          }
      }
      return {n};
    case 2:
      if (nd >= 2) {
        const int64_t d = g.below(nd - 1);
        Shape r = s;
        r[size_t(d)] *= r[size_t(d + 1)];
        r.erase(r.begin() + d + 1);
        return r;
      }
      return {n};
    default: {
      Shape r = s;
      if (nd >= 1) r[size_t(g.below(nd))] = -1;
      return r;
    }
  }
}

bool mk_view(const Shape& s, DType, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int k = int(g.below(14));
  switch (k) {
    case 0:
    case 1: {  // view / reshape
      const Shape to = reshaped(s, g);
      const bool view = k == 0;
      op.text = str("y = y.", view ? "view(" : "reshape(", list(to), ");");
      op.engine = [to, view](const ETensor& y) { return view ? y.view(to) : y.reshape(to); };
      op.ref = [to, view](const RTensor& y) { return view ? R::view(y, to) : R::reshape(y, to); };
      return true;
    }
    case 2: {
      const int64_t a = pick_dim(s, g), b = pick_dim(s, g);
      op.text = str("y = y.transpose(", a, ", ", b, ");");
      op.engine = [a, b](const ETensor& y) { return y.transpose(a, b); };
      op.ref = [a, b](const RTensor& y) { return R::transpose(y, a, b); };
      return true;
    }
    case 3: {
      Shape perm = Shape(size_t(nd));
      for (int64_t d = 0; d < nd; ++d) perm[size_t(d)] = d;
      for (int64_t d = nd - 1; d > 0; --d) std::swap(perm[size_t(d)], perm[size_t(g.below(d + 1))]);
      op.text = str("y = y.permute(", list(perm), ");");
      op.engine = [perm](const ETensor& y) { return y.permute(perm); };
      op.ref = [perm](const RTensor& y) { return R::permute(y, perm); };
      return true;
    }
    case 4: {  // expand: size-1 dims grow, maybe a new leading dim
      Shape to = s;
      for (int64_t& v : to)
        if (v == 1 && g.pct(60)) v = 3;
      if (g.pct(40)) to.insert(to.begin(), 2);
      op.text = str("y = y.expand(", list(to), ");");
      op.engine = [to](const ETensor& y) { return y.expand(to); };
      op.ref = [to](const RTensor& y) { return R::expand(y, to); };
      return true;
    }
    case 5:
    case 6: {  // narrow / slice with a step
      const int64_t d = pick_dim(s, g);
      const int64_t n = nd == 0 ? 1 : s[size_t(d < 0 ? d + nd : d)];
      const int64_t start = g.below(n + 1), len = g.below(n - start + 1), step = 1 + g.below(3);
      if (k == 5) {
        op.text = str("y = y.narrow(", d, ", ", start, ", ", len, ");");
        op.engine = [d, start, len](const ETensor& y) { return y.narrow(d, start, len); };
        op.ref = [d, start, len](const RTensor& y) { return R::narrow(y, d, start, len); };
      } else {
        op.text = str("y = y.slice(", d, ", ", start, ", ", start + len, ", ", step, ");");
        op.engine = [d, start, len, step](const ETensor& y) { return y.slice(d, start, start + len, step); };
        op.ref = [d, start, len, step](const RTensor& y) { return R::slice(y, d, start, start + len, step); };
      }
      return true;
    }
    case 7: {
      const int64_t d = pick_dim(s, g);
      const int64_t n = nd == 0 ? 1 : s[size_t(d < 0 ? d + nd : d)];
      const int64_t i = g.below(std::max<int64_t>(n, 1)) - (g.pct(30) ? n : 0);
      op.text = str("y = y.select(", d, ", ", i, ");");
      op.engine = [d, i](const ETensor& y) { return y.select(d, i); };
      op.ref = [d, i](const RTensor& y) { return R::select(y, d, i); };
      return true;
    }
    case 8: {
      const bool all = g.pct(40);
      const int64_t d = pick_dim(s, g);
      op.text = all ? "y = y.squeeze();" : str("y = y.squeeze(", d, ");");
      op.engine = [all, d](const ETensor& y) { return all ? y.squeeze() : y.squeeze(d); };
      op.ref = [all, d](const RTensor& y) { return all ? R::squeeze(y) : R::squeeze(y, d); };
      return true;
    }
    case 9: {
      const int64_t d = g.below(nd + 1) - (g.pct(30) ? nd + 1 : 0);
      op.text = str("y = y.unsqueeze(", d, ");");
      op.engine = [d](const ETensor& y) { return y.unsqueeze(d); };
      op.ref = [d](const RTensor& y) { return R::unsqueeze(y, d); };
      return true;
    }
    case 10: {
      const int64_t a = pick_dim(s, g), b = pick_dim(s, g);
      op.text = str("y = y.flatten(", a, ", ", b, ");");
      op.engine = [a, b](const ETensor& y) { return y.flatten(a, b); };
      op.ref = [a, b](const RTensor& y) { return R::flatten(y, a, b); };
      return true;
    }
    case 11: {
      const int64_t d = pick_dim(s, g), size = 1 + g.below(3), piece = g.below(3);
      op.text = str("y = tb::split(y, ", size, ", ", d, ")[", piece, "];  // the piece, if there is one");
      op.engine = [d, size, piece](const ETensor& y) {
        auto parts = tb::split(y, size, d);
        return parts.empty() ? y : parts[size_t(std::min<int64_t>(piece, int64_t(parts.size()) - 1))];
      };
      op.ref = [d, size, piece](const RTensor& y) {
        auto parts = R::split(y, size, d);
        return parts.empty() ? y : parts[size_t(std::min<int64_t>(piece, int64_t(parts.size()) - 1))];
      };
      return true;
    }
    case 12: {
      op.text = "y = y.t();";
      op.engine = [](const ETensor& y) { return y.t(); };
      op.ref = [](const RTensor& y) { return R::t(y); };
      return true;
    }
    default: {
      const bool clone = g.pct(50);
      op.text = clone ? "y = y.clone();" : "y = y.contiguous();";
      op.engine = [clone](const ETensor& y) { return clone ? y.clone() : y.contiguous(); };
      op.ref = [clone](const RTensor& y) { return clone ? R::clone(y) : R::contiguous(y); };
      return true;
    }
  }
}

bool mk_matmul(const Shape& s, DType dt, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int64_t K = nd == 0 ? 2 : s.back();
  const int64_t N = std::vector<int64_t>{0, 1, 3, 4}[size_t(g.below(4))];
  const int k = int(g.below(4));
  if (k <= 1) {  // matmul with a matrix, a vector, or a batch that broadcasts
    Shape bs = g.pct(25) ? Shape{K} : Shape{K, N};
    if (k == 1 && nd >= 3) bs.insert(bs.begin(), g.pct(50) ? s[size_t(nd - 3)] : 1);
    Extra b = extra(bs, dt, g);
    op.text = str("y = tb::matmul(y, ", b.text, ");");
    op.engine = [b](const ETensor& y) { return tb::matmul(y, b.e); };
    op.ref = [b](const RTensor& y) { return R::matmul(y, b.r); };
    return true;
  }
  Extra w = extra({N, K}, dt, g);
  const bool bias = g.pct(60);
  Extra b = extra({N}, dt, g);
  const bool relu = k == 3;
  op.text = relu ? str("y = tb::linear_relu(y, ", w.text, bias ? ", " + b.text : "", ");  // LibTorch: relu(linear)")
                 : str("y = tb::linear(y, ", w.text, bias ? ", " + b.text : "", ");");
  op.engine = [w, b, bias, relu](const ETensor& y) {
    return relu ? tb::linear_relu(y, w.e, bias ? b.e : ETensor()) : tb::linear(y, w.e, bias ? b.e : ETensor());
  };
  op.ref = [w, b, bias, relu](const RTensor& y) {
    RTensor out = R::linear(y, w.r, bias ? b.r : RTensor());
    return relu ? R::relu(out) : out;
  };
  return true;
}

bool mk_softmax(const Shape& s, DType, Rng& g, Op& op) {
  const int64_t d = pick_dim(s, g);
  const bool log = g.pct(50);
  op.text = str("y = A::", log ? "log_softmax" : "softmax", "(y, ", d, ");");
  op.engine = [d, log](const ETensor& y) { return log ? tb::log_softmax(y, d) : tb::softmax(y, d); };
  op.ref = [d, log](const RTensor& y) { return log ? R::log_softmax(y, d) : R::softmax(y, d); };
  return true;
}

bool mk_norm(const Shape& s, DType dt, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const bool affine = g.pct(50);
  // float32 near-constant groups: LibTorch's own float32 backward cancels terms of size rstd^3
  // (rstd = 1/sqrt(eps) = 316 at the default eps), an error no tolerance can tell from a fault;
  // a larger eps keeps float32 rows comparable. float64 rows keep the default.
  const double eps = dt == DType::Float32 ? 1e-3 : 1e-5;
  if (g.pct(50) || nd < 2) {
    const int64_t k = nd == 0 ? 0 : 1 + g.below(std::min<int64_t>(nd, 2));
    const Shape ns(s.end() - k, s.end());
    Extra w = extra(ns, dt, g), b = extra(ns, dt, g);
    op.text = str("y = tb::layer_norm(y, ", list(ns), ", ", affine ? w.text : "{}", ", ", affine ? b.text : "{}", ", ",
                  eps, ");");
    op.engine = [ns, w, b, affine, eps](const ETensor& y) {
      return tb::layer_norm(y, ns, affine ? w.e : ETensor(), affine ? b.e : ETensor(), eps);
    };
    op.ref = [ns, w, b, affine, eps](const RTensor& y) {
      return R::layer_norm(y, ns, affine ? w.r : RTensor(), affine ? b.r : RTensor(), eps);
    };
    return true;
  }
  const int64_t C = s[1];
  std::vector<int64_t> divisors;
  for (int64_t G = 1; G <= std::max<int64_t>(C, 1); ++G)
    if (C % G == 0) divisors.push_back(G);
  const int64_t G = divisors[size_t(g.below(int64_t(divisors.size())))];
  Extra w = extra({C}, dt, g), b = extra({C}, dt, g);
  // A constant group now and then: PyTorch normalises it to exactly 0.
  const bool constant = g.pct(30);
  op.engine = [G, w, b, affine, constant, eps](const ETensor& y0) {
    const ETensor y = constant ? tb::add(tb::mul(y0, 0.0), 0.3) : y0;
    return tb::group_norm(y, G, affine ? w.e : ETensor(), affine ? b.e : ETensor(), eps);
  };
  op.ref = [G, w, b, affine, constant, eps](const RTensor& y0) {
    const RTensor y = constant ? R::add(R::mul(y0, 0.0), 0.3) : y0;
    return R::group_norm(y, G, affine ? w.r : RTensor(), affine ? b.r : RTensor(), eps);
  };
  op.text = str(constant ? "y = tb::add(tb::mul(y, 0.0), 0.3); " : "", "y = tb::group_norm(y, ", G, ", ",
                affine ? w.text : "{}", ", ", affine ? b.text : "{}", ", ", eps, ");");
  return true;
}

bool mk_loss(const Shape& s, DType dt, Rng& g, Op& op) {
  static const char* reds[] = {"mean", "sum", "none"};
  const std::string red = reds[g.below(3)];
  const int k = int(g.below(5));
  const int64_t nd = nd_of(s);
  if (k <= 2) {
    Extra t = extra(s, dt, g);
    if (k == 2) {  // targets in [0, 1]
      t.e = tb::sigmoid(t.e).detach();
      t.r = R::to_ref(t.e);
      t.text = "tb::sigmoid(" + t.text + ")";
    }
    static const char* names[] = {"mse_loss", "l1_loss", "binary_cross_entropy_with_logits"};
    op.text = str("y = A::", names[k], "(y, ", t.text, ", \"", red, "\");");
    op.engine = [k, t, red](const ETensor& y) {
      if (k == 0) return tb::mse_loss(y, t.e, red);
      if (k == 1) return tb::l1_loss(y, t.e, red);
      return tb::binary_cross_entropy_with_logits(y, t.e, ETensor(), red);
    };
    op.ref = [k, t, red](const RTensor& y) {
      if (k == 0) return R::mse_loss(y, t.r, red);
      if (k == 1) return R::l1_loss(y, t.r, red);
      return R::binary_cross_entropy_with_logits(y, t.r, RTensor(), red);
    };
    return true;
  }
  // Class losses: input (N, C, ...) or (C); targets of the input's shape without dim 1 (or 0-dim).
  const int64_t C = nd == 0 ? 1 : nd == 1 ? s[0] : s[1];
  Shape ts = s;
  if (nd == 1) ts.clear();
  else if (nd >= 2) ts.erase(ts.begin() + 1);
  Extra t = index_extra(ts, C, g);
  const bool ce = k == 3;
  op.text = str("y = A::", ce ? "cross_entropy" : "nll_loss", "(y, ", t.text, ", {}, \"", red, "\");");
  op.engine = [ce, t, red](const ETensor& y) {
    return ce ? tb::cross_entropy(y, t.e, ETensor(), red) : tb::nll_loss(y, t.e, ETensor(), red);
  };
  op.ref = [ce, t, red](const RTensor& y) {
    return ce ? R::cross_entropy(y, t.r, RTensor(), red) : R::nll_loss(y, t.r, RTensor(), red);
  };
  return true;
}

bool mk_tri(const Shape&, DType, Rng& g, Op& op) {
  const int64_t k = g.below(5) - 2;
  const bool lower = g.pct(50);
  op.text = str("y = A::", lower ? "tril" : "triu", "(y, ", k, ");");
  op.engine = [k, lower](const ETensor& y) { return lower ? tb::tril(y, k) : tb::triu(y, k); };
  op.ref = [k, lower](const RTensor& y) { return lower ? R::tril(y, k) : R::triu(y, k); };
  return true;
}

bool mk_index(const Shape& s, DType dt, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int64_t d = pick_dim(s, g);
  const int64_t wd = nd == 0 ? 0 : (d < 0 ? d + nd : d);
  const int64_t n = nd == 0 ? 1 : s[size_t(wd)];
  const int k = int(g.below(5));
  switch (k) {
    case 0: {
      Extra idx = index_extra({g.below(5)}, n, g);
      op.text = str("y = tb::index_select(y, ", d, ", ", idx.text, ");");
      op.engine = [d, idx](const ETensor& y) { return tb::index_select(y, d, idx.e); };
      op.ref = [d, idx](const RTensor& y) { return R::index_select(y, d, idx.r); };
      return true;
    }
    case 1: {
      Shape is = s;
      if (nd > 0) is[size_t(wd)] = g.below(4);
      Extra idx = index_extra(is, n, g);
      op.text = str("y = tb::gather(y, ", d, ", ", idx.text, ");");
      op.engine = [d, idx](const ETensor& y) { return tb::gather(y, d, idx.e); };
      op.ref = [d, idx](const RTensor& y) { return R::gather(y, d, idx.r); };
      return true;
    }
    case 2: {
      const int64_t len = g.below(4);
      Extra idx = index_extra({len}, n, g);
      Shape ss = s;
      if (nd > 0) ss[size_t(wd)] = len;
      Extra src = extra(ss, dt, g);
      op.text = str("y = tb::index_add(y, ", d, ", ", idx.text, ", ", src.text, ");");
      op.engine = [d, idx, src](const ETensor& y) { return tb::index_add(y, d, idx.e, src.e); };
      op.ref = [d, idx, src](const RTensor& y) { return R::index_add(y, d, idx.r, src.r); };
      return true;
    }
    case 3: {
      Shape is = s;
      if (nd > 0) is[size_t(wd)] = g.below(std::max<int64_t>(n, 1) + 1);
      Extra idx = index_extra(is, n, g), src = extra(is, dt, g);
      op.text = str("y = tb::scatter_add(y, ", d, ", ", idx.text, ", ", src.text, ");");
      op.engine = [d, idx, src](const ETensor& y) { return tb::scatter_add(y, d, idx.e, src.e); };
      op.ref = [d, idx, src](const RTensor& y) { return R::scatter_add(y, d, idx.r, src.r); };
      return true;
    }
    default: {
      op.text = "y = tb::masked_fill(y, tb::gt(y, 0.3), 1.5);";
      op.engine = [](const ETensor& y) { return tb::masked_fill(y, tb::gt(y, 0.3), 1.5); };
      op.ref = [](const RTensor& y) { return R::masked_fill(y, R::gt(y, 0.3), 1.5); };
      return true;
    }
  }
}

bool mk_join(const Shape& s, DType dt, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int k = int(g.below(3));
  const int64_t d = pick_dim(s, g);
  if (k == 0) {
    Shape os = s;
    if (nd > 0) os[size_t(d < 0 ? d + nd : d)] = g.below(3);
    Extra b = extra(os, dt, g);
    op.text = str("y = tb::cat({y, ", b.text, "}, ", d, ");");
    op.engine = [b, d](const ETensor& y) { return tb::cat({y, b.e}, d); };
    op.ref = [b, d](const RTensor& y) { return R::cat({y, b.r}, d); };
    return true;
  }
  if (k == 1) {
    Extra b = extra(s, dt, g);
    const int64_t sd = g.below(nd + 1);
    op.text = str("y = tb::stack({y, ", b.text, "}, ", sd, ");");
    op.engine = [b, sd](const ETensor& y) { return tb::stack({y, b.e}, sd); };
    op.ref = [b, sd](const RTensor& y) { return R::stack({y, b.r}, sd); };
    return true;
  }
  Shape reps(size_t(nd + g.below(2)), 1);
  for (int64_t& r : reps) r = 1 + g.below(2) - (g.pct(5) ? 1 : 0);
  op.text = str("y = tb::repeat(y, ", list(reps), ");");
  op.engine = [reps](const ETensor& y) { return tb::repeat(y, reps); };
  op.ref = [reps](const RTensor& y) { return R::repeat(y, reps); };
  return true;
}

bool mk_pad(const Shape& s, DType, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int k = int(g.below(3));
  static const char* modes[] = {"constant", "reflect", "replicate"};
  const std::string mode = modes[k];
  const int64_t np = nd >= 3 && g.pct(40) ? 2 : 1;
  Shape pads;
  for (int64_t i = 0; i < 2 * np; ++i) {
    const int64_t d = nd - 1 - i / 2;
    const int64_t n = d >= 0 ? s[size_t(d)] : 1;
    pads.push_back(k == 0 ? g.below(4) - 1 : k == 1 ? g.below(std::max<int64_t>(n, 1)) : g.below(3));
  }
  op.text = str("y = tb::pad(y, ", list(pads), ", \"", mode, "\");");
  op.engine = [pads, mode](const ETensor& y) { return tb::pad(y, pads, mode); };
  op.ref = [pads, mode](const RTensor& y) { return R::pad(y, pads, mode); };
  return true;
}

// In-place ops: on the running value itself or on a view of it (refused on the input leaf and
// its views; CopySlices elsewhere).
bool mk_inplace(const Shape& s, DType, Rng& g, Op& op) {
  const int64_t nd = nd_of(s);
  const int k = int(g.below(3));
  const bool clone_first = g.pct(50);
  const int64_t d = pick_dim(s, g);
  const std::string pre = clone_first ? "y = y.clone(); " : "";
  if (k == 0 || nd == 0) {
    op.text = pre + "tb::mul_(y, 2.0);";
    op.engine = [clone_first](const ETensor& y0) {
      ETensor y = clone_first ? y0.clone() : y0;
      tb::mul_(y, 2.0);
      return y;
    };
    op.ref = [clone_first](const RTensor& y0) {
      RTensor y = clone_first ? R::clone(y0) : y0;
      R::mul_inplace(y, 2.0);
      return y;
    };
    return true;
  }
  const int64_t n = s[size_t(d < 0 ? d + nd : d)];
  const int64_t len = g.below(n + 1);
  op.text = pre +
            str("{ Tensor v = y.narrow(", d, ", 0, ", len, "); ", k == 1 ? "tb::mul_(v, 2.0);" : "tb::exp_(v);", " }");
  op.engine = [clone_first, d, len, k](const ETensor& y0) {
    ETensor y = clone_first ? y0.clone() : y0;
    ETensor v = y.narrow(d, 0, len);
    if (k == 1) tb::mul_(v, 2.0);
    else tb::exp_(v);
    return y;
  };
  op.ref = [clone_first, d, len, k](const RTensor& y0) {
    RTensor y = clone_first ? R::clone(y0) : y0;
    RTensor v = R::narrow(y, d, 0, len);
    if (k == 1) R::mul_inplace(v, 2.0);
    else R::exp_(v);
    return y;
  };
  return true;
}

struct Kind {
  const char* name;
  Maker make;
  int weight;
};
const Kind kKinds[] = {
    {"unary", mk_unary, 10},    {"binary", mk_binary, 10}, {"scalar", mk_scalar, 4},
    {"where", mk_where, 2},     {"reduce", mk_reduce, 8},  {"reduce_dim", mk_reduce_dim, 5},
    {"view", mk_view, 22},      {"matmul", mk_matmul, 7},  {"softmax", mk_softmax, 3},
    {"norm", mk_norm, 4},       {"loss", mk_loss, 4},      {"tri", mk_tri, 3},
    {"index", mk_index, 6},     {"join", mk_join, 4},      {"pad", mk_pad, 3},
    {"inplace", mk_inplace, 4},
};

int pick_kind(Rng& g) {
  int total = 0;
  for (const Kind& k : kKinds) total += k.weight;
  int r = int(g.below(total));
  for (int i = 0; i < int(std::size(kKinds)); ++i) {
    if (r < kKinds[i].weight) return i;
    r -= kKinds[i].weight;
  }
  return 0;
}

// ---- compositions ----

struct Program {
  uint64_t seed = 0;
  DType dtype = DType::Float64;
  Shape shape;
  Lay lay = Lay::Contiguous;
  uint64_t input_seed = 0;
  std::vector<std::pair<int, uint64_t>> steps;  // (kind, the step's seed)
};

Program generate(uint64_t seed) {
  Rng g(seed);
  Program p;
  p.seed = seed;
  p.dtype = g.pct(70) ? DType::Float64 : DType::Float32;
  const int64_t nd = g.below(5);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t r = g.below(100);
    p.shape.push_back(r < 7 ? 0 : r < 27 ? 1 : 2 + g.below(4));
  }
  p.lay = Lay(g.below(5));
  p.input_seed = g.next();
  const int64_t n = 3 + g.below(6);
  for (int64_t i = 0; i < n; ++i) {
    const int kind = pick_kind(g);
    p.steps.push_back({kind, g.next()});
  }
  return p;
}

struct Outcome {
  bool fail = false;
  bool errored = false;          // both sides raised (error parity held)
  bool ill_conditioned = false;  // values or grad apart, but so are LibTorch's own under rounding noise
  std::string kind;              // what disagreed: error, shape, values, layout, requires_grad, grad
  std::string detail;
  std::vector<std::string> lines;  // the composition as C++
};

// The text a crash handler prints: the composition being run (see install_crash_report).
std::string g_running;

void note_running(const Program& p, const std::vector<std::string>& lines) {
  g_running = str("opfuzz: crashed in composition ", hex(p.seed), ":\n");
  for (const std::string& l : lines) g_running += "  " + l + "\n";
}

void crash_report(int sig) {
  const ssize_t rc = ::write(2, g_running.data(), g_running.size());
  (void)rc;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct CrashReport {
  using Handler = void (*)(int);
  Handler old[5];
  static constexpr int kSignals[5] = {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT};
  CrashReport() {
    for (int i = 0; i < 5; ++i) old[i] = std::signal(kSignals[i], crash_report);
  }
  ~CrashReport() {
    for (int i = 0; i < 5; ++i) std::signal(kSignals[i], old[i]);
  }
};

std::string shape_text(const Shape& s) { return core::to_string(s); }

Tolerance chain_tolerance(DType dt, bool grad) {
  // A chain of ops rounds several times (and a gradient passes through each op's backward):
  // torch.testing's one-op tolerances, ten times wider.
  Tolerance t = grad ? grad_tolerance(dt) : default_tolerance(dt);
  return {t.rtol * 10, t.atol * 10};
}

bool values_match(const ETensor& a, const ETensor& b, Tolerance tol, std::string& why) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) {
    why = str("engine ", core::name(a.dtype()), shape_text(a.sizes()), " vs LibTorch ", core::name(b.dtype()),
              shape_text(b.sizes()));
    return false;
  }
  const Diff d = compare_values(a, b, tol);
  if (d.mismatches == 0) return true;
  why = str(d.mismatches, " of ", a.numel(), " elements outside rtol=", tol.rtol, " atol=", tol.atol, "; first ",
            d.first);
  return false;
}

// Which views of the result succeed: flat, and the first two dims merged.
std::vector<Shape> view_probes(const Shape& s) {
  std::vector<Shape> probes = {{-1}};
  if (s.size() >= 2) {
    Shape m(s.begin() + 1, s.end());
    m[0] *= s[0];
    probes.push_back(m);
  }
  if (s.size() >= 3) {
    Shape m(s.begin(), s.end() - 1);
    m.back() *= s.back();
    probes.push_back(m);
  }
  return probes;
}

// LibTorch failures that are LibTorch's defects, not behaviour to match: nll_loss2d's backward
// demands a contiguous input (pytorch/pytorch "grad_input must be contiguous" for a permuted
// (N, C, H, W) input; the forward accepts it). A composition that meets one is not compared.
bool libtorch_defect(const std::string& what) {
  return what.find("grad_input must be contiguous") != std::string::npos;
}

// The weights w of the backward of sum(result * w), one set per composition.
ETensor fuzz_weights(const Program& p, const Shape& sizes, DType dtype) {
  core::Generator wgen(p.seed ^ 0xA5A5A5A5ull);
  return randn(sizes, DType::Float64, &wgen).to(dtype);
}

// Note [Ill-conditioned compositions]
// Some compositions decide their result by cancellation: layer_norm over two elements then
// summed, a variance of equal values, a division by a difference near zero. Engine and LibTorch
// round differently (both correctly), the chain amplifies it, and the results differ by more
// than any tolerance. Such a composition cannot be judged at this precision, so before a values
// or grad mismatch counts, LibTorch runs it again on the input times (1 + u * 16 eps), u uniform
// in [-1, 1] per element (rounding-sized noise): if LibTorch's own two results disagree under
// the same tolerance, the composition is ill-conditioned and is counted as such, not as a
// failure. A fault in the engine is not hidden by it: LibTorch's result is stable there.
//
// Whether LibTorch's result (grad: its input gradient, `clean` either way: what run_program got
// from LibTorch on the noise-free input; zeros where it had none) moves past `tol` when the
// composition is run again on the noisy input.
bool ill_conditioned(const Program& p, bool grad, const ETensor& clean, Tolerance tol) {
  ETensor x = fuzz_tensor(p.shape, p.dtype, p.lay, p.input_seed);
  {
    A::NoGradGuard no_grad;
    core::Generator gen(p.seed ^ 0x5EED5EEDull);
    const double eps = p.dtype == DType::Float64 ? 0x1p-52 : 0x1p-23;
    const ETensor u = tb::sub(tb::mul(rand(x.sizes(), DType::Float64, &gen), 2.0), 1.0);
    x = tb::mul(x.to(DType::Float64), tb::add(tb::mul(u, 16 * eps), 1.0)).to(p.dtype);
  }
  RTensor xr = R::to_ref(x);
  R::requires_grad_(xr);
  RTensor r = xr;
  try {
    for (const auto& [kind, step_seed] : p.steps) {
      Rng g(step_seed);
      Op op;
      if (!kKinds[kind].make(r.sizes(), p.dtype, g, op)) continue;
      r = op.ref(r);
    }
    if (grad) {
      if (R::requires_grad(r)) R::backward(R::sum(R::mul(r, R::to_ref(fuzz_weights(p, r.sizes(), r.dtype())))));
      r = R::grad_of(xr);
    }
  } catch (const std::exception&) {
    // The noisy input is a plain tensor, whatever the layout of the original: should that make a
    // step raise, the composition is judged as usual (nothing is set aside on a layout's account).
    return false;
  }
  const ETensor noisy = r.defined() ? R::from_ref(r) : zeros(clean.sizes(), clean.dtype());
  std::string why;
  return !values_match(clean, noisy, tol, why);
}

Outcome run_program(const Program& p) {
  Outcome o;
  auto fail = [&](std::string kind, std::string detail) {
    o.fail = true;
    o.kind = std::move(kind);
    o.detail = std::move(detail);
    return o;
  };
  o.lines.push_back(str("Tensor y = ", tensor_text(p.shape, p.dtype, p.lay, p.input_seed), ";"));
  o.lines.push_back("Tensor x = y;  // the leaf");
  o.lines.push_back("x.requires_grad_();");
  ETensor x = fuzz_tensor(p.shape, p.dtype, p.lay, p.input_seed);
  RTensor xr = R::to_ref(x);
  x.requires_grad_();
  R::requires_grad_(xr);
  ETensor e = x;
  RTensor r = xr;
  for (const auto& [kind, step_seed] : p.steps) {
    Rng g(step_seed);
    Op op;
    if (!kKinds[kind].make(e.sizes(), p.dtype, g, op)) continue;
    o.lines.push_back(op.text);
    note_running(p, o.lines);
    ETensor ne;
    RTensor nr;
    std::string eerr, rerr;
    try {
      ne = op.engine(e);
    } catch (const core::Error& err) {
      eerr = err.what();
    } catch (const std::exception& err) {
      return fail("error", str("the engine threw a non-core::Error exception: ", err.what()));
    }
    try {
      nr = op.ref(r);
    } catch (const std::exception& err) {
      rerr = err.what();
      if (rerr.empty()) rerr = "(no message)";
    }
    if (!eerr.empty() && !rerr.empty()) {
      o.errored = true;
      return o;
    }
    if (!rerr.empty() && libtorch_defect(rerr)) return o;
    if (op.ref_defect && op.ref_defect(r)) return o;  // Note [LibTorch's value defects]
    if (!eerr.empty())
      return fail("error", str("the engine raised where LibTorch returned ", shape_text(nr.sizes()), ": ", eerr));
    if (!rerr.empty())
      return fail("error",
                  str("LibTorch raised where the engine returned ", shape_text(ne.sizes()), ": ", rerr.substr(0, 300)));
    if (ne.sizes() != nr.sizes() || ne.dtype() != nr.dtype())
      return fail("shape", str("engine ", core::name(ne.dtype()), shape_text(ne.sizes()), " vs LibTorch ",
                               core::name(nr.dtype()), shape_text(nr.sizes())));
    e = ne;
    r = nr;
  }
  std::string why;
  if (!values_match(e, R::from_ref(r), chain_tolerance(p.dtype, false), why)) {
    if (!ill_conditioned(p, false, R::from_ref(r), chain_tolerance(p.dtype, false))) return fail("values", why);
    o.ill_conditioned = true;  // the layout and the gradient are still compared
  }
  for (const Shape& probe : view_probes(e.sizes())) {
    bool ev = true, rv = true;
    try {
      (void)e.view(probe);
    } catch (const core::Error&) {
      ev = false;
    }
    try {
      (void)R::view(r, probe);
    } catch (const std::exception&) {
      rv = false;
    }
    if (ev != rv)
      return fail("layout", str(".view(", list(probe), ") ", ev ? "works" : "fails",
                                " on the engine's result (strides ", shape_text(e.strides()), ") and ",
                                rv ? "works" : "fails", " on LibTorch's (strides ", shape_text(r.strides()), ")"));
  }
  const bool erg = e.requires_grad(), rrg = R::requires_grad(r);
  if (erg != rrg)
    return fail("requires_grad", str("the result requires grad on ", erg ? "the engine" : "LibTorch", " only"));
  if (!erg) return o;
  o.lines.push_back("tb::sum(tb::mul(y, fuzz_weight(y))).backward();");
  note_running(p, o.lines);
  const ETensor w = fuzz_weights(p, e.sizes(), e.dtype());
  std::string eerr, rerr;
  try {
    tb::sum(tb::mul(e, w)).backward();
  } catch (const core::Error& err) {
    eerr = err.what();
  } catch (const std::exception& err) {
    return fail("error", str("backward threw a non-core::Error exception: ", err.what()));
  }
  try {
    R::backward(R::sum(R::mul(r, R::to_ref(w))));
  } catch (const std::exception& err) {
    rerr = err.what();
    if (rerr.empty()) rerr = "(no message)";
  }
  if (!eerr.empty() && !rerr.empty()) {
    o.errored = true;
    return o;
  }
  if (!rerr.empty() && libtorch_defect(rerr)) return o;
  if (!eerr.empty()) return fail("error", "the engine's backward raised where LibTorch's did not: " + eerr);
  if (!rerr.empty())
    return fail("error", "LibTorch's backward raised where the engine's did not: " + rerr.substr(0, 300));
  ETensor g = x.grad();
  const RTensor rgr = R::grad_of(xr);
  ETensor rg = rgr.defined() ? R::from_ref(rgr) : ETensor();
  if (!g.defined() && !rg.defined()) return o;
  if (!g.defined()) {
    // A lost gradient reads as zeros only when LibTorch's is zero too.
    g = zeros(x.sizes(), x.dtype());
  }
  if (!rg.defined()) rg = zeros(x.sizes(), x.dtype());
  if (!values_match(g, rg, chain_tolerance(p.dtype, true), why)) {
    if (!ill_conditioned(p, true, rg, chain_tolerance(p.dtype, true)))
      return fail("grad", str("x.grad", x.grad().defined() ? "" : " (undefined on the engine)", ": ", why));
    o.ill_conditioned = true;
  }
  return o;
}

// Smaller compositions that fail the same way: steps dropped, dims shrunk or dropped, the layout
// made plain. Bounded in runs.
Program shrink(Program p, const std::string& kind) {
  int runs = 0;
  auto still = [&](const Program& q) {
    ++runs;
    const Outcome o = run_program(q);
    return o.fail && o.kind == kind;
  };
  bool progress = true;
  while (progress && runs < 400) {
    progress = false;
    for (size_t i = p.steps.size(); i-- > 0;) {
      Program q = p;
      q.steps.erase(q.steps.begin() + int64_t(i));
      if (still(q)) p = q, progress = true;
    }
    for (size_t d = 0; d < p.shape.size(); ++d)
      for (int64_t c : {int64_t(1), p.shape[d] / 2, p.shape[d] - 1})
        if (c >= 0 && c < p.shape[d]) {
          Program q = p;
          q.shape[d] = c;
          if (still(q)) {
            p = q, progress = true;
            break;
          }
        }
    for (size_t d = p.shape.size(); d-- > 0;) {
      Program q = p;
      q.shape.erase(q.shape.begin() + int64_t(d));
      if (still(q)) p = q, progress = true;
    }
    if (p.lay != Lay::Contiguous) {
      Program q = p;
      q.lay = Lay::Contiguous;
      if (still(q)) p = q, progress = true;
    }
  }
  return p;
}

std::string report(const Program& p, const Outcome& o) {
  std::string s = str(o.kind, " mismatch: ", o.detail, "\n  composition ", hex(p.seed), " (rerun it alone with ",
                      "TRAINBENCH_OPFUZZ_SEED=", hex(p.seed), "), shrunk to:\n");
  for (const std::string& l : o.lines) s += "    " + l + "\n";
  return s;
}

// ---- budget ----

struct Budget {
  int64_t compositions = 2000;
  double seconds = 60;
};

Budget budget_from_env() {
  Budget b;
  const std::optional<std::string> env = core::env_string("TRAINBENCH_OPFUZZ_BUDGET");  // unset or empty: default
  if (!env) return b;
  const std::string& v = *env;
  b.seconds = 1e30;
  b.compositions = int64_t(1) << 62;
  auto parse = [&](const std::string& part) {
    TB_CHECK(!part.empty(), "opfuzz", "TRAINBENCH_OPFUZZ_BUDGET='", v,
             "' is not <compositions>, <seconds>s or <compositions>,<seconds>s");
    if (part.back() == 's')  // seconds: any positive decimal number
      b.seconds = core::parse_double("TRAINBENCH_OPFUZZ_BUDGET seconds", part.substr(0, part.size() - 1), 1e-3, 1e9);
    else  // compositions: a whole number, so "0.5" cannot mean zero compositions and a passing run
      b.compositions = core::parse_int64("TRAINBENCH_OPFUZZ_BUDGET compositions", part, 1, int64_t(1e12));
  };
  const size_t comma = v.find(',');
  parse(v.substr(0, comma));
  if (comma != std::string::npos) parse(v.substr(comma + 1));
  return b;
}

// A seed as a failure prints it (0x-hex) or in decimal; strtoull's base 0 had read "010" as
// octal 8 and refused "08".
std::optional<uint64_t> seed_from_env(const char* var) {
  const std::optional<std::string> env = core::env_string(var);  // unset or empty: none
  if (!env) return std::nullopt;
  const std::string& v = *env;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    const std::string digits = v.substr(2);
    TB_CHECK(digits.size() <= 16 && digits.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos, "opfuzz",
             var, "='", v, "' is not an unsigned 64-bit integer (decimal, or 0x-hex as a failure prints it)");
    return std::stoull(digits, nullptr, 16);
  }
  return core::parse_uint64(var, v);
}

constexpr int kBatches = 10;

harness::Record run_batch(int batch) {
  return run_recorded(
      "opfuzz", str("opfuzz/batch", batch),
      [batch](harness::Record& rec) {
        const Budget b = budget_from_env();
        const uint64_t base = core::env_uint64("TRAINBENCH_SEED", 0);  // strict, as every suite
        const std::optional<uint64_t> one = seed_from_env("TRAINBENCH_OPFUZZ_SEED");
        const uint64_t only = one.value_or(0);
        rec.metrics["seed"] = double(base);
        const int64_t n = one ? (batch == 0 ? 1 : 0) : (b.compositions + kBatches - 1 - batch) / kBatches;
        const auto t0 = std::chrono::steady_clock::now();
        const double limit = b.seconds / kBatches;
        CrashReport crash_report_guard;
        int64_t ran = 0, errored = 0, failed = 0, ill = 0;
        std::vector<std::string> failures;
        // The base seed hashed first: splitmix steps by its own constant, so base * that constant
        // would make the stream of seed k the stream of seed 0 shifted by k.
        Rng seeds(Rng(base).next() ^ (uint64_t(batch) + 1) * 0xD1B54A32D192ED03ull);
        for (int64_t i = 0; i < n; ++i) {
          if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit) break;
          const uint64_t seed = one ? only : seeds.next();
          const Program p = generate(seed);
          Outcome o = run_program(p);
          ++ran;
          errored += o.errored;
          ill += o.ill_conditioned;
          if (!o.fail) continue;
          ++failed;
          if (failures.size() < 5) {
            const Program small = shrink(p, o.kind);
            const Outcome so = run_program(small);
            failures.push_back(report(small, so.fail ? so : o));
          }
        }
        g_running.clear();
        rec.metrics["compositions"] = double(ran);
        rec.metrics["error_parity"] = double(errored);
        rec.metrics["ill_conditioned"] = double(ill);  // Note [Ill-conditioned compositions]
        rec.metrics["failures"] = double(failed);
        rec.metrics["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (failed == 0) return;
        std::string msg = str(failed, " of ", ran, " compositions disagree with LibTorch (TRAINBENCH_SEED=", base, ")");
        for (const std::string& f : failures) msg += "\n" + f;
        throw CheckFailed(msg);
      },
      /*with_seed=*/false);
}

}  // namespace

std::vector<harness::TestCase> opfuzz_tests() {
  std::vector<harness::TestCase> tests;
  for (int b = 0; b < kBatches; ++b) tests.push_back({str("opfuzz/batch", b), [b] { return run_batch(b); }});
  return tests;
}

}  // namespace tb::suites
