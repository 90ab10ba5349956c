// `trainbench checkpoint inspect|consolidate` through the CLI's main (harness/cli.h), in process,
// on checkpoints written here (one process: a world-1 group): what inspect shows and its JSON,
// --verify on a good and a flipped byte, consolidate's file loading back with load_distributed,
// one-process checkpoints and plain safetensors files, hostile input (metadata that is not JSON,
// a missing rank file, no checkpoint at all, a FIFO for a file, integers out of range, sizes the
// files do not hold) as one clear error and an exit status, never a crash, a hang or a wrapped
// number; and interop: a checkpoint saved by torch.distributed.checkpoint on 2 Gloo ranks, converted by
// reference/dist/torch_dcp_convert.py, loads into an equal engine model with PyTorch's values.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/distributed.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/training_state.h"
#include "engine/dist/process_group.h"
#include "engine/nn/models.h"
#include "engine/tensor/factories.h"
#include "engine/train/distributed_checkpoint.h"
#include "harness/tests/cli_run.h"

namespace {

namespace fs = std::filesystem;
using tb::DType;
using tb::Tensor;
using tb::harness::testing::CliRun;
using tb::harness::testing::run;
namespace ckpt = tb::checkpoint;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

tb::dist::ProcessGroup& group() {
  static std::shared_ptr<tb::dist::ProcessGroup> g = tb::dist::new_group("mpi");
  return *g;
}

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/tb_checkpoint_cmd_XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data(), b.contiguous().data(), size_t(a.numel()) * tb::core::itemsize(a.dtype())) ==
             0;
}

// A world-1 distributed checkpoint: a 5x3 weight, a 4-element int64 tensor and a 0-dim step.
ckpt::DistributedState sample_state() {
  ckpt::DistributedState s;
  s.step = 7;
  s.layout = "ddp";
  s.state = {{"optimizer", {{"lr", 0.5}}}};
  tb::core::Generator gen(3);
  s.tensors.push_back({"model.w", tb::randn({5, 3}, DType::Float32, &gen), {5, 3}, 0});
  s.tensors.push_back({"model.ids", tb::from_vector({1.0, 2.0, 3.0, 4.0}, {4}, DType::Int64), {4}, 0});
  s.tensors.push_back({"optim.w.step", tb::from_vector({2.0}, {}, DType::Float32), {}, 0});
  return s;
}

std::string save_sample(const fs::path& root) {
  const ckpt::SaveStats st = ckpt::save_distributed(sample_state(), root.string(), group());
  return st.step_dir;
}

// `run` in a forked child killed by SIGALRM after `seconds`: for input that made the command wait
// for ever (a FIFO), so a regression fails the test instead of hanging it. The child's peak
// resident memory comes back too (it starts at this process's, inherited at the fork).
struct ChildRun : CliRun {
  bool hung = false;
  int64_t max_rss_kib = 0;
};
ChildRun run_child(const std::vector<std::string>& args, unsigned seconds = 20) {
  TempDir io;
  const fs::path out = io.path / "out", err = io.path / "err";
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::signal(SIGALRM, SIG_DFL);
    ::alarm(seconds);
    int code = 99;
    try {
      const CliRun r = run(args);
      std::ofstream(out) << r.out;
      std::ofstream(err) << r.err;
      code = r.code;
    } catch (...) {
    }
    ::_exit(code);
  }
  ChildRun c;
  if (pid < 0) {
    c.err = std::string("fork failed: ") + std::strerror(errno);
    return c;
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  c.max_rss_kib = ru.ru_maxrss;
  if (WIFEXITED(status)) {
    c.code = WEXITSTATUS(status);
    std::stringstream o, e;
    o << std::ifstream(out).rdbuf();
    e << std::ifstream(err).rdbuf();
    c.out = o.str();
    c.err = e.str();
  } else {
    c.hung = WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
    c.err = "killed by signal " + std::to_string(WIFSIGNALED(status) ? WTERMSIG(status) : 0) +
            (c.hung ? " after " + std::to_string(seconds) + " s: the command hung" : "");
  }
  return c;
}

// This process's resident memory now, in KiB.
int64_t rss_kib() {
  long pages = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  return int64_t(resident) * ::sysconf(_SC_PAGESIZE) / 1024;
}

void make_fifo(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0) << p << ": " << std::strerror(errno);
}

// Flips one byte of a file at `from_end` bytes before its end (inside the data section).
void flip_byte(const fs::path& file, std::streamoff from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 0x40);
  f.seekp(-from_end, std::ios::end);
  f.write(&c, 1);
}

TEST(CheckpointCli, InspectDistributed) {
  TempDir d;
  const std::string step_dir = save_sample(d.path);
  CliRun r = run({"checkpoint", "inspect", d.path.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "distributed checkpoint " + step_dir)) << r.out;
  EXPECT_TRUE(has(r.out, "layout ddp, world size 1, step 7")) << r.out;
  EXPECT_TRUE(has(r.out, "model.w")) << r.out;
  EXPECT_TRUE(has(r.out, "[5, 3]")) << r.out;
  EXPECT_TRUE(has(r.out, "rows [0, 5)  rank-0.safetensors (rank 0)")) << r.out;
  EXPECT_TRUE(has(r.out, "metadata.json")) << r.out;
  EXPECT_TRUE(has(r.out, "total: 3 tensors, 3 chunks, 96 bytes of data")) << r.out;  // 60 + 32 + 4

  r = run({"checkpoint", "inspect", step_dir, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "distributed");
  EXPECT_EQ(j["step"], 7);
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["layout"], "ddp");
  ASSERT_EQ(j["tensors"].size(), 3u);
  for (const nlohmann::json& t : j["tensors"])
    if (t["name"] == "model.ids") {
      EXPECT_EQ(t["dtype"], "I64");
      EXPECT_EQ(t["bytes"], 32);
      EXPECT_EQ(t["chunks"][0]["rows"], nlohmann::json({0, 4}));
      EXPECT_EQ(t["chunks"][0]["writer"], 0);
      EXPECT_EQ(t["chunks"][0]["file"], "rank-0.safetensors");
    }
  EXPECT_EQ(j["totals"]["data_bytes"], 96);
}

TEST(CheckpointCli, VerifyFindsAFlippedByte) {
  TempDir d;
  const std::string step_dir = save_sample(d.path);
  CliRun r = run({"checkpoint", "inspect", d.path.string(), "--verify"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "checksums: 3 of 3 chunks ok")) << r.out;

  // The data section ends with the tensors' bytes: the last byte belongs to one of them.
  flip_byte(fs::path(step_dir) / "rank-0.safetensors", 1);
  r = run({"checkpoint", "inspect", d.path.string(), "--verify"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "BAD")) << r.out;
  EXPECT_TRUE(has(r.out, "2 of 3 chunks ok, 1 BAD")) << r.out;
  EXPECT_TRUE(has(r.err, "1 chunks failed verification")) << r.err;
  r = run({"checkpoint", "inspect", d.path.string(), "--verify", "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(nlohmann::json::parse(r.out)["totals"]["bad_chunks"], 1);
  // Without --verify the listing still works (no data is read).
  r = run({"checkpoint", "inspect", d.path.string()});
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(CheckpointCli, ConsolidateLoadsBack) {
  TempDir d;
  save_sample(d.path);
  const std::string out = (d.path / "all.safetensors").string();
  CliRun r = run({"checkpoint", "consolidate", d.path.string(), out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "consolidated 3 tensors (96 bytes) of step 7")) << r.out;

  // Any safetensors reader: our own, with the state in the metadata.
  const ckpt::LoadedFile f = ckpt::load_file(out);
  ASSERT_EQ(f.tensors.size(), 3u);
  const nlohmann::json state = nlohmann::json::parse(f.metadata.at("trainbench.state"));
  EXPECT_EQ(state["step"], 7);
  EXPECT_EQ(state["state"]["optimizer"]["lr"], 0.5);

  // load_distributed of the one file restores the values, the step and the state.
  const ckpt::DistributedState saved = sample_state();
  ckpt::DistributedState back = sample_state();
  for (ckpt::ShardedEntry& e : back.tensors) e.local = tb::zeros_like(e.local);
  ckpt::load_distributed(back, out, group());
  for (size_t i = 0; i < saved.tensors.size(); ++i)
    EXPECT_TRUE(same_bytes(back.tensors[i].local, saved.tensors[i].local)) << saved.tensors[i].name;
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.state["optimizer"]["lr"], 0.5);
  EXPECT_EQ(ckpt::read_distributed_metadata(out).step, 7);

  // inspect reads the consolidated file as a safetensors file and verifies it.
  r = run({"checkpoint", "inspect", out, "--verify"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "safetensors file " + out)) << r.out;
  EXPECT_TRUE(has(r.out, "step 7")) << r.out;
  EXPECT_TRUE(has(r.out, "checksums: 3 of 3 chunks ok")) << r.out;
}

// Past 64 MiB consolidate says how far it got on stderr; --quiet silences it.
TEST(CheckpointCli, ConsolidateProgress) {
  TempDir d;
  ckpt::DistributedState s;
  s.step = 1;
  for (int i = 0; i < 3; ++i) s.tensors.push_back({"t" + std::to_string(i), tb::zeros({6, 1 << 20}), {6, 1 << 20}, 0});
  ckpt::save_distributed(s, d.path.string(), group());  // 72 MiB
  const std::string out = (d.path / "all.safetensors").string();
  CliRun r = run({"checkpoint", "consolidate", d.path.string(), out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "consolidate: read 3/3 tensors, 72.0 MiB of 72.0 MiB")) << r.err;
  EXPECT_TRUE(has(r.err, "consolidate: writing " + out)) << r.err;
  r = run({"checkpoint", "consolidate", "--quiet", d.path.string(), out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(CheckpointCli, OneProcessCheckpointAndPlainFile) {
  TempDir d;
  ckpt::TrainingState s;
  s.model = {{"fc.weight", tb::randn({4, 2})}, {"fc.bias", tb::zeros({4})}};
  s.optimizer_tensors = {{"0.exp_avg", tb::zeros({4, 2})}};
  s.step = 3;
  s.epoch = 1;
  ckpt::save_checkpoint(d.path.string(), s);
  CliRun r = run({"checkpoint", "inspect", d.path.string(), "--verify"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "one-process checkpoint")) << r.out;
  EXPECT_TRUE(has(r.out, "step 3, epoch 1")) << r.out;
  EXPECT_TRUE(has(r.out, "fc.weight")) << r.out;
  EXPECT_TRUE(has(r.out, "optimizer.safetensors")) << r.out;
  EXPECT_TRUE(has(r.out, "checksums: 3 of 3 chunks ok")) << r.out;

  r = run({"checkpoint", "consolidate", d.path.string(), (d.path / "x.safetensors").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "is a one-process checkpoint")) << r.err;

  const std::string step_dir = ckpt::latest_checkpoint(d.path.string());
  flip_byte(fs::path(step_dir) / "model.safetensors", 1);
  r = run({"checkpoint", "inspect", step_dir, "--verify"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "BAD: checksum mismatch")) << r.out;

  const std::string plain = (d.path / "plain.safetensors").string();
  ckpt::save_file(plain, {{"a", tb::ones({3})}});
  r = run({"checkpoint", "inspect", plain, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["kind"], "safetensors");
}

// Hostile or broken input: exit 1 (2 for a path that does not exist), a message naming the file,
// never a crash.
TEST(CheckpointCli, BrokenInput) {
  TempDir d;
  const std::string step_dir = save_sample(d.path);
  const fs::path meta = fs::path(step_dir) / "metadata.json";

  CliRun r = run({"checkpoint", "inspect", (d.path / "nothing").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "no such file or directory")) << r.err;

  r = run({"checkpoint", "inspect", d.path.string(), "extra"});
  EXPECT_EQ(r.code, 2);

  const fs::path empty = d.path / "empty";
  fs::create_directories(empty);
  r = run({"checkpoint", "inspect", empty.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "holds no checkpoint")) << r.err;
  r = run({"checkpoint", "consolidate", empty.string(), (d.path / "o.safetensors").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "holds no distributed checkpoint")) << r.err;

  // A missing rank file: inspect names it; consolidate fails naming it.
  fs::rename(fs::path(step_dir) / "rank-0.safetensors", d.path / "moved");
  r = run({"checkpoint", "inspect", d.path.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "rank-0.safetensors: missing")) << r.err;
  r = run({"checkpoint", "inspect", d.path.string(), "--verify"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out + r.err, "rank-0.safetensors")) << r.out << r.err;
  r = run({"checkpoint", "consolidate", d.path.string(), (d.path / "o.safetensors").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.err, "rank-0.safetensors")) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "o.safetensors"));
  fs::rename(d.path / "moved", fs::path(step_dir) / "rank-0.safetensors");

  // metadata.json that is not JSON, then JSON of the wrong shape.
  for (const std::string text : {std::string("{not json"), std::string("[1, 2, 3]"),
                                 std::string(R"({"format": "trainbench.distributed", "tensors": 5})")}) {
    std::ofstream(meta, std::ios::trunc) << text;
    r = run({"checkpoint", "inspect", d.path.string()});
    EXPECT_EQ(r.code, 1) << text;
    EXPECT_TRUE(has(r.err, "metadata.json")) << text << ": " << r.err;
    r = run({"checkpoint", "consolidate", d.path.string(), (d.path / "o.safetensors").string()});
    EXPECT_EQ(r.code, 1) << text;
    EXPECT_TRUE(has(r.err, "metadata.json")) << text << ": " << r.err;
  }

  // An output that cannot be written is a usage error.
  r = run({"checkpoint", "consolidate", d.path.string(), d.path.string()});
  EXPECT_EQ(r.code, 2);
}

// A FIFO where a file should be: open(2) of it waited for a writer for ever (inspect of a state.json,
// a `latest` or, with --verify, a rank file; consolidate). Now a clear error naming the file, exit 1;
// a FIFO as PATH itself is a usage error (exit 2). Every command runs in a child with an alarm.
TEST(CheckpointCli, AFifoIsRefusedNotWaitedOn) {
  TempDir d;
  auto expect_refused = [](const ChildRun& r, int code, const std::string& file, const std::string& what) {
    EXPECT_FALSE(r.hung) << r.err;
    EXPECT_EQ(r.code, code) << r.out << r.err;
    EXPECT_TRUE(has(r.out + r.err, file)) << r.out << r.err;
    EXPECT_TRUE(has(r.out + r.err, what)) << r.out << r.err;
  };
  // One process: state.json, then `latest`.
  const fs::path state = d.path / "fifo_state";
  fs::create_directories(state);
  make_fifo(state / "state.json");
  expect_refused(run_child({"checkpoint", "inspect", state.string()}), 1, "state.json",
                 "is a FIFO, not a regular file");
  const fs::path latest = d.path / "fifo_latest";
  fs::create_directories(latest);
  make_fifo(latest / "latest");
  expect_refused(run_child({"checkpoint", "inspect", latest.string()}), 1, "latest", "is a FIFO, not a regular file");
  expect_refused(run_child({"checkpoint", "consolidate", latest.string(), (d.path / "o.safetensors").string()}), 1,
                 "latest", "is a FIFO, not a regular file");

  // A one-process checkpoint whose model.safetensors is a FIFO.
  const fs::path single = d.path / "single";
  ckpt::TrainingState s;
  s.model = {{"w", tb::ones({2})}};
  ckpt::save_checkpoint(single.string(), s);
  make_fifo(fs::path(ckpt::latest_checkpoint(single.string())) / "model.safetensors");
  expect_refused(run_child({"checkpoint", "inspect", "--verify", single.string()}), 1, "model.safetensors",
                 "not a regular file");

  // A distributed checkpoint whose rank file is a FIFO.
  const fs::path dist = d.path / "dist";
  const std::string step_dir = save_sample(dist);
  make_fifo(fs::path(step_dir) / "rank-0.safetensors");
  expect_refused(run_child({"checkpoint", "inspect", dist.string()}), 1, "rank-0.safetensors: not a regular file", "");
  const ChildRun v = run_child({"checkpoint", "inspect", "--verify", dist.string()});
  expect_refused(v, 1, "rank-0.safetensors", "is a FIFO, not a regular file");
  EXPECT_TRUE(has(v.out, "0 of 3 chunks ok, 3 BAD")) << v.out;
  const fs::path out = d.path / "o.safetensors";
  expect_refused(run_child({"checkpoint", "consolidate", dist.string(), out.string()}), 1, "rank-0.safetensors",
                 "is a FIFO, not a regular file");
  EXPECT_FALSE(fs::exists(out));

  // PATH itself.
  make_fifo(d.path / "fifo");
  expect_refused(run_child({"checkpoint", "inspect", (d.path / "fifo").string()}), 2, "fifo",
                 "is not a regular file or a directory");
  expect_refused(run_child({"checkpoint", "consolidate", (d.path / "fifo").string(), out.string()}), 2, "fifo",
                 "is not a regular file or a directory");
}

// Integers that do not fit their field were shown wrapped with exit 0 (nlohmann's get<int64_t>()
// of 18446744073709551615 is -1, get<int>() of 4294967298 is 2): now a problem naming the field
// and its value, exit 1. Values that fit, the largest included, are shown exactly.
TEST(CheckpointCli, IntegersOutOfRangeAreProblemsNotWrapped) {
  TempDir d;
  ckpt::TrainingState s;
  s.model = {{"w", tb::ones({2})}};
  ckpt::save_checkpoint(d.path.string(), s);
  const fs::path state = fs::path(ckpt::latest_checkpoint(d.path.string())) / "state.json";
  std::stringstream text;
  text << std::ifstream(state).rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  auto write_state = [&](const nlohmann::json& step, const nlohmann::json& epoch) {
    j["step"] = step;
    j["epoch"] = epoch;
    std::ofstream(state, std::ios::trunc) << j.dump();
  };
  write_state(UINT64_MAX, UINT64_MAX);
  CliRun r = run({"checkpoint", "inspect", d.path.string()});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "step -1")) << r.out;
  EXPECT_FALSE(has(r.out, "epoch -1")) << r.out;
  EXPECT_TRUE(has(r.err, "state.json: \"step\" is 18446744073709551615, too large for a 64-bit signed integer"))
      << r.err;
  EXPECT_TRUE(has(r.err, "state.json: \"epoch\" is 18446744073709551615")) << r.err;
  r = run({"checkpoint", "inspect", d.path.string(), "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["step"].is_null()) << r.out;
  write_state(INT64_MAX, -1);
  r = run({"checkpoint", "inspect", d.path.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "step 9223372036854775807, epoch -1")) << r.out;

  // A safetensors file's trainbench.state.
  const std::string file = (d.path / "ws.safetensors").string();
  auto save_with_state = [&](const nlohmann::json& st) {
    ckpt::save_file(file, {{"a", tb::ones({1})}}, {{"trainbench.state", st.dump()}});
  };
  save_with_state({{"step", 5}, {"world_size", 4294967298ULL}});
  r = run({"checkpoint", "inspect", file});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "world size 2")) << r.out;
  EXPECT_TRUE(has(r.out, "step 5")) << r.out;
  EXPECT_TRUE(has(r.err,
                  "ws.safetensors: __metadata__ \"trainbench.state\": \"world_size\" is 4294967298, outside "
                  "[0, 2147483647]"))
      << r.err;
  save_with_state({{"step", UINT64_MAX}, {"world_size", -3}});
  r = run({"checkpoint", "inspect", file});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(has(r.out, "step -1")) << r.out;
  EXPECT_TRUE(has(r.err, "\"step\" is 18446744073709551615")) << r.err;
  EXPECT_TRUE(has(r.err, "\"world_size\" is -3")) << r.err;
  save_with_state({{"step", INT64_MAX}, {"world_size", 2147483647}});
  r = run({"checkpoint", "inspect", file});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "world size 2147483647, step 9223372036854775807")) << r.out;
  // load_distributed's reader of the same file: an error, not step -1.
  save_with_state({{"step", UINT64_MAX}});
  try {
    ckpt::read_distributed_metadata(file);
    ADD_FAILURE() << "no error for step 18446744073709551615";
  } catch (const tb::core::Error& e) {
    EXPECT_TRUE(has(e.what(), "\"step\" 18446744073709551615 is too large")) << e.what();
  }
}

// metadata.json claims a tensor its file does not hold (the key names a 0-dim tensor). inspect
// --verify allocated and zero-filled the claimed size before it read the file's header: 1 GiB
// for a 1 GiB claim, std::bad_alloc ("out of memory") for 2^62 bytes. Now the header is checked
// first: the chunk is BAD with the reason, in little memory; consolidate says the same.
TEST(CheckpointCli, AClaimIsCheckedAgainstTheFileBeforeAllocating) {
  TempDir d;
  const std::string step_dir = save_sample(d.path);
  const fs::path meta = fs::path(step_dir) / "metadata.json";
  std::stringstream text;
  text << std::ifstream(meta).rdbuf();
  const nlohmann::json saved = nlohmann::json::parse(text.str());
  auto claim = [&](int64_t rows) {
    nlohmann::json j = saved;
    j["block_bytes"] = int64_t(1) << 62;  // one block checksum per chunk, however large
    nlohmann::json chunk = j["tensors"]["optim.w.step"]["chunks"][0];
    chunk["row_end"] = rows;
    j["tensors"]["model.big"] = {{"dtype", "F32"},
                                 {"shape", nlohmann::json::array({rows})},
                                 {"chunks", nlohmann::json::array({chunk})}};
    for (auto& t : j["tensors"])
      for (auto& c : t["chunks"]) c["blocks"] = nlohmann::json::array({c["checksum"]});
    std::ofstream(meta, std::ios::trunc) << j.dump();
  };
  const std::string holds = "the file holds float32 [], the metadata says float32 [";

  claim(int64_t(1) << 28);  // 1 GiB
  const int64_t before = rss_kib();
  ChildRun r = run_child({"checkpoint", "inspect", "--verify", d.path.string()}, 60);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "BAD: ")) << r.out;
  EXPECT_TRUE(has(r.out, holds + "268435456]")) << r.out;
  EXPECT_TRUE(has(r.out, "3 of 4 chunks ok, 1 BAD")) << r.out;
  EXPECT_LT(r.max_rss_kib - before, 256 * 1024) << "peak " << r.max_rss_kib << " KiB, this process " << before;

  claim(int64_t(1) << 60);  // 4 EiB: no allocation can succeed
  r = run_child({"checkpoint", "inspect", "--verify", d.path.string()}, 60);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(has(r.err, "out of memory")) << r.err;
  EXPECT_TRUE(has(r.out, holds + "1152921504606846976]")) << r.out;
  r = run_child({"checkpoint", "consolidate", d.path.string(), (d.path / "o.safetensors").string()}, 60);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_FALSE(has(r.err, "out of memory")) << r.err;
  EXPECT_TRUE(has(r.err, holds + "1152921504606846976]")) << r.err;
}

TEST(CheckpointCli, ListedInHelp) {
  CliRun r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "checkpoint")) << r.out;
  r = run({"checkpoint", "inspect", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "--verify")) << r.out;
  r = run({"checkpoint"});
  EXPECT_EQ(r.code, 2);
}

// A checkpoint saved by PyTorch's torch.distributed.checkpoint from 2 Gloo ranks (FSDP2 shards of
// an MLP and AdamW's state), converted by the reference script, loads into the engine's
// nn::MLP(16, 32, 5) and an optimizer-state DistributedState with the values PyTorch held.
TEST(CheckpointCli, TorchDistributedCheckpointConverts) {
  const std::string python = TB_TEST_PYTHON;
  if (python.empty() || !fs::exists(python)) GTEST_SKIP() << "no project Python (run ci/bootstrap)";
  TempDir d;
  const std::string script = std::string(TB_SOURCE_DIR) + "/reference/dist/torch_dcp_convert.py";
  const std::string dcp = (d.path / "dcp").string(), values = (d.path / "values.safetensors").string();
  const std::string ours = (d.path / "ours.safetensors").string(), log = (d.path / "log").string();
  auto sh = [&](const std::string& args) {
    const std::string cmd = "'" + python + "' '" + script + "' " + args + " > '" + log + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return std::make_pair(rc, text.str());
  };
  auto [rc, out] = sh("make '" + dcp + "' '" + values + "' --world 2");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = sh("convert '" + dcp + "' '" + ours + "'");
  ASSERT_EQ(rc, 0) << out;

  const ckpt::LoadedFile expected = ckpt::load_file(values);
  const ckpt::DistributedMetadata meta = ckpt::read_distributed_metadata(ours);
  EXPECT_EQ(meta.layout, "torch.distributed.checkpoint");
  ASSERT_EQ(meta.tensors.size(), expected.tensors.size());

  // The model, through the training API, as a run resuming from PyTorch's checkpoint would.
  tb::nn::MLP model(16, 32, 5);
  tb::train::load_distributed_state(model, nullptr, ours, group());
  int compared = 0;
  for (const auto& [fqn, p] : model.named_parameters()) {
    const std::string name = "model." + fqn;
    const auto it = std::find_if(expected.tensors.begin(), expected.tensors.end(),
                                 [&](const auto& e) { return e.first == name; });
    ASSERT_NE(it, expected.tensors.end()) << name;
    EXPECT_TRUE(same_bytes(p, it->second)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 6);

  // AdamW's state (exp_avg, exp_avg_sq, step) with load_distributed.
  ckpt::DistributedState optim;
  for (const auto& [name, t] : expected.tensors)
    if (name.rfind("optim.", 0) == 0) optim.tensors.push_back({name, tb::zeros_like(t), t.sizes(), 0});
  ASSERT_EQ(optim.tensors.size(), 18u);
  ckpt::load_distributed(optim, ours, group());
  for (const ckpt::ShardedEntry& e : optim.tensors) {
    const auto it = std::find_if(expected.tensors.begin(), expected.tensors.end(),
                                 [&](const auto& x) { return x.first == e.name; });
    EXPECT_TRUE(same_bytes(e.local, it->second)) << e.name;
  }
  const CliRun r = run({"checkpoint", "inspect", ours, "--verify"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "layout torch.distributed.checkpoint, world size 2")) << r.out;
  EXPECT_TRUE(has(r.out, "checksums: 0 of 24 chunks ok, 24 unchecked")) << r.out;
}

}  // namespace
