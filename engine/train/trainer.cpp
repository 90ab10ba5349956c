#include "engine/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/rng.h"
#include "engine/optim/clip_grad.h"
#include "engine/tensor/factories.h"

namespace tb::train {

namespace {
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

double Trainer::train_step(const data::Batch& batch) {
  model_->train();
  optimizer_->zero_grad(/*set_to_none=*/true);
  Tensor loss = options_.ddp ? loss_(*options_.ddp, batch) : loss_(*model_, batch);
  TB_CHECK(loss.numel() == 1, "Trainer", "the loss function returned a tensor of shape ", core::to_string(loss.sizes()),
           "; it must be a scalar");
  const double value = loss.item_double();
  loss.backward();
  if (options_.clip_grad_norm > 0) optim::clip_grad_norm_(params_, options_.clip_grad_norm);
  optimizer_->step();
  if (scheduler_) scheduler_->step();
  ++step_;
  return value;
}

EpochStats Trainer::train_epoch(data::DataLoader& loader) {
  const auto t0 = std::chrono::steady_clock::now();
  EpochStats st;
  st.epoch = epoch_;
  loader.set_epoch(epoch_);
  loader.skip_batches(batch_in_epoch_);  // resumed mid-epoch: the batches not yet seen
  double loss_sum = 0;
  for (const data::Batch& b : loader) {
    if (done()) break;
    loss_sum += train_step(b);
    ++batch_in_epoch_;
    ++st.steps;
    if (options_.log_every > 0 && step_ % options_.log_every == 0)
      log("epoch " + std::to_string(epoch_) + " step " + std::to_string(step_) + " loss " +
          std::to_string(loss_sum / double(st.steps)));
  }
  std::vector<double> sums{loss_sum, double(st.steps)};
  all_reduce_sum(sums);  // every rank's step losses (Note [Distributed training])
  st.train_loss = sums[1] > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN();
  st.seconds = seconds_since(t0);
  return st;
}

EvalCounts Trainer::evaluate(data::DataLoader& loader, const EvalFn& eval) {
  autograd::NoGradGuard no_grad;
  model_->eval();
  EvalCounts total;
  loader.set_epoch(0);
  for (const data::Batch& b : loader) {
    EvalCounts c = eval(*model_, b);
    total.loss_sum += c.loss_sum;
    total.correct += c.correct;
    total.count += c.count;
  }
  model_->train();
  if (distributed()) {
    // Sharded: the sum of the shards; else rank 0's counts (Note [Distributed training]).
    const bool sharded = dynamic_cast<const data::DistributedSampler*>(&loader.sampler()) != nullptr;
    std::vector<double> sums{total.loss_sum, double(total.correct), double(total.count)};
    if (!sharded && rank() != 0) sums.assign(3, 0.0);
    all_reduce_sum(sums);  // exact: counts stay far below 2^53
    total = {sums[0], int64_t(sums[1]), int64_t(sums[2])};
  }
  return total;
}

std::vector<EpochStats> Trainer::fit(data::DataLoader& train, data::DataLoader* val, const EvalFn* eval) {
  std::vector<EpochStats> out;
  while (epoch_ < options_.epochs && !done()) {
    EpochStats st = train_epoch(train);
    const bool epoch_complete = !done() || batch_in_epoch_ >= train.size();
    st.val_loss = st.val_accuracy = std::numeric_limits<double>::quiet_NaN();
    if (val && eval) {
      const EvalCounts c = evaluate(*val, *eval);
      if (c.count > 0) {
        st.val_loss = c.loss_sum / double(c.count);
        st.val_accuracy = double(c.correct) / double(c.count);
      }
    }
    log("epoch " + std::to_string(epoch_) + ": train loss " + std::to_string(st.train_loss) +
        (std::isnan(st.val_loss)
             ? std::string()
             : ", val loss " + std::to_string(st.val_loss) + ", val accuracy " + std::to_string(st.val_accuracy)) +
        " (" + std::to_string(st.seconds) + " s)");
    if (epoch_complete) {
      ++epoch_;
      batch_in_epoch_ = 0;
    }
    out.push_back(st);
    if (!options_.checkpoint_dir.empty()) {
      save(options_.checkpoint_dir);
      if (!std::isnan(st.val_loss) && (!best_val_loss_ || st.val_loss < *best_val_loss_)) {
        best_val_loss_ = st.val_loss;
        save(options_.checkpoint_dir + "/best");
      }
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
  s.extra = {{"batch_in_epoch", batch_in_epoch_}};
  if (best_val_loss_) s.extra["best_val_loss"] = *best_val_loss_;
  checkpoint::save_checkpoint(dir, s, options_.keep_last);
}

bool Trainer::resume(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "latest")) return false;
  checkpoint::TrainingState s = checkpoint::load_checkpoint(dir);
  nn::StateDict model_state;
  for (const auto& [name, t] : s.model) model_state.insert(name, t);
  model_->load_state_dict(model_state, /*strict=*/true);
  optimizer_->load_state_dict({s.optimizer, s.optimizer_tensors});
  if (scheduler_) scheduler_->load_state_dict(s.scheduler);
  const nlohmann::json& g = s.rng.at("default");
  core::default_generator().set_state(g.at("seed").get<uint64_t>(), g.at("offset").get<uint64_t>());
  step_ = s.step;
  epoch_ = s.epoch;
  batch_in_epoch_ = s.extra.value("batch_in_epoch", int64_t(0));
  if (s.extra.contains("best_val_loss")) best_val_loss_ = s.extra["best_val_loss"].get<double>();
  log("resumed from " + dir + " at epoch " + std::to_string(epoch_) + ", step " + std::to_string(step_));
  return true;
}

}  // namespace tb::train
