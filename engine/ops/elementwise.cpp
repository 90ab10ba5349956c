// Elementwise family, part 1: the result plumbing shared by the family (Dest, result types) and
// the unary ops: math (exp ... sigmoid), neg/abs/sign, activations (relu, gelu, silu, softplus),
// predicates (isnan, isinf, isfinite) and logical_not. Binary arithmetic lives in
// cpu/elementwise_binary.cpp; comparisons, logical ops, clamp and where in cpu/elementwise_compare.cpp.
#include "engine/ops/elementwise.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "engine/ops/cpu/elementwise_detail.h"
#include "engine/ops/cpu/vec_math_sleef.h"
#include "engine/tensor/stride_order.h"

namespace tb::ops {

namespace ew {

namespace {
// Same element addresses for every index (size-1 dims may have any stride).
bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.storage_offset() != b.storage_offset() || a.itemsize() != b.itemsize() || a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

bool has_internal_overlap(const Tensor& t) {
  if (t.numel() == 0) return false;  // nothing to write twice: PyTorch counts empty tensors as dense
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) == 0) return true;
  return false;
}
}  // namespace

Tensor empty_like_inputs(const Shape& shape, DType dtype, std::initializer_list<Tensor> inputs, Setup setup) {
  if (shape.size() <= 1 || setup == Setup::Contiguous) return empty(shape, dtype);
  if (setup == Setup::Fast) {  // TensorIterator's fast setup, each test in its order (Note [Result layouts])
    const auto all = [&](auto pred) {
      for (const Tensor& t : inputs)
        if (t.defined() && !pred(t)) return false;
      return true;
    };
    if (all([](const Tensor& t) { return t.is_contiguous(); })) return empty(shape, dtype);
    if (shape.size() == 4 && all([](const Tensor& t) { return is_channels_last_contiguous(t); }))
      return empty_channels_last(shape, dtype);
    const Tensor* first = nullptr;
    for (const Tensor& t : inputs)
      if (t.defined() && !first) first = &t;
    if (all([&](const Tensor& t) { return is_non_overlapping_and_dense(t) && t.strides() == first->strides(); }))
      return empty_like_preserve(*first, dtype);
  }
  return empty_in_stride_order(shape, dtype, inputs);  // reorder_dimensions
}

std::vector<Tensor> in_storage_order(std::initializer_list<Tensor> operands) {
  std::vector<Tensor> out(operands);
  const Tensor& lead = out.front();
  if (lead.is_contiguous() || lead.dim() <= 1) return out;
  std::vector<int64_t> dims(size_t(lead.dim()));
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = int64_t(d);
  std::stable_sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return lead.stride(a) > lead.stride(b); });
  for (Tensor& t : out) {
    Shape sz, st;
    for (int64_t d : dims) sz.push_back(t.size(d)), st.push_back(t.stride(d));
    t = make_tensor(t.storage(), sz, st, t.storage_offset(), t.dtype(), "in_storage_order");
  }
  return out;
}

Dest::Dest(Tensor* out, bool inplace, const Shape& shape, DType rdt, const char* op,
           std::initializer_list<Tensor> inputs, Setup setup)
    : out_(out) {
  if (!out) {
    target_ = empty_like_inputs(shape, rdt, inputs, setup);
    return;
  }
  TB_CHECK(out->defined(), op, "undefined out= tensor");
  if (inplace)
    TB_CHECK(out->sizes() == shape, op, "output with shape ", core::to_string(out->sizes()),
             " doesn't match the broadcast shape ", core::to_string(shape));
  Tensor o = prepare_out(out, shape, rdt, op);
  TB_CHECK(!has_internal_overlap(o), op,
           "unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location; clone() the tensor first");
  bool alias = false;
  for (const Tensor& in : inputs) alias |= in.numel() > 0 && in.shares_storage(o) && !same_layout(in, o);
  if (o.dtype() == rdt && !alias) {
    target_ = o;
  } else {
    target_ = empty(shape, rdt);
    copy_back_ = true;
  }
}

Tensor Dest::result() {
  if (!out_) return target_;
  if (copy_back_) out_->copy_(target_);  // casts into out's dtype and bumps its version
  else out_->bump_version();
  return *out_;
}

}  // namespace ew

namespace {

using core::opmath_t;

// Calls f in the compute type M (bf16/f16 elements convert to float on the way in). A struct
// with an always-inlined call rather than a lambda: GCC otherwise leaves the math out of line in
// this big translation unit, and an out-of-line call stops the loop from vectorising.
template <typename M, typename F>
struct InM {
  F f;
  [[gnu::always_inline]] M operator()(M v) const { return f(v); }
};

// Floating math: integer and bool inputs compute in float32; bf16/f16 compute in float.
// f: a generic callable M -> M for M in {float, double}.
template <typename F>
Tensor float_unary(const char* op, const Tensor& x, Tensor* out, bool inplace, F f) {
  const BareKernel bare(op, {&x, out});
  TB_CHECK(x.defined(), op, "undefined input tensor");
  const DType cdt = to_float_dtype(x.dtype());
  return ew::unary(op, x, cdt, cdt, out, inplace, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch_floating(cdt, op, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (requires { F::kVec; }) cpu::vec_math_kernel<T, F::kVec>(loop);  // Note [Vector math from SLEEF]
      else cpu::cpu_kernel<T, T>(loop, InM<M, F>{f});
    });
  });
}

// Floating-only ops (activations): any other dtype is an error, as in LibTorch.
// LibTorch's out= forms of the dtype-preserving unary ops (neg, abs, sign, activations) take no
// cast: out must have the input's dtype.
void check_out_dtype(const Tensor& x, const Tensor* out, bool inplace, const char* op) {
  if (out && !inplace && out->defined())
    TB_CHECK(out->dtype() == x.dtype(), op, "found dtype ", core::name(out->dtype()), " but expected ",
             core::name(x.dtype()));
}

template <typename F>
Tensor floating_only(const char* op, const Tensor& x, Tensor* out, bool inplace, F f) {
  TB_CHECK(x.defined(), op, "undefined input tensor");
  TB_CHECK(core::is_floating(x.dtype()), op, "not implemented for dtype ", core::name(x.dtype()));
  check_out_dtype(x, out, inplace, op);
  return float_unary(op, x, out, inplace, f);
}

// Same-dtype numeric ops (neg, abs, relu): bool refused with `bool_msg`.
template <typename F>
Tensor numeric_unary(const char* op, const Tensor& x, Tensor* out, bool inplace, const char* bool_msg, F f) {
  const BareKernel bare(op, {&x, out});
  TB_CHECK(x.defined(), op, "undefined input tensor");
  TB_CHECK(x.dtype() != DType::Bool, op, bool_msg);
  check_out_dtype(x, out, inplace, op);
  const DType dt = x.dtype();
  return ew::unary(op, x, dt, dt, out, inplace, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch(dt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (!std::is_same_v<T, bool>) cpu::cpu_kernel<T, T>(loop, InM<M, F>{f});
    });
  });
}

struct Exp {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Exp;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::exp(v);
  }
};
struct Expm1 {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Expm1;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::expm1(v);
  }
};
struct Log {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Log;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::log(v);
  }
};
struct Log1p {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Log1p;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::log1p(v);
  }
};
struct Sqrt {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::sqrt(v);
  }
};
struct Rsqrt {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return M(1) / std::sqrt(v);
  }
};
struct Reciprocal {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return M(1) / v;
  }
};
struct Sin {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Sin;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::sin(v);
  }
};
struct Cos {
  static constexpr cpu::VecFn kVec = cpu::VecFn::Cos;
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return std::cos(v);
  }
};
struct Tanh {
#if defined(__AVX512F__)
  static constexpr cpu::VecFn kVec = cpu::VecFn::Tanh;  // Note [tanh of float on AVX-512]
#endif
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return ew::tanh_fast(v);
  }
};
// exp_fast: libm's expf is an out-of-line call that keeps the loop scalar (double: std::exp).
struct Sigmoid {
#if defined(__AVX512F__)
  static constexpr cpu::VecFn kVec = cpu::VecFn::Sigmoid;  // Note [sigmoid of float on AVX-512]
#endif
  // e^x / (1 + e^x) for x < 0: 1 / (1 + e^-x) gives 0 where e^-x overflows (x below -88.7 in
  // float, -709.8 in double) and the answer is a subnormal.
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    const M e = cpu::exp_fast(-std::fabs(v));
    return (v < M(0) ? e : M(1)) / (M(1) + e);
  }
};
struct Silu {
#if defined(__AVX512F__)
  static constexpr cpu::VecFn kVec = cpu::VecFn::Silu;  // x sigmoid(x), Note [sigmoid of float on AVX-512]
#endif
  // x e^x / (1 + e^x) for x < 0, as Sigmoid: x / (1 + e^-x) gave -0 below -88.7 in float, where
  // e^-x overflows and x e^x is still a normal float down to about -92.
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    const M e = cpu::exp_fast(-std::fabs(v));
    return (v < M(0) ? v * e : v) / (M(1) + e);
  }
};
struct GeluErf {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return ew::gelu_erf(v);
  }
};
struct GeluTanh {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return ew::gelu_tanh(v);
  }
};
struct Neg {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return ew::wneg(v);
  }
};
struct Abs {
  template <typename M>
  M operator()(M v) const {
    if constexpr (std::is_floating_point_v<M>) return std::fabs(v);
    else return v < 0 ? ew::wneg(v) : v;
  }
};
// NaN stays NaN (x < 0 is false), like LibTorch's clamp_min(x, 0).
struct Relu {
  template <typename M>
  [[gnu::always_inline]] M operator()(M v) const {
    return v < M(0) ? M(0) : v;
  }
};

// See Note [gelu table]. table[b] = gelu(the T whose bits are b), computed by the float path
// itself (the same machine code as smaller tensors run, so even NaN signs agree) over all 65536
// bit patterns; engine/ops/tests/gelu_table_test.cpp checks every input against that path.
template <typename T>
const uint16_t* gelu_table() {
  static const std::vector<uint16_t> table = [] {
    Tensor every = empty({65536}, core::dtype_of<T>);
    T* p = every.data_ptr<T>();
    for (uint32_t b = 0; b < 65536; ++b) p[b].bits = uint16_t(b);
    const Tensor res = floating_only("gelu", every, nullptr, false, GeluErf{});
    const T* r = res.data_ptr<T>();
    std::vector<uint16_t> bits(65536);
    for (uint32_t b = 0; b < 65536; ++b) bits[b] = r[b].bits;
    return bits;
  }();
  return table.data();
}

// gelu (erf form) of a bfloat16 or float16 tensor by table lookup; x: (any shape), any strides.
Tensor gelu_by_table(const char* op, const Tensor& x, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&x, out});
  check_out_dtype(x, out, inplace, op);
  const DType dt = x.dtype();
  const uint16_t* table = dt == DType::BFloat16 ? gelu_table<core::BFloat16>() : gelu_table<core::Half>();
  return ew::unary(op, x, dt, dt, out, inplace, ew::Setup::Fast, [table](const StridedLoop& loop) {
    loop.for_each([table](char** data, const int64_t* st, int64_t n) {
      // No __restrict__: in place, out and in are the same array (each element is read before
      // it is written, also in the unrolled loop, which loads all 8 before storing).
      uint16_t* o = reinterpret_cast<uint16_t*>(data[0]);
      const uint16_t* in = reinterpret_cast<const uint16_t*>(data[1]);
      if (st[0] == 2 && st[1] == 2) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          uint16_t v[8];
          for (int k = 0; k < 8; ++k) v[k] = table[in[i + k]];
          for (int k = 0; k < 8; ++k) o[i + k] = v[k];
        }
        for (; i < n; ++i) o[i] = table[in[i]];
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<uint16_t*>(data[0] +
                                     i * st[0]) = table[*reinterpret_cast<const uint16_t*>(data[1] + i * st[1])];
    });
  });
}

// gelu "none" of a big enough bfloat16/float16 tensor goes to gelu_by_table (Note [gelu table]).
bool use_gelu_table(const Tensor& x) {
  return x.defined() && core::is_reduced_float(x.dtype()) && x.numel() >= ew::kGeluTableMinNumel;
}

bool check_gelu_mode(const std::string& approximate, const char* op) {
  TB_CHECK(approximate == "none" || approximate == "tanh", op,
           "approximate argument must be either none or tanh, got '", approximate, "'");
  return approximate == "tanh";
}

constexpr const char* kNegBool =
    "negation, the `-` operator, on a bool tensor is not supported; use the `~` or `logical_not()` operator instead";
constexpr const char* kAbsBool = "not implemented for dtype bool";
constexpr const char* kReluBool = "not implemented for dtype bool";

}  // namespace

// ---- floating math ----
Tensor exp(const Tensor& x) { return float_unary("exp", x, nullptr, false, Exp{}); }
Tensor& exp_(Tensor& self) {
  float_unary("exp_", self, &self, true, Exp{});
  return self;
}
Tensor& exp_out(Tensor& out, const Tensor& x) {
  float_unary("exp_out", x, &out, false, Exp{});
  return out;
}
Tensor expm1(const Tensor& x) { return float_unary("expm1", x, nullptr, false, Expm1{}); }
Tensor& expm1_(Tensor& self) {
  float_unary("expm1_", self, &self, true, Expm1{});
  return self;
}
Tensor& expm1_out(Tensor& out, const Tensor& x) {
  float_unary("expm1_out", x, &out, false, Expm1{});
  return out;
}
Tensor log(const Tensor& x) { return float_unary("log", x, nullptr, false, Log{}); }
Tensor& log_(Tensor& self) {
  float_unary("log_", self, &self, true, Log{});
  return self;
}
Tensor& log_out(Tensor& out, const Tensor& x) {
  float_unary("log_out", x, &out, false, Log{});
  return out;
}
Tensor log1p(const Tensor& x) { return float_unary("log1p", x, nullptr, false, Log1p{}); }
Tensor& log1p_(Tensor& self) {
  float_unary("log1p_", self, &self, true, Log1p{});
  return self;
}
Tensor& log1p_out(Tensor& out, const Tensor& x) {
  float_unary("log1p_out", x, &out, false, Log1p{});
  return out;
}
Tensor sqrt(const Tensor& x) { return float_unary("sqrt", x, nullptr, false, Sqrt{}); }
Tensor& sqrt_(Tensor& self) {
  float_unary("sqrt_", self, &self, true, Sqrt{});
  return self;
}
Tensor& sqrt_out(Tensor& out, const Tensor& x) {
  float_unary("sqrt_out", x, &out, false, Sqrt{});
  return out;
}
Tensor rsqrt(const Tensor& x) { return float_unary("rsqrt", x, nullptr, false, Rsqrt{}); }
Tensor& rsqrt_(Tensor& self) {
  float_unary("rsqrt_", self, &self, true, Rsqrt{});
  return self;
}
Tensor& rsqrt_out(Tensor& out, const Tensor& x) {
  float_unary("rsqrt_out", x, &out, false, Rsqrt{});
  return out;
}
Tensor reciprocal(const Tensor& x) { return float_unary("reciprocal", x, nullptr, false, Reciprocal{}); }
Tensor& reciprocal_(Tensor& self) {
  float_unary("reciprocal_", self, &self, true, Reciprocal{});
  return self;
}
Tensor& reciprocal_out(Tensor& out, const Tensor& x) {
  float_unary("reciprocal_out", x, &out, false, Reciprocal{});
  return out;
}
Tensor sin(const Tensor& x) { return float_unary("sin", x, nullptr, false, Sin{}); }
Tensor& sin_(Tensor& self) {
  float_unary("sin_", self, &self, true, Sin{});
  return self;
}
Tensor& sin_out(Tensor& out, const Tensor& x) {
  float_unary("sin_out", x, &out, false, Sin{});
  return out;
}
Tensor cos(const Tensor& x) { return float_unary("cos", x, nullptr, false, Cos{}); }
Tensor& cos_(Tensor& self) {
  float_unary("cos_", self, &self, true, Cos{});
  return self;
}
Tensor& cos_out(Tensor& out, const Tensor& x) {
  float_unary("cos_out", x, &out, false, Cos{});
  return out;
}
Tensor tanh(const Tensor& x) { return float_unary("tanh", x, nullptr, false, Tanh{}); }
Tensor& tanh_(Tensor& self) {
  float_unary("tanh_", self, &self, true, Tanh{});
  return self;
}
Tensor& tanh_out(Tensor& out, const Tensor& x) {
  float_unary("tanh_out", x, &out, false, Tanh{});
  return out;
}
Tensor sigmoid(const Tensor& x) { return float_unary("sigmoid", x, nullptr, false, Sigmoid{}); }
Tensor& sigmoid_(Tensor& self) {
  float_unary("sigmoid_", self, &self, true, Sigmoid{});
  return self;
}
Tensor& sigmoid_out(Tensor& out, const Tensor& x) {
  float_unary("sigmoid_out", x, &out, false, Sigmoid{});
  return out;
}

// ---- neg, abs, sign ----
Tensor neg(const Tensor& x) { return numeric_unary("neg", x, nullptr, false, kNegBool, Neg{}); }
Tensor& neg_(Tensor& self) {
  numeric_unary("neg_", self, &self, true, kNegBool, Neg{});
  return self;
}
Tensor& neg_out(Tensor& out, const Tensor& x) {
  numeric_unary("neg_out", x, &out, false, kNegBool, Neg{});
  return out;
}
Tensor abs(const Tensor& x) { return numeric_unary("abs", x, nullptr, false, kAbsBool, Abs{}); }
Tensor& abs_(Tensor& self) {
  numeric_unary("abs_", self, &self, true, kAbsBool, Abs{});
  return self;
}
Tensor& abs_out(Tensor& out, const Tensor& x) {
  numeric_unary("abs_out", x, &out, false, kAbsBool, Abs{});
  return out;
}

namespace {
// sign(NaN) is 0 and sign(bool) is the bool itself, as in LibTorch.
Tensor sign_impl(const char* op, const Tensor& x, Tensor* out, bool inplace) {
  const BareKernel bare(op, {&x, out});
  TB_CHECK(x.defined(), op, "undefined input tensor");
  check_out_dtype(x, out, inplace, op);
  const DType dt = x.dtype();
  return ew::unary(op, x, dt, dt, out, inplace, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch(dt, [&]<typename T>() {
      using M = opmath_t<T>;
      if constexpr (std::is_same_v<T, bool>) cpu::cpu_kernel<T, T>(loop, [](bool v) { return v; });
      else cpu::cpu_kernel<T, T>(loop, [](M v) -> M { return M((M(0) < v) - (v < M(0))); });
    });
  });
}
}  // namespace

Tensor sign(const Tensor& x) { return sign_impl("sign", x, nullptr, false); }
Tensor& sign_(Tensor& self) {
  sign_impl("sign_", self, &self, true);
  return self;
}
Tensor& sign_out(Tensor& out, const Tensor& x) {
  sign_impl("sign_out", x, &out, false);
  return out;
}

// ---- activations ----
Tensor relu(const Tensor& x) { return numeric_unary("relu", x, nullptr, false, kReluBool, Relu{}); }
Tensor& relu_(Tensor& self) {
  numeric_unary("relu_", self, &self, true, kReluBool, Relu{});
  return self;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (check_gelu_mode(approximate, "gelu")) return floating_only("gelu", x, nullptr, false, GeluTanh{});
  if (use_gelu_table(x)) return gelu_by_table("gelu", x, nullptr, false);
  return floating_only("gelu", x, nullptr, false, GeluErf{});
}
Tensor& gelu_(Tensor& self, const std::string& approximate) {
  if (check_gelu_mode(approximate, "gelu_")) floating_only("gelu_", self, &self, true, GeluTanh{});
  else if (use_gelu_table(self)) gelu_by_table("gelu_", self, &self, true);
  else floating_only("gelu_", self, &self, true, GeluErf{});
  return self;
}
Tensor& gelu_out(Tensor& out, const Tensor& x, const std::string& approximate) {
  if (check_gelu_mode(approximate, "gelu_out")) floating_only("gelu_out", x, &out, false, GeluTanh{});
  else if (use_gelu_table(x)) gelu_by_table("gelu_out", x, &out, false);
  else floating_only("gelu_out", x, &out, false, GeluErf{});
  return out;
}

Tensor silu(const Tensor& x) { return floating_only("silu", x, nullptr, false, Silu{}); }
Tensor& silu_(Tensor& self) {
  floating_only("silu_", self, &self, true, Silu{});
  return self;
}
Tensor& silu_out(Tensor& out, const Tensor& x) {
  floating_only("silu_out", x, &out, false, Silu{});
  return out;
}

namespace {
Tensor softplus_impl(const char* op, const Tensor& x, const Scalar& beta, const Scalar& threshold, Tensor* out) {
  const double b = beta.d, th = threshold.d;
  TB_CHECK(x.defined(), op, "undefined input tensor");
  TB_CHECK(core::is_floating(x.dtype()), op, "not implemented for dtype ", core::name(x.dtype()));
  check_out_dtype(x, out, false, op);
  const BareKernel bare(op, {&x, out});
  // x where beta * x > threshold, else log1p(exp(beta * x)) / beta: exp and log1p through SLEEF
  // over each buffered run (Note [Vector math from SLEEF]), as LibTorch's vector kernel.
  return ew::unary(op, x, x.dtype(), x.dtype(), out, false, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
      using M = opmath_t<T>;
      // out[0, m) from in[0, m) (m <= kVecChunk; out == in allowed: each in[i] is read before out[i]
      // is written).
      const auto chunk = [b, th](M* out, const M* in, int64_t m) {
        alignas(64) M e[cpu::kVecChunk];
        for (int64_t i = 0; i < m; ++i) e[i] = in[i] * M(b);
        cpu::vec_math_run<cpu::VecFn::Exp>(e, m);
        cpu::vec_math_run<cpu::VecFn::Log1p>(e, m);
        for (int64_t i = 0; i < m; ++i) out[i] = in[i] * M(b) > M(th) ? in[i] : e[i] / M(b);
      };
      // Contiguous runs read x and write out directly: the copies into and out of the buffer were
      // a third of the engine's softplus time.
      cpu::vec_buffer_kernel<T>(
          loop, [&chunk](M* v, int64_t m) { chunk(v, v, m); },
          [&chunk](M* out, const M* in, int64_t n) {
            for (int64_t c = 0; c < n; c += cpu::kVecChunk) chunk(out + c, in + c, std::min(cpu::kVecChunk, n - c));
            return n;
          });
    });
  });
}
}  // namespace

Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return softplus_impl("softplus", x, beta, threshold, nullptr);
}
Tensor& softplus_out(Tensor& out, const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  softplus_impl("softplus_out", x, beta, threshold, &out);
  return out;
}

// ---- predicates ----
namespace {
enum class Pred { NaN, Inf, Finite };
Tensor predicate(const char* op, const Tensor& x, Pred p) {
  TB_CHECK(x.defined(), op, "undefined input tensor");
  // Integers and bools are never NaN or infinite.
  if (!core::is_floating(x.dtype()))
    return p == Pred::Finite ? ones(x.sizes(), DType::Bool) : zeros(x.sizes(), DType::Bool);
  const DType dt = x.dtype();
  return ew::unary(op, x, dt, DType::Bool, nullptr, false, ew::Setup::Fast, [&](const StridedLoop& loop) {
    core::dispatch_floating(dt, op, [&]<typename T>() {
      using M = opmath_t<T>;
      constexpr M inf = std::numeric_limits<M>::infinity();
      switch (p) {
        case Pred::NaN: cpu::cpu_kernel<bool, T>(loop, [](M v) { return v != v; }); break;
        case Pred::Inf: cpu::cpu_kernel<bool, T>(loop, [](M v) { return std::fabs(v) == inf; }); break;
        case Pred::Finite: cpu::cpu_kernel<bool, T>(loop, [](M v) { return std::fabs(v) < inf; }); break;
      }
    });
  });
}
}  // namespace

Tensor isnan(const Tensor& x) { return predicate("isnan", x, Pred::NaN); }
Tensor isinf(const Tensor& x) { return predicate("isinf", x, Pred::Inf); }
Tensor isfinite(const Tensor& x) { return predicate("isfinite", x, Pred::Finite); }

// ---- logical_not: nonzero (NaN included) is true ----
namespace {
Tensor logical_not_impl(const char* op, const Tensor& x, Tensor* out, bool inplace) {
  return ew::unary(op, x, DType::Bool, DType::Bool, out, inplace, ew::Setup::Fast, [](const StridedLoop& loop) {
    // On the bytes: GCC leaves a loop of bool -> !bool scalar (4.6x slower than
    // LibTorch over 4M elements); byte == 0 vectorises.
    cpu::cpu_kernel<uint8_t, uint8_t>(loop, [](uint8_t v) { return uint8_t(v == 0); });
  });
}
}  // namespace

Tensor logical_not(const Tensor& x) { return logical_not_impl("logical_not", x, nullptr, false); }
Tensor& logical_not_(Tensor& self) {
  logical_not_impl("logical_not_", self, &self, true);
  return self;
}
Tensor& logical_not_out(Tensor& out, const Tensor& x) {
  logical_not_impl("logical_not_out", x, &out, false);
  return out;
}

}  // namespace tb::ops
