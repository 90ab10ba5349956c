// The training suite's mixed-precision recipe cases: engine/train's Trainer against a LibTorch
// loop written the PyTorch way, on the same weights and batches, for a few epochs.
//   recipe/mlp/bfloat16: bfloat16 autocast, float32 master weights, AdamW, gradient accumulation
//     over 5 micro-batches (an epoch of 24 ends with a group of 4), clipping, ReduceLROnPlateau
//     on validation accuracy (mode max) and the best checkpoint on it.
//   recipe/mlp/float16: float16 autocast with a GradScaler whose first scales overflow (skipped
//     steps, backoff, growth every 4 clean steps), accumulation 3, clipping after unscale, a
//     StepLR stepped per epoch, the best checkpoint on validation loss (mode min).
// Compared: every optimizer step's loss, lr, skip and scale; the per-epoch validation metric and
// lr; the epoch the best checkpoint holds and its parameters; the final parameters.
//
// Note [Mixed-precision tolerances]
// Under autocast every product's output is rounded to 8 (bfloat16) or 11 (float16) significant
// bits, and the engine's and LibTorch's kernels sum in different orders, so the logits differ by
// about one ulp of the low precision from the first step on, and training amplifies it. As in
// Note [Float32 drift yardstick] the allowance is measured in the same run: a second LibTorch
// model whose initial weights differ from the first's by half an ulp of the autocast dtype
// (2^-9 relative for bfloat16, 2^-12 for float16) trains on the same batches; the engine must
// stay within 10 of those yardsticks of LibTorch, plus a floor of 1% (bfloat16) or 0.2% (float16)
// relative (the size of a few roundings of the loss itself): losses at every step, every
// parameter tensor's L2 distance at the end and in the best checkpoint. The discrete outcomes
// (which steps were skipped, the scales, the lrs, the best epoch) must be equal: the two sides'
// logits agree far closer than a validation sample's margin (the worst loss difference is a
// few 1e-7), so no decision rests on a rounding.
#include <cmath>
#include <filesystem>
#include <optional>
#include <unistd.h>

#include "engine/autograd/functions.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/rng.h"
#include "engine/data/dataloader.h"
#include "engine/nn/models.h"
#include "engine/ops/reduce.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/tensor/factories.h"
#include "engine/train/trainer.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "reference/training.h"
#include "suites/compare.h"
#include "suites/recorded.h"
#include "suites/training/training_bench.h"

namespace tb::suites {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kIn = 16, kHidden = 64, kClasses = 4, kBatch = 16, kEpochs = 6;
constexpr double kRecipeYardsticks = 10;

struct Recipe {
  DType autocast;
  int64_t accumulation;
  bool scaler;    // float16: GradScaler(2^24, growth 2, backoff 0.5, interval 4)
  bool plateau;   // ReduceLROnPlateau(max, 0.5, patience 0) on accuracy; else StepLR(2, 0.5) per epoch, best on loss
  double spread;  // of the clusters' centres (see clusters)
};

// Gaussian clusters (unit variance) around kClasses centres; `spread` scales the centres: 1.5
// separates them well (validation accuracy 1 from the first epoch), 0.3 makes them overlap (an
// accuracy that climbs and wobbles over the epochs, so the best epoch is a real choice).
std::shared_ptr<data::TensorDataset> clusters(int64_t n, uint64_t seed, double spread) {
  core::Generator g(seed);
  core::Generator c(1234);  // the same centres for every split
  const Tensor centres = tb::mul(randn({kClasses, kIn}, DType::Float32, &c), spread);
  const Tensor y = randint(0, kClasses, {n}, DType::Int64, &g);
  const Tensor x = tb::add(tb::index_select(centres, 0, y), randn({n, kIn}, DType::Float32, &g));
  return std::make_shared<data::TensorDataset>(x, y);
}

ref::NamedTensors ref_state(const nn::Module& m, double scale = 1.0) {
  ref::NamedTensors out;
  for (auto& [name, t] : m.state_dict()) out.push_back({name, ref::to_ref(scale == 1.0 ? t : tb::mul(t, scale))});
  return out;
}

struct Curve {
  std::vector<double> loss, lr, scale;
  std::vector<int64_t> skipped;  // indices of the skipped steps
  std::vector<double> val_metric, epoch_lr;
  int64_t best_epoch = -1;
  ref::NamedTensors best_params;
};

// The LibTorch loop, as a PyTorch user writes the recipe.
Curve run_libtorch(const Recipe& r, const ref::NnModule& model, data::DataLoader& train, data::DataLoader& val) {
  Curve c;
  ref::AdamW opt(model, 1e-2, 0.9, 0.999, 1e-8, 0.01);
  std::optional<ref::GradScaler> scaler;
  if (r.scaler) scaler.emplace(double(1 << 24), 2.0, 0.5, 4);
  std::optional<ref::ReduceLROnPlateau> plateau;
  if (r.plateau) plateau.emplace(opt, "max", 0.5, 0, 1e-4, "rel", 0, 0.0, 1e-8);
  std::optional<double> best;
  const int64_t n = train.size();
  for (int64_t e = 0; e < kEpochs; ++e) {
    model.train(true);
    train.set_epoch(e);
    std::vector<data::Batch> batches;
    for (const data::Batch& b : train) batches.push_back(b);
    for (int64_t start = 0; start < n; start += r.accumulation) {
      const int64_t k = std::min(r.accumulation, n - start);
      c.lr.push_back(opt.lr());
      c.scale.push_back(scaler ? scaler->get_scale() : 1.0);
      opt.zero_grad();
      double sum = 0;
      for (int64_t i = start; i < start + k; ++i) {
        const data::Batch& b = batches[size_t(i)];
        ref::Tensor loss;
        ref::with_autocast(r.autocast, [&] {
          loss = ref::cross_entropy(model.forward(ref::to_ref(b.input)), ref::to_ref(b.target));
        });
        sum += ref::from_ref(loss).item_double();
        ref::Tensor obj = ref::div(loss, double(k));
        ref::backward(scaler ? scaler->scale(obj) : obj);
      }
      if (scaler) scaler->unscale_(model);
      ref::clip_grad_norm(model, 1.0);
      if (scaler) {
        if (!scaler->step(opt)) c.skipped.push_back(int64_t(c.loss.size()));
        scaler->update();
      } else {
        opt.step();
      }
      c.loss.push_back(sum / double(k));
    }
    // Validation under no_grad and autocast.
    model.train(false);
    double loss_sum = 0;
    int64_t correct = 0, count = 0;
    ref::with_no_grad([&] {
      for (const data::Batch& b : val) {
        ref::Tensor logits;
        ref::with_autocast(r.autocast, [&] { logits = model.forward(ref::to_ref(b.input)); });
        const Tensor l = ref::from_ref(logits).to(DType::Float32);
        loss_sum += tb::cross_entropy(l, b.target, {}, "sum").item_double();
        correct += tb::sum(tb::eq(tb::argmax(l, 1), b.target)).item<int64_t>();
        count += b.target.numel();
      }
    });
    const double metric = r.plateau ? double(correct) / double(count) : loss_sum / double(count);
    c.val_metric.push_back(metric);
    if (plateau) plateau->step(metric);
    else opt.set_lr(1e-2 * std::pow(0.5, double((e + 1) / 2)));  // StepLR(step_size 2, gamma 0.5)
    c.epoch_lr.push_back(opt.lr());
    if (!best || (r.plateau ? metric > *best : metric < *best)) {
      best = metric;
      c.best_epoch = e;
      c.best_params.clear();
      for (auto& [name, t] : model.named_parameters())
        c.best_params.push_back({name, ref::to_ref(ref::from_ref(t).clone())});
    }
  }
  return c;
}

// Per tensor: |engine - LibTorch| / (floor * |LibTorch| + yardsticks * |twin - LibTorch|).
double param_ratio(const std::vector<std::pair<std::string, Tensor>>& engine, const ref::NamedTensors& lib,
                   const ref::NamedTensors& twin, double floor, std::string* where) {
  double worst = 0;
  for (size_t i = 0; i < lib.size(); ++i) {
    const Tensor* e = nullptr;
    for (const auto& [n, t] : engine)
      if (n == lib[i].first) e = &t;
    if (!e) throw CheckFailed("the engine has no parameter " + lib[i].first);
    const Tensor a = ref::from_ref(lib[i].second).to(DType::Float64),
                 b = ref::from_ref(twin[i].second).to(DType::Float64);
    const double d = tb::norm(tb::sub(e->detach().to(DType::Float64), a)).item_double();
    const double yard = tb::norm(tb::sub(b, a)).item_double(), norm = tb::norm(a).item_double();
    const double ratio = d / (floor * norm + kRecipeYardsticks * yard + 1e-30);
    if (ratio > worst) {
      worst = ratio;
      *where = lib[i].first + ": |engine - LibTorch| = " + std::to_string(d) + ", yardstick " + std::to_string(yard) +
               ", |LibTorch| = " + std::to_string(norm);
    }
  }
  return worst;
}

void fail(harness::Record& rec, const std::string& why) {
  if (rec.status != harness::Status::Pass) return;
  rec.status = harness::Status::Fail;
  rec.message = why;
}

template <typename T>
nlohmann::json to_json(const std::vector<T>& v) {
  return nlohmann::json(v);
}

harness::TestCase recipe_case(const std::string& name, Recipe r) {
  return recorded_case("training", name, [r](harness::Record& rec) {
    const bool bf16 = r.autocast == DType::BFloat16;
    const double floor = bf16 ? 1e-2 : 2e-3, twin_scale = 1.0 + (bf16 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -12));
    const fs::path dir = fs::temp_directory_path() / ("trainbench-recipe-" + std::to_string(getpid()));
    fs::remove_all(dir);
    struct Cleanup {
      fs::path p;
      ~Cleanup() { fs::remove_all(p); }
    } cleanup{dir};
    data::DataLoader::Options lo;
    lo.batch_size = kBatch;
    lo.shuffle = true;
    lo.seed = 3;
    data::DataLoader train(clusters(24 * kBatch, 1, r.spread), lo);
    data::DataLoader::Options vo;
    vo.batch_size = 64;
    data::DataLoader val(clusters(128, 2, r.spread), vo);

    core::manual_seed(21);
    auto model = std::make_shared<nn::MLP>(kIn, kHidden, kClasses);
    ref::NnModule lib = ref::nn_mlp(kIn, kHidden, kClasses), twin = ref::nn_mlp(kIn, kHidden, kClasses);
    lib.load_by_name(ref_state(*model));
    twin.load_by_name(ref_state(*model, twin_scale));

    // The engine: the Trainer with the recipe's options.
    optim::AdamW::Options o;
    o.lr = 1e-2;
    o.weight_decay = 0.01;
    auto opt = std::make_shared<optim::AdamW>(model->parameters(), o);
    std::shared_ptr<optim::LRScheduler> sched;
    if (r.plateau) sched = std::make_shared<optim::ReduceLROnPlateau>(*opt, "max", 0.5, 0, 1e-4);
    else sched = std::make_shared<optim::StepLR>(*opt, 2, 0.5);
    train::Options to;
    to.epochs = kEpochs;
    to.clip_grad_norm = 1.0;
    to.autocast = r.autocast;
    to.accumulation_steps = r.accumulation;
    if (r.scaler) to.grad_scaler = std::make_shared<optim::GradScaler>(double(1 << 24), 2.0, 0.5, 4);
    to.scheduler_interval = "epoch";
    to.metric = r.plateau ? "accuracy" : "loss";
    to.metric_mode = r.plateau ? "max" : "min";
    to.checkpoint_dir = dir.string();
    to.keep_last = 1;
    to.log = [](const std::string&) {};
    Curve eng;
    to.on_step = [&](const train::StepInfo& s) {
      if (s.skipped) eng.skipped.push_back(int64_t(eng.loss.size()));
      eng.loss.push_back(s.loss);
      eng.lr.push_back(s.lr);
      eng.scale.push_back(s.scale);
    };
    train::Trainer trainer(
        model, opt, sched, [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); },
        to);
    train::Trainer::EvalFn eval = [](nn::Module& m, const data::Batch& b) {
      const Tensor logits = m(b.input).to(DType::Float32);
      train::EvalCounts c;
      c.loss_sum = tb::cross_entropy(logits, b.target, {}, "sum").item_double();
      c.correct = tb::sum(tb::eq(tb::argmax(logits, 1), b.target)).item<int64_t>();
      c.count = b.target.numel();
      return c;
    };
    for (const train::EpochStats& st : trainer.fit(train, &val, &eval)) {
      eng.val_metric.push_back(st.val_metric);
      eng.epoch_lr.push_back(st.lr);
    }
    eng.best_epoch = trainer.best_epoch();

    const Curve ref1 = run_libtorch(r, lib, train, val), ref2 = run_libtorch(r, twin, train, val);

    // Losses at every step, against the largest yardstick so far.
    if (eng.loss.size() != ref1.loss.size())
      throw CheckFailed("the engine took " + std::to_string(eng.loss.size()) + " optimizer steps, LibTorch " +
                        std::to_string(ref1.loss.size()));
    double yard = 0, worst_loss = 0;
    for (size_t s = 0; s < eng.loss.size(); ++s) {
      yard = std::max(yard, std::fabs(ref2.loss[s] - ref1.loss[s]));
      const double allowed = floor * std::fabs(ref1.loss[s]) + kRecipeYardsticks * yard;
      const double ratio = std::fabs(eng.loss[s] - ref1.loss[s]) / allowed;
      worst_loss = std::max(worst_loss, ratio);
      if (ratio > 1)
        fail(rec, "step " + std::to_string(s) + ": engine loss " + std::to_string(eng.loss[s]) + " vs LibTorch " +
                      std::to_string(ref1.loss[s]) + " (allowed difference " + std::to_string(allowed) + ")");
    }
    // The discrete outcomes: equal.
    auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (std::fabs(a[i] - b[i]) > 1e-12 * std::fabs(b[i])) return false;
      return true;
    };
    if (eng.skipped != ref1.skipped)
      fail(rec, "skipped steps differ: engine " + to_json(eng.skipped).dump() + ", LibTorch " +
                    to_json(ref1.skipped).dump());
    if (!same(eng.scale, ref1.scale))
      fail(rec, "loss scales differ: engine " + to_json(eng.scale).dump() + ", LibTorch " + to_json(ref1.scale).dump());
    if (!same(eng.lr, ref1.lr) || !same(eng.epoch_lr, ref1.epoch_lr))
      fail(rec, "lrs differ: engine per epoch " + to_json(eng.epoch_lr).dump() + ", LibTorch " +
                    to_json(ref1.epoch_lr).dump() + " (validation metric: engine " + to_json(eng.val_metric).dump() +
                    ", LibTorch " + to_json(ref1.val_metric).dump() + ")");
    if (eng.best_epoch != ref1.best_epoch)
      fail(rec, "best checkpoint: engine epoch " + std::to_string(eng.best_epoch) + ", LibTorch epoch " +
                    std::to_string(ref1.best_epoch) + " (validation metric: engine " + to_json(eng.val_metric).dump() +
                    ", LibTorch " + to_json(ref1.val_metric).dump() + ")");
    // Parameters: final, and in the best checkpoint (against LibTorch's copy at its best epoch).
    std::string where;
    const double worst_param = param_ratio(model->named_parameters(), lib.named_parameters(), twin.named_parameters(),
                                           floor, &where);
    if (worst_param > 1) fail(rec, "final parameters differ: " + where);
    const checkpoint::TrainingState best = checkpoint::load_checkpoint((dir / "best").string());
    if (best.epoch != eng.best_epoch + 1)
      fail(rec, "the best checkpoint was saved after epoch " + std::to_string(best.epoch - 1) + ", not " +
                    std::to_string(eng.best_epoch));
    std::vector<std::pair<std::string, Tensor>> best_params(best.model.begin(), best.model.end());
    const double worst_best = param_ratio(best_params, ref1.best_params, ref2.best_params, floor, &where);
    if (worst_best > 1) fail(rec, "best checkpoint parameters differ: " + where);

    rec.series = {{"engine_loss", to_json(eng.loss)},
                  {"reference_loss", to_json(ref1.loss)},
                  {"yardstick_loss", to_json(ref2.loss)},
                  {"engine_lr", to_json(eng.lr)},
                  {"reference_lr", to_json(ref1.lr)},
                  {"engine_val_metric", to_json(eng.val_metric)},
                  {"reference_val_metric", to_json(ref1.val_metric)}};
    rec.metrics["steps"] = double(eng.loss.size());
    rec.metrics["skipped_steps"] = double(eng.skipped.size());
    rec.metrics["best_epoch"] = double(eng.best_epoch);
    rec.metrics["worst_loss_tolerance_ratio"] = worst_loss;
    rec.metrics["worst_param_tolerance_ratio"] = worst_param;
    rec.metrics["worst_best_param_tolerance_ratio"] = worst_best;
    rec.metrics["loss_yardstick"] = yard;
    rec.tolerances = {{"loss_rtol", floor},
                      {"param_rtol", floor},
                      {"yardsticks", kRecipeYardsticks},
                      {"twin_relative_perturbation", twin_scale - 1.0}};
  });
}

}  // namespace

std::vector<harness::TestCase> recipe_tests() {
  return {recipe_case("recipe/mlp/bfloat16", {DType::BFloat16, 5, /*scaler=*/false, /*plateau=*/true, /*spread=*/0.3}),
          recipe_case("recipe/mlp/float16", {DType::Float16, 3, /*scaler=*/true, /*plateau=*/false, /*spread=*/1.5})};
}

}  // namespace tb::suites
