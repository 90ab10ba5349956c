// embedding, dropout (and native_dropout), one_hot, pad and pad_backward (conv2d is in
// cpu/conv2d.cpp, pooling in cpu/pool2d.cpp, the other backward kernels in cpu/nn_backward.cpp).
// Each validates its arguments like PyTorch before touching memory: every index is range-checked
// before the first read.
#include "engine/ops/nn.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "engine/ops/cpu/loops.h"

namespace tb::ops {

namespace {

// Index tensor -> int64 values (contiguous copy), checked to be an integer type.
std::vector<int64_t> read_indices(const Tensor& idx, const char* op, const char* what) {
  TB_CHECK(idx.dtype() == DType::Int64 || idx.dtype() == DType::Int32, op, "expected ", what,
           " to have scalar type Long or Int, but got ", core::name(idx.dtype()));
  const Tensor c = idx.to(DType::Int64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t /*padding_idx: gradient only*/) {
  const BareKernel bare("embedding", {&weight});
  TB_CHECK(weight.dim() == 2, "embedding", "weight must be 2-D, got shape ", core::to_string(weight.sizes()));
  const std::vector<int64_t> idx = read_indices(indices, "embedding", "indices");
  const int64_t V = weight.size(0), D = weight.size(1);
  for (int64_t i : idx) TB_CHECK(i >= 0 && i < V, "embedding", "index ", i, " is out of range for ", V, " embeddings");
  Shape shape = indices.sizes();
  shape.push_back(D);
  Tensor out = empty(shape, weight.dtype());
  const Tensor w = weight.contiguous();
  const size_t row = size_t(D) * w.itemsize();
  const char* src = static_cast<const char*>(w.data());
  char* dst = static_cast<char*>(out.data());
  const int64_t n = int64_t(idx.size());
#pragma omp parallel for schedule(static) if (n * D > 32768)
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * row, src + size_t(idx[size_t(i)]) * row, row);
  return out;
}

namespace {

// out (x's dtype, contiguous) = kept ? x * 1 / (1 - p) : 0, and mask = kept when mask is non-null.
// Element i uses output i % 4 of Philox block base + i / 4: the mask depends on the seed and the
// element only, never on the thread split. 0 < p < 1.
void dropout_kernel(const Tensor& x, const Tensor& out, bool* mask, double p, core::Generator& g) {
  const int64_t n = x.numel();
  const uint64_t base = g.reserve(uint64_t((n + 3) / 4));
  const Tensor xc = x.contiguous();
  const float keep = float(1 - p);
  core::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const Op scale = Op(1) / Op(1 - p);
    const T* in = xc.data_ptr<T>();
    T* o = out.data_ptr<T>();
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t blk = 0; blk < (n + 3) / 4; ++blk) {
      const auto r = g.block(base + uint64_t(blk));
      for (int64_t k = 0; k < 4 && blk * 4 + k < n; ++k) {
        const int64_t i = blk * 4 + k;
        const bool kept = core::Generator::to_unit_float(r[size_t(k)]) < keep;
        o[i] = kept ? T(Op(in[i]) * scale) : T(Op(0));
        if (mask) mask[i] = kept;
      }
    }
  });
}

void fill_bytes(const Tensor& t, char v) {
  std::fill_n(static_cast<char*>(t.data()), t.numel() * int64_t(t.itemsize()), v);
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, core::Generator* gen) {
  const BareKernel bare("dropout", {&x});
  TB_CHECK(p >= 0 && p <= 1, "dropout", "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  TB_CHECK(core::is_floating(x.dtype()), "dropout", "expected a floating point input, got ", core::name(x.dtype()));
  Tensor out = empty(x.sizes(), x.dtype());
  if (p == 1) {
    fill_bytes(out, 0);
    return out;
  }
  dropout_kernel(x, out, nullptr, p, gen ? *gen : core::default_generator());
  return out;
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training, core::Generator* gen) {
  TB_CHECK(p >= 0 && p <= 1, "native_dropout", "dropout probability has to be between 0 and 1, but got ", p);
  Tensor mask = empty(x.sizes(), DType::Bool);
  if (!training || p == 0) {  // no draws, as dropout(); the output is x itself
    fill_bytes(mask, 1);
    return {x, mask};
  }
  TB_CHECK(core::is_floating(x.dtype()), "native_dropout", "expected a floating point input, got ",
           core::name(x.dtype()));
  Tensor out = empty(x.sizes(), x.dtype());
  if (p == 1) {
    fill_bytes(out, 0);
    fill_bytes(mask, 0);
    return {out, mask};
  }
  dropout_kernel(x, out, mask.data_ptr<bool>(), p, gen ? *gen : core::default_generator());
  return {out, mask};
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  TB_CHECK(indices.dtype() == DType::Int64, "one_hot", "one_hot is only applicable to index tensor of type int64, got ",
           core::name(indices.dtype()));
  const std::vector<int64_t> idx = read_indices(indices, "one_hot", "indices");
  TB_CHECK(num_classes >= -1, "one_hot", "num_classes should be positive or -1, got ", num_classes);
  if (num_classes == -1) {
    TB_CHECK(!idx.empty(), "one_hot", "can not infer total number of classes from empty tensor");
    num_classes = *std::max_element(idx.begin(), idx.end()) + 1;
  }
  for (int64_t i : idx) {
    TB_CHECK(i >= 0, "one_hot", "class values must be non-negative, got ", i);
    TB_CHECK(i < num_classes, "one_hot", "class values must be smaller than num_classes (", num_classes, "), got ", i);
  }
  Shape shape = indices.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, DType::Int64);
  int64_t* o = out.data_ptr<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i) o[int64_t(i) * num_classes + idx[i]] = 1;
  return out;
}

namespace {

// Constant padding of any number of trailing dims; negative pads crop.
Tensor pad_constant(const Tensor& x, const Shape& pad, double value) {
  const int64_t nd = x.dim(), np = int64_t(pad.size()) / 2;
  Shape shape = x.sizes();
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = nd - 1 - k;
    shape[size_t(d)] += pad[size_t(2 * k)] + pad[size_t(2 * k + 1)];
    TB_CHECK(shape[size_t(d)] >= 0, "pad", "the input size ", x.size(d), ", plus negative padding ", pad[size_t(2 * k)],
             " and ", pad[size_t(2 * k + 1)], " resulted in a negative output size");
  }
  // PyTorch narrows the input by each negative pad (left, then right): a pad that would take more
  // than the dim holds is an error even when the output size comes out non-negative.
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = nd - 1 - k, l = pad[size_t(2 * k)], r = pad[size_t(2 * k + 1)];
    const int64_t after_left = x.size(d) + std::min<int64_t>(l, 0);
    TB_CHECK(after_left >= 0 && after_left + std::min<int64_t>(r, 0) >= 0, "pad",
             "narrow(): length must be "
             "non-negative: padding (",
             l, ", ", r, ") removes more than the ", x.size(d), " elements of dim ", d);
  }
  // Only cropping: PyTorch returns a clone of the narrowed input, which keeps its stride order.
  if (std::all_of(pad.begin(), pad.end(), [](int64_t v) { return v <= 0; })) {
    Tensor src = x;
    for (int64_t k = 0; k < np; ++k) {
      const int64_t d = nd - 1 - k;
      src = src.narrow(d, -pad[size_t(2 * k)], shape[size_t(d)]);
    }
    return src.clone();
  }
  // In the input's memory format, as PyTorch's constant_pad_nd (Note [Channels-last by strides]).
  Tensor out = suggests_channels_last(x) ? empty_channels_last(shape, x.dtype()) : empty(shape, x.dtype());
  // The value goes only where the input does not (each padded dim's two slabs, corners twice):
  // filling all of the output first, as PyTorch does, writes the input's share twice
  // (pad/float32/sweep, (4096, 1024) by one on each side at two threads, alternated binaries:
  // 0.55-0.60 -> 0.53-0.56 ms).
  Tensor dst = out, src = x;
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = nd - 1 - k, l = pad[size_t(2 * k)], r = pad[size_t(2 * k + 1)];
    const int64_t len = x.size(d) + std::min<int64_t>(l, 0) + std::min<int64_t>(r, 0);
    if (len <= 0) return fill_(out, value);
    const int64_t left = std::max<int64_t>(l, 0), right = shape[size_t(d)] - left - len;
    Tensor before = out.narrow(d, 0, left), after = out.narrow(d, left + len, right);
    if (left > 0) fill_(before, value);
    if (right > 0) fill_(after, value);
    dst = dst.narrow(d, left, len);
    src = src.narrow(d, std::max<int64_t>(-l, 0), len);
  }
  dst.copy_(src);
  return out;
}

// Reflect/replicate padding of the last one or two dims goes through per-dim index maps:
// maps[1][o] is the input column output column o copies, maps[0] the same for rows (one entry, 0,
// when only the last dim is padded). `shape` becomes the padded shape.
std::vector<std::vector<int64_t>> pad_maps(const Shape& xs, const Shape& pad, bool reflect, Shape& shape) {
  const char* mode = reflect ? "reflect" : "replicate";
  const int64_t np = int64_t(pad.size()) / 2, nd = int64_t(xs.size());
  TB_CHECK(np == 1 || np == 2, "pad", mode, " padding is implemented for the last 1 or 2 dims, got ", pad.size(),
           " pad values");
  TB_CHECK(nd == np + 1 || nd == np + 2, "pad", mode, " padding of ", np, " dims expects a ", np + 1, "-D or ", np + 2,
           "-D input, got shape ", core::to_string(xs));
  // PyTorch's rule for both modes: the batch dim may be 0, every other dim must not.
  for (int64_t d = nd == np + 2 ? 1 : 0; d < nd; ++d)
    TB_CHECK(xs[size_t(d)] > 0, "pad", "Expected ", np + 1, "D or ", np + 2,
             "D (batch mode) tensor with possibly 0 "
             "batch size and other non-zero dimensions for input, but got: ",
             core::to_string(xs));
  std::vector<std::vector<int64_t>> maps(2, std::vector<int64_t>{0});
  shape = xs;
  for (int64_t k = 0; k < np; ++k) {
    const int64_t d = nd - 1 - k, n = xs[size_t(d)], l = pad[size_t(2 * k)], r = pad[size_t(2 * k + 1)];
    if (reflect)
      TB_CHECK(l < n && r < n && l >= 0 && r >= 0, "pad",
               "padding size should be less than the corresponding input "
               "dimension, but got padding (",
               l, ", ", r, ") at dimension ", d, " of input ", core::to_string(xs));
    else
      TB_CHECK(n > 0 && l >= 0 && r >= 0, "pad",
               "replicate padding expects a non-empty dim and non-negative pads, "
               "got input ",
               core::to_string(xs), " and padding (", l, ", ", r, ")");
    std::vector<int64_t>& m = maps[size_t(1 - k)];  // maps[1]: last dim, maps[0]: the one before
    m.resize(size_t(n + l + r));
    for (int64_t o = 0; o < n + l + r; ++o) {
      int64_t i = o - l;
      if (reflect) i = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
      else i = std::clamp<int64_t>(i, 0, n - 1);
      m[size_t(o)] = i;
    }
    shape[size_t(d)] = n + l + r;
  }
  return maps;
}

Tensor pad_index(const Tensor& x, const Shape& pad, bool reflect) {
  Shape shape;
  const auto maps = pad_maps(x.sizes(), pad, reflect, shape);
  const int64_t np = int64_t(pad.size()) / 2;
  const Tensor xc = x.contiguous();
  Tensor out = empty(shape, x.dtype());
  const int64_t OH = int64_t(maps[0].size()), OW = int64_t(maps[1].size());
  const int64_t W = x.size(-1), H = np == 2 ? x.size(-2) : 1;
  const int64_t planes = H * W == 0 ? 0 : xc.numel() / (H * W);
  const size_t isz = x.itemsize();
  const char* in = static_cast<const char*>(xc.data());
  char* o = static_cast<char*>(out.data());
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        std::memcpy(o + size_t((pl * OH + oh) * OW + ow) * isz,
                    in + size_t((pl * H + maps[0][size_t(oh)]) * W + maps[1][size_t(ow)]) * isz, isz);
  return in_memory_format_of(x, out);  // a channels-last input's result channels-last, as PyTorch's
}

}  // namespace

Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode, double value) {
  const BareKernel bare("pad", {&x});
  TB_CHECK(pad.size() % 2 == 0, "pad", "padding length must be divisible by 2, got ", pad.size());
  TB_CHECK(int64_t(pad.size()) / 2 <= x.dim(), "pad", "padding length ", pad.size(), " is too large for an input of ",
           x.dim(), " dims");
  if (mode == "constant") return pad_constant(x, pad, value);
  if (mode == "reflect" || mode == "replicate") return pad_index(x, pad, mode == "reflect");
  throw Error("pad", "unsupported padding mode '" + mode + "' (constant, reflect, replicate)");
}

Tensor pad_backward(const Tensor& grad_output, const Shape& input_sizes, const Shape& pad, const std::string& mode) {
  KernelEvent event("pad_backward", {&grad_output});  // Note [Backward kernels]
  TB_CHECK(mode == "reflect" || mode == "replicate", "pad_backward", "expected mode reflect or replicate, got '", mode,
           "' (the gradient of constant padding is pad(grad, -pad))");
  Shape shape;
  const auto maps = pad_maps(input_sizes, pad, mode == "reflect", shape);
  TB_CHECK(grad_output.sizes() == shape, "pad_backward", "expected grad_output of shape ", core::to_string(shape),
           ", got ", core::to_string(grad_output.sizes()));
  const int64_t np = int64_t(pad.size()) / 2, nd = int64_t(input_sizes.size());
  const int64_t W = input_sizes[size_t(nd - 1)], H = np == 2 ? input_sizes[size_t(nd - 2)] : 1;
  const int64_t OH = int64_t(maps[0].size()), OW = int64_t(maps[1].size());
  const int64_t planes = H * W == 0 ? 0 : core::checked_numel(input_sizes, "pad_backward") / (H * W);
  const Tensor g = grad_output.contiguous();
  return core::dispatch_floating(g.dtype(), "pad_backward", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    Tensor acc = zeros(input_sizes, core::dtype_of<Op>);  // reduced floats accumulate in float, round once
    Op* gi = acc.data_ptr<Op>();
    const T* go = g.data_ptr<T>();
    // Border elements receive several outputs' gradients; planes are independent.
#pragma omp parallel for schedule(static) if (planes * OH * OW > 32768)
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oh = 0; oh < OH; ++oh) {
        Op* row = gi + (pl * H + maps[0][size_t(oh)]) * W;
        const T* src = go + (pl * OH + oh) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) row[maps[1][size_t(ow)]] += Op(src[ow]);
      }
    return acc.dtype() == g.dtype() ? acc : acc.to(g.dtype());
  });
}

}  // namespace tb::ops
