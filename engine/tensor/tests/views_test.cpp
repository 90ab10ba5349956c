// Views share storage and change only sizes, strides and storage offset. Every expected number
// here is written by hand from PyTorch's rules (row-major strides; a view's element (i, j, ...)
// sits at storage[offset + i*stride0 + j*stride1 + ...]) and is what torch 2.x prints for the
// same calls. x below is arange(24).view(2, 3, 4): element (i, j, k) holds 12i + 4j + k.
#include <gtest/gtest.h>

#include "engine/core/tests/error_of.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::values;
using V = std::vector<double>;

Tensor x234() { return arange(24, DType::Float32).view({2, 3, 4}); }

void expect_layout(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  EXPECT_EQ(t.sizes(), sizes);
  EXPECT_EQ(t.strides(), strides);
  EXPECT_EQ(t.storage_offset(), offset);
}

TEST(Views, ContiguousLayout) {
  Tensor x = x234();
  expect_layout(x, {2, 3, 4}, {12, 4, 1}, 0);
  EXPECT_TRUE(x.is_contiguous());
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(values(x), testing::iota(24));
}

TEST(Views, TransposeAndPermute) {
  Tensor x = x234();
  Tensor t = x.transpose(0, 2);
  expect_layout(t, {4, 3, 2}, {1, 4, 12}, 0);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.shares_storage(x));
  // t[k][j][i] = 12i + 4j + k
  EXPECT_EQ(values(t), V({0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23}));
  expect_layout(x.transpose(-1, -2), {2, 4, 3}, {12, 1, 4}, 0);
  Tensor p = x.permute({1, 2, 0});
  expect_layout(p, {3, 4, 2}, {4, 1, 12}, 0);
  EXPECT_EQ(values(p).front(), 0);
  EXPECT_EQ(values(p)[1], 12);  // p[0][0][1] = x[1][0][0]
  Tensor m = arange(6, DType::Float32).view({2, 3});
  expect_layout(m.t(), {3, 2}, {1, 3}, 0);
  EXPECT_EQ(values(m.t()), V({0, 3, 1, 4, 2, 5}));
  expect_contains(error_of([&] { x.permute({0, 0, 1}); }), {"permute", "repeated dim 0"});
  expect_contains(error_of([&] { x.permute({0, 1}); }), {"permute", "number of dims don't match"});
}

TEST(Views, NarrowSelectSlice) {
  Tensor x = x234();
  Tensor n = x.narrow(2, 1, 2);
  expect_layout(n, {2, 3, 2}, {12, 4, 1}, 1);
  EXPECT_EQ(values(n), V({1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  Tensor s = x.select(1, 2);
  expect_layout(s, {2, 4}, {12, 1}, 8);
  EXPECT_EQ(values(s), V({8, 9, 10, 11, 20, 21, 22, 23}));
  Tensor last = x.select(-1, -1);
  expect_layout(last, {2, 3}, {12, 4}, 3);
  EXPECT_EQ(values(last), V({3, 7, 11, 15, 19, 23}));
  // a view of a view: offsets add up
  expect_layout(x.select(0, 1).narrow(0, 1, 2), {2, 4}, {4, 1}, 16);
  Tensor r = arange(10, DType::Float32);
  Tensor every3 = r.slice(0, 1, 8, 3);
  expect_layout(every3, {3}, {3}, 1);
  EXPECT_EQ(values(every3), V({1, 4, 7}));
  EXPECT_EQ(values(r.slice(0, -3, std::nullopt)), V({7, 8, 9}));
  EXPECT_EQ(r.slice(0, 20, 30).numel(), 0);  // clamped as in Python
  expect_contains(error_of([&] { x.narrow(2, 3, 2); }), {"narrow", "start (3) + length (2)"});
  expect_contains(error_of([&] { x.select(1, 3); }),
                  {"select", "index 3 out of range for tensor of size [2, 3, 4] at dimension 1"});
  expect_contains(error_of([&] { r.slice(0, 0, 5, 0); }), {"slice", "step must be positive"});
}

TEST(Views, ExpandHasZeroStrides) {
  Tensor col = arange(3, DType::Float32).view({3, 1});
  Tensor e = col.expand({2, 3, 4});
  expect_layout(e, {2, 3, 4}, {0, 1, 0}, 0);
  EXPECT_EQ(values(e), V({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  expect_layout(col.expand({-1, 4}), {3, 4}, {1, 0}, 0);
  expect_contains(error_of([&] { col.expand({2, 4}); }), {"expand", "the expanded size of the tensor (2)"});
  expect_contains(error_of([&] { col.expand({4}); }), {"expand", "the number of sizes provided (1)"});
}

TEST(Views, AsStrided) {
  Tensor r = arange(6, DType::Float32);
  Tensor a = r.as_strided({2, 2}, {1, 2}, 1);
  expect_layout(a, {2, 2}, {1, 2}, 1);
  EXPECT_EQ(values(a), V({1, 3, 2, 4}));
  // overlapping windows are allowed: (3, 2) windows of stride 1
  EXPECT_EQ(values(r.as_strided({3, 2}, {1, 1})), V({0, 1, 1, 2, 2, 3}));
  expect_contains(error_of([&] { r.as_strided({3, 3}, {3, 1}); }), {"size [3, 3] with strides [3, 1]"});
}

TEST(Views, SqueezeUnsqueezeFlatten) {
  Tensor z = zeros({2, 1, 3, 1});
  expect_layout(z, {2, 1, 3, 1}, {3, 3, 1, 1}, 0);
  expect_layout(z.squeeze(), {2, 3}, {3, 1}, 0);
  expect_layout(z.squeeze(1), {2, 3, 1}, {3, 1, 1}, 0);
  expect_layout(z.squeeze(0), {2, 1, 3, 1}, {3, 3, 1, 1}, 0);  // size 2: unchanged
  Tensor x = x234();
  // PyTorch's unsqueeze stride: sizes[d] * strides[d] of the dim it goes before, 1 at the end
  expect_layout(x.unsqueeze(0), {1, 2, 3, 4}, {24, 12, 4, 1}, 0);
  expect_layout(x.unsqueeze(1), {2, 1, 3, 4}, {12, 12, 4, 1}, 0);
  expect_layout(x.unsqueeze(-1), {2, 3, 4, 1}, {12, 4, 1, 1}, 0);
  expect_layout(x.flatten(), {24}, {1}, 0);
  expect_layout(x.flatten(1), {2, 12}, {12, 1}, 0);
  expect_layout(x.flatten(1).unflatten(1, {3, 4}), {2, 3, 4}, {12, 4, 1}, 0);
}

TEST(Views, ViewNeedsACompatibleLayout) {
  Tensor x = x234();
  Tensor v = x.view({6, -1});
  expect_layout(v, {6, 4}, {4, 1}, 0);
  EXPECT_TRUE(v.shares_storage(x));
  Tensor t = x.transpose(0, 1);  // sizes [3, 2, 4], strides [4, 12, 1]
  // splitting the last dim keeps the layout; merging dims 0 and 1 cannot (stride 4 != 2 * 12)
  expect_layout(t.view({3, 2, 2, 2}), {3, 2, 2, 2}, {4, 12, 2, 1}, 0);
  EXPECT_EQ(error_of([&] {
              t.view({6, 4});
            }),
            "view: view size [6, 4] is not compatible with input tensor's size [3, 2, 4] and stride [4, 12, 1] "
            "(at least one dimension spans across two contiguous subspaces); use .reshape(...) instead");
  expect_contains(error_of([&] { x.view({5, -1}); }), {"view"});
  expect_contains(error_of([&] { x.view({-1, -1}); }), {"view"});
}

TEST(Views, ReshapeViewsWhenItCanElseCopies) {
  Tensor x = x234();
  Tensor r = x.reshape({4, 6});
  EXPECT_TRUE(r.shares_storage(x));
  expect_layout(r, {4, 6}, {6, 1}, 0);
  Tensor t = x.transpose(0, 1);
  Tensor c = t.reshape({6, 4});
  EXPECT_FALSE(c.shares_storage(x));
  expect_layout(c, {6, 4}, {4, 1}, 0);
  // t[j][i][k] = 12i + 4j + k, read row by row
  EXPECT_EQ(values(c), V({0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  Tensor x = x234();
  EXPECT_TRUE(x.contiguous().is_same(x));
  Tensor t = x.transpose(0, 2);
  Tensor c = t.contiguous();
  EXPECT_FALSE(c.shares_storage(x));
  expect_layout(c, {4, 3, 2}, {6, 2, 1}, 0);
  EXPECT_EQ(values(c), values(t));
  // a narrowed tensor is not contiguous; a leading select of a contiguous one is
  EXPECT_FALSE(x.narrow(2, 0, 2).is_contiguous());
  EXPECT_TRUE(x.select(0, 1).is_contiguous());
  Tensor second = x.select(0, 1);
  EXPECT_TRUE(second.contiguous().is_same(second));
  // size-1 dims do not count against contiguity (PyTorch ignores their strides)
  EXPECT_TRUE(x.narrow(0, 1, 1).is_contiguous());
}

TEST(Views, WritesThroughAViewReachTheBaseAndBumpOneVersion) {
  Tensor x = x234();
  Tensor row = x.select(1, 0);  // x[:, 0, :]: elements 0..3 and 12..15
  EXPECT_EQ(row.version(), x.version()) << "views share the version counter";
  const uint64_t before = x.version();
  fill_(row, -1);
  EXPECT_EQ(x.version(), before + 1);
  EXPECT_EQ(row.version(), before + 1);
  EXPECT_EQ(values(x.select(1, 0)), V({-1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(values(x.select(1, 1)), V({4, 5, 6, 7, 16, 17, 18, 19}));  // untouched
  Tensor col = x.select(2, 3);
  col.copy_(from_vector({100, 101, 102, 103, 104, 105}, {2, 3}));
  EXPECT_EQ(x.version(), before + 2);
  EXPECT_EQ(values(x.select(0, 1).select(0, 2)), V({20, 21, 22, 105}));
  // a copy has its own counter
  Tensor c = x.clone();
  zero_(c);
  EXPECT_EQ(x.version(), before + 2);
}

TEST(Views, Printing) {
  EXPECT_EQ(from_vector({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1, 2], [3, 4]], size=[2, 2], dtype=float32)");
  EXPECT_EQ(from_vector({1.5, -0.25}, DType::Float64).str(), "tensor([1.5, -0.25], size=[2], dtype=float64)");
  EXPECT_EQ(scalar_tensor(2.5).str(), "tensor(2.5, size=[], dtype=float32)");
  EXPECT_EQ(arange(10).str(), "tensor([0, 1, 2, ..., 7, 8, 9], size=[10], dtype=int64)");
  EXPECT_EQ(from_vector({1, 0}, DType::Bool).str(), "tensor([True, False], size=[2], dtype=bool)");
  EXPECT_EQ(zeros({0, 3}).str(), "tensor([], size=[0, 3], dtype=float32)");
  // printed through the view's strides, not the storage order
  EXPECT_EQ(arange(6, DType::Float32).view({2, 3}).t().str(),
            "tensor([[0, 3], [1, 4], [2, 5]], size=[3, 2], dtype=float32)");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

// Note [Channels-last by strides]: the layouts torch 2.11 reads as channels-last (its pad then
// returns channels-last strides), written as sizes @ strides over one big storage.
TEST(Views, ChannelsLastByStrides) {
  const Tensor store = empty({256}, DType::Float32);
  auto cl = [&](const Shape& sizes, const Shape& strides) {
    return suggests_channels_last(store.as_strided(sizes, strides));
  };
  EXPECT_FALSE(cl({2, 3, 4, 5}, {60, 20, 5, 1}));  // contiguous
  EXPECT_TRUE(cl({2, 3, 4, 5}, {60, 1, 15, 3}));   // NHWC permuted to NCHW
  EXPECT_FALSE(cl({4, 1, 1, 1}, {1, 1, 1, 1}));    // N111: both layouts; contiguous wins
  EXPECT_TRUE(cl({3, 1, 5, 1}, {5, 1, 1, 1}));     // N1H1 channels-last
  EXPECT_FALSE(cl({3, 1, 5, 1}, {5, 5, 1, 1}));    // N1H1 contiguous
  EXPECT_FALSE(cl({1, 3, 1, 4}, {12, 4, 4, 1}));
  EXPECT_TRUE(cl({1, 3, 1, 4}, {12, 1, 12, 3}));
  EXPECT_TRUE(cl({1, 2, 2, 1}, {4, 1, 2, 2}));
  EXPECT_FALSE(cl({2, 3, 4, 5}, {60, 0, 15, 3}));       // broadcast channels
  EXPECT_FALSE(cl({2, 0, 4, 5}, {0, 1, 0, 0}));         // empty
  EXPECT_TRUE(cl({2, 3, 2, 3, 2}, {36, 1, 18, 6, 3}));  // channels-last-3d
  EXPECT_FALSE(cl({2, 3, 2, 3, 2}, {36, 12, 6, 2, 1}));
  EXPECT_FALSE(cl({2, 3, 4}, {12, 1, 3}));  // only 4-D and 5-D have the format
  // is_contiguous(memory_format=torch.channels_last), as torch 2.11 answers it
  auto clc = [&](const Shape& sizes, const Shape& strides) {
    return is_channels_last_contiguous(store.as_strided(sizes, strides));
  };
  EXPECT_FALSE(clc({2, 3, 4, 5}, {60, 20, 5, 1}));
  EXPECT_TRUE(clc({2, 3, 4, 5}, {60, 1, 15, 3}));
  EXPECT_FALSE(clc({2, 3, 4, 5}, {61, 1, 15, 3}));  // a gap between images
  EXPECT_TRUE(clc({1, 2, 1, 2}, {1, 1, 2, 2}));     // size-1 dims: any stride
  EXPECT_FALSE(clc({1, 2, 1, 2}, {1, 2, 1, 1}));
  EXPECT_TRUE(clc({4, 1, 1, 1}, {1, 1, 1, 1}));  // both layouts at once
  EXPECT_TRUE(clc({2, 1, 2, 2}, {4, 1, 2, 1}));
  EXPECT_FALSE(clc({2, 3, 2, 3, 2}, {36, 1, 18, 6, 3}));  // 5-D: channels_last_3d is another format
  expect_layout(empty_channels_last({2, 3, 4, 5}, DType::Float32), {2, 3, 4, 5}, {60, 1, 15, 3}, 0);
  expect_layout(empty_channels_last({2, 3, 2, 3, 2}, DType::Float32), {2, 3, 2, 3, 2}, {36, 1, 18, 6, 3}, 0);
}

}  // namespace
}  // namespace tb
