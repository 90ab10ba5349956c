// The schedulers that drive more than one lr formula (lr_scheduler.h): OneCycleLR (which also
// cycles momentum/beta1), SequentialLR (which runs other schedulers) and ReduceLROnPlateau
// (which follows a metric). Same rules as lr_scheduler.cpp: PyTorch 2.11's arithmetic, in order.
#include <algorithm>
#include <cmath>

#include "engine/optim/lr_scheduler.h"
#include "engine/optim/lr_scheduler_detail.h"

// See lr_scheduler.cpp: no fused multiply-adds, as in Python.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tb::optim {

using nlohmann::json;
using namespace detail;

// ---------------------------------------------------------------- OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, double div_factor, double final_div_factor, bool three_phase,
                       bool cycle_momentum, double base_momentum, double max_momentum, int64_t last_epoch)
    : OneCycleLR(opt, std::vector<double>(opt.param_groups().size(), max_lr), total_steps, pct_start, anneal_strategy,
                 div_factor, final_div_factor, three_phase, cycle_momentum, base_momentum, max_momentum, last_epoch) {}

namespace {
// Runs before LRScheduler's constructor (which reads "initial_lr"): validates and writes the
// group options PyTorch's OneCycleLR.__init__ writes before calling super().__init__.
Optimizer& prepare_one_cycle(Optimizer& opt, const std::vector<double>& max_lrs, int64_t total_steps, double pct_start,
                             const std::string& anneal, double div_factor, double final_div_factor, bool cycle_momentum,
                             double base_momentum, double max_momentum, int64_t last_epoch) {
  const char* op = "OneCycleLR";
  TB_CHECK(total_steps > 0, op, "Expected positive integer total_steps, but got ", total_steps);
  TB_CHECK(pct_start >= 0 && pct_start <= 1, op, "Expected float between 0 and 1 pct_start, but got ", pct_start);
  TB_CHECK(anneal == "cos" || anneal == "linear", op, "anneal_strategy must be one of 'cos' or 'linear', instead got '",
           anneal, "'");
  auto& groups = opt.param_groups();
  TB_CHECK(max_lrs.size() == groups.size(), op,
           "max_lr must have the same length as optimizer.param_groups. max_lr has ", max_lrs.size(),
           " values, param_groups has ", groups.size(), ".");
  TB_CHECK(div_factor > 0 && final_div_factor > 0, op, "div_factor and final_div_factor must be > 0, got ", div_factor,
           " and ", final_div_factor);
  const bool has_momentum = opt.defaults().contains("momentum"), has_betas = opt.defaults().contains("betas");
  TB_CHECK(!cycle_momentum || has_momentum || has_betas, op,
           "optimizer must support momentum or beta1 with `cycle_momentum` option enabled; pass cycle_momentum=false");
  if (last_epoch != -1) return opt;
  for (size_t i = 0; i < groups.size(); ++i) {
    nlohmann::json& o = groups[i].options;
    o["initial_lr"] = max_lrs[i] / div_factor;
    o["max_lr"] = max_lrs[i];
    o["min_lr"] = o["initial_lr"].get<double>() / final_div_factor;
    if (!cycle_momentum) continue;
    if (has_betas) {
      TB_CHECK(o.contains("betas") && o["betas"].is_array() && o["betas"].size() == 2, op, "param_groups[", i,
               "]['betas'] must be a pair like [0.9, 0.999], got ", o.value("betas", nlohmann::json()).dump());
      o["betas"][0] = max_momentum;
    } else {
      o["momentum"] = max_momentum;
    }
    o["max_momentum"] = max_momentum;
    o["base_momentum"] = base_momentum;
  }
  return opt;
}
}  // namespace

OneCycleLR::OneCycleLR(Optimizer& opt, std::vector<double> max_lrs, int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, double div_factor, double final_div_factor, bool three_phase,
                       bool cycle_momentum, double base_momentum, double max_momentum, int64_t last_epoch)
    : LRScheduler(prepare_one_cycle(opt, max_lrs, total_steps, pct_start, anneal_strategy, div_factor, final_div_factor,
                                    cycle_momentum, base_momentum, max_momentum, last_epoch),
                  last_epoch),
      total_steps_(total_steps),
      anneal_(anneal_strategy),
      cycle_momentum_(cycle_momentum) {
  const double T = double(total_steps);
  if (three_phase) {
    phases_ = {{pct_start * T - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * pct_start * T - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {T - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{pct_start * T - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {T - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  if (cycle_momentum_) use_beta1_ = opt.defaults().contains("betas");
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_ == "cos") {
    const double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  TB_CHECK(step_num <= total_steps_, "OneCycleLR.step", "Tried to step ", step_num,
           " times. The specified number of total steps is ", total_steps_,
           "; build the scheduler with a larger total_steps");
  std::vector<double> lrs;
  auto& groups = opt_->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (double(step_num) <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (double(step_num) - start_step) / (ph.end_step - start_step);
        lr = anneal(group_value(g, ph.start_lr.c_str()), group_value(g, ph.end_lr.c_str()), pct);
        if (cycle_momentum_)
          momentum = anneal(group_value(g, ph.start_momentum.c_str()), group_value(g, ph.end_momentum.c_str()), pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (cycle_momentum_) {
      nlohmann::json& o = groups[g].options;
      if (use_beta1_) {
        TB_CHECK(o.contains("betas") && o["betas"].is_array() && o["betas"].size() == 2, "OneCycleLR", "param_groups[",
                 g, "]['betas'] must be a pair like [0.9, 0.999]");
        o["betas"][0] = momentum;
      } else {
        o["momentum"] = momentum;
      }
    }
  }
  return lrs;
}

json OneCycleLR::state_dict() const {
  json phases = json::array();
  for (const Phase& p : phases_)
    phases.push_back({{"end_step", p.end_step},
                      {"start_lr", p.start_lr},
                      {"end_lr", p.end_lr},
                      {"start_momentum", p.start_momentum},
                      {"end_momentum", p.end_momentum}});
  json sd = {{"total_steps", total_steps_},
             {"_schedule_phases", phases},
             {"_anneal_func_type", anneal_},
             {"cycle_momentum", cycle_momentum_}};
  if (cycle_momentum_) sd["use_beta1"] = use_beta1_;
  base_state(sd);
  return sd;
}

void OneCycleLR::load_state_dict(const json& sd) {
  const char* op = "OneCycleLR.load_state_dict";
  const int64_t total = get_int(sd, "total_steps", op);
  check_int(total, 1, op, "total_steps");
  const std::string anneal = get_string(sd, "_anneal_func_type", op);
  TB_CHECK(anneal == "cos" || anneal == "linear", op, "'_anneal_func_type' must be 'cos' or 'linear', got '", anneal,
           "'");
  const bool cycle = get_bool(sd, "cycle_momentum", op);
  const bool beta1 = cycle ? get_bool(sd, "use_beta1", op) : false;
  const json& ph = need(sd, "_schedule_phases", op);
  TB_CHECK(ph.is_array() && !ph.empty(), op, "'_schedule_phases' must be a non-empty list");
  std::vector<Phase> phases;
  for (const json& p : ph)
    phases.push_back({get_double(p, "end_step", op), get_string(p, "start_lr", op), get_string(p, "end_lr", op),
                      get_string(p, "start_momentum", op), get_string(p, "end_momentum", op)});
  load_base_state(sd);
  total_steps_ = total;
  anneal_ = anneal;
  cycle_momentum_ = cycle;
  use_beta1_ = beta1;
  phases_ = std::move(phases);
}

// ---------------------------------------------------------------- SequentialLR

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler(opt, NoInitialLr{}), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  const char* op = "SequentialLR";
  TB_CHECK(!schedulers_.empty(), op, "SequentialLR expects at least one scheduler, but got no scheduler.");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    TB_CHECK(schedulers_[i] != nullptr, op, "scheduler ", i, " is null");
    TB_CHECK(dynamic_cast<ReduceLROnPlateau*>(schedulers_[i].get()) == nullptr, op,
             "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires a metric in `step`, "
             "but got one at index ",
             i, " in the given schedulers sequence.");
    TB_CHECK(&schedulers_[i]->optimizer() == &opt, op,
             "SequentialLR expects all schedulers to belong to the same optimizer, but scheduler ", i,
             " drives a different one");
  }
  TB_CHECK(milestones_.size() + 1 == schedulers_.size(), op,
           "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
           "milestone points, but got number of schedulers ",
           schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  for (size_t i = 1; i < milestones_.size(); ++i)
    TB_CHECK(milestones_[i] > milestones_[i - 1], op, "milestones must be strictly increasing, got ",
             milestones_[i - 1], " then ", milestones_[i]);
  last_epoch_ = last_epoch + 1;
  auto& groups = opt.param_groups();
  std::vector<double> initial;
  for (size_t i = 0; i < groups.size(); ++i) initial.push_back(group_value(i, "initial_lr"));
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options["lr"] = initial[i];
  for (auto& s : schedulers_) recursive_undo(*s);
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::recursive_undo(LRScheduler& s) {
  if (auto* seq = dynamic_cast<SequentialLR*>(&s)) {
    for (auto& child : seq->schedulers_) recursive_undo(*child);
  } else {
    s.last_epoch_ -= 1;
  }
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = size_t(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                            milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s.update_lr(0);
  } else {
    s.step();
  }
  last_lr_ = s.get_last_lr();
}

std::vector<double> SequentialLR::get_lr() {
  TB_CHECK(false, "SequentialLR",
           "a SequentialLR has no lr formula of its own (it cannot start at a milestone of "
           "an enclosing SequentialLR); step it with step()");
  return {};
}

json SequentialLR::state_dict() const {
  json subs = json::array();
  for (const auto& s : schedulers_) subs.push_back(s->state_dict());
  json ms = json::array();
  for (int64_t m : milestones_) ms.push_back(m);
  return {{"_milestones", ms},
          {"last_epoch", last_epoch_},
          {"_last_lr", doubles_json(last_lr_)},
          {"_schedulers", subs}};
}

void SequentialLR::load_state_dict(const json& sd) {
  const char* op = "SequentialLR.load_state_dict";
  const json& subs = need(sd, "_schedulers", op);
  TB_CHECK(subs.is_array() && subs.size() == schedulers_.size(), op, "'_schedulers' must hold ", schedulers_.size(),
           " state dicts (one per scheduler), got ", subs.is_array() ? std::to_string(subs.size()) : subs.type_name());
  const json& ms = need(sd, "_milestones", op);
  TB_CHECK(ms.is_array() && ms.size() == milestones_.size(), op, "'_milestones' must be a list of ", milestones_.size(),
           " epochs, got ", ms.dump());
  std::vector<int64_t> milestones;
  for (const json& m : ms) {
    TB_CHECK(m.is_number_integer(), op, "'_milestones' must hold integers, got ", ms.dump());
    milestones.push_back(m.get<int64_t>());
  }
  const int64_t epoch = get_int(sd, "last_epoch", op);
  std::vector<double> last = get_doubles(sd, "_last_lr", op, opt_->param_groups().size());
  // The children validate before they change anything, but a later child can still fail after an
  // earlier one loaded; snapshot to stay all-or-nothing.
  std::vector<json> before;
  for (const auto& s : schedulers_) before.push_back(s->state_dict());
  try {
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(subs[i]);
  } catch (...) {
    for (size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(before[i]);
    throw;
  }
  milestones_ = std::move(milestones);
  last_epoch_ = epoch;
  last_lr_ = std::move(last);
}

// ---------------------------------------------------------------- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const std::string& mode, double factor, int64_t patience,
                                     double threshold, const std::string& threshold_mode, int64_t cooldown,
                                     double min_lr, double eps)
    : ReduceLROnPlateau(opt, mode, factor, patience, threshold, threshold_mode, cooldown,
                        std::vector<double>(opt.param_groups().size(), min_lr), eps) {
  default_min_lr_ = min_lr;
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& opt, const std::string& mode, double factor, int64_t patience,
                                     double threshold, const std::string& threshold_mode, int64_t cooldown,
                                     std::vector<double> min_lrs, double eps)
    : LRScheduler(opt, NoInitialLr{}),
      factor_(factor),
      min_lrs_(std::move(min_lrs)),
      patience_(patience),
      cooldown_(cooldown),
      eps_(eps) {
  const char* op = "ReduceLROnPlateau";
  TB_CHECK(factor < 1.0 && factor >= 0, op, "Factor should be < 1.0 (and >= 0), got ", factor);
  TB_CHECK(min_lrs_.size() == opt.param_groups().size(), op, "expected ", opt.param_groups().size(), " min_lrs, got ",
           min_lrs_.size());
  check_int(patience, 0, op, "patience");
  check_int(cooldown, 0, op, "cooldown");
  last_epoch_ = 0;
  last_lr_ = group_lrs();
  init_is_better(mode, threshold, threshold_mode);
  best_ = mode_worse_;
}

void ReduceLROnPlateau::init_is_better(const std::string& mode, double threshold, const std::string& threshold_mode) {
  TB_CHECK(mode == "min" || mode == "max", "ReduceLROnPlateau", "mode ", mode, " is unknown! Use \"min\" or \"max\"");
  TB_CHECK(threshold_mode == "rel" || threshold_mode == "abs", "ReduceLROnPlateau", "threshold mode ", threshold_mode,
           " is unknown! Use \"rel\" or \"abs\"");
  mode_worse_ = mode == "min" ? INFINITY : -INFINITY;
  mode_ = mode;
  threshold_ = threshold;
  threshold_mode_ = threshold_mode;
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (mode_ == "min" && threshold_mode_ == "rel") return a < best * (1.0 - threshold_);
  if (mode_ == "min") return a < best - threshold_;
  if (threshold_mode_ == "rel") return a > best * (threshold_ + 1.0);
  return a > best + threshold_;
}

void ReduceLROnPlateau::step() {
  TB_CHECK(false, "ReduceLROnPlateau.step", "ReduceLROnPlateau needs the monitored metric: call step(metric)");
}

// A NaN metric is never better, so it counts as a bad epoch (as in PyTorch).
void ReduceLROnPlateau::step(double metric) {
  const double current = metric;
  last_epoch_ = last_epoch_ + 1;
  if (is_better(current, best_)) {
    best_ = current;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > patience_) {
    reduce_lr();
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
  }
  last_lr_ = group_lrs();
}

void ReduceLROnPlateau::reduce_lr() {
  auto& groups = opt_->param_groups();
  if (groups.size() != min_lrs_.size()) {
    TB_CHECK(default_min_lr_.has_value(), "ReduceLROnPlateau.step", "The number of param groups in the optimizer (",
             groups.size(), ") differs from when ReduceLROnPlateau was initialized (", min_lrs_.size(),
             "), usually due to a new param group being added to the optimizer; build the scheduler after adding "
             "the group or give one min_lr for all groups");
    min_lrs_.assign(groups.size(), *default_min_lr_);
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const double old_lr = group_value(i, "lr");
    const double new_lr = std::max(old_lr * factor_, min_lrs_[i]);
    if (old_lr - new_lr > eps_) groups[i].options["lr"] = new_lr;
  }
}

std::vector<double> ReduceLROnPlateau::get_lr() { return group_lrs(); }

json ReduceLROnPlateau::state_dict() const {
  return {{"factor", factor_},
          {"default_min_lr", default_min_lr_ ? json(*default_min_lr_) : json(nullptr)},
          {"min_lrs", doubles_json(min_lrs_)},
          {"patience", patience_},
          {"cooldown", cooldown_},
          {"eps", eps_},
          {"last_epoch", last_epoch_},
          {"_last_lr", doubles_json(last_lr_)},
          {"mode_worse", num_json(mode_worse_)},
          {"mode", mode_},
          {"threshold", threshold_},
          {"threshold_mode", threshold_mode_},
          {"best", num_json(best_)},
          {"cooldown_counter", cooldown_counter_},
          {"num_bad_epochs", num_bad_epochs_}};
}

void ReduceLROnPlateau::load_state_dict(const json& sd) {
  const char* op = "ReduceLROnPlateau.load_state_dict";
  const double factor = get_double(sd, "factor", op);
  TB_CHECK(factor < 1.0 && factor >= 0, op, "'factor' should be in [0, 1), got ", factor);
  const json& dm = need(sd, "default_min_lr", op);
  std::optional<double> default_min;
  if (!dm.is_null()) default_min = as_double(dm, "default_min_lr", op);
  const json& ml = need(sd, "min_lrs", op);
  TB_CHECK(ml.is_array(), op, "'min_lrs' must be a list of numbers, got ", ml.dump());
  std::vector<double> min_lrs;
  for (const json& x : ml) min_lrs.push_back(as_double(x, "min_lrs", op));
  const int64_t patience = get_int(sd, "patience", op), cooldown = get_int(sd, "cooldown", op);
  check_int(patience, 0, op, "patience");
  check_int(cooldown, 0, op, "cooldown");
  const double eps = get_double(sd, "eps", op), threshold = get_double(sd, "threshold", op),
               best = get_double(sd, "best", op);
  const int64_t epoch = get_int(sd, "last_epoch", op), counter = get_int(sd, "cooldown_counter", op);
  const int64_t bad = get_int(sd, "num_bad_epochs", op);
  const json& last_j = need(sd, "_last_lr", op);
  TB_CHECK(last_j.is_array(), op, "'_last_lr' must be a list of numbers");
  std::vector<double> last;
  for (const json& x : last_j) last.push_back(as_double(x, "_last_lr", op));
  const std::string mode = get_string(sd, "mode", op), tmode = get_string(sd, "threshold_mode", op);
  init_is_better(mode, threshold, tmode);  // validates; PyTorch recomputes mode_worse here too
  factor_ = factor;
  default_min_lr_ = default_min;
  min_lrs_ = std::move(min_lrs);
  patience_ = patience;
  cooldown_ = cooldown;
  eps_ = eps;
  best_ = best;
  last_epoch_ = epoch;
  cooldown_counter_ = counter;
  num_bad_epochs_ = bad;
  last_lr_ = std::move(last);
}

}  // namespace tb::optim
