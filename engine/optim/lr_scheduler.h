// Learning-rate schedulers: torch.optim.lr_scheduler (torch 2.11) re-stated for tb::optim, with
// the same state (initial_lr in the parameter groups, the constructor's initial step, last_epoch,
// _step_count), the same chainable (recursive) formulas in step() and the same closed forms where
// PyTorch uses them (SequentialLR's milestones), so every lr matches PyTorch to float64 rounding.
// state_dict() uses PyTorch's keys, so a state saved by torch loads here and vice versa.
// Not here: the deprecated step(epoch), ConstantLR/PolynomialLR/CyclicLR/MultiplicativeLR/
// ChainedScheduler, tensor-valued lrs. Loss scaling is grad_scaler.h.
//
// Schedulers hold a reference to their Optimizer: it must outlive them. They write
// optimizer.param_groups()[i].options["lr"] (and "momentum" / "betas"[0] for OneCycleLR).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/optim/optimizer.h"

namespace tb::optim {

class SequentialLR;

// Note [Scheduler initial step]
// As in PyTorch, constructing a scheduler performs one step (the "initial step") that sets the
// lrs for last_epoch + 1 (epoch 0 for a fresh scheduler). A C++ base constructor cannot call the
// subclass's get_lr(), so every concrete constructor ends with initial_step().
class LRScheduler {
 public:
  virtual ~LRScheduler();
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one epoch/iteration and writes the new lr of every parameter group.
  virtual void step();
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return *opt_; }

  // PyTorch's state_dict() keys ("base_lrs", "last_epoch", "_step_count", "_last_lr", and each
  // scheduler's own fields). Non-finite numbers are written as the strings "inf", "-inf", "nan".
  virtual nlohmann::json state_dict() const;
  // Replaces this scheduler's state (hyperparameters included, as PyTorch's __dict__.update
  // does); missing or mistyped keys are an error and leave the scheduler unchanged. The
  // optimizer's lrs are not touched: load the optimizer's own state dict for those.
  virtual void load_state_dict(const nlohmann::json& sd);

 protected:
  // Fresh (last_epoch == -1): sets options["initial_lr"] = options["lr"] where absent.
  // Resuming (last_epoch >= 0): every group must already hold "initial_lr".
  LRScheduler(Optimizer& opt, int64_t last_epoch);
  struct NoInitialLr {};
  // For schedulers that PyTorch does not run through LRScheduler.__init__ (SequentialLR,
  // ReduceLROnPlateau): no initial_lr, no base_lrs.
  LRScheduler(Optimizer& opt, NoInitialLr);

  // The chainable form: the lrs for last_epoch_, usually from the groups' current lrs.
  virtual std::vector<double> get_lr() = 0;
  // The closed form, for schedulers that have one; used when an epoch is given (SequentialLR).
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }

  void initial_step();                           // See Note [Scheduler initial step]
  void update_lr(std::optional<int64_t> epoch);  // PyTorch's _update_lr
  std::vector<double> group_lrs() const;         // options["lr"] of every group
  double group_value(size_t group, const char* key) const;
  void write_lrs(const std::vector<double>& lrs);  // options["lr"] and last_lr_
  void base_state(nlohmann::json& sd) const;       // the base class's keys into sd
  void load_base_state(const nlohmann::json& sd);

  Optimizer* opt_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  bool is_initial_ = false;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;

  friend class SequentialLR;
};

// lr = initial_lr * gamma^(epoch // step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = initial_lr * gamma^(number of milestones <= epoch); a repeated milestone counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma = 0.1, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::map<int64_t, int64_t> milestones_;  // milestone -> multiplicity (PyTorch's Counter)
  double gamma_;
};

// lr = initial_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& opt, double gamma, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double gamma_;
};

// The factor goes linearly from start_factor (epoch 0) to end_factor (epoch total_iters), then
// stays. 0 < start_factor <= 1, 0 <= end_factor <= 1.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& opt, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5,
           int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// lr = eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed
// recursively as PyTorch does (so it keeps oscillating with period 2*T_max past T_max).
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min = 0.0, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// SGDR: cosine from initial_lr to eta_min over T_i steps, then restart with T_i *= T_mult.
class CosineAnnealingWarmRestarts : public LRScheduler {
 public:
  CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult = 1, double eta_min = 0.0,
                              int64_t last_epoch = -1);
  void step() override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t T_0_, T_i_, T_mult_;
  double eta_min_;
  double T_cur_;  // an integer in practice; a double as in PyTorch's explicit-epoch path
};

// The 1cycle policy. Sets per group "initial_lr" = max_lr / div_factor, "max_lr", "min_lr" =
// initial_lr / final_div_factor, and with cycle_momentum "max_momentum"/"base_momentum", and
// cycles "momentum" (optimizers whose defaults have "momentum", e.g. SGD) or "betas"[0]
// (defaults with "betas", e.g. Adam) inversely to the lr. cycle_momentum (PyTorch's default:
// on) with an optimizer that has neither is an error. Stepping past total_steps is an error.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", double div_factor = 25.0, double final_div_factor = 1e4,
             bool three_phase = false, bool cycle_momentum = true, double base_momentum = 0.85,
             double max_momentum = 0.95, int64_t last_epoch = -1);
  // One max_lr per parameter group.
  OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", double div_factor = 25.0, double final_div_factor = 1e4,
             bool three_phase = false, bool cycle_momentum = true, double base_momentum = 0.85,
             double max_momentum = 0.95, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    std::string start_lr, end_lr, start_momentum, end_momentum;  // option keys of the group
  };
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_;
  std::vector<Phase> phases_;
  std::string anneal_;  // "cos" | "linear"
  bool cycle_momentum_;
  bool use_beta1_ = false;
};

// lr = initial_lr * f(epoch), one f for all groups or one per group. The functions are not
// serialised (as in PyTorch: "lr_lambdas" is a list of nulls); a loaded scheduler keeps its own.
class LambdaLR : public LRScheduler {
 public:
  using Fn = std::function<double(int64_t)>;
  LambdaLR(Optimizer& opt, Fn lr_lambda, int64_t last_epoch = -1);
  LambdaLR(Optimizer& opt, std::vector<Fn> lr_lambdas, int64_t last_epoch = -1);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Fn> fns_;
};

// A factor for LambdaLR: linear warmup from 0, then a half cosine down to min_factor.
//   step <  warmup_steps:               step / warmup_steps
//   warmup_steps <= step < total_steps: min_factor + (1 - min_factor) * 0.5 * (1 + cos(pi * p)),
//                                       p = (step - warmup_steps) / (total_steps - warmup_steps)
//   step >= total_steps:                min_factor
// (float64, in this order of operations). Requires 0 <= warmup_steps < total_steps and
// 0 <= min_factor <= 1. Note the factor is 0 at step 0 when warmup_steps > 0.
std::function<double(int64_t)> warmup_cosine(int64_t warmup_steps, int64_t total_steps, double min_factor = 0.0);

// Runs schedulers[0] until milestones[0], then schedulers[1] (started at its epoch 0 via its
// closed form) until milestones[1], ... All schedulers must drive `opt`; milestones strictly
// increasing, one fewer than schedulers; ReduceLROnPlateau is not allowed (as in PyTorch).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers, std::vector<int64_t> milestones,
               int64_t last_epoch = -1);
  void step() override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 protected:
  std::vector<double> get_lr() override;  // an error: SequentialLR only steps its children

 private:
  void recursive_undo(LRScheduler& s);
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

// Multiplies every group's lr by `factor` once the metric has not improved for more than
// `patience` steps (improved: below best * (1 - threshold) for mode "min"/"rel", below
// best - threshold for "min"/"abs", mirrored for "max"), then waits `cooldown` steps. An lr
// never goes below min_lr, and changes smaller than eps are skipped. Does not set initial_lr
// and does not step at construction (as in PyTorch). Call step(metric), not step().
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(Optimizer& opt, const std::string& mode = "min", double factor = 0.1, int64_t patience = 10,
                    double threshold = 1e-4, const std::string& threshold_mode = "rel", int64_t cooldown = 0,
                    double min_lr = 0.0, double eps = 1e-8);
  // One min_lr per parameter group.
  ReduceLROnPlateau(Optimizer& opt, const std::string& mode, double factor, int64_t patience, double threshold,
                    const std::string& threshold_mode, int64_t cooldown, std::vector<double> min_lrs,
                    double eps = 1e-8);
  void step() override;  // an error: the metric is required
  void step(double metric);
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& sd) override;
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }

 protected:
  std::vector<double> get_lr() override;  // the groups' current lrs

 private:
  void init_is_better(const std::string& mode, double threshold, const std::string& threshold_mode);
  bool is_better(double a, double best) const;
  void reduce_lr();

  double factor_;
  std::optional<double> default_min_lr_;  // set when min_lr was one number for all groups
  std::vector<double> min_lrs_;
  int64_t patience_, cooldown_;
  double eps_;
  std::string mode_, threshold_mode_;
  double threshold_, mode_worse_ = 0, best_ = 0;
  int64_t cooldown_counter_ = 0, num_bad_epochs_ = 0;
};

}  // namespace tb::optim
