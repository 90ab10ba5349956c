// gelu of bfloat16/float16 tensors from kGeluTableMinNumel elements up reads a table (Note [gelu
// table] in engine/ops/cpu/elementwise_detail.h). Every one of the 65536 inputs must give the
// same bits as the float path that smaller tensors take, and that path must stay within half a
// unit in the last place (plus the float erf's absolute error, 4.2e-7) of gelu in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "engine/ops/cpu/elementwise_detail.h"
#include "engine/ops/ops.h"

namespace tb {
namespace {

constexpr int64_t kSlice = 1024;  // well below the threshold: these slices take the float path
static_assert(kSlice < ops::ew::kGeluTableMinNumel && ops::ew::kGeluTableMinNumel <= 65536);

// All 65536 bit patterns of a 16-bit float type, in bit order.
template <typename T>
Tensor every_value() {
  Tensor t = empty({65536}, core::dtype_of<T>);
  T* p = t.data_ptr<T>();
  for (uint32_t b = 0; b < 65536; ++b) p[b].bits = uint16_t(b);
  return t;
}

double gelu_f64(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

template <typename T>
void check_every_input(double half_ulp_rel) {
  const Tensor x = every_value<T>();
  const Tensor by_table = ops::gelu(x);  // 65536 elements: the table
  Tensor in_place = x.clone();
  ops::gelu_(in_place);
  Tensor out = empty({65536}, core::dtype_of<T>);
  ops::gelu_out(out, x);
  const T* tab = by_table.data_ptr<T>();
  const T* inp = in_place.data_ptr<T>();
  const T* o = out.data_ptr<T>();
  int64_t mismatches = 0, inaccurate = 0;
  for (int64_t s = 0; s < 65536; s += kSlice) {
    const Tensor computed = ops::gelu(x.narrow(0, s, kSlice));  // the float path
    const T* c = computed.data_ptr<T>();
    for (int64_t i = 0; i < kSlice; ++i) {
      const int64_t b = s + i;
      if (tab[b].bits != c[i].bits || inp[b].bits != c[i].bits || o[b].bits != c[i].bits) {
        if (++mismatches <= 5)
          ADD_FAILURE() << "input bits 0x" << std::hex << b << ": table 0x" << tab[b].bits << ", float path 0x"
                        << c[i].bits;
      }
      const double xin = float(x.data_ptr<T>()[b]);
      const double got = float(c[i]), want = gelu_f64(xin);
      if (std::isnan(want)) {  // NaN in, or -inf * Phi(-inf) = -inf * 0 (LibTorch gives NaN too)
        if (!std::isnan(got) && ++inaccurate <= 5) ADD_FAILURE() << "gelu(" << xin << ") = " << got << ", not NaN";
      } else if (std::isinf(want)) {
        if (got != want && ++inaccurate <= 5) ADD_FAILURE() << "gelu(" << xin << ") = " << got;
      } else if (std::fabs(got - want) > half_ulp_rel * std::fabs(want) + 4.2e-7) {
        if (++inaccurate <= 5) ADD_FAILURE() << "gelu(" << xin << ") = " << got << ", float64 says " << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(inaccurate, 0);
}

TEST(GeluTable, BFloat16EveryInputMatchesFloatPath) { check_every_input<core::BFloat16>(std::ldexp(1.0, -8)); }
TEST(GeluTable, Float16EveryInputMatchesFloatPath) { check_every_input<core::Half>(std::ldexp(1.0, -11)); }

// A strided (non-contiguous) input of table size takes the table's strided loop.
TEST(GeluTable, StridedInput) {
  const Tensor x = every_value<core::BFloat16>().view({256, 256}).t();
  const Tensor got = ops::gelu(x).contiguous();
  const Tensor want = ops::gelu(x.contiguous());
  const Tensor by_rows = x.contiguous();
  for (int64_t r = 0; r < 256; ++r) {
    const Tensor row = ops::gelu(by_rows.narrow(0, r, 1));  // 256 elements: the float path
    for (int64_t c = 0; c < 256; ++c) {
      ASSERT_EQ(got.data_ptr<core::BFloat16>()[r * 256 + c].bits, row.data_ptr<core::BFloat16>()[c].bits);
      ASSERT_EQ(want.data_ptr<core::BFloat16>()[r * 256 + c].bits, row.data_ptr<core::BFloat16>()[c].bits);
    }
  }
}

}  // namespace
}  // namespace tb
