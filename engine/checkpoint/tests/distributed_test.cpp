// Distributed checkpoints on a world of one (engine/dist/tests/world_of_one.h): the directory
// layout and metadata, row-range loads that verify only the checksum blocks they touch, a
// one-file load, and the errors for missing, mismatched and corrupted data. The multi-rank
// resharding matrix, kill -9 and disk-full trials live in suites/dcp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/distributed.h"
#include "engine/core/tests/error_of.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/tensor/factories.h"

namespace tb::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_contains;

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tb_engine_dcp_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    dist::Options o;
    o.run_dir = dir_.string();
    o.watchdog = false;
    group_ = std::make_shared<testing::WorldOfOne>(o);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string root() const { return (dir_ / "ckpt").string(); }

  // 3 x 100000 floats (1.2 MB: two checksum blocks) with values i, and a 0-dim int64.
  static DistributedState sample(int64_t step) {
    DistributedState s;
    Tensor big = arange(0, 300000, 1, DType::Float32).view({100000, 3});
    s.tensors.push_back({"w", big, {100000, 3}, 0});
    s.tensors.push_back({"n", full({}, 7, DType::Int64), {}, 0});
    s.state = {{"lr", 0.5}};
    s.step = step;
    s.layout = "single";
    return s;
  }
  static void flip_byte(const std::string& path, int64_t from_end) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-from_end, std::ios::end);
    char c;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(-from_end, std::ios::end);
    f.write(&c, 1);
  }

  fs::path dir_;
  std::shared_ptr<dist::ProcessGroup> group_;
};

TEST_F(Distributed, SavesRankFilesThenMetadataAndMovesLatest) {
  save_distributed(sample(3), root(), *group_);
  EXPECT_EQ(read_small_file(root() + "/latest"), "step-3\n");
  EXPECT_TRUE(fs::exists(root() + "/step-3/rank-0.safetensors"));
  const DistributedMetadata m = read_distributed_metadata(root());
  EXPECT_EQ(m.step, 3);
  EXPECT_EQ(m.world_size, 1);
  EXPECT_EQ(m.layout, "single");
  EXPECT_EQ(m.state["lr"], 0.5);
  ASSERT_EQ(m.tensors.size(), 2u);
  const SavedTensor* w = m.find("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->shape, (Shape{100000, 3}));
  ASSERT_EQ(w->chunks.size(), 1u);
  EXPECT_EQ(w->chunks[0].row_end, 100000);
  EXPECT_EQ(w->chunks[0].block_checksums.size(), 2u);  // 1.2 MB in 1 MiB blocks
  EXPECT_TRUE(is_distributed_checkpoint(root()));
  EXPECT_FALSE(is_distributed_checkpoint(dir_.string()));
}

TEST_F(Distributed, LoadsAnyRowRangeWithItsValues) {
  save_distributed(sample(1), root(), *group_);
  DistributedState s;
  Tensor rows = zeros({5, 3}, DType::Float32);  // rows 87380..87384 straddle the 1 MiB block edge
  Tensor n = zeros({}, DType::Int64);
  s.tensors.push_back({"w", rows, {100000, 3}, 87380});
  s.tensors.push_back({"n", n, {}, 0});
  const uint64_t rows_version = rows.version(), n_version = n.version();
  const LoadStats st = load_distributed(s, root(), *group_);
  // Written in place, so their versions move, as copy_'s do: caches keyed on the version (autocast's
  // weight shadows, tensors saved for backward) must not trust the old values.
  EXPECT_GT(rows.version(), rows_version);
  EXPECT_GT(n.version(), n_version);
  const float* r = rows.data_ptr<float>();
  for (int i = 0; i < 15; ++i) EXPECT_EQ(r[i], float(87380 * 3 + i));
  EXPECT_EQ(n.data_ptr<int64_t>()[0], 7);
  EXPECT_EQ(s.state["lr"], 0.5);
  EXPECT_EQ(s.step, 1);
  EXPECT_GE(st.bytes_read, 60 + 8);
  // Rows inside the second block read that block (to verify it) and nothing of the first.
  DistributedState tail;
  tail.tensors.push_back({"w", zeros({5, 3}, DType::Float32), {100000, 3}, 90000});
  EXPECT_EQ(load_distributed(tail, root(), *group_).bytes_read, 1200000 - (int64_t(1) << 20));
  EXPECT_EQ(tail.tensors[0].local.data_ptr<float>()[0], float(270000));
}

TEST_F(Distributed, AConsolidatedFileLoadsLikeTheDirectory) {
  save_distributed(sample(2), root(), *group_);
  const DistributedMetadata m = read_distributed_metadata(root());
  const std::string file = (dir_ / "all.safetensors").string();
  save_file(file, read_distributed_full(m),
            {{"trainbench.state", nlohmann::json({{"state", m.state}, {"step", 2}}).dump()}});
  DistributedState s;
  Tensor rows = zeros({2, 3}, DType::Float32);
  s.tensors.push_back({"w", rows, {100000, 3}, 99998});
  load_distributed(s, file, *group_);
  EXPECT_EQ(rows.data_ptr<float>()[5], float(299999));
  EXPECT_EQ(s.step, 2);
  EXPECT_EQ(s.state["lr"], 0.5);
}

TEST_F(Distributed, ACorruptByteNamesTheFileAndTheTensor) {
  save_distributed(sample(1), root(), *group_);
  flip_byte(root() + "/step-1/rank-0.safetensors", 100);  // inside w's last rows
  DistributedState s;
  s.tensors.push_back({"w", zeros({100000, 3}, DType::Float32), {100000, 3}, 0});
  const std::string e = error_of([&] { load_distributed(s, root(), *group_); });
  expect_contains(e, {"rank-0.safetensors"});
  expect_contains(e, {"tensor 'w'"});
  expect_contains(e, {"checksum mismatch"});
  // Rows far from the damaged block still load (their blocks are intact).
  DistributedState head;
  head.tensors.push_back({"w", zeros({10, 3}, DType::Float32), {100000, 3}, 0});
  load_distributed(head, root(), *group_);
  const auto checks = verify_distributed(read_distributed_metadata(root()));
  int bad = 0;
  for (const ChunkCheck& c : checks) bad += !c.ok;
  EXPECT_EQ(bad, 1);
}

TEST_F(Distributed, MismatchesAndHostileMetadataAreClearErrors) {
  save_distributed(sample(1), root(), *group_);
  DistributedState s;
  s.tensors.push_back({"nope", zeros({1}, DType::Float32), {1}, 0});
  expect_contains(error_of([&] { load_distributed(s, root(), *group_); }), {"has no tensor 'nope'"});
  s.tensors = {{"w", zeros({1, 3}, DType::Float64), {100000, 3}, 0}};
  expect_contains(error_of([&] { load_distributed(s, root(), *group_); }),
                  {"holds float32 [100000, 3], this model wants float64"});
  s.tensors = {{"w", zeros({2, 3}, DType::Float32), {100000, 3}, 99999}};
  expect_contains(error_of([&] { load_distributed(s, root(), *group_); }), {"does not fit"});
  // A metadata file pointing outside the step directory.
  const std::string meta = root() + "/step-1/metadata.json";
  std::string text = read_small_file(meta);
  const size_t at = text.find("rank-0.safetensors");
  ASSERT_NE(at, std::string::npos);
  write_file_atomic(meta, text.substr(0, at) + "../../x.safetensors" + text.substr(at + 18));
  expect_contains(error_of([&] { read_distributed_metadata(root()); }), {"is not rank-<N>.safetensors"});
  write_file_atomic(meta, "{\"format\": 3");
  expect_contains(error_of([&] { read_distributed_metadata(root()); }), {"metadata.json"});
}

TEST_F(Distributed, BadLocalStateFailsBeforeAnythingIsWritten) {
  save_distributed(sample(1), root(), *group_);
  DistributedState s = sample(2);
  s.tensors[0].row_offset = 5;  // rows [5, 100005) of 100000
  expect_contains(error_of([&] { save_distributed(s, root(), *group_); }), {"lie outside"});
  s = sample(2);
  s.tensors[0].local = s.tensors[0].local.narrow(0, 0, 50);  // rows [50, 100000) held by no rank
  expect_contains(error_of([&] { save_distributed(s, root(), *group_); }), {"no rank holds rows from 50"});
  s = sample(2);
  s.state["best_loss"] = std::nan("");  // JSON has no NaN: it would load as null
  expect_contains(error_of([&] { save_distributed(s, root(), *group_); }), {"state.best_loss is NaN or infinite"});
  s = sample(1'000'000'000'000'000'000);  // a step directory name of 19 digits no load reads
  expect_contains(error_of([&] { save_distributed(s, root(), *group_); }), {"at most 18 digits"});
  EXPECT_EQ(read_small_file(root() + "/latest"), "step-1\n");
  EXPECT_FALSE(fs::exists(root() + "/step-2"));
}

}  // namespace
}  // namespace tb::checkpoint
