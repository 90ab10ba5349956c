#include "engine/train/trainer.h"

#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/rng.h"
#include "engine/optim/clip_grad.h"
#include "engine/tensor/factories.h"

namespace tb::train {

namespace {
constexpr const char* kAccumulatedGrad = "trainer.accumulated_grad.";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Trainer::Trainer(std::shared_ptr<nn::Module> model, std::shared_ptr<optim::Optimizer> optimizer,
                 std::shared_ptr<optim::LRScheduler> scheduler, LossFn loss, Options options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      scheduler_(std::move(scheduler)),
      loss_(std::move(loss)),
      options_(std::move(options)) {
  TB_CHECK(model_ && optimizer_ && loss_, "Trainer", "a model, an optimizer and a loss function are required");
  params_ = model_->parameters();
  if (options_.ddp)
    TB_CHECK(options_.ddp->module_ptr() == model_, "Trainer",
             "Options::ddp must wrap the Trainer's model (DistributedDataParallel(model, group))");
  TB_CHECK(!options_.autocast || *options_.autocast == DType::BFloat16 || *options_.autocast == DType::Float16,
           "Trainer", "Options::autocast must be bfloat16 or float16 (or unset for float32), got ",
           core::name(*options_.autocast));
  TB_CHECK(options_.accumulation_steps >= 1, "Trainer", "Options::accumulation_steps must be >= 1, got ",
           options_.accumulation_steps);
  TB_CHECK(options_.scheduler_interval == "step" || options_.scheduler_interval == "epoch", "Trainer",
           "Options::scheduler_interval must be \"step\" or \"epoch\", got \"", options_.scheduler_interval, "\"");
  TB_CHECK(options_.metric == "loss" || options_.metric == "accuracy" || options_.metric == "f1", "Trainer",
           "Options::metric must be \"loss\", \"accuracy\" or \"f1\", got \"", options_.metric, "\"");
  TB_CHECK(options_.metric_mode == "min" || options_.metric_mode == "max", "Trainer",
           "Options::metric_mode must be \"min\" or \"max\", got \"", options_.metric_mode, "\"");
  if (scheduler_)
    TB_CHECK(&scheduler_->optimizer() == optimizer_.get(), "Trainer",
             "the scheduler must drive the Trainer's optimizer");
  if (plateau()) {
    const std::string mode = scheduler_->state_dict().at("mode").get<std::string>();
    TB_CHECK(mode == options_.metric_mode, "Trainer", "ReduceLROnPlateau has mode \"", mode,
             "\" but Options::metric_mode is \"", options_.metric_mode, "\" (for metric \"", options_.metric,
             "\"): they must agree, or the lr drops while the metric improves");
  }
}

bool Trainer::plateau() const { return dynamic_cast<const optim::ReduceLROnPlateau*>(scheduler_.get()) != nullptr; }

double eval_metric(const EvalCounts& c, const std::string& metric) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (metric == "loss") return c.count > 0 ? c.loss_sum / double(c.count) : nan;
  if (metric == "accuracy") return c.count > 0 ? double(c.correct) / double(c.count) : nan;
  TB_CHECK(metric == "f1", "eval_metric", "unknown metric \"", metric, "\" (loss, accuracy, f1)");
  const double denom = double(2 * c.true_positive + c.false_positive + c.false_negative);
  return denom > 0 ? 2.0 * double(c.true_positive) / denom : nan;
}

void Trainer::all_reduce_sum(std::vector<double>& values) const {
  if (!distributed() || values.empty()) return;
  Tensor t = from_vector(values, {int64_t(values.size())}, DType::Float64);
  options_.ddp->process_group().all_reduce(t, dist::ReduceOp::Sum)->wait();
  const double* p = t.data_ptr<double>();
  for (size_t i = 0; i < values.size(); ++i) values[i] = p[i];
}

void Trainer::log(const std::string& line) const {
  if (rank() != 0) return;
  if (options_.log) options_.log(line);
  else std::fprintf(stderr, "%s\n", line.c_str());
}

double Trainer::train_step(const data::Batch& batch) { return micro_step(batch, options_.accumulation_steps); }

// Note [Mixed precision and accumulation]: one micro-batch of a group of group_size.
double Trainer::micro_step(const data::Batch& batch, int64_t group_size) {
  model_->train();
  if (micro_ == 0) {
    optimizer_->zero_grad(/*set_to_none=*/true);
    group_size_ = group_size;
    group_loss_ = 0;
    if (options_.autocast) cast_cache_ = std::make_unique<autograd::AutocastCacheScope>();
  }
  const bool last = micro_ + 1 >= group_size_;
  // DDP: gradients stay local until the group's last backward (PyTorch's no_sync()).
  std::optional<dist::DistributedDataParallel::NoSyncGuard> no_sync;
  if (options_.ddp && !last) no_sync.emplace(*options_.ddp);
  Tensor loss;
  {
    std::optional<autograd::AutocastGuard> autocast;
    if (options_.autocast) autocast.emplace(true, *options_.autocast);
    loss = options_.ddp ? loss_(*options_.ddp, batch) : loss_(*model_, batch);
  }
  TB_CHECK(loss.numel() == 1, "Trainer", "the loss function returned a tensor of shape ", core::to_string(loss.sizes()),
           "; it must be a scalar");
  const double value = loss.item_double();
  Tensor objective = group_size_ > 1 ? tb::div(loss, double(group_size_)) : loss;
  if (options_.grad_scaler) objective = options_.grad_scaler->scale(objective);
  objective.backward();
  group_loss_ += value;
  ++micro_;
  if (last) optimizer_step();
  return value;
}

void Trainer::optimizer_step() {
  StepInfo info;
  info.lr = optimizer_->param_groups().at(0).options.at("lr").get<double>();
  info.micro_batches = micro_;
  info.loss = group_loss_ / double(micro_);
  // The weights change now: the next group casts them afresh. Dropped before the step, so that no
  // cast of this group holds a weight's shadow buffer while the step refills it (Note [Autocast
  // weight shadows] in autograd/autocast.h).
  cast_cache_.reset();
  optim::GradScaler* scaler = options_.grad_scaler.get();
  if (scaler) {
    info.scale = scaler->get_scale();
    if (options_.clip_grad_norm > 0) scaler->unscale_(*optimizer_);  // clip the true gradients
  }
  if (options_.clip_grad_norm > 0) optim::clip_grad_norm_(params_, options_.clip_grad_norm);
  if (scaler) {
    info.skipped = !scaler->step(*optimizer_);
    scaler->update();
  } else {
    optimizer_->step();
  }
  if (scheduler_ && !plateau() && options_.scheduler_interval == "step") scheduler_->step();
  micro_ = 0;
  ++step_;
  if (info.skipped) ++skipped_steps_;
  info.step = step_;
  info.epoch = epoch_;
  if (options_.on_step) options_.on_step(info);
}

EpochStats Trainer::train_epoch(data::DataLoader& loader) {
  const auto t0 = std::chrono::steady_clock::now();
  EpochStats st;
  st.epoch = epoch_;
  const int64_t skipped_before = skipped_steps_, steps_before = step_;
  loader.set_epoch(epoch_);
  loader.skip_batches(batch_in_epoch_);  // resumed mid-epoch: the batches not yet seen
  const int64_t n = loader.size(), k = options_.accumulation_steps;
  double loss_sum = 0;
  int64_t micro_batches = 0;
  for (const data::Batch& b : loader) {
    if (done()) break;
    // Groups start at multiples of k in the epoch; the last one holds what is left.
    const int64_t group_start = batch_in_epoch_ - micro_;
    loss_sum += micro_step(b, std::min(k, n - group_start));
    ++batch_in_epoch_;
    ++micro_batches;
    if (micro_ == 0 && options_.log_every > 0 && step_ % options_.log_every == 0)
      log("epoch " + std::to_string(epoch_) + " step " + std::to_string(step_) + " loss " +
          std::to_string(loss_sum / double(micro_batches)));
  }
  st.steps = step_ - steps_before;
  st.skipped_steps = skipped_steps_ - skipped_before;
  std::vector<double> sums{loss_sum, double(micro_batches)};
  all_reduce_sum(sums);  // every rank's micro-batch losses (Note [Distributed training])
  st.train_loss = sums[1] > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN();
  st.seconds = seconds_since(t0);
  return st;
}

EvalCounts Trainer::evaluate(data::DataLoader& loader, const EvalFn& eval) {
  autograd::NoGradGuard no_grad;
  std::optional<autograd::AutocastGuard> autocast;  // validation computes as training does
  if (options_.autocast) autocast.emplace(true, *options_.autocast);
  model_->eval();
  EvalCounts total;
  loader.set_epoch(0);
  for (const data::Batch& b : loader) {
    EvalCounts c = eval(*model_, b);
    total.loss_sum += c.loss_sum;
    total.correct += c.correct;
    total.count += c.count;
    total.true_positive += c.true_positive;
    total.false_positive += c.false_positive;
    total.false_negative += c.false_negative;
  }
  model_->train();
  if (distributed()) {
    // Sharded: the sum of the shards; else rank 0's counts (Note [Distributed training]).
    const bool sharded = dynamic_cast<const data::DistributedSampler*>(&loader.sampler()) != nullptr;
    std::vector<double> sums{total.loss_sum,
                             double(total.correct),
                             double(total.count),
                             double(total.true_positive),
                             double(total.false_positive),
                             double(total.false_negative)};
    if (!sharded && rank() != 0) sums.assign(sums.size(), 0.0);
    all_reduce_sum(sums);  // exact: counts stay far below 2^53
    total = {sums[0], int64_t(sums[1]), int64_t(sums[2]), int64_t(sums[3]), int64_t(sums[4]), int64_t(sums[5])};
  }
  return total;
}

std::vector<EpochStats> Trainer::fit(data::DataLoader& train, data::DataLoader* val, const EvalFn* eval) {
  TB_CHECK(!plateau() || (val && eval), "Trainer.fit",
           "ReduceLROnPlateau steps on the validation metric: fit needs a validation loader and an EvalFn");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<EpochStats> out;
  while (epoch_ < options_.epochs && !done()) {
    EpochStats st = train_epoch(train);
    const bool epoch_complete = !done() || batch_in_epoch_ >= train.size();
    st.val_loss = st.val_accuracy = st.val_metric = nan;
    if (val && eval) {
      const EvalCounts c = evaluate(*val, *eval);
      st.val_loss = eval_metric(c, "loss");
      st.val_accuracy = eval_metric(c, "accuracy");
      st.val_metric = eval_metric(c, options_.metric);
    }
    if (epoch_complete && scheduler_) {
      if (plateau()) {
        TB_CHECK(!std::isnan(st.val_metric), "Trainer.fit", "ReduceLROnPlateau needs a validation ", options_.metric,
                 " but the validation set gave none (no samples?)");
        static_cast<optim::ReduceLROnPlateau&>(*scheduler_).step(st.val_metric);
      } else if (options_.scheduler_interval == "epoch") {
        scheduler_->step();
      }
    }
    st.lr = optimizer_->param_groups().at(0).options.at("lr").get<double>();
    log("epoch " + std::to_string(epoch_) + ": train loss " + std::to_string(st.train_loss) +
        (std::isnan(st.val_loss)
             ? std::string()
             : ", val loss " + std::to_string(st.val_loss) + ", val accuracy " + std::to_string(st.val_accuracy) +
                   (options_.metric == "f1" ? ", val f1 " + std::to_string(st.val_metric) : std::string())) +
        (st.skipped_steps > 0 ? ", " + std::to_string(st.skipped_steps) + " steps skipped" : std::string()) + " (" +
        std::to_string(st.seconds) + " s)");
    const bool better = !std::isnan(st.val_metric) &&
                        (!best_metric_ || (options_.metric_mode == "min" ? st.val_metric < *best_metric_
                                                                         : st.val_metric > *best_metric_));
    if (better) {
      best_metric_ = st.val_metric;
      best_epoch_ = epoch_;
    }
    if (epoch_complete) {
      ++epoch_;
      batch_in_epoch_ = 0;
    }
    out.push_back(st);
    if (!options_.checkpoint_dir.empty()) {
      save(options_.checkpoint_dir);
      if (better) save(options_.checkpoint_dir + "/best");
    }
  }
  return out;
}

void Trainer::save(const std::string& dir) const {
  if (rank() == 0) save_state(dir);
  if (distributed()) options_.ddp->process_group().barrier()->wait();
}

void Trainer::save_state(const std::string& dir) const {
  checkpoint::TrainingState s;
  for (const auto& [name, t] : model_->state_dict()) s.model.push_back({name, t});
  optim::StateDict o = optimizer_->state_dict();
  s.optimizer = o.json;
  s.optimizer_tensors = o.tensors;
  if (scheduler_) s.scheduler = scheduler_->state_dict();
  const core::Generator& g = core::default_generator();
  s.rng = {{"default", {{"seed", g.seed()}, {"offset", g.offset()}}}};
  s.step = step_;
  s.epoch = epoch_;
  s.config = options_.config;
  if (options_.grad_scaler) s.scaler = options_.grad_scaler->state_dict();
  s.extra = {{"batch_in_epoch", batch_in_epoch_}, {"micro_batch", micro_},           {"group_size", group_size_},
             {"group_loss", group_loss_},         {"skipped_steps", skipped_steps_}, {"metric", options_.metric},
             {"best_epoch", best_epoch_}};
  if (best_metric_) s.extra["best_metric"] = *best_metric_;
  // Mid-group: the gradients accumulated so far (Note [Mixed precision and accumulation]).
  if (micro_ > 0)
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].grad().defined())
        s.optimizer_tensors.push_back({std::string(kAccumulatedGrad) + std::to_string(i), params_[i].grad()});
  checkpoint::save_checkpoint(dir, s, options_.keep_last);
}

bool Trainer::resume(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "latest")) return false;
  checkpoint::TrainingState s = checkpoint::load_checkpoint(dir);
  // What the loop's own state needs is checked before anything is changed.
  std::optional<double> best;  // checkpoints before Options::metric saved best_val_loss
  const std::string metric = s.extra.value("metric", std::string("loss"));
  const char* best_key = s.extra.contains("best_metric") ? "best_metric" : "best_val_loss";
  if (s.extra.contains(best_key)) {
    TB_CHECK(metric == options_.metric, "Trainer.resume", "the checkpoint's best ", metric, " cannot seed the best ",
             options_.metric, ": resume with the same Options::metric");
    best = s.extra[best_key].get<double>();
  }
  // Split the accumulated gradients (if any) from the optimizer's own tensors.
  checkpoint::NamedTensors opt_tensors;
  std::vector<std::pair<size_t, Tensor>> grads;
  for (auto& nt : s.optimizer_tensors) {
    if (nt.first.rfind(kAccumulatedGrad, 0) != 0) {
      opt_tensors.push_back(nt);
      continue;
    }
    const std::string index = nt.first.substr(std::strlen(kAccumulatedGrad));
    const bool digits = !index.empty() && index.size() < 10 &&
                        index.find_first_not_of("0123456789") == std::string::npos;
    const size_t i = digits ? std::stoul(index) : params_.size();
    TB_CHECK(i < params_.size() && nt.second.sizes() == params_[i].sizes(), "Trainer.resume", "accumulated gradient ",
             nt.first, " does not match the model's parameters");
    grads.emplace_back(i, nt.second);
  }
  nn::StateDict model_state;
  for (const auto& [name, t] : s.model) model_state.insert(name, t);
  model_->load_state_dict(model_state, /*strict=*/true);
  optimizer_->load_state_dict({s.optimizer, opt_tensors});
  if (options_.grad_scaler && !s.scaler.is_null() && !s.scaler.empty()) options_.grad_scaler->load_state_dict(s.scaler);
  if (scheduler_) scheduler_->load_state_dict(s.scheduler);
  const nlohmann::json& g = s.rng.at("default");
  core::default_generator().set_state(g.at("seed").get<uint64_t>(), g.at("offset").get<uint64_t>());
  step_ = s.step;
  epoch_ = s.epoch;
  batch_in_epoch_ = s.extra.value("batch_in_epoch", int64_t(0));
  micro_ = s.extra.value("micro_batch", int64_t(0));
  group_size_ = s.extra.value("group_size", int64_t(0));
  group_loss_ = s.extra.value("group_loss", 0.0);
  skipped_steps_ = s.extra.value("skipped_steps", int64_t(0));
  best_epoch_ = s.extra.value("best_epoch", int64_t(-1));
  best_metric_ = best;
  for (Tensor& p : params_) p.set_grad(Tensor());
  for (const auto& [i, g] : grads) params_[i].set_grad(g.to(params_[i].dtype()));
  if (micro_ > 0 && options_.autocast) cast_cache_ = std::make_unique<autograd::AutocastCacheScope>();
  log("resumed from " + dir + " at epoch " + std::to_string(epoch_) + ", step " + std::to_string(step_));
  return true;
}

}  // namespace tb::train
