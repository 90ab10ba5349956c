// The checkpoint format byte by byte for a tiny tensor (Note [File format] in safetensors.h), a
// round trip of every dtype and layout, the errors for truncated and corrupted files, and a
// training-state round trip through the checkpoint directory (Note [Checkpoint directory]).
#include <gtest/gtest.h>
#include <unistd.h>

#define XXH_INLINE_ALL  // the checksum computed here independently of the engine's call
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/step_dir.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/tests/error_of.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "engine/tensor/tests/values.h"

namespace tb::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_contains;
using testing::values;
using V = std::vector<double>;

// A fresh directory per test, removed afterwards.
class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tb_engine_checkpoint_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static void write(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path dir_;
};

TEST_F(Checkpoint, SafetensorsLayoutByteByByte) {
  const std::string p = path("w.safetensors");
  save_file(p, {{"w", from_vector({1.0, -2.0})}}, {{"step", "3"}});
  const std::string bytes = read(p);
  // float32 1.0 = 0x3F800000, -2.0 = 0xC0000000, little-endian
  const std::string data("\x00\x00\x80\x3F\x00\x00\x00\xC0", 8);
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(XXH64(data.data(), data.size(), 0)));
  // __metadata__ first (user entries, then one checksum per tensor), then the tensors; 114
  // characters padded with 6 spaces so that the data starts at byte 8 + 120 = 128.
  const std::string header = std::string("{\"__metadata__\":{\"step\":\"3\",\"checksum.w\":\"") + sum +
                             "\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}      ";
  ASSERT_EQ(header.size(), 120u);
  ASSERT_EQ(bytes.size(), 8u + 120u + 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x78\0\0\0\0\0\0\0", 8)) << "header length 120, u64 little-endian";
  EXPECT_EQ(bytes.substr(8, 120), header);
  EXPECT_EQ(bytes.substr(128), data);
  // and it reads back: the values, the user metadata without the checksum entries
  const LoadedFile f = load_file(p);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].first, "w");
  EXPECT_EQ(values(f.tensors[0].second), V({1, -2}));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"step", "3"}}));
}

TEST_F(Checkpoint, RoundTripOfEveryDTypeAndLayout) {
  const std::string p = path("all.safetensors");
  NamedTensors in = {
      {"f64", from_vector({0.1, -1e300}, DType::Float64)},
      {"bf16", from_vector({1.5, -3}, DType::BFloat16)},
      {"f16", from_vector({0.5, 65504}, DType::Float16)},
      {"i64", from_vector({-(1LL << 40), 7}, DType::Int64)},
      {"i32", from_vector({-5, 5}, DType::Int32)},
      {"b", from_vector({1, 0, 1}, DType::Bool)},
      {"scalar", scalar_tensor(4.25)},
      {"empty", zeros({0, 3})},
      {"transposed", arange(6, DType::Float32).view({2, 3}).t()},  // written contiguously
  };
  save_file(p, in);
  const LoadedFile f = load_file(p);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& [name, t] = f.tensors[i];
    EXPECT_EQ(name, in[i].first) << "tensors come back in data-offset order, which is the saved order";
    EXPECT_EQ(t.dtype(), in[i].second.dtype()) << name;
    EXPECT_EQ(t.sizes(), in[i].second.sizes()) << name;
    EXPECT_EQ(values(t), values(in[i].second)) << name;
  }
  EXPECT_EQ(values(f.tensors.back().second), V({0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(f.metadata.empty());
  // a floating cast on load leaves the integer tensors alone
  const LoadedFile cast = load_file(p, {.dtype = DType::Float32});
  EXPECT_EQ(cast.tensors[0].second.dtype(), DType::Float32);
  EXPECT_EQ(cast.tensors[3].second.dtype(), DType::Int64);
  EXPECT_STREQ(format_dtype_name(DType::BFloat16), "BF16");
  EXPECT_EQ(dtype_from_format_name("I32"), DType::Int32);
  EXPECT_EQ(dtype_from_format_name("F8"), std::nullopt);
}

TEST_F(Checkpoint, TruncatedAndCorruptedFilesAreClearErrors) {
  const std::string p = path("w.safetensors");
  save_file(p, {{"w", from_vector({1.0, -2.0})}});
  const std::string good = read(p);
  const std::string bad = path("bad.safetensors");
  write(bad, good.substr(0, good.size() - 1));
  EXPECT_EQ(error_of([&] { load_file(bad); }),
            "checkpoint.load: '" + bad +
                "': tensor 'w': data_offsets [0,8] reach past the data section of 7 bytes "
                "(the file is truncated or the header is corrupt)");
  write(bad, good.substr(0, 5));
  EXPECT_EQ(error_of([&] { load_file(bad); }),
            "checkpoint.load: '" + bad + "': it is 5 bytes, too short for the 8-byte header length");
  write(bad, good.substr(0, 100));
  const uint64_t n = uint64_t(uint8_t(good[0]));  // < 256 here, so one byte says it all
  expect_contains(error_of([&] { load_file(bad); }),
                  {"header length " + std::to_string(n) + " exceeds the 92 bytes after the length field", "truncated"});
  std::string flipped = good;
  flipped.back() ^= 0x01;  // one bit of -2.0
  write(bad, flipped);
  expect_contains(error_of([&] { load_file(bad); }), {"tensor 'w'", "checksum mismatch", "the file is corrupt"});
  EXPECT_EQ(load_file(bad, {.verify_checksums = false}).tensors.size(), 1u);
  expect_contains(error_of([&] { load_file(path("missing.safetensors")); }), {"missing.safetensors"});
  expect_contains(error_of([&] { save_file(p, {{"w", zeros({1})}, {"w", zeros({1})}}); }), {"w"});
}

// Files of more than 4 MiB are hashed, written and read by several threads (Note [Load and save
// I/O] in safetensors.cpp): the bytes, the checksums, the error for the first bad tensor in data
// order, the BOOL check and a dtype conversion (in batches of 32 MiB) are those of one thread.
TEST_F(Checkpoint, LargeFilesOnSeveralThreadsBehaveAsOnOne) {
  struct Threads {
    int before = num_threads();
    ~Threads() { set_num_threads(before); }
  } restore;
  set_num_threads(2);
#if defined(__SANITIZE_THREAD__)  // GCC's ThreadSanitizer (ci/tsan builds with GCC)
  // libgomp is not instrumented: its team's barriers are invisible to ThreadSanitizer, so every
  // OpenMP team reports races (ci/tsan runs the engine with OMP_NUM_THREADS=1 for that reason).
  GTEST_SKIP() << "two OpenMP threads under ThreadSanitizer (uninstrumented libgomp)";
#endif
  constexpr int kTensors = 10;
  constexpr size_t kElements = size_t(1) << 20;
  NamedTensors in;
  std::vector<double> v(kElements);
  for (int i = 0; i < kTensors; ++i) {
    for (size_t j = 0; j < v.size(); ++j) v[j] = double(i) * 1e6 + double(j) + 0.25;  // exact in float32
    in.emplace_back("t" + std::to_string(i), from_vector(v));
  }
  std::vector<double> mask(kElements);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = double(i % 3 == 0);
  in.emplace_back("mask", from_vector(mask, DType::Bool));
  const std::string p = path("big.safetensors");
  save_file(p, in);
  const std::string bytes = read(p);
  const FileIndex idx = read_index(p);
  ASSERT_EQ(idx.tensors.size(), in.size());
  const LoadedFile f = load_file(p);
  ASSERT_EQ(f.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const IndexEntry& e = idx.tensors[i];
    const Tensor& t = in[i].second;
    ASSERT_EQ(e.nbytes, uint64_t(t.numel()) * t.itemsize()) << e.name;
    EXPECT_EQ(std::memcmp(bytes.data() + e.offset, t.data(), e.nbytes), 0) << e.name;
    char sum[17];
    std::snprintf(sum, sizeof sum, "%016llx",
                  static_cast<unsigned long long>(XXH64(bytes.data() + e.offset, e.nbytes, 0)));
    EXPECT_EQ(e.checksum, sum) << e.name;
    EXPECT_EQ(f.tensors[i].first, in[i].first);
    EXPECT_EQ(std::memcmp(f.tensors[i].second.data(), t.data(), e.nbytes), 0) << e.name;
  }
  const std::string bad = path("bad.safetensors");
  std::string flipped = bytes;
  flipped[idx.tensors[kTensors - 1].offset + 100] ^= 1;  // a later tensor is bad too
  flipped[idx.tensors[1].offset + 7] ^= 1;
  write(bad, flipped);
  const std::string err = error_of([&] { load_file(bad); });
  expect_contains(err, {bad, "tensor 't1'", "checksum mismatch"});  // the first in file order
  EXPECT_EQ(err.find("'t" + std::to_string(kTensors - 1) + "'"), std::string::npos) << err;
  std::string not_bool = bytes;
  not_bool[idx.tensors[kTensors].offset + 5] = 2;
  write(bad, not_bool);
  EXPECT_EQ(error_of([&] { load_file(bad, {.verify_checksums = false}); }),
            "checkpoint.load: '" + bad + "': tensor 'mask': BOOL byte 5 is 2, not 0 or 1");
  const LoadedFile wide = load_file(p, {.dtype = DType::Float64});
  ASSERT_EQ(wide.tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = wide.tensors[i].second;
    EXPECT_EQ(t.dtype(), i < size_t(kTensors) ? DType::Float64 : DType::Bool) << in[i].first;
    const Tensor back = t.to(in[i].second.dtype());  // float32 -> float64 -> float32 is exact
    EXPECT_EQ(std::memcmp(back.data(), in[i].second.data(), idx.tensors[i].nbytes), 0) << in[i].first;
  }
}

// SaveFileOptions: the block checksums (here blocks of 100,000 bytes, which cut the writer's
// 256 KiB pieces unevenly) and the whole-tensor checksums equal XXH64 of the written bytes; an
// in-place file is created under its own name (an existing one is an error and stays untouched).
TEST_F(Checkpoint, SaveFileOptionsBlockChecksumsAndInPlace) {
  std::vector<double> v(300'000);  // 1.2 MB: 12 blocks, the last 0.4 of one
  for (size_t j = 0; j < v.size(); ++j) v[j] = double(j) * 0.5;
  const NamedTensors in = {{"big", from_vector(v)}, {"one", from_vector({7.0})}, {"none", zeros({0})}};
  const std::string p = path("blocks.safetensors");
  SaveFileOptions o;
  o.block_bytes = 100'000;
  o.atomic = false;
  const std::vector<WrittenChecksums> sums = save_file(p, in, {}, o);
  ASSERT_EQ(sums.size(), in.size());
  const std::string bytes = read(p);
  const FileIndex idx = read_index(p);
  for (size_t i = 0; i < in.size(); ++i) {
    const IndexEntry& e = *idx.find(in[i].first);
    const char* data = bytes.data() + e.offset;
    EXPECT_EQ(sums[i].whole, XXH64(data, e.nbytes, 0)) << e.name;
    std::vector<uint64_t> want;
    for (uint64_t off = 0; off < e.nbytes; off += 100'000)
      want.push_back(XXH64(data + off, std::min<uint64_t>(100'000, e.nbytes - off), 0));
    EXPECT_EQ(sums[i].blocks, want) << e.name;
  }
  EXPECT_EQ(sums[0].blocks.size(), 12u);
  EXPECT_TRUE(sums[2].blocks.empty());
  EXPECT_EQ(values(load_file(p).tensors[1].second), V{7.0});
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u) << "an in-place save leaves no temporary";
  expect_contains(error_of([&] { save_file(p, {{"x", zeros({1})}}, {}, o); }), {"cannot create", p});
  EXPECT_EQ(read(p), bytes);
  o.block_bytes = -1;
  expect_contains(error_of([&] { save_file(path("neg.safetensors"), in, {}, o); }), {"block_bytes must be >= 0"});
}

TEST_F(Checkpoint, TrainingStateRoundTrip) {
  core::Generator gen(1234);
  gen.reserve(10);
  TrainingState s;
  s.model = {{"linear.weight", from_vector({1, 2, 3, 4}, {2, 2})}, {"linear.bias", from_vector({0.5, -0.5})}};
  s.optimizer_tensors = {{"state.0.exp_avg", from_vector({0.25, 0.75})}};
  s.optimizer = {{"lr", 0.01}, {"betas", {0.9, 0.999}}};
  s.scheduler = {{"last_epoch", 3}};
  s.rng = {{"default", rng_state(gen)}};
  s.step = 7;
  s.epoch = 2;
  s.config = {{"batch_size", 32}};
  save_checkpoint(dir_.string(), s);
  EXPECT_EQ(read(path("latest")), "step-7\n");
  EXPECT_EQ(latest_checkpoint(dir_.string()), path("step-7"));
  const TrainingState r = load_checkpoint(dir_.string());
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.epoch, 2);
  EXPECT_EQ(r.optimizer, s.optimizer);
  EXPECT_EQ(r.scheduler, s.scheduler);
  EXPECT_EQ(r.config, s.config);
  ASSERT_EQ(r.model.size(), 2u);
  EXPECT_EQ(r.model[0].first, "linear.weight");
  EXPECT_EQ(values(r.model[0].second), V({1, 2, 3, 4}));
  EXPECT_EQ(values(r.optimizer_tensors.at(0).second), V({0.25, 0.75}));
  EXPECT_EQ(r.rng["default"], (nlohmann::json{{"seed", 1234}, {"offset", 10}}));
  core::Generator back;
  set_rng_state(back, r.rng["default"]);
  EXPECT_EQ(back.seed(), 1234u);
  EXPECT_EQ(back.offset(), 10u);
  // a later step becomes `latest`; keep_last = 1 removes the older directory
  s.step = 8;
  save_checkpoint(dir_.string(), s, /*keep_last=*/1);
  EXPECT_EQ(read(path("latest")), "step-8\n");
  EXPECT_FALSE(fs::exists(path("step-7")));
  EXPECT_EQ(load_checkpoint(path("step-8")).step, 8);
}

// What a save cannot write faithfully it refuses, leaving `latest` as it was: a NaN or infinite
// number anywhere in the JSON (nlohmann wrote null: the resumed config differed, and reading it
// as a number threw), and a step whose directory name a load would refuse (19 digits and more).
TEST_F(Checkpoint, SaveRefusesWhatItCouldNotLoadBack) {
  TrainingState s;
  s.model = {{"w", from_vector({1, 2})}};
  s.step = 1;
  save_checkpoint(dir_.string(), s);
  const auto refused = [&](const TrainingState& bad) { return error_of([&] { save_checkpoint(dir_.string(), bad); }); };
  TrainingState bad = s;
  bad.step = 2;
  bad.config = {{"max_grad_norm", std::numeric_limits<double>::infinity()}};
  expect_contains(refused(bad), {"config.max_grad_norm is NaN or infinite"});
  bad.config = {{"clip", 1.0}};
  bad.extra = {{"losses", {0.5, std::nan("")}}};
  expect_contains(refused(bad), {"extra.losses[1] is NaN or infinite"});
  bad.extra = {{"best", "inf"}};  // as a string, as the schedulers write it: fine
  bad.step = kMaxStep + 1;
  expect_contains(refused(bad), {"at most 18 digits"});
  EXPECT_EQ(read(path("latest")), "step-1\n");
  EXPECT_FALSE(fs::exists(path("step-2")));
  bad.step = kMaxStep;  // the largest step saves and loads
  save_checkpoint(dir_.string(), bad);
  const TrainingState r = load_checkpoint(dir_.string());
  EXPECT_EQ(r.step, kMaxStep);
  EXPECT_EQ(r.extra, bad.extra);
}

}  // namespace
}  // namespace tb::checkpoint
