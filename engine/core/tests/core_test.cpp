// The core room by itself: dtype names, sizes and PyTorch's promotion table, the bf16/f16
// rounding, shapes (strides, broadcasting, dim wrapping, -1 inference, overflow) and the
// counter-based generator, whose first block is the Random123 known answer for Philox4x32-10.
#include <gtest/gtest.h>

#include <set>

#include "engine/core/dtype.h"
#include "engine/core/rng.h"
#include "engine/core/shape.h"
#include "engine/core/tests/error_of.h"

namespace tb::core {
namespace {

using testing::error_of;
using testing::expect_contains;

TEST(DType, NamesAndSizes) {
  const std::pair<DType, std::pair<const char*, size_t>> table[] = {
      {DType::Bool, {"bool", 1}},         {DType::Int32, {"int32", 4}},     {DType::Int64, {"int64", 8}},
      {DType::BFloat16, {"bfloat16", 2}}, {DType::Float16, {"float16", 2}}, {DType::Float32, {"float32", 4}},
      {DType::Float64, {"float64", 8}}};
  for (const auto& [dt, want] : table) {
    EXPECT_STREQ(name(dt), want.first);
    EXPECT_EQ(itemsize(dt), want.second) << want.first;
    EXPECT_EQ(dtype_from_name(want.first), dt);
  }
  expect_contains(error_of([] { dtype_from_name("float"); }), {"unknown dtype 'float'"});
}

// Entries of torch.promote_types, written out (torch 2.x prints the same).
TEST(DType, PromotionTable) {
  struct Row {
    DType a, b, want;
  };
  const Row rows[] = {
      {DType::Bool, DType::Bool, DType::Bool},          {DType::Bool, DType::Int32, DType::Int32},
      {DType::Int32, DType::Int64, DType::Int64},       {DType::Int64, DType::BFloat16, DType::BFloat16},
      {DType::Int64, DType::Float16, DType::Float16},   {DType::BFloat16, DType::Float16, DType::Float32},
      {DType::Float16, DType::Float32, DType::Float32}, {DType::BFloat16, DType::Float64, DType::Float64},
      {DType::Float32, DType::Float64, DType::Float64}, {DType::Bool, DType::Float16, DType::Float16},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(promote_types(r.a, r.b), r.want) << name(r.a) << " + " << name(r.b);
    EXPECT_EQ(promote_types(r.b, r.a), r.want) << "promotion is symmetric: " << name(r.b) << " + " << name(r.a);
  }
  for (DType t : kAllDTypes) EXPECT_EQ(promote_types(t, t), t);
}

TEST(DType, ReducedFloatsRoundToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(BFloat16(-2.0f).bits, 0xC000);
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f).bits, 0x3F80);      // tie -> even mantissa (0)
  EXPECT_EQ(BFloat16(1.0f + 3 * 0x1p-8f).bits, 0x3F82);  // tie -> even mantissa (2)
  EXPECT_EQ(float(BFloat16(3.0f)), 3.0f);
  EXPECT_EQ(Half(1.0f).bits, 0x3C00);
  EXPECT_EQ(Half(65504.0f).bits, 0x7BFF);  // the largest finite half
  EXPECT_EQ(Half(65520.0f).bits, 0x7C00);  // halfway to 65536: rounds to even, which is inf
  EXPECT_EQ(Half(0x1p-24f).bits, 0x0001);  // the smallest subnormal
  EXPECT_EQ(Half(0x1p-26f).bits, 0x0000);  // a quarter of it rounds to zero
  EXPECT_EQ(float(Half(uint16_t(0))), 0.0f);
  EXPECT_EQ(Half::to_float(0x3555), 0.333251953125f);  // 1/3 in half: 0x3555
}

TEST(Shape, ContiguousStridesAndNumel) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), Shape({12, 4, 1}));
  EXPECT_EQ(contiguous_strides({5}), Shape({1}));
  EXPECT_EQ(contiguous_strides({}), Shape({}));
  EXPECT_EQ(contiguous_strides({2, 0, 3}), Shape({3, 3, 1}));  // a zero size counts as 1 (PyTorch)
  EXPECT_EQ(checked_numel({2, 3, 4}, "t"), 24);
  EXPECT_EQ(checked_numel({}, "t"), 1);
  EXPECT_EQ(checked_numel({7, 0}, "t"), 0);
  EXPECT_EQ(error_of([] { checked_numel({2, -1}, "zeros"); }), "zeros: negative dimension in size [2, -1]");
  expect_contains(error_of([] {
                    checked_numel({int64_t(1) << 32, int64_t(1) << 32}, "zeros");
                  }),
                  {"zeros", "overflows int64", "[4294967296, 4294967296]"});
  EXPECT_EQ(to_string({2, 3}), "[2, 3]");
  EXPECT_EQ(to_string({}), "[]");
}

TEST(Shape, Broadcasting) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}, "add"), Shape({2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}, "add"), Shape({5}));
  EXPECT_EQ(broadcast_shapes({0}, {1}, "add"), Shape({0}));
  EXPECT_EQ(broadcast_shapes({1, 1}, {1}, "add"), Shape({1, 1}));
  EXPECT_EQ(error_of([] {
              broadcast_shapes({2, 3}, {3, 3}, "add");
            }),
            "add: shapes [2, 3] and [3, 3] cannot be broadcast (dimension 0: 2 vs 3)");
}

TEST(Shape, WrapDimAndInferSize) {
  EXPECT_EQ(wrap_dim(-1, 3, "sum"), 2);
  EXPECT_EQ(wrap_dim(-3, 3, "sum"), 0);
  EXPECT_EQ(wrap_dim(-1, 0, "sum"), 0);  // a 0-dim tensor takes -1 and 0
  EXPECT_EQ(error_of([] { wrap_dim(3, 3, "sum"); }),
            "sum: dimension 3 out of range for a tensor of 3 dims (expected in [-3, 2])");
  EXPECT_EQ(infer_size({-1, 4}, 24, "view"), Shape({6, 4}));
  EXPECT_EQ(infer_size({2, 3, 4}, 24, "view"), Shape({2, 3, 4}));
  EXPECT_EQ(error_of([] { infer_size({-1, 5}, 24, "view"); }), "view: shape [-1, 5] is invalid for input of size 24");
  expect_contains(error_of([] { infer_size({-1, -1}, 24, "view"); }), {"only one dimension can be inferred"});
}

// Random123's known-answer vector for philox4x32_10: counter 0, key 0 ->
// 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
TEST(Generator, PhiloxKnownAnswer) {
  Generator g(0);
  const auto b = g.block(0);
  EXPECT_EQ(b[0], 0x6627e8d5u);
  EXPECT_EQ(b[1], 0xe169c58du);
  EXPECT_EQ(b[2], 0xbc57ac4cu);
  EXPECT_EQ(b[3], 0x9b00dbd8u);
}

TEST(Generator, SeedAndOffsetDetermineTheStream) {
  Generator a(42), b(42), c(43);
  EXPECT_EQ(a.block(7), b.block(7));
  EXPECT_NE(a.block(7), c.block(7));
  EXPECT_NE(a.block(7), a.block(8));
  EXPECT_EQ(a.reserve(3), 0u);  // returns the first counter of the reserved range
  EXPECT_EQ(a.reserve(2), 3u);
  EXPECT_EQ(a.offset(), 5u);
  a.set_state(42, 0);
  EXPECT_EQ(a.offset(), 0u);
  // to_unit_float keeps the top 24 bits: 0 -> 0, all ones -> 1 - 2^-24 (never 1)
  EXPECT_EQ(Generator::to_unit_float(0), 0.0f);
  EXPECT_EQ(Generator::to_unit_float(0xFFFFFFFFu), 1.0f - 0x1p-24f);
  EXPECT_EQ(Generator::to_unit_double(0xFFFFFFFFu, 0xFFFFFFFFu), 1.0 - 0x1p-53);
  manual_seed(5);
  EXPECT_EQ(default_generator().seed(), 5u);
  EXPECT_EQ(default_generator().offset(), 0u);
}

}  // namespace
}  // namespace tb::core
