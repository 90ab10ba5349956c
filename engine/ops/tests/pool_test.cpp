// avg_pool2d's row blocks (Note [avg_pool2d by output rows] in cpu/pool2d.cpp): a small case by
// hand, then every output, bit for bit, against a plain per-window loop written here (PyTorch's
// definition: rows of the window, then columns, summed from 0 in the dtype, divided once) over
// kernel sizes, strides 1, 2 and 3 (3 takes the generic stride), padding, ceil_mode,
// count_include_pad, divisor_override, float and double, a batched and an unbatched input, one
// read through a transpose, NaN and infinities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "engine/ops/ops.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::values;
using V = std::vector<double>;

TEST(AvgPool2d, TwoByTwoByHand) {
  // [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], 2x2 windows, stride 2: (1 + 2 + 5 + 6) / 4,
  // (3 + 4 + 7 + 8) / 4; the last row has no second window row (floor mode drops it).
  const Tensor x = from_vector({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 3, 4});
  EXPECT_EQ(values(ops::avg_pool2d(x, {2}, {2})), V({3.5, 5.5}));
  // ceil_mode keeps it: (9 + 10) / 2 and (11 + 12) / 2 without the padding in the count.
  EXPECT_EQ(values(ops::avg_pool2d(x, {2}, {2}, {0}, true)), V({3.5, 5.5, 9.5, 11.5}));
  // Padding 1, counted: the corner window holds 1 alone, divided by 4; the last one 8 and 12.
  EXPECT_EQ(values(ops::avg_pool2d(x, {2}, {2}, {1})), V({0.25, 1.25, 1, 3.5, 8.5, 5}));
  EXPECT_EQ(values(ops::avg_pool2d(x, {2}, {2}, {1}, false, false)), V({1, 2.5, 4, 7, 8.5, 10}));
  EXPECT_EQ(values(ops::avg_pool2d(x, {2}, {2}, {0}, false, true, 3)), V({double(14.0f / 3), double(22.0f / 3)}));
}

template <typename T>
std::vector<T> reference(const std::vector<T>& in, int64_t P, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh,
                         int64_t sw, int64_t ph, int64_t pw, int64_t OH, int64_t OW, bool include_pad,
                         std::optional<int64_t> divisor) {
  std::vector<T> out;
  for (int64_t pl = 0; pl < P; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
        int64_t h1 = std::min(h0 + kh, H + ph), w1 = std::min(w0 + kw, W + pw);
        const int64_t pool = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H), w1 = std::min(w1, W);
        if (h0 >= h1 || w0 >= w1) {
          out.push_back(T(0));
          continue;
        }
        T sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += in[size_t((pl * H + h) * W + w)];
        const int64_t d = divisor ? *divisor : include_pad ? pool : (h1 - h0) * (w1 - w0);
        out.push_back(sum / T(d));
      }
  return out;
}

template <typename T>
void check_grid() {
  const int64_t N = 2, C = 3, H = 9, W = 37;  // W: full vectors and a tail at stride 1
  std::vector<T> in;
  for (int64_t i = 0; i < N * C * H * W; ++i) in.push_back(T(std::sin(double(i) * 0.37) * 3) + T(i % 5) / T(7));
  in[5] = std::numeric_limits<T>::quiet_NaN();
  in[W * 4 + 20] = std::numeric_limits<T>::infinity();
  in[W * H + 3] = -std::numeric_limits<T>::infinity();
  std::vector<double> ind(in.begin(), in.end());
  const DType dt = core::dtype_of<T>;
  const Tensor x = from_vector(ind, {N, C, H, W}, dt);
  const Tensor xt = from_vector(ind, {N, C, H, W}, dt).transpose(2, 3).contiguous().transpose(2, 3);  // strided
  ASSERT_FALSE(xt.is_contiguous());
  for (int64_t k : {1, 2, 3})
    for (int64_t s : {1, 2, 3})
      for (int64_t pad = 0; pad <= k / 2; ++pad)
        for (bool ceil : {false, true})
          for (bool include : {true, false})
            for (std::optional<int64_t> div : {std::optional<int64_t>(), std::optional<int64_t>(5)}) {
              const int64_t kh = k, kw = k == 1 ? 2 : k, sh = s, sw = s == 3 ? 3 : s;
              const int64_t pw = kw == 2 && pad == 0 ? 1 : pad;  // a 2-wide window padded by 1 too
              const Tensor src = (k + s) % 2 ? xt : x;
              const Tensor out = ops::avg_pool2d(src, {kh, kw}, {sh, sw}, {pad, pw}, ceil, include, div);
              const int64_t OH = out.size(2), OW = out.size(3);
              const std::vector<T> want = reference(in, N * C, H, W, kh, kw, sh, sw, pad, pw, OH, OW, include, div);
              const Tensor oc = out.contiguous();
              const T* got = oc.data_ptr<T>();
              const std::string what = "k " + std::to_string(kh) + "x" + std::to_string(kw) + " s " +
                                       std::to_string(sh) + "x" + std::to_string(sw) + " p " + std::to_string(pad) +
                                       "x" + std::to_string(pw) + (ceil ? " ceil" : "") +
                                       (include ? "" : " exclude_pad") + (div ? " divisor 5" : "");
              ASSERT_EQ(int64_t(want.size()), oc.numel()) << what;
              int bad = 0;
              for (size_t i = 0; i < want.size(); ++i)
                if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && !(std::isnan(got[i]) && std::isnan(want[i])))
                  bad += bad < 3 ? (ADD_FAILURE() << what << " output " << i << ": " << got[i] << " vs " << want[i], 1)
                                 : 1;
              EXPECT_EQ(bad, 0) << what;
            }
  // Unbatched (C, H, W).
  const Tensor u = ops::avg_pool2d(x.select(0, 1), {2}, {2});
  const std::vector<T> all = reference(in, N * C, H, W, 2, 2, 2, 2, 0, 0, 4, 18, true, std::nullopt);
  const V got = values(u);
  ASSERT_EQ(got.size(), size_t(C * 4 * 18));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], double(all[size_t(C * 4 * 18) + i])) << i;
}

TEST(AvgPool2d, RowBlocksMatchPerWindowLoopFloat) { check_grid<float>(); }
TEST(AvgPool2d, RowBlocksMatchPerWindowLoopDouble) { check_grid<double>(); }

}  // namespace
}  // namespace tb
