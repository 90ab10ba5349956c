// `trainbench profile` (profile_cmd.h): the training loop each rank profiles, the launch at world
// W > 1, and the merge of the ranks' traces and statistics into trace.json, the tables and the
// result record.
#include "harness/profile_cmd.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <tuple>
#include <optional>
#include <sstream>
#include <thread>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/core/env.h"
#include "engine/core/error.h"
#include "engine/core/profiler.h"
#include "engine/core/rng.h"
#include "engine/data/dataloader.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/process_group.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "harness/launcher.h"
#include "harness/output_file.h"
#include "harness/runner.h"

namespace tb::harness {
namespace fs = std::filesystem;
namespace {

using profiler::Category;

// The training suite's reference sizes (suites/training/training_bench.cpp), batch per rank.
struct Workload {
  std::shared_ptr<nn::Module> model;
  std::shared_ptr<data::TensorDataset> dataset;
  int64_t batch = 0;
  std::function<Tensor(const Tensor& out, const Tensor& target)> loss;
};

Workload make_workload(const std::string& model, int64_t examples) {
  core::manual_seed(0);
  core::Generator gen(1);
  Workload w;
  if (model == "mlp") {
    static constexpr int64_t B = 256, In = 784, H = 1024, Out = 10;
    w.model = std::make_shared<nn::MLP>(In, H, Out);
    w.dataset = std::make_shared<data::TensorDataset>(randn({examples * B, In}, DType::Float32, &gen),
                                                      randint(0, Out, {examples * B}, DType::Int64, &gen));
    w.batch = B;
    w.loss = [](const Tensor& out, const Tensor& y) { return tb::cross_entropy(out, y); };
  } else {
    nn::GPTConfig c;
    c.vocab = 1024, c.d_model = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq = 128, c.dropout = 0;
    static constexpr int64_t B = 16;
    w.model = std::make_shared<nn::GPT>(c);
    w.dataset =
        std::make_shared<data::TensorDataset>(randint(0, c.vocab, {examples * B, c.max_seq}, DType::Int64, &gen),
                                              randint(0, c.vocab, {examples * B, c.max_seq}, DType::Int64, &gen));
    w.batch = B;
    w.loss = [](const Tensor& out, const Tensor& y) { return nn::GPT::loss(out, y); };
  }
  return w;
}

// Milliseconds per recorded step of each phase, from one rank's events (Note [Step breakdown]).
struct Breakdown {
  double step = 0, forward = 0, backward = 0, optimizer = 0, data = 0, communication = 0;
  double other() const { return std::max(0.0, step - forward - backward - optimizer - data); }
};

// Note [Step breakdown]
// step: the mean ProfilerStep span. forward, backward, optimizer: the loop's own labels around
// the forward (with zero_grad and the loss), loss.backward() and opt.step(); data: the main
// thread's waits for the next batch (dataloader.next, whether the batch is built there or by a
// worker); other = step minus those four. communication: the time inside collectives on any
// thread; under DDP most of it runs on the collectives thread while backward still computes, so
// it overlaps backward and is not a part of the step's sum.
Breakdown breakdown(const profiler::Trace& t, int steps) {
  Breakdown b;
  int main_tid = -1;
  for (const profiler::Thread& th : t.threads)
    if (th.name == "main") main_tid = th.tid;
  for (const profiler::Event& e : t.events) {
    const double ms = double(e.end_ns - e.start_ns) / 1e6;
    const std::string_view name = e.name;
    if (e.cat == Category::Collective) b.communication += ms;
    if (e.tid != main_tid) continue;
    if (e.cat == Category::Step) b.step += ms;
    else if (e.cat == Category::User && name == "forward") b.forward += ms;
    else if (e.cat == Category::User && name == "backward") b.backward += ms;
    else if (e.cat == Category::User && name == "optimizer") b.optimizer += ms;
    else if (e.cat == Category::Data && name == "dataloader.next") b.data += ms;
  }
  for (double* x : {&b.step, &b.forward, &b.backward, &b.optimizer, &b.data, &b.communication}) *x /= steps;
  return b;
}

nlohmann::json breakdown_json(const Breakdown& b) {
  return {{"step_ms", b.step},           {"forward_ms", b.forward}, {"backward_ms", b.backward},
          {"optimizer_ms", b.optimizer}, {"data_ms", b.data},       {"communication_ms", b.communication},
          {"other_ms", b.other()}};
}

fs::path rank_dir(const fs::path& out) { return out / "ranks"; }

// --threads, or the cores shared out among the ranks (at least one each): more threads than cores
// would make every OpenMP barrier wait on a descheduled thread.
int rank_threads(const ProfileOptions& o, int world) {
  if (o.threads > 0) return o.threads;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max(1, int(cores) / world);
}

// One rank's part: warm-up, recorded steps, then trace_rank<R>.json and summary_rank<R>.json.
void profile_rank(const ProfileOptions& o, const fs::path& out) {
  std::shared_ptr<dist::ProcessGroup> group;
  int rank = 0, world = 1;
  if (o.world > 1) {
    group = dist::new_group(o.backend);
    rank = group->rank();
    world = group->size();
    TB_CHECK(world == o.world, "trainbench profile", "launched with ", world, " ranks, expected ", o.world);
  }
  set_num_threads(rank_threads(o, world));

  const int total = o.warmup + o.steps;
  Workload w = make_workload(o.model, int64_t(total) * world);
  std::shared_ptr<nn::Module> net = w.model;
  if (group) net = std::make_shared<dist::DistributedDataParallel>(w.model, group);
  optim::AdamW::Options ao;
  ao.lr = 1e-3;
  ao.weight_decay = 0.01;
  optim::AdamW opt(w.model->parameters(), ao);
  data::DataLoader::Options lo;
  lo.batch_size = w.batch;
  lo.num_workers = o.workers;
  auto sampler = std::make_shared<data::DistributedSampler>(w.dataset->size(), world, rank, /*shuffle=*/true, 0);
  data::DataLoader loader(w.dataset, sampler, lo);

  std::optional<profiler::Profile> prof;
  auto it = loader.begin();
  for (int i = 0; i < total; ++i) {
    if (i == o.warmup) {
      if (group) group->barrier()->wait();  // the ranks' recorded steps start together
      prof.emplace(profiler::Profile::Options{.rank = rank});
    }
    profiler::Scope step("ProfilerStep", Category::Step);  // one name: one row of the table
    step.arg("step", int64_t(i - o.warmup));
    if (i > 0) ++it;
    const data::Batch& b = *it;
    Tensor loss;
    {
      profiler::RecordFunction r("forward");
      opt.zero_grad(true);
      autograd::AutocastGuard autocast(o.autocast != "none", DType::BFloat16);
      loss = w.loss((*net)(b.input), b.target);
    }
    {
      profiler::RecordFunction r("backward");
      loss.backward();
    }
    {
      profiler::RecordFunction r("optimizer");
      opt.step();
    }
  }
  const profiler::Trace trace = prof->stop();

  fs::create_directories(rank_dir(out));
  const std::string r = std::to_string(rank);
  write_output_file(rank_dir(out) / ("trace_rank" + r + ".json"), profiler::chrome_trace_json({trace}));
  nlohmann::json stats = nlohmann::json::array();
  for (const profiler::OpStat& s : profiler::key_averages(trace.events))
    stats.push_back({{"name", s.name},
                     {"category", profiler::category_name(s.cat)},
                     {"label", s.label},
                     {"calls", s.calls},
                     {"self_ns", s.self_ns},
                     {"total_ns", s.total_ns}});
  nlohmann::json summary = {{"rank", rank},
                            {"breakdown", breakdown_json(breakdown(trace, o.steps))},
                            {"events", trace.events.size()},
                            {"threads", trace.threads.size()},
                            {"engine_threads", num_threads()},
                            {"stats", stats}};
  write_output_file(rank_dir(out) / ("summary_rank" + r + ".json"), summary.dump(1) + "\n");
  if (group) group->barrier()->wait();  // no rank leaves while another still needs the group
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  TB_CHECK(f.good(), "trainbench profile", "cannot read ", p.string(), " (did the rank fail?)");
  return nlohmann::json::parse(f);
}

Category category_from_name(const std::string& n) {
  for (Category c : {Category::Op, Category::Backward, Category::Optimizer, Category::Collective, Category::Data,
                     Category::User, Category::Step})
    if (n == profiler::category_name(c)) return c;
  return Category::User;
}

// The ranks' files -> trace.json, the tables on stdout, the result file.
int merge(const ProfileOptions& o, const fs::path& out, const std::string& command) {
  nlohmann::json trace = {{"displayTimeUnit", "ms"}, {"traceEvents", nlohmann::json::array()}};
  std::map<std::tuple<std::string, std::string, std::string>, profiler::OpStat> by;  // name, category, label
  nlohmann::json mean = nlohmann::json::object();
  int64_t events = 0;
  int threads = 0;  // the engine's threads per rank, as the ranks report them
  for (int r = 0; r < o.world; ++r) {
    const std::string rs = std::to_string(r);
    nlohmann::json t = read_json(rank_dir(out) / ("trace_rank" + rs + ".json"));
    for (auto& e : t["traceEvents"]) trace["traceEvents"].push_back(std::move(e));
    const nlohmann::json s = read_json(rank_dir(out) / ("summary_rank" + rs + ".json"));
    events += s["events"].get<int64_t>();
    threads = s["engine_threads"].get<int>();
    for (const auto& [k, v] : s["breakdown"].items()) mean[k] = mean.value(k, 0.0) + v.get<double>() / o.world;
    for (const auto& x : s["stats"]) {
      const std::string label = x.value("label", "");
      profiler::OpStat& st = by[{x["name"].get<std::string>(), x["category"].get<std::string>(), label}];
      st.name = x["name"];
      st.cat = category_from_name(x["category"]);
      st.label = label;
      st.calls += x["calls"].get<int64_t>();
      st.self_ns += x["self_ns"].get<int64_t>();
      st.total_ns += x["total_ns"].get<int64_t>();
    }
  }
  write_output_file(out / "trace.json", trace.dump() + "\n");
  std::vector<profiler::OpStat> stats;
  for (auto& [k, s] : by) stats.push_back(s);

  std::cout << "trainbench profile: " << o.model << (o.autocast == "none" ? "" : " under " + o.autocast + " autocast")
            << ", world " << o.world << ", " << o.steps << " recorded steps (after " << o.warmup << " warm-up), "
            << o.workers << " DataLoader workers, " << threads << " engine thread" << (threads == 1 ? "" : "s")
            << (o.world > 1 ? " per rank" : "") << "\n\n"
            << "Top ops by self time (all ranks):\n"
            << profiler::table(stats, profiler::SortBy::SelfTime, std::size_t(o.rows)) << '\n'
            << "Top ops by calls (all ranks):\n"
            << profiler::table(stats, profiler::SortBy::Calls, 10) << '\n';
  std::cout << std::fixed << std::setprecision(2) << "Step breakdown (mean over ranks, ms per step): step "
            << mean["step_ms"].get<double>() << " = forward " << mean["forward_ms"].get<double>() << " + backward "
            << mean["backward_ms"].get<double>() << " + optimizer " << mean["optimizer_ms"].get<double>() << " + data "
            << mean["data_ms"].get<double>() << " + other " << mean["other_ms"].get<double>() << "; communication "
            << mean["communication_ms"].get<double>() << " (overlaps backward)\n";

  Record rec;
  rec.suite = "profile";
  rec.case_name = o.model + (o.autocast == "none" ? "" : "/" + o.autocast) + "/w" + std::to_string(o.world);
  rec.kind = "benchmark";
  rec.metrics = mean;
  rec.metrics["world"] = o.world;
  rec.metrics["steps"] = o.steps;
  rec.metrics["warmup_steps"] = o.warmup;
  rec.metrics["dataloader_workers"] = o.workers;
  rec.metrics["threads"] = threads;
  rec.metrics["events"] = events;
  rec.metrics["trace"] = (out / "trace.json").string();
  const fs::path json = o.json.empty() ? out / "profile.json" : fs::path(o.json);
  write_result(json, make_result(RunInfo{command, threads}, {rec}));
  std::cout << "trace: " << (out / "trace.json").string() << " (open in https://ui.perfetto.dev or chrome://tracing)\n"
            << "results: " << json.string() << std::endl;
  return 0;
}

}  // namespace

CLI::App* add_profile_command(CLI::App& app, ProfileOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "profile",
      "Profile training steps of a reference model: a Chrome trace (trace.json), the top ops, the step breakdown");
  sub->add_option("--model", o.model, "Reference model (the training suite's train_step sizes)")
      ->check(CLI::IsMember({"mlp", "gpt"}))
      ->type_name("mlp|gpt");
  sub->add_option("--steps", o.steps, "Recorded steps")->check(CLI::Range(1, 10000))->type_name("N");
  sub->add_option("--warmup", o.warmup, "Steps before recording starts")->check(CLI::Range(0, 1000))->type_name("N");
  sub->add_option("--world", o.world, "Ranks (launched through mpirun, DDP when > 1)")
      ->check(CLI::Range(1, 64))
      ->type_name("W");
  sub->add_option("--workers", o.workers, "DataLoader worker threads per rank")
      ->check(CLI::Range(0, 64))
      ->type_name("N");
  sub->add_option("--autocast", o.autocast,
                  "Forward and loss under bfloat16 autocast, float32 master weights (train_step/<model>/bfloat16)")
      ->check(CLI::IsMember({"none", "bfloat16"}));
  sub->add_option("--threads", o.threads, "Engine threads per rank; default: the cores / ranks, at least 1")
      ->check(CLI::Range(1, 4096))
      ->type_name("N");
  sub->add_option("--backend", o.backend, "Process group backend when --world > 1")
      ->check(CLI::IsMember({"mpi", "gloo"}));
  sub->add_option("--out", o.out, "Output folder (trace.json, profile.json, ranks/)")->type_name("DIR");
  sub->add_option("--json", o.json, "Result file (default: DIR/profile.json)")->type_name("PATH");
  sub->add_option("--rows", o.rows, "Rows of the table by self time")->check(CLI::Range(1, 10000));
  sub->add_option("--timeout", o.timeout, "Seconds the ranks may run before they are stopped (world > 1)")
      ->check(CLI::Range(1, 86400));
  sub->add_flag("--as-rank", o.as_rank)->group("");  // the launched ranks' own invocation
  return sub;
}

int run_profile(const ProfileOptions& o, const std::string& command) {
  const fs::path out = fs::absolute(o.out);
  if (fs::exists(out) && !fs::is_directory(out)) throw UsageError("--out " + o.out + ": not a directory");
  if (o.as_rank) {
    profile_rank(o, out);
    return 0;
  }
  if (!o.json.empty()) {
    try {
      check_output_path(o.json);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--json ") + e.what());
    }
  }
  fs::create_directories(out);
  fs::remove_all(rank_dir(out));
  if (o.world == 1) {
    profile_rank(o, out);
    return merge(o, out, command);
  }
  LaunchSpec spec;
  spec.ranks = o.world;
  spec.run_dir = rank_dir(out);
  spec.timeout = std::chrono::seconds(o.timeout);
  spec.argv = {self_exe(),
               "profile",
               "--as-rank",
               "--model",
               o.model,
               "--steps",
               std::to_string(o.steps),
               "--warmup",
               std::to_string(o.warmup),
               "--world",
               std::to_string(o.world),
               "--workers",
               std::to_string(o.workers),
               "--threads",
               std::to_string(rank_threads(o, o.world)),
               "--backend",
               o.backend,
               "--autocast",
               o.autocast,
               "--out",
               out.string()};
  if (!core::env_string("TRAINBENCH_DIST_TIMEOUT")) spec.env["TRAINBENCH_DIST_TIMEOUT"] = "300";  // empty: unset
  spec.env["OMPI_MCA_mpi_yield_when_idle"] = "1";  // as the DDP bench (Note [MPI polling in the DDP bench])
  spec.echo = &std::cerr;
  const LaunchResult res = launch(spec);
  if (!res.ok()) {
    std::cerr << "trainbench profile: the ranks failed: " << res.diagnosis() << '\n';
    return 1;
  }
  return merge(o, out, command);
}

}  // namespace tb::harness
