// copy_ over the layouts it treats apart (Note [Copies that reorder memory] in copy.cpp): the tiled
// copy between different unit-stride dims (contiguous() of transposes and permutes, a copy into a
// transposed destination, an expanded or narrowed source), the flat copy of two dense operands with
// the same strides (clone() and to() keep a permuted layout), and the strided loop beside them, in
// every dtype and across dtypes. Each result is read back element by element through its own
// strides (values.h) and compared with the source read the same way. The values are integers in
// [-125, 125] in a pattern that repeats only every 251 elements, exact in every dtype, so an
// element written to the wrong place cannot pass.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::values;

constexpr DType kAll[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                          DType::Int64,   DType::Int32,   DType::Bool};

Tensor pattern(const Shape& shape, DType dt) {
  std::vector<double> v(size_t(core::checked_numel(shape, "pattern")));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i * 7919 % 251) - 125);
  return from_vector(v, shape, dt);
}

// What a copy into dtype `to` must hold, element by element: the source's values (bool: nonzero).
std::vector<double> expected(const Tensor& src, DType to) {
  std::vector<double> v = values(src);
  if (to == DType::Bool)
    for (double& x : v) x = x != 0 ? 1 : 0;
  return v;
}

void expect_copy(const Tensor& got, const Tensor& src, const std::string& what) {
  ASSERT_EQ(got.sizes(), src.sizes()) << what;
  const std::vector<double> want = expected(src, got.dtype()), have = values(got);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(have[i], want[i]) << what << ": element " << i << " of " << want.size();
}

std::string name(const Tensor& t) { return std::string(core::name(t.dtype())) + " " + core::to_string(t.sizes()); }

TEST(CopyLayout, TransposesAroundTheTileSize) {
  for (DType dt : kAll)
    for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{
             {16, 16}, {31, 33}, {32, 32}, {33, 100}, {100, 7}, {1000, 17}, {300, 301}}) {
      const Tensor t = pattern({r, c}, dt).t();
      const Tensor out = t.contiguous();
      ASSERT_TRUE(out.is_contiguous());
      expect_copy(out, t, "contiguous() of a transposed " + name(t));
    }
}

TEST(CopyLayout, PermutesOfFourDims) {
  const std::vector<std::vector<int64_t>> orders = {
      {0, 2, 3, 1}, {3, 2, 1, 0}, {1, 0, 3, 2}, {2, 3, 0, 1}, {0, 2, 1, 3}};
  for (DType dt : kAll)
    for (const auto& order : orders) {
      const Tensor p = pattern({3, 5, 17, 40}, dt).permute(order);
      expect_copy(p.contiguous(), p, "contiguous() of a permuted " + name(p));
      // clone() and to() keep a dense layout: the copy runs in memory order.
      const Tensor c = p.clone();
      EXPECT_EQ(c.strides(), p.strides());
      expect_copy(c, p, "clone() of a permuted " + name(p));
      // The same, into a destination of that layout filled with a value the pattern never has.
      for (DType to : kAll) {
        Tensor dst = full({3, 5, 17, 40}, 126, to).permute(order);
        dst.copy_(p);
        expect_copy(dst, p, "copy_ of a permuted " + name(p) + " into the same layout in " + core::name(to));
        const Tensor cast = p.to(to);
        expect_copy(cast, p, "to(" + std::string(core::name(to)) + ") of a permuted " + name(p));
        expect_copy(p.contiguous().to(to), p, "to() of a contiguous " + name(p));
      }
    }
}

TEST(CopyLayout, NarrowedExpandedAndStridedOperands) {
  for (DType dt : kAll) {
    // A narrowed source: storage offset and row stride wider than the row.
    const Tensor n = pattern({40, 50}, dt).narrow(1, 3, 40).narrow(0, 1, 37).t();
    expect_copy(n.contiguous(), n, "a narrowed, transposed " + name(n));
    // An expanded source: stride 0 along the destination's unit-stride dim.
    const Tensor e = pattern({1, 40}, dt).expand({50, 40}).t();
    expect_copy(e.contiguous(), e, "an expanded, transposed " + name(e));
    const Tensor e2 = pattern({40, 1, 33}, dt).expand({40, 20, 33}).permute({2, 1, 0});
    expect_copy(e2.contiguous(), e2, "an expanded, permuted " + name(e2));
    // A transposed destination: its unit-stride dim is the source's outer one.
    for (DType to : kAll) {
      Tensor dst = zeros({40, 50}, to).t();
      const Tensor src = pattern({50, 40}, dt);
      dst.copy_(src);
      expect_copy(dst, src, "copy_ of " + name(src) + " into a transposed " + std::string(core::name(to)));
    }
  }
}

// Within a dtype the bits move as they are, whichever path: a bfloat16 signalling NaN keeps its
// payload (it used to go through float and come out quiet).
TEST(CopyLayout, BitsMoveUnchangedWithinADtype) {
  std::vector<core::BFloat16> bits(64 * 48);
  for (size_t i = 0; i < bits.size(); ++i) bits[i].bits = uint16_t(i % 3 == 0 ? 0x7f81 : 0xff80 + i % 64);
  const Tensor x = from_vector_of(bits, {64, 48});
  for (const Tensor& v : {x.t(), x.narrow(1, 0, 5).t(), x.t().narrow(0, 0, 40)}) {
    const Tensor c = v.contiguous();
    for (int64_t i = 0; i < v.size(0); ++i)
      for (int64_t j = 0; j < v.size(1); ++j) {
        const uint16_t want = static_cast<const core::BFloat16*>(x.data())[j * 48 + i].bits;
        ASSERT_EQ(c.data_ptr<core::BFloat16>()[i * v.size(1) + j].bits, want) << i << ", " << j;
      }
  }
}

}  // namespace
}  // namespace tb
