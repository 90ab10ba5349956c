// Vectorisable float math shared by the kernels: branch-free and always inlined, so the loops
// that call them stay vectorised (libm's expf is an out-of-line call, which stops GCC's
// vectoriser).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace tb::ops::cpu {

// e^(x - n ln2) for the integer-valued n nearest x / ln2: ln2 split in two for the reduction
// (|r| <= ln2 / 2), then Cephes' degree-6 polynomial. The shared core of exp_fast and softmax's
// exp_shifted (engine/ops/nn_norm.cpp).
[[gnu::always_inline]] inline float exp_reduced(float x, float n) {
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

// e^x for float: x = n ln2 + r, e^r by exp_reduced; ~1 ulp.
// Below -87 gives 0 and above 88.5 gives inf (no subnormal results); NaN stays NaN.
[[gnu::always_inline]] inline float exp_fast(float x) {
  const float xc = std::min(std::max(x, -87.0f), 88.5f);
  // Round to nearest by the 1.5 * 2^23 trick: std::floor does not vectorise under -ftrapping-math.
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float y = exp_reduced(xc, n);
  const float scale = std::bit_cast<float>((int32_t(n) + 126) << 23);  // 2^(n-1): n may be 128
  float res = y * scale * 2.0f;
  res = x < -87.0f ? 0.0f : res;
  res = x > 88.5f ? INFINITY : res;
  return x != x ? x : res;
}
inline double exp_fast(double x) { return std::exp(x); }

}  // namespace tb::ops::cpu
