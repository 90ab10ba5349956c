// An idiomatic training loop as a reusable piece: train/eval modes, zero_grad + forward +
// backward, optional gradient clipping, the optimizer and LR-scheduler steps, validation under
// no_grad, checkpoints every epoch (and of the best validation result on a chosen metric), mixed
// precision (autocast, a GradScaler), gradient accumulation, and exact resume: the model,
// optimizer, scheduler, scaler, the default RNG, the step, the epoch, the position in the epoch's
// data order and in the accumulation come back from a checkpoint, so N steps + save + load + N
// steps equals 2N steps bit for bit. It knows nothing of a particular model: the caller gives the loss of a batch
// (and, for validation, what to count in a batch). With Options::ddp it trains data-parallel
// (Note [Distributed training]).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/dataloader.h"
#include "engine/autograd/autocast.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/nn/module.h"
#include "engine/optim/grad_scaler.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/optimizer.h"

namespace tb::train {

// One optimizer step, as Options::on_step sees it.
struct StepInfo {
  int64_t step = 0;  // optimizer steps taken so far, this one included
  int64_t epoch = 0;
  double loss = 0;       // mean of the step's micro-batch losses (unscaled, undivided)
  double lr = 0;         // the first parameter group's lr this step used
  bool skipped = false;  // the GradScaler found inf/NaN gradients and skipped optimizer.step()
  double scale = 1;      // the GradScaler's scale this step used (1 without one)
  int64_t micro_batches = 0;
};

struct Options {
  int64_t epochs = 1;
  int64_t max_steps = -1;                       // stop after this many optimizer steps in total (-1: epochs decide)
  double clip_grad_norm = 0;                    // clip the gradients' global 2-norm to this (0: no clipping)
  std::string checkpoint_dir;                   // empty: no checkpoints; else <dir>/step-N after each epoch, <dir>/best
  int64_t keep_last = 2;                        // step checkpoints kept (0: all)
  int64_t log_every = 0;                        // a progress line every this many steps (0: only per epoch)
  std::function<void(const std::string&)> log;  // where progress lines go (default: stderr)
  nlohmann::json config;                        // saved with every checkpoint (what the run was)
  // Data-parallel training: the DistributedDataParallel wrapping `model` (the Trainer's model).
  // The loss function then receives the wrapper, so its forward arms the gradient all-reduce.
  std::shared_ptr<dist::DistributedDataParallel> ddp;

  // Mixed precision (Note [Mixed precision and accumulation]).
  std::optional<DType> autocast;  // nullopt: float32; BFloat16 or Float16: the loss fn runs under autocast
  std::shared_ptr<optim::GradScaler> grad_scaler;  // loss scaling (for float16): skips steps with inf/NaN gradients
  int64_t accumulation_steps = 1;                  // micro-batches per optimizer step
  // When the scheduler steps: "step" (after every optimizer step) or "epoch" (after every
  // complete epoch). A ReduceLROnPlateau always steps per epoch, on the validation metric.
  std::string scheduler_interval = "step";
  // The validation metric that picks <checkpoint_dir>/best and drives ReduceLROnPlateau:
  // "loss" (loss_sum / count), "accuracy" (correct / count) or "f1" (binary, from tp/fp/fn),
  // better when lower ("min") or higher ("max").
  std::string metric = "loss";
  std::string metric_mode = "min";
  // Called after every optimizer step (also a skipped one) with what the step did.
  std::function<void(const StepInfo&)> on_step;
};

// Note [Mixed precision and accumulation]
// An optimizer step over micro-batches b_1..b_k (k = accumulation_steps, fewer for the last
// group of an epoch whose size k does not divide) is, as a PyTorch loop writes it:
//   for each b_i:  with autocast(dtype): loss_i = loss_fn(model, b_i)
//                  scaler.scale(loss_i / k).backward()          (plain backward without a scaler)
//   scaler.unscale_(optimizer); clip_grad_norm_(...)            (unscale only with a scaler)
//   scaler.step(optimizer); scaler.update()                     (optimizer.step() without one)
//   scheduler.step()                                            (scheduler_interval "step")
//   optimizer.zero_grad(set_to_none=True)
// so every step averages its micro-batches' losses with equal weights. Parameters stay float32
// (the master weights); autocast casts them for the products, once per optimizer step (Note
// [Autocast weight cache]). A step the scaler skips still counts (step(), the scheduler), as in
// PyTorch. A checkpoint taken between micro-batches of a group also holds the gradients
// accumulated so far (optimizer tensors named "trainer.accumulated_grad.<i>").

// Note [Distributed training]
// With Options::ddp every rank runs the same Trainer in lockstep (same epochs, max_steps and
// number of batches per epoch: give the training loader a data::DistributedSampler, whose
// set_epoch the loop calls every epoch).
//   - Steps: the loss function gets the DDP wrapper; backward averages the gradients across
//     ranks, so clipping and the optimizer step are identical on every rank.
//   - Metrics: an epoch's train loss is the mean of every rank's step losses (one all_reduce per
//     epoch). Validation counts are summed across ranks when the validation loader's sampler is a
//     DistributedSampler (each rank evaluates its shard; note that without drop_last it pads the
//     last shard with repeated samples, as PyTorch's does); with any other sampler every rank
//     evaluates the whole set and rank 0's counts are broadcast. Either way all ranks get the
//     same figures and take the same best-checkpoint decisions.
//   - Checkpoints: save() is collective: rank 0 writes (the wrapped module's own state dict, so
//     files are interchangeable with single-process runs), then every rank waits at a barrier,
//     so a checkpoint is complete before anyone may read it. resume() reads rank 0's checkpoint
//     on every rank (the directory must be shared, as on one host), restoring the same model,
//     optimizer, scheduler, RNG and data position everywhere.
//   - Progress lines are written by rank 0 only.

// What validation counts over a batch (sums, so batches of any size combine exactly).
struct EvalCounts {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t count = 0;
  // For the "f1" metric (binary: the positive class's true positives, false positives, false
  // negatives); leave 0 otherwise.
  int64_t true_positive = 0, false_positive = 0, false_negative = 0;
};

// The named metric ("loss", "accuracy", "f1") of summed counts; NaN when count is 0 (or, for f1,
// when there is no positive sample nor prediction).
double eval_metric(const EvalCounts& c, const std::string& metric);

struct EpochStats {
  int64_t epoch = 0;
  int64_t steps = 0;          // optimizer steps taken in this epoch
  double train_loss = 0;      // mean of the step losses
  double val_loss = 0;        // loss_sum / count over the validation set (NaN without one)
  double val_accuracy = 0;    // correct / count (NaN without one)
  double val_metric = 0;      // Options::metric over the validation set (NaN without one)
  int64_t skipped_steps = 0;  // optimizer steps the GradScaler skipped in this epoch
  double lr = 0;              // the first parameter group's lr after the epoch (schedulers stepped)
  double seconds = 0;
};

class Trainer {
 public:
  // loss(model, batch): the scalar loss to minimise (the model is in train mode; under
  // Options::autocast when set).
  using LossFn = std::function<Tensor(nn::Module&, const data::Batch&)>;
  // eval(model, batch): runs under NoGradGuard (and Options::autocast) with the model in eval mode.
  using EvalFn = std::function<EvalCounts(nn::Module&, const data::Batch&)>;

  Trainer(std::shared_ptr<nn::Module> model, std::shared_ptr<optim::Optimizer> optimizer,
          std::shared_ptr<optim::LRScheduler> scheduler, LossFn loss, Options options);

  // One micro-batch: forward + backward; after Options::accumulation_steps of them, the
  // optimizer step. Returns the micro-batch's loss. (train_epoch sizes an epoch's last group.)
  double train_step(const data::Batch& batch);
  // The rest of the current epoch (all of it, unless resumed mid-epoch or max_steps stops it).
  EpochStats train_epoch(data::DataLoader& loader);
  EvalCounts evaluate(data::DataLoader& loader, const EvalFn& eval);
  // Epochs from the current one to options.epochs: train, validate (if `val`), checkpoint.
  std::vector<EpochStats> fit(data::DataLoader& train, data::DataLoader* val = nullptr, const EvalFn* eval = nullptr);

  // Writes a checkpoint of everything resume needs into `dir` (checkpoint::save_checkpoint).
  // Collective with Options::ddp: rank 0 writes, then all ranks meet at a barrier.
  void save(const std::string& dir) const;
  // Restores from `dir`'s latest checkpoint; false (and nothing changed) when there is none.
  bool resume(const std::string& dir);

  int64_t step() const { return step_; }
  int64_t epoch() const { return epoch_; }
  int64_t batch_in_epoch() const { return batch_in_epoch_; }
  bool done() const { return options_.max_steps >= 0 && step_ >= options_.max_steps; }
  int64_t micro_batch() const { return micro_; }  // micro-batches accumulated towards the next step
  // The best Options::metric value seen at validation (it named <checkpoint_dir>/best).
  const std::optional<double>& best_metric() const { return best_metric_; }
  int64_t best_epoch() const { return best_epoch_; }
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  void log(const std::string& line) const;
  double micro_step(const data::Batch& batch, int64_t group_size);
  void optimizer_step();
  bool plateau() const;
  void save_state(const std::string& dir) const;
  bool distributed() const { return options_.ddp != nullptr; }
  int rank() const { return distributed() ? options_.ddp->process_group().rank() : 0; }
  // Sums `values` across ranks (float64; a no-op without ddp).
  void all_reduce_sum(std::vector<double>& values) const;

  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<optim::Optimizer> optimizer_;
  std::shared_ptr<optim::LRScheduler> scheduler_;
  LossFn loss_;
  Options options_;
  std::vector<Tensor> params_;
  int64_t step_ = 0, epoch_ = 0, batch_in_epoch_ = 0;
  // Gradient accumulation: micro-batches of the current group so far, the group's size, the
  // sum of their losses. The weight cache lives over the group.
  int64_t micro_ = 0, group_size_ = 0;
  double group_loss_ = 0;
  std::unique_ptr<autograd::AutocastCacheScope> cast_cache_;
  int64_t skipped_steps_ = 0, best_epoch_ = -1;
  std::optional<double> best_metric_;
};

}  // namespace tb::train
