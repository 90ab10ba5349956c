// The schedulers of lr_scheduler.h. Each get_lr()/closed_form_lr() is PyTorch 2.11's formula
// with the same order of float64 operations (Python's int/float arithmetic, floor division and
// modulo), so results are identical, not merely close. Python ints become double only where
// Python mixes them with floats. The base class and the single-formula schedulers live here;
// OneCycleLR, SequentialLR and ReduceLROnPlateau in lr_scheduler_composite.cpp.
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/lr_scheduler_detail.h"

#include <algorithm>
#include <cmath>
#include <numbers>

// Python never fuses a * b + c; with -march=native GCC would (its C++ default is
// -ffp-contract=fast, clang's is "on"), changing the last bit of cosine and OneCycle lrs.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tb::optim {

using nlohmann::json;
using namespace detail;

// ---------------------------------------------------------------- LRScheduler

LRScheduler::LRScheduler(Optimizer& opt, int64_t last_epoch) : opt_(&opt), last_epoch_(last_epoch) {
  const char* op = "LRScheduler";
  TB_CHECK(last_epoch >= -1, op, "last_epoch must be -1 (a fresh schedule) or the index of the last epoch, got ",
           last_epoch);
  auto& groups = opt.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    json& o = groups[i].options;
    if (last_epoch == -1) {
      TB_CHECK(o.contains("lr") && o["lr"].is_number(), op, "param_groups[", i, "] has no numeric 'lr'");
      if (!o.contains("initial_lr")) o["initial_lr"] = o["lr"];
    } else {
      TB_CHECK(o.contains("initial_lr"), op, "param 'initial_lr' is not specified in param_groups[", i,
               "] when resuming a scheduler with last_epoch >= 0: load the optimizer's state dict first, or "
               "use last_epoch = -1 for a fresh run");
    }
    TB_CHECK(o["initial_lr"].is_number(), op, "param_groups[", i, "]['initial_lr'] must be a number, got ",
             o["initial_lr"].dump());
    base_lrs_.push_back(o["initial_lr"].get<double>());
  }
}

LRScheduler::LRScheduler(Optimizer& opt, NoInitialLr) : opt_(&opt) {}

LRScheduler::~LRScheduler() = default;

void LRScheduler::initial_step() {
  step_count_ = 0;
  is_initial_ = true;
  try {
    step();
  } catch (...) {
    is_initial_ = false;
    throw;
  }
  is_initial_ = false;
}

void LRScheduler::step() {
  // Roll back on error (OneCycleLR past total_steps), so the scheduler stays usable.
  const int64_t saved_epoch = last_epoch_, saved_count = step_count_;
  try {
    ++step_count_;
    update_lr(std::nullopt);
  } catch (...) {
    last_epoch_ = saved_epoch;
    step_count_ = saved_count;
    throw;
  }
}

void LRScheduler::update_lr(std::optional<int64_t> epoch) {
  std::vector<double> values;
  if (!epoch) {
    ++last_epoch_;
    values = get_lr();
  } else {
    last_epoch_ = *epoch;
    std::optional<std::vector<double>> closed = closed_form_lr();
    values = closed ? std::move(*closed) : get_lr();
  }
  TB_CHECK(values.size() == opt_->param_groups().size(), "LRScheduler.step", "the scheduler computed ", values.size(),
           " lrs for ", opt_->param_groups().size(),
           " parameter groups; a group was added or removed after the "
           "scheduler was built");
  for (size_t i = 0; i < values.size(); ++i)
    TB_CHECK(std::isfinite(values[i]), "LRScheduler.step", "the schedule gave a non-finite lr (", values[i],
             ") for param_groups[", i, "] at epoch ", last_epoch_, "; check the lr function and its arguments");
  write_lrs(values);
}

double LRScheduler::group_value(size_t group, const char* key) const {
  const json& o = opt_->param_groups().at(group).options;
  auto it = o.find(key);
  TB_CHECK(it != o.end() && it->is_number(), "LRScheduler", "param_groups[", group, "]['", key,
           "'] is missing or not a number (got ", it == o.end() ? std::string("nothing") : it->dump(), ")");
  return it->get<double>();
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (size_t i = 0; i < opt_->param_groups().size(); ++i) lrs.push_back(group_value(i, "lr"));
  return lrs;
}

void LRScheduler::write_lrs(const std::vector<double>& lrs) {
  auto& groups = opt_->param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options["lr"] = lrs[i];
  last_lr_ = lrs;
}

void LRScheduler::base_state(json& sd) const {
  sd["base_lrs"] = doubles_json(base_lrs_);
  sd["last_epoch"] = last_epoch_;
  sd["_step_count"] = step_count_;
  sd["_is_initial"] = false;
  sd["_get_lr_called_within_step"] = false;
  sd["_last_lr"] = doubles_json(last_lr_);
}

void LRScheduler::load_base_state(const json& sd) {
  const char* op = "LRScheduler.load_state_dict";
  const size_t n = opt_->param_groups().size();
  std::vector<double> base = get_doubles(sd, "base_lrs", op, n);
  std::vector<double> last = get_doubles(sd, "_last_lr", op, n);
  const int64_t epoch = get_int(sd, "last_epoch", op);
  const int64_t count = get_int(sd, "_step_count", op);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
  last_epoch_ = epoch;
  step_count_ = count;
}

json LRScheduler::state_dict() const {
  json sd = json::object();
  base_state(sd);
  return sd;
}

void LRScheduler::load_state_dict(const json& sd) { load_base_state(sd); }

// ---------------------------------------------------------------- StepLR

StepLR::StepLR(Optimizer& opt, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), step_size_(step_size), gamma_(gamma) {
  check_int(step_size, 1, "StepLR", "step_size");
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || floor_mod(last_epoch_, step_size_) != 0) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, double(floor_div(last_epoch_, step_size_))));
  return lrs;
}

json StepLR::state_dict() const {
  json sd = {{"step_size", step_size_}, {"gamma", gamma_}};
  base_state(sd);
  return sd;
}

void StepLR::load_state_dict(const json& sd) {
  const char* op = "StepLR.load_state_dict";
  const int64_t step_size = get_int(sd, "step_size", op);
  check_int(step_size, 1, op, "step_size");
  const double gamma = get_double(sd, "gamma", op);
  load_base_state(sd);
  step_size_ = step_size;
  gamma_ = gamma;
}

// ---------------------------------------------------------------- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> milestones, double gamma, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return lrs;
  for (double& lr : lrs) lr = lr * std::pow(gamma_, double(it->second));
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  int64_t passed = 0;  // bisect_right over the sorted milestones, counted with multiplicity
  for (const auto& [m, count] : milestones_)
    if (m <= last_epoch_) passed += count;
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, double(passed)));
  return lrs;
}

json MultiStepLR::state_dict() const {
  json m = json::object();  // PyTorch's Counter: {"milestone": multiplicity}
  for (const auto& [k, v] : milestones_) m[std::to_string(k)] = v;
  json sd = {{"milestones", m}, {"gamma", gamma_}};
  base_state(sd);
  return sd;
}

void MultiStepLR::load_state_dict(const json& sd) {
  const char* op = "MultiStepLR.load_state_dict";
  const json& m = need(sd, "milestones", op);
  TB_CHECK(m.is_object(), op, "'milestones' must be an object {\"epoch\": count}, got ", m.dump());
  std::map<int64_t, int64_t> milestones;
  for (const auto& [k, v] : m.items()) {
    size_t used = 0;
    int64_t epoch = 0;
    try {
      epoch = std::stoll(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TB_CHECK(used == k.size() && !k.empty() && v.is_number_integer() && v.get<int64_t>() >= 0, op,
             "'milestones' entry \"", k, "\": ", v.dump(), " is not an epoch with a count");
    milestones[epoch] = v.get<int64_t>();
  }
  const double gamma = get_double(sd, "gamma", op);
  load_base_state(sd);
  milestones_ = std::move(milestones);
  gamma_ = gamma;
}

// ---------------------------------------------------------------- ExponentialLR

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (is_initial_) return lrs;
  for (double& lr : lrs) lr = lr * gamma_;
  return lrs;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, double(last_epoch_)));
  return lrs;
}

json ExponentialLR::state_dict() const {
  json sd = {{"gamma", gamma_}};
  base_state(sd);
  return sd;
}

void ExponentialLR::load_state_dict(const json& sd) {
  const double gamma = get_double(sd, "gamma", "ExponentialLR.load_state_dict");
  load_base_state(sd);
  gamma_ = gamma;
}

// ---------------------------------------------------------------- LinearLR

namespace {
void check_linear(double start, double end, int64_t total_iters, const char* op) {
  TB_CHECK(start > 0 && start <= 1.0, op,
           "Starting multiplicative factor expected to be greater than 0 and less or "
           "equal to 1, got start_factor=",
           start);
  TB_CHECK(end >= 0 && end <= 1.0, op,
           "Ending multiplicative factor expected to be between 0 and 1, got end_factor=", end);
  check_int(total_iters, 0, op, "total_iters");
}
}  // namespace

LinearLR::LinearLR(Optimizer& opt, double start_factor, double end_factor, int64_t total_iters, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check_linear(start_factor, end_factor, total_iters, "LinearLR");
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr = lr * start_factor_;
    return lrs;
  }
  if (is_initial_ || last_epoch_ > total_iters_) return lrs;
  const double d = end_factor_ - start_factor_;
  const double factor = 1.0 + d / (double(total_iters_) * start_factor_ + double(last_epoch_ - 1) * d);
  for (double& lr : lrs) lr = lr * factor;
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  TB_CHECK(total_iters_ > 0, "LinearLR",
           "the closed form (used by SequentialLR at a milestone) divides by "
           "total_iters, which is 0; use total_iters >= 1");
  std::vector<double> lrs;
  const double t = double(std::min(total_iters_, last_epoch_));
  for (double b : base_lrs_)
    lrs.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t / double(total_iters_)));
  return lrs;
}

json LinearLR::state_dict() const {
  json sd = {{"start_factor", start_factor_}, {"end_factor", end_factor_}, {"total_iters", total_iters_}};
  base_state(sd);
  return sd;
}

void LinearLR::load_state_dict(const json& sd) {
  const char* op = "LinearLR.load_state_dict";
  const double s = get_double(sd, "start_factor", op), e = get_double(sd, "end_factor", op);
  const int64_t t = get_int(sd, "total_iters", op);
  check_linear(s, e, t, op);
  load_base_state(sd);
  start_factor_ = s;
  end_factor_ = e;
  total_iters_ = t;
}

// ---------------------------------------------------------------- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max, double eta_min, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), T_max_(T_max), eta_min_(eta_min) {
  check_int(T_max, 1, "CosineAnnealingLR", "T_max");
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (is_initial_) return lrs;
  const double T = double(T_max_);
  if (step_count_ == 1 && last_epoch_ > 0) {  // resumed with last_epoch: restart from the closed form
    for (size_t i = 0; i < lrs.size(); ++i)
      lrs[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(double(last_epoch_) * kPi / T)) / 2;
    return lrs;
  }
  if (floor_mod(last_epoch_ - 1 - T_max_, 2 * T_max_) == 0) {  // the trough: the recursion would divide by 0
    for (size_t i = 0; i < lrs.size(); ++i) lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    return lrs;
  }
  const double ratio = (1 + std::cos(kPi * double(last_epoch_) / T)) /
                       (1 + std::cos(kPi * double(last_epoch_ - 1) / T));
  for (double& lr : lrs) lr = ratio * (lr - eta_min_) + eta_min_;
  return lrs;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_)
    lrs.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * double(last_epoch_) / double(T_max_))) / 2);
  return lrs;
}

json CosineAnnealingLR::state_dict() const {
  json sd = {{"T_max", T_max_}, {"eta_min", eta_min_}};
  base_state(sd);
  return sd;
}

void CosineAnnealingLR::load_state_dict(const json& sd) {
  const char* op = "CosineAnnealingLR.load_state_dict";
  const int64_t T = get_int(sd, "T_max", op);
  check_int(T, 1, op, "T_max");
  const double eta = get_double(sd, "eta_min", op);
  load_base_state(sd);
  T_max_ = T;
  eta_min_ = eta;
}

// ---------------------------------------------------------------- CosineAnnealingWarmRestarts

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& opt, int64_t T_0, int64_t T_mult, double eta_min,
                                                         int64_t last_epoch)
    : LRScheduler(opt, last_epoch),
      T_0_(T_0),
      T_i_(T_0),
      T_mult_(T_mult),
      eta_min_(eta_min),
      T_cur_(double(last_epoch)) {
  check_int(T_0, 1, "CosineAnnealingWarmRestarts", "T_0");
  check_int(T_mult, 1, "CosineAnnealingWarmRestarts", "T_mult");
  initial_step();
}

std::vector<double> CosineAnnealingWarmRestarts::get_lr() {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * T_cur_ / double(T_i_))) / 2);
  return lrs;
}

// PyTorch overrides step() here and never counts _step_count. Only the epoch-0 case of its
// explicit-epoch path is reachable (the first step of a fresh schedule).
void CosineAnnealingWarmRestarts::step() {
  if (last_epoch_ < 0) {
    T_i_ = T_0_;
    T_cur_ = 0;
    last_epoch_ = 0;
  } else {
    T_cur_ = T_cur_ + 1;
    if (T_cur_ >= double(T_i_)) {
      T_cur_ = std::fmod(T_cur_, double(T_i_));
      T_i_ = T_i_ * T_mult_;
    }
    last_epoch_ = last_epoch_ + 1;
  }
  write_lrs(get_lr());
}

json CosineAnnealingWarmRestarts::state_dict() const {
  json sd = {{"T_0", T_0_}, {"T_i", T_i_}, {"T_mult", T_mult_}, {"eta_min", eta_min_}, {"T_cur", T_cur_}};
  base_state(sd);
  return sd;
}

void CosineAnnealingWarmRestarts::load_state_dict(const json& sd) {
  const char* op = "CosineAnnealingWarmRestarts.load_state_dict";
  const int64_t T_0 = get_int(sd, "T_0", op), T_i = get_int(sd, "T_i", op), T_mult = get_int(sd, "T_mult", op);
  check_int(T_0, 1, op, "T_0");
  check_int(T_i, 1, op, "T_i");
  check_int(T_mult, 1, op, "T_mult");
  const double eta = get_double(sd, "eta_min", op), T_cur = get_double(sd, "T_cur", op);
  load_base_state(sd);
  T_0_ = T_0;
  T_i_ = T_i;
  T_mult_ = T_mult;
  eta_min_ = eta;
  T_cur_ = T_cur;
}

// ---------------------------------------------------------------- LambdaLR

LambdaLR::LambdaLR(Optimizer& opt, Fn lr_lambda, int64_t last_epoch)
    : LambdaLR(opt, std::vector<Fn>(opt.param_groups().size(), std::move(lr_lambda)), last_epoch) {}

LambdaLR::LambdaLR(Optimizer& opt, std::vector<Fn> lr_lambdas, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), fns_(std::move(lr_lambdas)) {
  TB_CHECK(fns_.size() == opt.param_groups().size(), "LambdaLR", "Expected ", opt.param_groups().size(),
           " lr_lambdas, but got ", fns_.size());
  for (size_t i = 0; i < fns_.size(); ++i) TB_CHECK(bool(fns_[i]), "LambdaLR", "lr_lambda ", i, " is empty");
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t i = 0; i < fns_.size(); ++i) lrs.push_back(base_lrs_[i] * fns_[i](last_epoch_));
  return lrs;
}

json LambdaLR::state_dict() const {
  json sd = json::object();
  base_state(sd);
  sd["lr_lambdas"] = json::array();
  for (size_t i = 0; i < fns_.size(); ++i) sd["lr_lambdas"].push_back(nullptr);
  return sd;
}

void LambdaLR::load_state_dict(const json& sd) {
  const char* op = "LambdaLR.load_state_dict";
  const json& fns = need(sd, "lr_lambdas", op);
  TB_CHECK(fns.is_array() && fns.size() == fns_.size(), op, "'lr_lambdas' must be a list of ", fns_.size(),
           " entries (one per parameter group), got ", fns.dump());
  for (const json& f : fns)
    TB_CHECK(f.is_null(), op, "'lr_lambdas' holds a callable object's state (", f.dump(),
             "), which a C++ std::function cannot take; only plain functions (null entries) load");
  load_base_state(sd);
}

std::function<double(int64_t)> warmup_cosine(int64_t warmup_steps, int64_t total_steps, double min_factor) {
  TB_CHECK(warmup_steps >= 0 && total_steps > warmup_steps, "warmup_cosine",
           "expected 0 <= warmup_steps < total_steps, got warmup_steps=", warmup_steps, ", total_steps=", total_steps);
  TB_CHECK(min_factor >= 0 && min_factor <= 1, "warmup_cosine", "expected 0 <= min_factor <= 1, got ", min_factor);
  return [warmup_steps, total_steps, min_factor](int64_t step) {
    if (step < warmup_steps) return double(step) / double(warmup_steps);
    if (step >= total_steps) return min_factor;
    const double progress = double(step - warmup_steps) / double(total_steps - warmup_steps);
    return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + std::cos(kPi * progress));
  };
}

}  // namespace tb::optim
