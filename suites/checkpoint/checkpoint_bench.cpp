// The checkpoint benchmark: save and load of a ~100M-parameter float32 state (40 tensors of
// 2.5M), the engine's save_file/load_file beside LibTorch's torch::save/torch::load of the same
// tensors. Files live in a temporary directory removed when the cases are destroyed.
#include <sys/stat.h>

#include <memory>

#include "engine/checkpoint/atomic_file.h"
#include "engine/tensor/factories.h"
#include "reference/checkpoint.h"
#include "suites/checkpoint/checkpoint_suite.h"
#include "suites/checkpoint/checkpoint_util.h"

namespace tb::suites {

namespace {

constexpr int kTensors = 40;
constexpr int64_t kElements = 2'500'000;

struct BenchState {
  ckpt::TempDir dir;
  checkpoint::NamedTensors named;
  ref::TensorList torch_list;
  std::string ours = dir / "engine.safetensors";
  std::string theirs = dir / "torch.pt";
};

uint64_t file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

}  // namespace

std::vector<harness::BenchCase> checkpoint_benches() {
  auto s = std::make_shared<BenchState>();
  core::Generator gen(7);
  std::vector<Tensor> plain;
  for (int i = 0; i < kTensors; ++i) {
    Tensor t = randn({kElements}, DType::Float32, &gen);
    s->named.emplace_back("layers." + std::to_string(i) + ".weight", t);
    plain.push_back(t);
  }
  s->torch_list = ref::to_tensor_list(plain);
  // Both files exist before timing, so the load cases can run alone (--filter).
  checkpoint::save_file(s->ours, s->named);
  ref::torch_save(s->torch_list, s->theirs);
  const double bytes = double(file_bytes(s->ours));
  const nlohmann::json extra = {
      {"parameters", double(kTensors) * double(kElements)},
      {"tensors", kTensors},
      {"engine_file_bytes", bytes},
      {"torch_file_bytes", double(file_bytes(s->theirs))},
      {"note",
       "save is honest: the engine fsyncs the file and its directory (atomic rename); the LibTorch side is "
       "torch::save followed by an fsync of its file, so both reach the disk. Loads read the file just written, "
       "from the page cache. The engine verifies an XXH64 checksum per tensor on load and computes it on save, "
       "spreading tensors over --threads threads (torch::save and torch::load use one)."}};

  harness::BenchCase save;
  save.name = "save/float32/100M_params";
  save.engine = [s] { checkpoint::save_file(s->ours, s->named); };
  save.reference = [s] {
    ref::torch_save(s->torch_list, s->theirs);
    checkpoint::fsync_file(s->theirs);
  };
  save.bytes_per_call = bytes;
  save.extra = extra;

  harness::BenchCase load;
  load.name = "load/float32/100M_params";
  load.engine = [s] {
    const checkpoint::LoadedFile f = checkpoint::load_file(s->ours);
    if (f.tensors.size() != size_t(kTensors)) throw core::Error("checkpoint bench", "wrong tensor count on load");
  };
  load.reference = [s] {
    const ref::TensorList l = ref::torch_load(s->theirs);
    if (l.size() != size_t(kTensors)) throw core::Error("checkpoint bench", "wrong tensor count on torch::load");
  };
  load.bytes_per_call = bytes;
  load.extra = extra;
  return {save, load};
}

}  // namespace tb::suites
