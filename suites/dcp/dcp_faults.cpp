// The dcp suite's failure and interop cases, run in every rank of the world-4 launch:
//   mpi/disk_full/rank2: rank 2's files are capped at 4 KiB (RLIMIT_FSIZE, as the checkpoint suite
//     simulates a full disk) during a save at world 4: every rank gets an error naming rank 2,
//     `latest` still names the previous checkpoint, nothing of the failed save is left, and the
//     previous checkpoint loads bit for bit.
//   mpi/mutated/<what>: a copy of the full_shard_w4 checkpoint with one byte of a chunk flipped, a
//     rank file truncated or removed, metadata.json's shape, rows or checksums edited or broken:
//     loading it fails on every rank with an error naming the file and, where one tensor is hit,
//     the tensor.
//   mpi/interop/consolidated: read_distributed_full of that checkpoint written by save_file opens in
//     Python's `safetensors` package (suites/checkpoint/read_with_safetensors.py) with the bytes of
//     the state gathered at the save; the same file loads into a HYBRID_SHARD 2 x 2 model and
//     optimizer bit for bit.
//   mpi/inspect/full_shard_w4: `trainbench checkpoint inspect DIR --verify --json` (a child of rank
//     0) on the world-4 checkpoint: world size 4, every tensor of the state with chunks that tile
//     its rows in order, each verified ok, written by all four ranks.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "engine/checkpoint/atomic_file.h"
#include "engine/train/distributed_checkpoint.h"
#include "harness/launcher.h"
#include "harness/project_python.h"
#include "harness/subprocess.h"
#include "suites/dcp/dcp_util.h"

namespace tb::suites::dcp {

namespace {

namespace fs = std::filesystem;
using dist::ProcessGroup;

const Layout& full_shard_w4() { return layouts()[3]; }

// Caps the size of any file this process writes (the soft RLIMIT_FSIZE; writes past it fail with
// EFBIG instead of raising SIGXFSZ) until destroyed; no cap for bytes <= 0.
class FileSizeCap {
 public:
  explicit FileSizeCap(rlim_t bytes) {
    if (bytes <= 0) return;
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old_;
    lim.rlim_cur = bytes;
    check(::setrlimit(RLIMIT_FSIZE, &lim) == 0, "cannot lower RLIMIT_FSIZE");
    active_ = true;
  }
  ~FileSizeCap() {
    if (!active_) return;
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeCap(const FileSizeCap&) = delete;
  FileSizeCap& operator=(const FileSizeCap&) = delete;

 private:
  bool active_ = false;
  struct rlimit old_ {};
  void (*old_handler_)(int) = nullptr;
};

void run_disk_full(harness::Record& rec) {
  constexpr int kFull = 2;
  auto world = dist::new_group("mpi");
  const Layout& l = full_shard_w4();
  Trained t = make_trained(l, world, 21);
  train(t, 0, kSteps);
  const std::string dir = scratch_dir(*world, "disk_full");
  checkpoint::save_distributed(train::distributed_state(*t.model, t.opt.get(), kSteps, {}, l.name), dir, *world);
  const NamedTensors before = whole_state(t);
  train(t, kSteps, 1);
  checkpoint::DistributedSaveOptions o;
  o.timeout = std::chrono::seconds(60);
  std::string err;
  {
    FileSizeCap cap(world->rank() == kFull ? 4096 : 0);
    err = error_of([&] {
      checkpoint::save_distributed(train::distributed_state(*t.model, t.opt.get(), kSteps + 1, {}, l.name), dir, *world,
                                   o);
    });
  }
  world->barrier()->wait();
  const std::string latest = checkpoint::read_small_file(dir + "/latest");
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path().filename().string());
  Trained fresh = make_trained(l, world, 99);
  const std::string load_err = error_of(
      [&] { train::load_distributed_state(*fresh.model, fresh.opt.get(), dir, *world); });
  const NamedTensors got = whole_state(fresh);
  remove_scratch(*world, dir);
  check(!err.empty(), "the save with rank " + std::to_string(kFull) + "'s disk full raised nothing on rank " +
                          std::to_string(world->rank()));
  check(err.find("rank " + std::to_string(kFull)) != std::string::npos,
        "the error does not name rank " + std::to_string(kFull) + ": " + err);
  check(latest == "step-" + std::to_string(kSteps) + "\n", "latest says '" + latest + "' after the failed save");
  for (const std::string& e : entries)
    check(e == "latest" || e == "step-" + std::to_string(kSteps), "the failed save left '" + e + "' in " + dir);
  check(load_err.empty(), "the previous checkpoint does not load: " + load_err);
  const std::string d = bit_diff(got, before);
  check(d.empty(), "the previous checkpoint loads with other values: " + d);
  rec.metrics["world"] = world->size();
  rec.metrics["full_rank"] = kFull;
  if (world->rank() == 0) rec.message = "error: " + err.substr(0, 400);
  rec.tolerances = {{"previous_checkpoint", "bitwise"}};
}

// One edit of a copied checkpoint and what the error must name.
struct Mutation {
  std::string name;
  // Applied by rank 0 to the step directory; returns nothing (the needles come from `needles`).
  std::function<void(const std::string& step_dir)> apply;
  std::vector<std::string> needles;
};

// The tensor the edits hit: the first "model." tensor with rows written by rank 1 (so a rank other
// than the metadata's writer owns the damaged bytes), and that chunk.
std::pair<const checkpoint::SavedTensor*, const checkpoint::SavedChunk*> target(
    const checkpoint::DistributedMetadata& m) {
  for (const checkpoint::SavedTensor& t : m.tensors)
    if (t.name.rfind("model.", 0) == 0)
      for (const checkpoint::SavedChunk& c : t.chunks)
        if (c.writer == 1 && c.row_end > c.row_begin) return {&t, &c};
  throw CheckFailed("no model tensor has rows written by rank 1 in the full_shard_w4 checkpoint");
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(checkpoint::read_small_file(path)); }
void write_json(const std::string& path, const nlohmann::json& j) { checkpoint::write_file_atomic(path, j.dump(1)); }

// The chunk entry of `tensor` that starts at `row_begin` in metadata.json.
nlohmann::json& chunk_json(nlohmann::json& meta, const std::string& tensor, int64_t row_begin) {
  nlohmann::json& t = meta.at("tensors").at(tensor);
  for (nlohmann::json& c : t.at("chunks"))
    if (c.at("row_begin").get<int64_t>() == row_begin) return c;
  throw CheckFailed("metadata.json has no chunk of " + tensor + " at row " + std::to_string(row_begin));
}

std::vector<Mutation> mutations(const checkpoint::DistributedMetadata& m) {
  const auto [t, c] = target(m);
  const std::string name = t->name, file = c->file, key = c->key;
  const int64_t begin = c->row_begin, end = c->row_end;
  std::vector<Mutation> out;
  out.push_back({"flipped_byte",
                 [=](const std::string& d) {
                   const checkpoint::FileIndex idx = checkpoint::read_index(d + "/" + file);
                   const checkpoint::IndexEntry* e = idx.find(key);
                   check(e != nullptr, file + " has no key " + key);
                   std::fstream f(d + "/" + file, std::ios::in | std::ios::out | std::ios::binary);
                   f.seekg(std::streamoff(e->offset + e->nbytes / 2));
                   char b = 0;
                   f.read(&b, 1);
                   b = char(b ^ 0x10);
                   f.seekp(std::streamoff(e->offset + e->nbytes / 2));
                   f.write(&b, 1);
                 },
                 {file, name}});
  out.push_back({"truncated_file",
                 [=](const std::string& d) { fs::resize_file(d + "/" + file, fs::file_size(d + "/" + file) / 2); },
                 {file, "tensor '"}});  // which tensor reaches past the end depends on the cut
  out.push_back({"missing_rank_file", [=](const std::string& d) { fs::remove(d + "/" + file); }, {file}});
  out.push_back({"metadata_shape",
                 [=](const std::string& d) {
                   nlohmann::json j = read_json(d + "/metadata.json");
                   nlohmann::json& shape = j.at("tensors").at(name).at("shape");
                   shape[0] = shape[0].get<int64_t>() + 1;
                   write_json(d + "/metadata.json", j);
                 },
                 {"metadata.json", name}});
  out.push_back({"metadata_rows",
                 [=](const std::string& d) {
                   nlohmann::json j = read_json(d + "/metadata.json");
                   chunk_json(j, name, begin)["row_end"] = end - 1;  // a gap in the tiling
                   write_json(d + "/metadata.json", j);
                 },
                 {"metadata.json", name}});
  out.push_back({"metadata_checksum",
                 [=](const std::string& d) {
                   nlohmann::json j = read_json(d + "/metadata.json");
                   nlohmann::json& cj = chunk_json(j, name, begin);
                   cj["checksum"] = "0123456789abcdef";
                   for (nlohmann::json& b : cj.at("blocks")) b = "0123456789abcdef";
                   write_json(d + "/metadata.json", j);
                 },
                 {file, name}});
  out.push_back(
      {"metadata_not_json",
       [=](const std::string& d) { checkpoint::write_file_atomic(d + "/metadata.json", "{\"tensors\": [1, "); },
       {"metadata.json"}});
  return out;
}

void run_mutated(const std::string& what, harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const Saved& S = saved(full_shard_w4(), *world);
  const checkpoint::DistributedMetadata meta = checkpoint::read_distributed_metadata(S.dir);
  Mutation mut;
  for (Mutation& m : mutations(meta))
    if (m.name == what) mut = m;
  check(mut.apply != nullptr, "no mutation named " + what);
  const std::string dir = scratch_dir(*world, "mutated_" + what);
  const std::string step = fs::path(meta.step_dir).filename().string();
  std::string setup;
  if (world->rank() == 0)
    setup = error_of([&] {
      fs::copy(S.dir, dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
      mut.apply(dir + "/" + step);
    });
  world->barrier()->wait();
  Trained t = make_trained(full_shard_w4(), world, 99);
  const std::string err = error_of([&] { train::load_distributed_state(*t.model, t.opt.get(), dir, *world); });
  world->barrier()->wait();
  remove_scratch(*world, dir);
  check(setup.empty(), "cannot mutate the copy: " + setup);
  check(!err.empty(),
        "the checkpoint with " + what + " loaded without an error on rank " + std::to_string(world->rank()));
  for (const std::string& n : mut.needles)
    check(err.find(n) != std::string::npos, "the error does not name '" + n + "': " + err);
  rec.metrics["world"] = world->size();
  rec.metrics["error_chars"] = err.size();
  if (world->rank() == 0) rec.message = "error: " + err.substr(0, 400);
}

std::string hex(const Tensor& t) {
  static const char* digits = "0123456789abcdef";
  const Tensor c = t.detach().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data());
  std::string s;
  for (size_t i = 0; i < size_t(c.numel()) * c.itemsize(); ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
  return s;
}

// The consolidated file read by Python's `safetensors` package; rank 0's problem, or "".
std::string python_reads(const std::string& file, const NamedTensors& want, harness::Record& rec) {
  const auto py = harness::project_python();
  if (!py) return "skip";
  harness::SubprocessSpec spec;
  spec.argv = {py->path, std::string(TB_SOURCE_DIR) + "/suites/checkpoint/read_with_safetensors.py", file};
  spec.timeout = std::chrono::seconds(120);
  const harness::SubprocessResult run = harness::run_subprocess(spec);
  if (!run.ok())
    return "Python's safetensors failed on " + file + ": " + run.describe() + " " + run.err.substr(0, 1000);
  const nlohmann::json j = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "read_with_safetensors.py printed no JSON";
  if (j["tensors"].size() != want.size())
    return "Python sees " + std::to_string(j["tensors"].size()) + " tensors, the state has " +
           std::to_string(want.size());
  for (const auto& [name, t] : want) {
    if (!j["tensors"].contains(name)) return "Python does not see " + name;
    const nlohmann::json& e = j["tensors"][name];
    if (e["dtype"] != checkpoint::format_dtype_name(t.dtype()) || e["shape"] != nlohmann::json(t.sizes()))
      return name + ": Python reads dtype " + e["dtype"].dump() + " shape " + e["shape"].dump();
    if (e["hex"] != hex(t)) return name + ": Python reads other bytes than the state at the save";
  }
  rec.metrics["python_tensors_compared"] = want.size();
  rec.message = "opened in Python's safetensors package (suites/checkpoint/read_with_safetensors.py)";
  return "";
}

void run_consolidated(harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const Saved& S = saved(full_shard_w4(), *world);
  const std::string dir = scratch_dir(*world, "consolidated");
  const std::string file = dir + "/model.safetensors";
  std::string problem;
  if (world->rank() == 0)
    problem = error_of([&] {
      const checkpoint::DistributedMetadata meta = checkpoint::read_distributed_metadata(S.dir);
      // As `trainbench checkpoint consolidate` writes it: the state beside the tensors, so the
      // file also restores the optimizer's groups and the step.
      const nlohmann::json state = {{"step", meta.step},
                                    {"layout", meta.layout},
                                    {"world_size", meta.world_size},
                                    {"save_id", meta.save_id},
                                    {"state", meta.state}};
      checkpoint::save_file(file, checkpoint::read_distributed_full(meta), {{"trainbench.state", state.dump()}});
      const std::string p = python_reads(file, S.at_save, rec);
      if (p == "skip") {
        rec.status = harness::Status::Skip;
        rec.message = "no project Python: " + harness::project_python_hint();
      } else {
        check(p.empty(), p);
      }
    });
  world->barrier()->wait();
  const Layout& hybrid = layouts()[5];
  Trained t = make_trained(hybrid, world, 99);
  int64_t step = -1;
  const std::string err = error_of(
      [&] { step = train::load_distributed_state(*t.model, t.opt.get(), file, *world).step; });
  check(err.empty(), "the consolidated file does not load into " + hybrid.name + ": " + err);
  check(step == kSteps, "the consolidated file loads as step " + std::to_string(step));
  const std::string d = bit_diff(whole_state(t), S.at_save);
  remove_scratch(*world, dir);
  check(problem.empty(), problem);
  check(d.empty(), "the consolidated file loads into " + hybrid.name + " with other values: " + d);
  rec.metrics["world"] = world->size();
  rec.tolerances = {{"bytes", "exact"}};
}

void run_inspect(harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const Saved& S = saved(full_shard_w4(), *world);
  std::string problem;
  if (world->rank() == 0)
    problem = error_of([&] {
      harness::SubprocessSpec spec;
      spec.argv = {harness::self_exe(), "checkpoint", "inspect", S.dir, "--verify", "--json"};
      spec.timeout = std::chrono::seconds(120);
      const harness::SubprocessResult run = harness::run_subprocess(spec);
      check(run.ok(), "checkpoint inspect failed: " + run.describe() + " " + run.err.substr(0, 600));
      const nlohmann::json j = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
      check(!j.is_discarded() && j.is_object(), "checkpoint inspect printed no JSON object");
      check(j.value("world_size", -1) == 4, "inspect says world size " + j["world_size"].dump());
      check(j["tensors"].size() == S.at_save.size(), "inspect lists " + std::to_string(j["tensors"].size()) +
                                                         " tensors, the state has " + std::to_string(S.at_save.size()));
      std::set<std::string> files;
      int64_t chunks = 0;
      for (const nlohmann::json& t : j["tensors"]) {
        const std::string name = t.value("name", "");
        const auto want = std::find_if(S.at_save.begin(), S.at_save.end(),
                                       [&](const auto& e) { return e.first == name; });
        check(want != S.at_save.end(), "inspect lists '" + name + "', which the state does not have");
        check(t["shape"] == nlohmann::json(want->second.sizes()), name + ": inspect says shape " + t["shape"].dump());
        const int64_t rows = want->second.dim() == 0 ? 1 : want->second.size(0);
        int64_t next = 0;
        for (const nlohmann::json& c : t["chunks"]) {
          check(c["rows"][0] == next,
                name + ": a chunk starts at row " + c["rows"][0].dump() + ", expected " + std::to_string(next));
          next = c["rows"][1].get<int64_t>();
          check(c.value("status", "") == "ok", name + ": chunk status " + c.value("status", "(none)"));
          files.insert(c.value("file", ""));
          ++chunks;
        }
        check(next == rows || (want->second.dim() == 0 && next <= 1),
              name + ": chunks end at row " + std::to_string(next) + " of " + std::to_string(rows));
      }
      check(files.size() == 4, "the chunks come from " + std::to_string(files.size()) + " files, not the 4 ranks'");
      rec.metrics["chunks"] = chunks;
      rec.message = "inspect --verify: " + std::to_string(chunks) + " chunks in 4 rank files, all ok";
    });
  world->barrier()->wait();
  check(problem.empty(), problem);
  rec.metrics["world"] = world->size();
}

}  // namespace

std::vector<harness::TestCase> fault_rank_tests() {
  std::vector<harness::TestCase> t;
  t.push_back(dcp_case("mpi/disk_full/rank2", run_disk_full));
  for (const std::string what : {"flipped_byte", "truncated_file", "missing_rank_file", "metadata_shape",
                                 "metadata_rows", "metadata_checksum", "metadata_not_json"})
    t.push_back(dcp_case("mpi/mutated/" + what, [what](harness::Record& rec) { run_mutated(what, rec); }));
  t.push_back(dcp_case("mpi/interop/consolidated", run_consolidated));
  t.push_back(dcp_case("mpi/inspect/full_shard_w4", run_inspect));
  return t;
}

}  // namespace tb::suites::dcp
