#include "suites/scenarios/oom_workload.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/memory/allocator.h"
#include "engine/memory/oom.h"
#include "engine/memory/snapshot.h"
#include "engine/nn/activation_checkpoint.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"

namespace tb::suites::oom {

namespace {

using Clock = std::chrono::steady_clock;

std::string str(const char* p) { return p ? p : ""; }

// "<op> in <module>", what a snapshot's blocks are grouped by.
std::string site_name(const memory::Site& site) {
  std::string s = site.op ? site.op : "?";
  if (site.module) s += std::string(" in ") + site.module;
  return s;
}

// Restores the allocator's cap when a run ends, however it ends.
struct CapGuard {
  explicit CapGuard(const RunSpec& spec) {
    memory::CpuCachingAllocator& a = memory::cpu_allocator();
    a.empty_cache();
    a.reset_peak();
    a.set_limit(spec.cap);
    memory::set_release_cache(a, spec.release_cache);
    memory::set_oom_snapshot_dir(a, spec.snapshot_dir);
  }
  ~CapGuard() {
    memory::CpuCachingAllocator& a = memory::cpu_allocator();
    a.set_limit(0);
    memory::set_release_cache(a, true);
    memory::set_oom_snapshot_dir(a, "");
  }
};

}  // namespace

std::vector<Remedy> capacity_remedies() {
  Remedy mb{"microbatch_accum", 4, false, false, false};
  Remedy ck{"activation_checkpointing", 1, true, false, false};
  Remedy ac{"bf16_autocast", 1, false, true, false};
  Remedy fs{"fsdp_2_ranks", 1, false, false, true};
  return {mb, ck, ac, fs};
}

RunResult train_run(const RunSpec& spec) {
  RunResult r;
  r.remedy = spec.remedy.name;
  const int world = spec.group ? spec.group->size() : 1;
  const int rank = spec.group ? spec.group->rank() : 0;
  const int64_t per_rank = spec.shape.batch / world;
  TB_CHECK(per_rank > 0 && per_rank % spec.remedy.micro_batches == 0, "oom scenario", "batch ", spec.shape.batch,
           " does not split into ", world, " ranks x ", spec.remedy.micro_batches, " micro-batches");
  int step = 0;
  std::string phase = "setup";
  const auto t0 = Clock::now();
  {
    CapGuard cap(spec);
    try {
      core::manual_seed(spec.seed);
      nn::GPTConfig c;
      c.vocab = spec.shape.vocab, c.d_model = spec.shape.d_model, c.n_layers = spec.shape.layers;
      c.n_heads = spec.shape.heads, c.max_seq = spec.shape.seq, c.dropout = 0;
      auto gpt = std::make_shared<nn::GPT>(c);
      std::shared_ptr<nn::Module> model = gpt;
      if (spec.remedy.checkpoint) nn::checkpoint_blocks(*gpt);
      std::shared_ptr<dist::DistributedDataParallel> ddp;
      if (spec.remedy.fsdp) {
        TB_CHECK(spec.group != nullptr, "oom scenario", "the FSDP remedy needs a process group");
        dist::fully_shard_tree(model, spec.group, dist::wrap_module_types({"TransformerBlock"}));
      } else if (spec.ddp) {
        ddp = std::make_shared<dist::DistributedDataParallel>(model, spec.group);
      }
      nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp) : *model;
      optim::AdamW opt(model->parameters(), {});
      core::Generator gen(spec.seed * 1000 + uint64_t(rank) + 1);  // each rank its own data
      const Tensor x_all = randint(0, c.vocab, {per_rank, c.max_seq}, DType::Int64, &gen);
      const Tensor y_all = randint(0, c.vocab, {per_rank, c.max_seq}, DType::Int64, &gen);
      std::vector<Tensor> kept;  // the leak
      const int64_t mb = per_rank / spec.remedy.micro_batches;
      Clock::time_point timed_from = Clock::now();
      for (step = 0; step < spec.steps; ++step) {
        if (step == 1 || spec.steps == 1) timed_from = Clock::now();
        opt.zero_grad(true);
        const int64_t seq = size_t(step) < spec.seq_per_step.size() ? spec.seq_per_step[size_t(step)] : c.max_seq;
        const Tensor x = seq == c.max_seq ? x_all : x_all.narrow(1, 0, seq).contiguous();
        const Tensor y = seq == c.max_seq ? y_all : y_all.narrow(1, 0, seq).contiguous();
        for (int m = 0; m < spec.remedy.micro_batches; ++m) {
          phase = "forward";
          Tensor loss;
          {
            autograd::AutocastGuard autocast(spec.remedy.autocast);
            const Tensor logits = net(x.narrow(0, m * mb, mb));
            if (spec.keep_logits) kept.push_back(logits);
            loss = nn::GPT::loss(logits, y.narrow(0, m * mb, mb));
          }
          if (spec.remedy.micro_batches > 1) loss = tb::div(loss, double(spec.remedy.micro_batches));
          phase = "backward";
          loss.backward();
        }
        phase = "optimizer.step";
        if (step == 0) r.peak_before_first_step = memory::cpu_allocator().stats().peak_allocated_bytes;
        opt.step();
        const memory::Stats s = memory::cpu_allocator().stats();
        r.allocated_after_step.push_back(s.allocated_bytes);
        r.activation_after_step.push_back(s.allocated_by_tag[size_t(memory::Tag::Activation)]);
        if (spec.sites_each_step) {
          std::map<std::string, int64_t> by_site;
          for (const auto& b : memory::snapshot().live) by_site[site_name(b.site)] += b.size;
          r.sites_after_step.push_back(std::move(by_site));
        }
      }
      const double secs = std::chrono::duration<double>(Clock::now() - timed_from).count();
      const int timed = spec.steps == 1 ? 1 : spec.steps - 1;
      // Samples of the whole job: every rank takes per_rank of them in the same time.
      r.samples_per_s = double(per_rank * world * timed) / secs;
    } catch (const memory::OutOfMemoryError& e) {
      r.seconds_to_oom = std::chrono::duration<double>(Clock::now() - t0).count();
      r.oom = true;
      r.step = step;
      r.phase = phase;
      r.error = e.what();
      r.requested = int64_t(e.requested());
      if (const memory::OomReport* rep = memory::oom_report(e)) {
        r.tag = memory::tag_name(rep->tag);
        r.op = str(rep->site.op);
        r.module = str(rep->site.module);
        r.reason = rep->reason;
        r.limit = rep->limit, r.allocated = rep->allocated, r.cached_free = rep->cached_free;
        r.largest_free_block = rep->largest_free_block;
        for (const auto& b : rep->largest_live)
          r.largest_live.push_back({{"bytes", b.size},
                                    {"tag", memory::tag_name(b.tag)},
                                    {"op", str(b.site.op)},
                                    {"module", str(b.site.module)}});
        r.snapshot_path = rep->snapshot_path;
      }
    }
    r.peak_bytes = memory::cpu_allocator().stats().peak_allocated_bytes;
  }
  return r;
}

nlohmann::json RunResult::to_json() const {
  return {{"remedy", remedy},
          {"oom", oom},
          {"step", step},
          {"phase", phase},
          {"tag", tag},
          {"op", op},
          {"module", module},
          {"reason", reason},
          {"requested", requested},
          {"limit", limit},
          {"allocated", allocated},
          {"cached_free", cached_free},
          {"largest_free_block", largest_free_block},
          {"largest_live", largest_live},
          {"snapshot_path", snapshot_path},
          {"sites_after_step", sites_after_step},
          {"error", error},
          {"peak_bytes", peak_bytes},
          {"peak_before_first_step", peak_before_first_step},
          {"samples_per_s", samples_per_s},
          {"allocated_after_step", allocated_after_step},
          {"activation_after_step", activation_after_step},
          {"seconds_to_oom", seconds_to_oom}};
}

RunResult RunResult::from_json(const nlohmann::json& j) {
  RunResult r;
  r.remedy = j.at("remedy").get<std::string>();
  r.oom = j.at("oom").get<bool>();
  r.step = j.at("step").get<int>();
  r.phase = j.at("phase").get<std::string>();
  r.tag = j.at("tag").get<std::string>();
  r.op = j.at("op").get<std::string>();
  r.module = j.at("module").get<std::string>();
  r.reason = j.at("reason").get<std::string>();
  r.requested = j.at("requested").get<int64_t>();
  r.limit = j.at("limit").get<int64_t>();
  r.allocated = j.at("allocated").get<int64_t>();
  r.cached_free = j.at("cached_free").get<int64_t>();
  r.largest_free_block = j.at("largest_free_block").get<int64_t>();
  r.largest_live = j.at("largest_live");
  r.snapshot_path = j.at("snapshot_path").get<std::string>();
  r.sites_after_step = j.at("sites_after_step").get<std::vector<std::map<std::string, int64_t>>>();
  r.error = j.at("error").get<std::string>();
  r.peak_bytes = j.at("peak_bytes").get<int64_t>();
  r.peak_before_first_step = j.at("peak_before_first_step").get<int64_t>();
  r.samples_per_s = j.at("samples_per_s").get<double>();
  r.allocated_after_step = j.at("allocated_after_step").get<std::vector<int64_t>>();
  r.activation_after_step = j.at("activation_after_step").get<std::vector<int64_t>>();
  r.seconds_to_oom = j.at("seconds_to_oom").get<double>();
  return r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  TB_CHECK(bool(in), "oom scenario", "cannot read ", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  TB_CHECK(!j.is_discarded(), "oom scenario", path, " is not JSON");
  return j;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    TB_CHECK(bool(out), "oom scenario", "cannot write ", tmp);
  }
  TB_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "oom scenario", "cannot rename ", tmp, " to ", path);
}

void write_pid_file(const std::string& dir, int rank) {
  std::ofstream(dir + "/rank" + std::to_string(rank) + ".pid") << ::getpid() << "\n";
}

}  // namespace tb::suites::oom
