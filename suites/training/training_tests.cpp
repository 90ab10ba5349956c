// The training suite's correctness cases:
//   equivalence/mlp, equivalence/gpt: 50 AdamW steps (warmup + cosine, gradient clipping) from
//     identical weights on identical batches in the engine and in LibTorch; the losses must agree
//     at every step and every parameter at the end.
//   resume/mlp: N steps, a checkpoint, a NEW PROCESS that resumes and trains N more, against 2N
//     uninterrupted steps: parameters, optimizer state and the RNG equal bit for bit.
//   fashion_mnist/mlp: the MLP trained on Fashion-MNIST with engine/train's Trainer reaches the
//     test accuracy floor; LibTorch trains the same model on the same batches beside it, and the
//     per-epoch curves of both go into the record (and the report).
//   recipe/*: the Trainer's mixed-precision recipe against a LibTorch loop (recipe_tests.cpp).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "engine/core/env.h"
#include "engine/autograd/functions.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/rng.h"
#include "engine/data/dataloader.h"
#include "engine/data/fashion_mnist.h"
#include "engine/nn/activation.h"
#include "engine/nn/container.h"
#include "engine/nn/linear.h"
#include "engine/nn/models.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/optim/adam.h"
#include "engine/optim/clip_grad.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/tensor/factories.h"
#include "engine/train/trainer.h"
#include "harness/subprocess.h"
#include "reference/autograd.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "reference/reduce.h"
#include "reference/training.h"
#include "suites/compare.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"
#include "suites/training/compare.h"
#include "suites/training/training_bench.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace fs = std::filesystem;

harness::TestCase training_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("training", name, std::move(body), /*with_seed=*/false);
}

ref::NamedTensors named_ref(const nn::Module& m) {
  ref::NamedTensors out;
  for (auto& [name, t] : m.state_dict()) out.push_back({name, ref::to_ref(t)});
  return out;
}

// Both sides train `steps` AdamW steps (warmup + cosine, clip 1.0) on the same batches.
// loss_e/loss_r compute each side's batch loss from (input, target).
struct Equivalence {
  std::shared_ptr<nn::Module> model;
  std::function<ref::NnModule()> make_ref;  // a fresh LibTorch twin (weights are loaded after)
  std::function<Tensor(const Tensor&, const Tensor&)> loss_e;
  std::function<ref::Tensor(const ref::NnModule&, const ref::Tensor&, const ref::Tensor&)> loss_r;
  std::function<std::pair<Tensor, Tensor>(int64_t step)> batch;
};

// Note [Float32 drift yardstick]
// In float64 the two sides agree to ~1e-15 over 50 steps (the same algorithm, different
// summation orders), so float64 is held to fixed tight tolerances. In float32 the same
// rounding differences (~1e-7) are amplified by training itself: ReLU units that flip, Adam
// updates whose size does not depend on the gradient's (a parameter whose true gradient is 0,
// like attention's key bias, random-walks on rounding noise). How much is a property of the
// run, not of the engine, so it is measured in the same run: a second LibTorch model whose
// initial weights differ from the first's by one float32 ulp trains on the same batches, and
// its distance from the first LibTorch run is the yardstick. The engine must stay within 10
// yardsticks of LibTorch (plus 1e-6 relative): losses at every step (against the largest
// yardstick so far) and every parameter tensor's L2 distance at the end.
constexpr double kYardsticks = 10;

void run_equivalence(const Equivalence& q, int64_t steps, DType dt, harness::Record& rec,
                     ref::AdamW::Kind ref_kind = ref::AdamW::Kind::Standard) {
  const bool f64 = dt == DType::Float64;
  const Tolerance loss_tol = f64 ? Tolerance{1e-10, 1e-12} : Tolerance{1e-6, 0};
  const Tolerance param_tol = f64 ? Tolerance{1e-8, 1e-10} : Tolerance{1e-6, 0};
  optim::AdamW::Options o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  ref::NnModule r1 = q.make_ref(), r2 = q.make_ref();
  r1.load_by_name(named_ref(*q.model));
  {  // the yardstick twin: every weight one ulp away
    ref::NamedTensors w;
    for (auto& [name, t] : q.model->state_dict())
      w.push_back({name, ref::to_ref(core::is_floating(t.dtype()) ? tb::mul(t, 1.0 + 1.2e-7) : t)});
    r2.load_by_name(w);
  }
  auto opt = std::make_shared<optim::AdamW>(q.model->parameters(), o);
  optim::LambdaLR sched(*opt, optim::warmup_cosine(steps / 5, steps, 0.1));
  ref::AdamW o1(r1, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, ref_kind);
  ref::AdamW o2(r2, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, ref_kind);
  auto ref_step = [&](ref::NnModule& r, ref::AdamW& ro, double lr, const Tensor& x, const Tensor& y) {
    ro.set_lr(lr);
    ro.zero_grad();
    ref::Tensor loss = q.loss_r(r, ref::to_ref(x), ref::to_ref(y));
    ref::backward(loss);
    ref::clip_grad_norm(r, 1.0);
    ro.step();
    return ref::from_ref(loss).item_double();
  };
  const std::vector<Tensor> params = q.model->parameters();
  nlohmann::json el = nlohmann::json::array(), rl = nlohmann::json::array(), yl = nlohmann::json::array();
  double worst_loss = 0, yardstick = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto [x, y] = q.batch(s);
    const double lr = opt->param_groups()[0].options["lr"].get<double>();
    opt->zero_grad(true);
    Tensor loss = q.loss_e(x, y);
    loss.backward();
    optim::clip_grad_norm_(params, 1.0);
    opt->step();
    sched.step();
    const double le = loss.item_double();
    const double l1 = ref_step(r1, o1, lr, x, y);
    const double l2 = f64 ? l1 : ref_step(r2, o2, lr, x, y);
    el.push_back(le);
    rl.push_back(l1);
    yl.push_back(l2);
    yardstick = std::max(yardstick, std::fabs(l2 - l1));
    const double allowed = loss_tol.atol + loss_tol.rtol * std::fabs(l1) + (f64 ? 0 : kYardsticks * yardstick);
    const double ratio = std::fabs(le - l1) / allowed;
    worst_loss = std::max(worst_loss, ratio);
    if (ratio > 1 && rec.status == harness::Status::Pass) {
      rec.status = harness::Status::Fail;
      rec.message = "step " + std::to_string(s) + ": engine loss " + std::to_string(le) + " vs LibTorch " +
                    std::to_string(l1) + " (allowed difference " + std::to_string(allowed) + ")";
    }
  }
  // Parameters: float64 elementwise; float32 per tensor against the yardstick.
  double worst_param = 0;
  std::string where;
  if (f64) {
    worst_param = worst_param_ratio(*q.model, r1.named_parameters(), param_tol, &where);
  } else {
    const ref::NamedTensors p1 = r1.named_parameters(), p2 = r2.named_parameters();
    for (size_t i = 0; i < p1.size(); ++i) {
      const Tensor e = q.model->find_tensor(p1[i].first);
      if (!e.defined()) throw CheckFailed("the engine model has no parameter " + p1[i].first);
      const Tensor a = ref::from_ref(p1[i].second), b = ref::from_ref(p2[i].second);
      const double d_engine = tb::norm(tb::sub(e.detach().to(DType::Float64), a.to(DType::Float64))).item_double();
      const double d_yard = tb::norm(tb::sub(b.to(DType::Float64), a.to(DType::Float64))).item_double();
      const double norm = tb::norm(a.to(DType::Float64)).item_double();
      const double ratio = d_engine / (param_tol.rtol * norm + kYardsticks * d_yard + 1e-30);
      if (ratio > worst_param) {
        worst_param = ratio;
        where = p1[i].first + ": |engine - LibTorch| = " + std::to_string(d_engine) + ", yardstick " +
                std::to_string(d_yard) + ", |LibTorch| = " + std::to_string(norm);
      }
    }
  }
  if (worst_param > 1 && rec.status == harness::Status::Pass) {
    rec.status = harness::Status::Fail;
    rec.message = "parameters after " + std::to_string(steps) + " steps differ: " + where;
  }
  rec.series = {{"engine_loss", el}, {"reference_loss", rl}};
  if (!f64) rec.series["yardstick_loss"] = yl;
  rec.metrics["steps"] = steps;
  rec.metrics["worst_loss_tolerance_ratio"] = worst_loss;
  rec.metrics["worst_param_tolerance_ratio"] = worst_param;
  rec.metrics["final_loss"] = el.back();
  rec.metrics["reference_final_loss"] = rl.back();
  if (!f64) rec.metrics["loss_yardstick"] = yardstick;
  rec.tolerances = {{"loss_rtol", loss_tol.rtol},
                    {"loss_atol", loss_tol.atol},
                    {"param_rtol", param_tol.rtol},
                    {"param_atol", param_tol.atol}};
  if (!f64) rec.tolerances["yardsticks"] = kYardsticks;
}

harness::TestCase equivalence_mlp(DType dt) {
  return training_case("equivalence/mlp/" + std::string(core::name(dt)), [dt](harness::Record& rec) {
    constexpr int64_t steps = 50, B = 64;
    core::manual_seed(10);
    Equivalence q;
    auto model = std::make_shared<nn::MLP>(784, 1024, 10, dt);
    q.model = model;
    q.make_ref = [dt] {
      ref::NnModule r = ref::nn_mlp(784, 1024, 10);
      r.to(dt);
      return r;
    };
    q.loss_e = [model](const Tensor& x, const Tensor& y) { return tb::cross_entropy((*model)(x), y); };
    q.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
      return ref::cross_entropy(r.forward(x), y);
    };
    q.batch = [dt](int64_t s) {
      core::Generator g(1000 + uint64_t(s));
      return std::pair{randn({B, 784}, dt, &g), randint(0, 10, {B}, DType::Int64, &g)};
    };
    run_equivalence(q, steps, dt, rec);
  });
}

// The training benchmarks time LibTorch's fused AdamW kernel (ref::AdamW::Kind::Fused): it must
// train as the engine does, as torch::optim::AdamW does above (a small MLP, 10 steps, float64,
// with the schedule and clipping of the other runs).
harness::TestCase fused_reference_adamw() {
  return training_case("reference/fused_adamw", [](harness::Record& rec) {
    constexpr int64_t steps = 10, B = 16;
    core::manual_seed(11);
    Equivalence q;
    auto model = std::make_shared<nn::MLP>(32, 64, 10, DType::Float64);
    q.model = model;
    q.make_ref = [] {
      ref::NnModule r = ref::nn_mlp(32, 64, 10);
      r.to(DType::Float64);
      return r;
    };
    q.loss_e = [model](const Tensor& x, const Tensor& y) { return tb::cross_entropy((*model)(x), y); };
    q.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
      return ref::cross_entropy(r.forward(x), y);
    };
    q.batch = [](int64_t s) {
      core::Generator g(2000 + uint64_t(s));
      return std::pair{randn({B, 32}, DType::Float64, &g), randint(0, 10, {B}, DType::Int64, &g)};
    };
    run_equivalence(q, steps, DType::Float64, rec, ref::AdamW::Kind::Fused);
  });
}

harness::TestCase equivalence_gpt(DType dt) {
  return training_case("equivalence/gpt/" + std::string(core::name(dt)), [dt](harness::Record& rec) {
    constexpr int64_t steps = 50, B = 4;
    nn::GPTConfig c;
    c.vocab = 128, c.d_model = 64, c.n_layers = 2, c.n_heads = 4, c.max_seq = 32;
    c.dtype = dt;
    core::manual_seed(11);
    Equivalence q;
    auto model = std::make_shared<nn::GPT>(c);
    q.model = model;
    q.make_ref = [c, dt] {
      ref::NnModule r = ref::nn_gpt(c.vocab, c.d_model, c.n_layers, c.n_heads, c.max_seq, c.dropout,
                                    c.gelu_approximate);
      r.to(dt);
      return r;
    };
    q.loss_e = [model](const Tensor& x, const Tensor& y) { return nn::GPT::loss(model->forward(x), y); };
    q.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
      return ref::gpt_loss(r.forward(x), y);
    };
    q.batch = [c](int64_t s) {
      core::Generator g(2000 + uint64_t(s));
      return std::pair{randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &g),
                       randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &g)};
    };
    run_equivalence(q, steps, dt, rec);
  });
}

// ---- resume/mlp ----
// A small classifier with dropout (so the RNG state matters) on a shuffled dataset (so the data
// order matters), trained by engine/train's Trainer.
constexpr int64_t kResumeSteps = 24;  // N; an epoch is 16 batches, so the save falls mid-epoch

struct ResumeRun {
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<optim::AdamW> opt;
  std::shared_ptr<optim::LRScheduler> sched;
  std::shared_ptr<data::DataLoader> loader;
  std::unique_ptr<train::Trainer> trainer;
};

ResumeRun make_resume_run(int64_t max_steps, const std::string& dir) {
  core::manual_seed(7);
  ResumeRun r;
  r.model = std::make_shared<nn::Sequential>();
  r.model->push_back(std::make_shared<nn::Linear>(20, 32));
  r.model->push_back(std::make_shared<nn::ReLU>());
  r.model->push_back(std::make_shared<nn::Dropout>(0.2));
  r.model->push_back(std::make_shared<nn::Linear>(32, 5));
  core::Generator g(99);
  auto ds = std::make_shared<data::TensorDataset>(randn({512, 20}, DType::Float32, &g),
                                                  randint(0, 5, {512}, DType::Int64, &g));
  data::DataLoader::Options lo;
  lo.batch_size = 32;
  lo.shuffle = true;
  lo.seed = 5;
  lo.num_workers = 1;
  r.loader = std::make_shared<data::DataLoader>(ds, lo);
  optim::AdamW::Options o;
  o.lr = 3e-3;
  r.opt = std::make_shared<optim::AdamW>(r.model->parameters(), o);
  r.sched = std::make_shared<optim::LambdaLR>(*r.opt, optim::warmup_cosine(5, 2 * kResumeSteps, 0.1));
  train::Options to;
  to.epochs = 100;
  to.max_steps = max_steps;
  to.clip_grad_norm = 1.0;
  to.checkpoint_dir = dir;
  to.log = [](const std::string&) {};
  r.trainer = std::make_unique<train::Trainer>(
      r.model, r.opt, r.sched,
      [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); }, to);
  return r;
}

// Everything a resumed run must reproduce: parameters, optimizer state, the RNG.
checkpoint::NamedTensors final_state(const ResumeRun& r) {
  checkpoint::NamedTensors out;
  for (auto& [n, t] : r.model->state_dict()) out.push_back({"model." + n, t});
  for (auto& [n, t] : r.opt->state_dict().tensors) out.push_back({"optim." + n, t});
  const core::Generator& g = core::default_generator();
  out.push_back({"rng", from_vector_of<int64_t>({int64_t(g.seed()), int64_t(g.offset())}, {2})});
  return out;
}

harness::TestCase resume_mlp() {
  return training_case("resume/mlp", [](harness::Record& rec) {
    const fs::path dir = fs::temp_directory_path() / ("trainbench-resume-" + std::to_string(getpid()));
    fs::remove_all(dir);
    struct Cleanup {
      fs::path p;
      ~Cleanup() { fs::remove_all(p); }
    } cleanup{dir};
    // 2N steps uninterrupted.
    ResumeRun whole = make_resume_run(2 * kResumeSteps, (dir / "whole").string());
    whole.trainer->fit(*whole.loader);
    const checkpoint::NamedTensors expected = final_state(whole);
    // N steps and a checkpoint (fit saves when it stops) ...
    ResumeRun first = make_resume_run(kResumeSteps, (dir / "split").string());
    first.trainer->fit(*first.loader);
    // ... then a new process resumes and trains N more, writing its final state.
    harness::SubprocessSpec child;
    child.argv = {fs::read_symlink("/proc/self/exe").string()};
    child.env["TRAINBENCH_RESUME_CHILD"] = (dir / "split").string();
    const harness::SubprocessResult run = harness::run_subprocess(child);
    if (!run.started()) throw CheckFailed("could not start the resuming process " + child.argv[0]);
    if (!run.ok())
      throw CheckFailed("the resuming process failed (" + run.describe() + "): " + run.err.substr(0, 2000));
    const checkpoint::LoadedFile got = checkpoint::load_file((dir / "split" / "final.safetensors").string());
    if (got.tensors.size() != expected.size()) throw CheckFailed("the resumed state has a different set of tensors");
    int64_t compared = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const auto& [name, e] = expected[i];
      const auto& [gname, gt] = got.tensors[i];
      if (name != gname)
        throw CheckFailed("tensor " + std::to_string(i) + ": " + gname + " where " + name + " was expected");
      Tensor a = e.detach().contiguous(), b = gt.contiguous();
      if (a.sizes() != b.sizes() || a.dtype() != b.dtype() ||
          std::memcmp(a.data(), b.data(), size_t(a.numel()) * a.itemsize()) != 0)
        throw CheckFailed(name + " differs between 2N uninterrupted steps and N + resume + N (not bit-exact)");
      compared += a.numel();
    }
    rec.metrics["steps"] = 2 * kResumeSteps;
    rec.metrics["elements_compared"] = double(compared);
    rec.tolerances = {{"exact", 1}};
  });
}

// ---- fashion_mnist/mlp ----

constexpr double kAccuracyFloor = 0.88;

harness::TestCase fashion_mnist_mlp() {
  return training_case("fashion_mnist/mlp", [](harness::Record& rec) {
    const std::string root = core::env_string("TRAINBENCH_FASHION_MNIST").value_or("/usr/share/datasets/fashion-mnist");
    auto train_set = std::make_shared<data::FashionMNIST>(root, true);
    auto test_set = std::make_shared<data::FashionMNIST>(root, false);
    const int64_t epochs = core::env_int64("TRAINBENCH_FASHION_EPOCHS", 5, 1, 1000);
    data::DataLoader::Options lo;
    lo.batch_size = 256;
    lo.shuffle = true;
    lo.seed = 1;
    lo.num_workers = 1;
    data::DataLoader train_loader(train_set, lo);
    data::DataLoader::Options eo;
    eo.batch_size = 1000;
    data::DataLoader test_loader(test_set, eo);

    core::manual_seed(3);
    auto model = std::make_shared<nn::MLP>(784, 1024, 10);
    ref::NnModule rmodel = ref::nn_mlp(784, 1024, 10);
    rmodel.load_by_name(named_ref(*model));
    optim::AdamW::Options o;
    o.lr = 1e-3;
    o.weight_decay = 0.01;
    auto opt = std::make_shared<optim::AdamW>(model->parameters(), o);
    const int64_t total = epochs * train_loader.size();
    auto sched = std::make_shared<optim::LambdaLR>(*opt, optim::warmup_cosine(100, total, 0.05));
    const fs::path dir = fs::temp_directory_path() / ("trainbench-fmnist-" + std::to_string(getpid()));
    struct Cleanup {
      fs::path p;
      ~Cleanup() { fs::remove_all(p); }
    } cleanup{dir};
    train::Options to;
    to.epochs = epochs;
    to.clip_grad_norm = 1.0;
    to.checkpoint_dir = dir.string();
    to.keep_last = 1;
    to.config = {{"model", "MLP 784-1024-1024-10"}, {"optimizer", "AdamW lr 1e-3 wd 0.01"}, {"epochs", epochs}};
    train::Trainer trainer(
        model, opt, sched, [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); },
        to);
    train::Trainer::EvalFn eval = [](nn::Module& m, const data::Batch& b) {
      Tensor logits = m(b.input);
      train::EvalCounts c;
      c.loss_sum = tb::cross_entropy(logits, b.target, {}, "sum").item_double();
      c.correct = tb::sum(tb::eq(tb::argmax(logits, 1), b.target)).item<int64_t>();
      c.count = b.target.numel();
      return c;
    };

    // LibTorch: the same model, optimizer and schedule on the same batches.
    ref::AdamW ropt(rmodel, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay);
    std::vector<double> lrs;  // the engine's lr at each step, replayed on LibTorch's side
    auto ref_epoch = [&](int64_t e, int64_t first_step) {
      rmodel.train(true);
      train_loader.set_epoch(e);
      double sum = 0;
      int64_t n = 0;
      for (const data::Batch& b : train_loader) {
        ropt.set_lr(lrs.at(size_t(first_step + n)));
        ropt.zero_grad();
        ref::Tensor loss = ref::cross_entropy(rmodel.forward(ref::to_ref(b.input)), ref::to_ref(b.target));
        ref::backward(loss);
        ref::clip_grad_norm(rmodel, 1.0);
        ropt.step();
        sum += ref::from_ref(loss).item_double();
        ++n;
      }
      return sum / double(std::max<int64_t>(n, 1));
    };
    auto ref_eval = [&] {
      rmodel.train(false);
      double loss = 0;
      int64_t correct = 0, count = 0;
      ref::with_no_grad([&] {
        for (const data::Batch& b : test_loader) {
          ref::Tensor logits = rmodel.forward(ref::to_ref(b.input));
          loss += ref::from_ref(ref::cross_entropy(logits, ref::to_ref(b.target), {}, "sum")).item_double();
          Tensor pred = tb::argmax(ref::from_ref(logits), 1);
          correct += tb::sum(tb::eq(pred, b.target)).item<int64_t>();
          count += b.target.numel();
        }
      });
      return std::pair{loss / double(count), double(correct) / double(count)};
    };

    // The engine: engine/train's loop, every epoch validated on the test set.
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<train::EpochStats> stats = trainer.fit(train_loader, &test_loader, &eval);
    const double engine_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // LibTorch: the lr of step k is base_lr * lambda(k), LambdaLR's definition.
    const auto lambda = optim::warmup_cosine(100, total, 0.05);
    t0 = std::chrono::steady_clock::now();
    nlohmann::json e_train = nlohmann::json::array(), e_vloss = nlohmann::json::array(),
                   e_vacc = nlohmann::json::array(), r_train = nlohmann::json::array(),
                   r_vloss = nlohmann::json::array(), r_vacc = nlohmann::json::array();
    for (int64_t e = 0; e < epochs; ++e) {
      for (int64_t k = 0; k < train_loader.size(); ++k) lrs.push_back(o.lr * lambda(e * train_loader.size() + k));
      r_train.push_back(ref_epoch(e, e * train_loader.size()));
      const auto [rvloss, rvacc] = ref_eval();
      r_vloss.push_back(rvloss);
      r_vacc.push_back(rvacc);
    }
    const double reference_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const train::EpochStats& st : stats) {
      e_train.push_back(st.train_loss);
      e_vloss.push_back(st.val_loss);
      e_vacc.push_back(st.val_accuracy);
    }
    const double acc = e_vacc.back().get<double>();
    rec.series = {{"engine_epoch_train_loss", e_train},  {"reference_epoch_train_loss", r_train},
                  {"engine_epoch_val_loss", e_vloss},    {"reference_epoch_val_loss", r_vloss},
                  {"engine_epoch_val_accuracy", e_vacc}, {"reference_epoch_val_accuracy", r_vacc}};
    rec.metrics["test_accuracy"] = acc;
    rec.metrics["reference_test_accuracy"] = r_vacc.back().get<double>();
    rec.metrics["epochs"] = epochs;
    rec.metrics["steps"] = trainer.step();
    rec.metrics["engine_train_s"] = engine_s;
    rec.metrics["reference_train_s"] = reference_s;
    rec.metrics["best_val_loss"] = trainer.best_metric().value_or(std::nan(""));
    rec.tolerances = {{"min_test_accuracy", kAccuracyFloor}};
    if (acc < kAccuracyFloor) {
      rec.status = harness::Status::Fail;
      rec.message = "test accuracy " + std::to_string(acc) + " is below " + std::to_string(kAccuracyFloor);
    }
  });
}

}  // namespace

// See resume_mlp: the child half of the resume check, run in a fresh process.
int run_resume_child(const std::string& dir) {
  try {
    ResumeRun r = make_resume_run(2 * kResumeSteps, dir);
    if (!r.trainer->resume(dir)) {
      std::fprintf(stderr, "resume child: no checkpoint in %s\n", dir.c_str());
      return 2;
    }
    r.trainer->fit(*r.loader);
    checkpoint::save_file(dir + "/final.safetensors", final_state(r));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resume child: %s\n", e.what());
    return 1;
  }
}

std::vector<harness::TestCase> training_tests() {
  std::vector<harness::TestCase> t;
  for (DType dt : {DType::Float64, DType::Float32}) {
    t.push_back(equivalence_mlp(dt));
    t.push_back(equivalence_gpt(dt));
  }
  t.push_back(fused_reference_adamw());
  t.push_back(resume_mlp());
  t.push_back(fashion_mnist_mlp());
  for (harness::TestCase& c : recipe_tests()) t.push_back(std::move(c));
  return t;
}

double worst_param_ratio(const std::vector<std::pair<std::string, Tensor>>& params, const ref::NamedTensors& rp,
                         Tolerance tol, std::string* where) {
  double worst = 0;
  for (const auto& [name, t] : params) {
    const ref::Tensor* match = nullptr;
    for (const auto& [rn, rt] : rp)
      if (rn == name) match = &rt;
    if (!match) throw CheckFailed("LibTorch model has no parameter " + name);
    const Diff d = compare_values(t.detach(), ref::from_ref(*match), tol);
    if (d.worst_ratio > worst) {
      worst = d.worst_ratio;
      *where = name + "[" + std::to_string(d.worst_index) + "]: engine " + std::to_string(d.worst_actual) +
               " vs LibTorch " + std::to_string(d.worst_expected);
    }
  }
  return worst;
}

}  // namespace tb::suites
