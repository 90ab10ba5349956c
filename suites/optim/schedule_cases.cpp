// The scheduler half of the optim suite: every LR scheduler and the GradScaler replayed against
// golden values that reference/golden/make_optim_goldens.py wrote with the pinned Python torch
// (lr_schedules.json, grad_scaler.json: torch version, seed and exact configs inside).
//   sched/<case>           lrs (and cycled momentum/beta1) after construction and every step,
//                          get_last_lr, and our state_dict() vs torch's, key by key, mid-run and at the end
//   sched/<case>/torch_sd  a fresh scheduler loads torch's mid-run state_dict and continues like torch
//   sched/<case>/resume    our state_dict (through JSON text) + the optimizer's, loaded mid-run into a
//                          fresh optimizer and scheduler, continues bit for bit like the original
//   grad_scaler/<case>     scale, growth tracker, skipped steps, unscaled grads and SGD parameters per
//                          step vs torch.amp.GradScaler("cpu"); a scaler swapped mid-run for one that
//                          loaded torch's state_dict must not change anything
//   sched/errors, grad_scaler/errors, grad_scaler/disabled: misuse and edge cases (exact outcomes)
// Tolerances: lrs 1e-12 relative (float64 formulas replayed in the same order; in practice they are
// equal), scales exact, grads and parameters float32 defaults (rtol 1.3e-6, atol 1e-5).
// The golden directory is the source tree's reference/golden (TB_SOURCE_DIR) or TB_GOLDEN_DIR.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "engine/core/env.h"
#include "engine/autograd/functions.h"
#include "engine/optim/adam.h"
#include "engine/optim/grad_scaler.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"
#include "harness/suite.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

using nlohmann::json;
using namespace tb::optim;

constexpr double kLrRtol = 1e-12;

harness::TestCase test_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("optim", name, std::move(body), /*with_seed=*/false);
}

// ---------------------------------------------------------------- golden files

std::filesystem::path golden_dir() {
  if (const std::optional<std::string> d = core::env_string("TB_GOLDEN_DIR")) return *d;  // empty: the default
  // TB_SOURCE_DIR, not __FILE__: ccache with base_dir makes __FILE__ relative to the build folder.
  return std::filesystem::path(TB_SOURCE_DIR) / "reference" / "golden";
}

const json& golden(const std::string& file) {
  static std::map<std::string, json> cache;
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  const std::filesystem::path p = golden_dir() / file;
  std::ifstream in(p);
  if (!in)
    throw std::runtime_error("golden file " + p.string() +
                             " is missing; regenerate it with the project venv's python: "
                             "python reference/golden/make_optim_goldens.py (or set TB_GOLDEN_DIR)");
  json j = json::parse(in);
  return cache.emplace(file, std::move(j)).first->second;
}

double num(const json& v) {  // the goldens write inf/NaN as strings
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    return s == "nan" ? NAN : s == "inf" ? INFINITY : -INFINITY;
  }
  return v.get<double>();
}

// Relative closeness for lrs; tracks the worst error in the record.
void expect_lr(const std::string& what, double actual, double expected, harness::Record& rec) {
  const double err = std::abs(actual - expected);
  const double rel = expected == 0 ? err : err / std::abs(expected);
  rec.metrics["max_rel"] = std::max(rec.metrics.value("max_rel", 0.0), rel);
  check(rel <= kLrRtol, what + ": engine " + std::to_string(actual) + " vs torch " + std::to_string(expected) +
                            " (relative error " + std::to_string(rel) + ")");
}

// Our state dict against torch's: the same keys, numbers within kLrRtol, everything else equal.
void expect_same_state(const std::string& what, const json& ours, const json& theirs, harness::Record& rec) {
  if (theirs.is_object()) {
    check(ours.is_object(), what + ": engine has " + ours.dump() + ", torch an object");
    for (const auto& [k, v] : theirs.items()) {
      check(ours.contains(k), what + ": engine state_dict lacks torch's key '" + k + "'");
      expect_same_state(what + "." + k, ours[k], v, rec);
    }
    for (const auto& [k, v] : ours.items())
      check(theirs.contains(k), what + ": engine has key '" + k + "' torch lacks");
  } else if (theirs.is_array()) {
    check(ours.is_array() && ours.size() == theirs.size(),
          what + ": engine " + ours.dump() + " vs torch " + theirs.dump());
    for (size_t i = 0; i < theirs.size(); ++i)
      expect_same_state(what + "[" + std::to_string(i) + "]", ours[i], theirs[i], rec);
  } else if (theirs.is_number()) {
    check(ours.is_number(), what + ": engine " + ours.dump() + " vs torch " + theirs.dump());
    expect_lr(what, ours.get<double>(), theirs.get<double>(), rec);
  } else {
    check(ours == theirs, what + ": engine " + ours.dump() + " vs torch " + theirs.dump());
  }
}

// ---------------------------------------------------------------- building from the configs

struct Setup {
  std::vector<Tensor> params;
  std::unique_ptr<Optimizer> opt;
  std::shared_ptr<LRScheduler> sched;
};

std::unique_ptr<Optimizer> make_optimizer(const json& spec, std::vector<Tensor>& params) {
  const std::vector<double> lrs = spec["lrs"].get<std::vector<double>>();
  std::vector<ParamGroup> groups;
  for (double lr : lrs) {
    params.push_back(zeros({2}).requires_grad_());
    groups.push_back({{params.back()}, {{"lr", lr}}});
  }
  if (spec["type"] == "SGD") {
    SGD::Options o;
    o.lr = lrs[0];
    o.momentum = spec.value("momentum", 0.0);
    return std::make_unique<SGD>(std::move(groups), o);
  }
  Adam::Options o;
  o.lr = lrs[0];
  o.betas = {spec["betas"][0].get<double>(), spec["betas"][1].get<double>()};
  return std::make_unique<Adam>(std::move(groups), o);
}

LambdaLR::Fn make_lambda(const json& cfg) {
  if (cfg["lambda"] == "pow") {
    const double base = cfg["base"].get<double>();
    return [base](int64_t e) { return std::pow(base, double(e)); };  // Python's base ** e
  }
  check(cfg["lambda"] == "warmup_cosine", "unknown lambda " + cfg["lambda"].dump());
  return warmup_cosine(cfg["warmup_steps"].get<int64_t>(), cfg["total_steps"].get<int64_t>(),
                       cfg["min_factor"].get<double>());
}

std::shared_ptr<LRScheduler> build(Optimizer& opt, const json& c) {
  const std::string t = c["type"].get<std::string>();
  if (t == "StepLR") return std::make_shared<StepLR>(opt, c["step_size"].get<int64_t>(), c.value("gamma", 0.1));
  if (t == "MultiStepLR")
    return std::make_shared<MultiStepLR>(opt, c["milestones"].get<std::vector<int64_t>>(), c.value("gamma", 0.1));
  if (t == "ExponentialLR") return std::make_shared<ExponentialLR>(opt, c["gamma"].get<double>());
  if (t == "LinearLR")
    return std::make_shared<LinearLR>(opt, c.value("start_factor", 1.0 / 3), c.value("end_factor", 1.0),
                                      c.value("total_iters", int64_t(5)));
  if (t == "CosineAnnealingLR")
    return std::make_shared<CosineAnnealingLR>(opt, c["T_max"].get<int64_t>(), c.value("eta_min", 0.0));
  if (t == "CosineAnnealingWarmRestarts")
    return std::make_shared<CosineAnnealingWarmRestarts>(opt, c["T_0"].get<int64_t>(), c.value("T_mult", int64_t(1)),
                                                         c.value("eta_min", 0.0));
  if (t == "OneCycleLR") {
    std::vector<double> max_lrs = c["max_lr"].is_array()
                                      ? c["max_lr"].get<std::vector<double>>()
                                      : std::vector<double>(opt.param_groups().size(), c["max_lr"].get<double>());
    return std::make_shared<OneCycleLR>(opt, max_lrs, c["total_steps"].get<int64_t>(), c.value("pct_start", 0.3),
                                        c.value("anneal_strategy", std::string("cos")), c.value("div_factor", 25.0),
                                        c.value("final_div_factor", 1e4), c.value("three_phase", false),
                                        c.value("cycle_momentum", true), c.value("base_momentum", 0.85),
                                        c.value("max_momentum", 0.95));
  }
  if (t == "LambdaLR") return std::make_shared<LambdaLR>(opt, make_lambda(c));
  if (t == "SequentialLR") {
    std::vector<std::shared_ptr<LRScheduler>> subs;
    for (const json& s : c["schedulers"]) subs.push_back(build(opt, s));
    return std::make_shared<SequentialLR>(opt, subs, c["milestones"].get<std::vector<int64_t>>());
  }
  check(t == "ReduceLROnPlateau", "unknown scheduler type " + t);
  const std::string mode = c.value("mode", std::string("min")), tmode = c.value("threshold_mode", std::string("rel"));
  const double factor = c.value("factor", 0.1), threshold = c.value("threshold", 1e-4), eps = c.value("eps", 1e-8);
  const int64_t patience = c.value("patience", int64_t(10)), cooldown = c.value("cooldown", int64_t(0));
  if (c.contains("min_lr") && c["min_lr"].is_array())
    return std::make_shared<ReduceLROnPlateau>(opt, mode, factor, patience, threshold, tmode, cooldown,
                                               c["min_lr"].get<std::vector<double>>(), eps);
  return std::make_shared<ReduceLROnPlateau>(opt, mode, factor, patience, threshold, tmode, cooldown,
                                             c.value("min_lr", 0.0), eps);
}

Setup setup(const json& gc) {
  Setup s;
  s.opt = make_optimizer(gc["optimizer"], s.params);
  s.sched = build(*s.opt, gc["scheduler"]);
  return s;
}

void step(Setup& s, const json& gc, int64_t k) {  // the k-th step (0-based), as the script does
  if (auto* p = dynamic_cast<ReduceLROnPlateau*>(s.sched.get())) p->step(gc["metrics"][size_t(k)].get<double>());
  else s.sched->step();
}

double momentum_of(const ParamGroup& g) {
  return g.options.contains("betas") ? g.options["betas"][0].get<double>() : g.options["momentum"].get<double>();
}

// The groups' lrs (and momenta) after k steps against the golden row k.
void expect_row(const Setup& s, const json& gc, size_t k, harness::Record& rec) {
  const auto& groups = s.opt->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string at = "step " + std::to_string(k) + " group " + std::to_string(g);
    expect_lr("lr at " + at, groups[g].options["lr"].get<double>(), gc["lrs"][k][g].get<double>(), rec);
    if (gc.contains("momentums"))
      expect_lr("momentum at " + at, momentum_of(groups[g]), gc["momentums"][k][g].get<double>(), rec);
  }
}

void run_golden(const json& gc, harness::Record& rec) {
  Setup s = setup(gc);
  const int64_t steps = gc["steps"].get<int64_t>(), mid = gc["mid"].get<int64_t>();
  expect_row(s, gc, 0, rec);
  for (int64_t k = 0; k < steps; ++k) {
    step(s, gc, k);
    expect_row(s, gc, size_t(k + 1), rec);
    if (k + 1 == mid)
      expect_same_state("state_dict after " + std::to_string(mid) + " steps", s.sched->state_dict(),
                        gc["state_dict_mid"], rec);
  }
  expect_same_state("final state_dict", s.sched->state_dict(), gc["state_dict_final"], rec);
  const std::vector<double> last = s.sched->get_last_lr();
  check(last.size() == gc["last_lr"].size(), "get_last_lr size");
  for (size_t g = 0; g < last.size(); ++g) expect_lr("get_last_lr", last[g], num(gc["last_lr"][g]), rec);
  rec.metrics["steps"] = double(steps);
}

// Fresh optimizer + scheduler; the optimizer's lrs/momenta set to torch's after `mid` steps, the
// scheduler loads torch's state_dict from then, and the rest of the run must match torch.
void run_torch_state(const json& gc, harness::Record& rec) {
  Setup s = setup(gc);
  const size_t mid = gc["mid"].get<size_t>();
  auto& groups = s.opt->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].options["lr"] = gc["lrs"][mid][g];
    if (gc.contains("momentums")) {
      if (groups[g].options.contains("betas")) groups[g].options["betas"][0] = gc["momentums"][mid][g];
      else groups[g].options["momentum"] = gc["momentums"][mid][g];
    }
  }
  s.sched->load_state_dict(gc["state_dict_mid"]);
  for (int64_t k = int64_t(mid); k < gc["steps"].get<int64_t>(); ++k) {
    step(s, gc, k);
    expect_row(s, gc, size_t(k + 1), rec);
  }
}

// Our own state (scheduler + optimizer, through JSON text) resumed in fresh objects mid-run.
void run_resume(const json& gc, harness::Record& rec) {
  Setup a = setup(gc);
  const int64_t steps = gc["steps"].get<int64_t>(), mid = gc["mid"].get<int64_t>();
  for (int64_t k = 0; k < mid; ++k) step(a, gc, k);
  const json sched_sd = json::parse(a.sched->state_dict().dump());
  StateDict opt_sd = a.opt->state_dict();
  opt_sd.json = json::parse(opt_sd.json.dump());
  Setup b = setup(gc);
  b.opt->load_state_dict(opt_sd);
  b.sched->load_state_dict(sched_sd);
  for (int64_t k = mid; k < steps; ++k) {
    step(a, gc, k);
    step(b, gc, k);
    for (size_t g = 0; g < a.opt->param_groups().size(); ++g) {
      const json& oa = a.opt->param_groups()[g].options;
      const json& ob = b.opt->param_groups()[g].options;
      check(oa == ob, "after step " + std::to_string(k + 1) + " group " + std::to_string(g) + " the resumed options " +
                          ob.dump() + " differ from the uninterrupted " + oa.dump());
    }
    check(a.sched->get_last_lr() == b.sched->get_last_lr(), "get_last_lr differs after step " + std::to_string(k + 1));
  }
  check(a.sched->state_dict() == b.sched->state_dict(), "final state dicts differ");
  expect_row(b, gc, size_t(steps), rec);
}

// ---------------------------------------------------------------- error cases

// A bare optimizer with only an lr (no momentum, no betas); step() does nothing.
class PlainOpt : public Optimizer {
 public:
  explicit PlainOpt(std::vector<ParamGroup> g) : Optimizer(std::move(g), {{"lr", 0.1}}) {}
  void step() override {}

 protected:
  void check_options(const json&) const override {}
};

template <typename F>
void expect_error(const std::string& what, F&& f, const std::string& needle) {
  try {
    f();
  } catch (const core::Error& e) {
    check(std::string(e.what()).find(needle) != std::string::npos,
          what + ": raised \"" + e.what() + "\", expected a message containing \"" + needle + "\"");
    return;
  }
  check(false, what + ": no error raised");
}

void scheduler_errors(harness::Record&) {
  auto fresh = [] {
    std::vector<ParamGroup> g{{{zeros({2}).requires_grad_()}, {{"lr", 0.1}}},
                              {{zeros({2}).requires_grad_()}, {{"lr", 0.2}}}};
    SGD::Options o;
    o.lr = 0.1;
    return std::make_unique<SGD>(std::move(g), o);
  };
  auto opt = fresh();
  expect_error(
      "StepLR step_size 0", [&] { StepLR(*opt, 0); }, "step_size >= 1");
  expect_error(
      "LinearLR start_factor 0", [&] { LinearLR(*opt, 0.0); }, "Starting multiplicative factor");
  expect_error(
      "CosineAnnealingLR T_max 0", [&] { CosineAnnealingLR(*opt, 0); }, "T_max >= 1");
  expect_error(
      "warm restarts T_mult 0", [&] { CosineAnnealingWarmRestarts(*opt, 3, 0); }, "T_mult >= 1");
  expect_error(
      "LambdaLR one lambda per group", [&] { LambdaLR(*opt, std::vector<LambdaLR::Fn>{warmup_cosine(1, 5)}); },
      "Expected 2 lr_lambdas");
  expect_error(
      "warmup_cosine warmup >= total", [&] { warmup_cosine(5, 5); }, "warmup_steps < total_steps");
  expect_error(
      "warmup_cosine min_factor", [&] { warmup_cosine(0, 5, 1.5); }, "min_factor");
  expect_error(
      "resume without initial_lr", [&] { StepLR(*fresh(), 3, 0.1, 4); }, "initial_lr");
  expect_error(
      "OneCycleLR without momentum",
      [&] {
        PlainOpt p({{{zeros({1}).requires_grad_()}, {}}});
        OneCycleLR(p, 1.0, 10);
      },
      "cycle_momentum");
  expect_error(
      "OneCycleLR max_lr count", [&] { OneCycleLR(*fresh(), std::vector<double>{1.0}, 10); }, "max_lr has 1");
  {
    auto o = fresh();
    OneCycleLR s(*o, 1.0, 3);
    for (int i = 0; i < 3; ++i) s.step();
    const std::vector<double> before = s.get_last_lr();
    expect_error(
        "OneCycleLR past total_steps", [&] { s.step(); }, "Tried to step 4 times");
    check(s.last_epoch() == 3 && s.get_last_lr() == before, "OneCycleLR changed its state on the failed step");
  }
  {  // a non-finite lr is refused and the scheduler stays where it was
    auto o = fresh();
    LambdaLR s(*o, [](int64_t e) { return e == 2 ? NAN : 1.0; });
    s.step();
    expect_error(
        "LambdaLR NaN factor", [&] { s.step(); }, "non-finite lr");
    check(s.last_epoch() == 1 && o->param_groups()[0].options["lr"].get<double>() == 0.1,
          "a refused step changed the scheduler or the optimizer");
  }
  {
    auto o = fresh(), other = fresh();
    auto a = std::make_shared<LinearLR>(*o);
    auto b = std::make_shared<ExponentialLR>(*o, 0.9);
    expect_error(
        "SequentialLR milestones",
        [&] {
          SequentialLR(*o, {a, b}, {});
        },
        "number of milestones");
    expect_error(
        "SequentialLR unsorted",
        [&] {
          SequentialLR(*o, {a, b, std::make_shared<ExponentialLR>(*o, 0.5)}, {5, 3});
        },
        "strictly increasing");
    auto c = std::make_shared<ExponentialLR>(*other, 0.9);
    expect_error(
        "SequentialLR other optimizer",
        [&] {
          SequentialLR(*o, {a, c}, {3});
        },
        "same optimizer");
    auto r = std::make_shared<ReduceLROnPlateau>(*o);
    expect_error(
        "SequentialLR plateau",
        [&] {
          SequentialLR(*o, {a, r}, {3});
        },
        "ReduceLROnPlateau");
    expect_error(
        "plateau step() without metric", [&] { r->step(); }, "step(metric)");
    expect_error(
        "plateau mode", [&] { ReduceLROnPlateau(*o, "avg"); }, "mode avg is unknown");
    expect_error(
        "plateau factor", [&] { ReduceLROnPlateau(*o, "min", 1.0); }, "Factor should be < 1.0");
    expect_error(
        "plateau min_lrs count",
        [&] { ReduceLROnPlateau(*o, "min", 0.1, 1, 1e-4, "rel", 0, std::vector<double>{0.0}, 1e-8); },
        "expected 2 min_lrs");
  }
  {
    auto o = fresh();
    StepLR s(*o, 3, 0.5);
    s.step();
    const json good = s.state_dict();
    json bad = good;
    bad.erase("gamma");
    expect_error(
        "load without gamma", [&] { s.load_state_dict(bad); }, "no 'gamma'");
    bad = good;
    bad["base_lrs"] = json::array({0.1});
    expect_error(
        "load with one group", [&] { s.load_state_dict(bad); }, "2 parameter groups");
    check(s.state_dict() == good, "a failed load_state_dict changed the scheduler");
    expect_error(
        "load a MultiStepLR state into StepLR",
        [&] {
          auto o2 = fresh();
          MultiStepLR m(*o2, {2});
          s.load_state_dict(m.state_dict());
        },
        "no 'step_size'");
  }
  {  // a plateau with a NaN metric counts it as a bad epoch, as torch does
    auto o = fresh();
    ReduceLROnPlateau p(*o, "min", 0.5, 0);
    p.step(1.0);
    p.step(NAN);
    check(o->param_groups()[0].options["lr"].get<double>() == 0.05, "NaN metric did not count as a bad epoch");
    const json sd = json::parse(p.state_dict().dump());
    check(sd["mode_worse"] == "inf", "mode_worse inf not written as \"inf\": " + sd.dump());
  }
}

// ---------------------------------------------------------------- GradScaler

std::vector<float> floats(const json& a) {
  std::vector<float> v;
  for (const json& x : a) v.push_back(float(num(x)));
  return v;
}

Tensor tensor_of(const json& values, const Shape& shape) { return from_vector_of<float>(floats(values), shape); }

void run_grad_scaler(const json& gc, harness::Record& rec) {
  const json& kw = gc["kwargs"];
  std::vector<Shape> shapes;
  for (const json& s : gc["shapes"]) shapes.push_back(s.get<Shape>());
  std::vector<Tensor> params;
  for (size_t i = 0; i < shapes.size(); ++i)
    params.push_back(tensor_of(gc["init_params"][i], shapes[i]).requires_grad_());
  SGD::Options o;
  o.lr = 0.1;
  o.momentum = gc["optimizer"]["momentum"].get<double>();
  SGD opt({{{params[0], params[1]}, {{"lr", 0.1}}}, {{params[2]}, {{"lr", 0.05}}}}, o);
  auto make_scaler = [&] {
    return std::make_unique<GradScaler>(kw["init_scale"].get<double>(), kw["growth_factor"].get<double>(),
                                        kw["backoff_factor"].get<double>(), kw["growth_interval"].get<int64_t>());
  };
  std::unique_ptr<GradScaler> scaler = make_scaler();
  const std::vector<int64_t> explicit_unscale = gc["explicit_unscale"].get<std::vector<int64_t>>();
  const int64_t steps = gc["steps"].get<int64_t>(), mid = gc["mid"].get<int64_t>();
  const Tolerance tol = default_tolerance(DType::Float32);
  int64_t skipped = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const std::string at = "step " + std::to_string(k);
    const json& r = gc["records"][size_t(k)];
    opt.zero_grad();
    Tensor loss;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor term = tb::sum(tb::mul(params[i], tensor_of(gc["coeffs"][size_t(k)][i], shapes[i])));
      loss = loss.defined() ? tb::add(loss, term) : term;
    }
    scaler->scale(loss).backward();
    if (std::find(explicit_unscale.begin(), explicit_unscale.end(), k) != explicit_unscale.end()) scaler->unscale_(opt);
    const bool stepped = scaler->step(opt);
    scaler->update();
    skipped += stepped ? 0 : 1;
    check(stepped == r["stepped"].get<bool>(),
          at + ": engine " + (stepped ? "stepped" : "skipped") + ", torch did not");
    check(scaler->get_scale() == r["scale"].get<double>(), at + ": scale " + std::to_string(scaler->get_scale()) +
                                                               " vs torch " + std::to_string(r["scale"].get<double>()));
    check(scaler->growth_tracker() == r["growth_tracker"].get<int64_t>(), at + ": growth tracker differs");
    for (size_t i = 0; i < params.size(); ++i) {
      const Diff dg = compare_values(params[i].grad(), tensor_of(r["grads"][i], shapes[i]), tol);
      check(dg.mismatches == 0, at + " unscaled grad " + std::to_string(i) + ": " + dg.first);
      const Diff dp = compare_values(params[i].detach(), tensor_of(r["params"][i], shapes[i]), tol);
      rec.metrics["max_abs"] = std::max(rec.metrics.value("max_abs", 0.0), dp.max_abs);
      rec.metrics["max_rel"] = std::max(rec.metrics.value("max_rel", 0.0), dp.max_rel);
      check(dp.mismatches == 0, at + " parameter " + std::to_string(i) + ": " + dp.first);
    }
    if (k + 1 == mid) {
      check(scaler->state_dict() == gc["state_dict_mid"], "state_dict after " + std::to_string(mid) +
                                                              " steps: engine " + scaler->state_dict().dump() +
                                                              " vs torch " + gc["state_dict_mid"].dump());
      scaler = make_scaler();  // resume: the rest of the run with a scaler that loaded torch's state
      scaler->load_state_dict(gc["state_dict_mid"]);
    }
  }
  check(scaler->state_dict() == gc["state_dict_final"],
        "final state_dict: engine " + scaler->state_dict().dump() + " vs torch " + gc["state_dict_final"].dump());
  rec.metrics["skipped_steps"] = double(skipped);
  rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}, {"scale", "exact"}};
}

// Exact outcomes of misuse, the disabled pass-through, and the scale's float32 ceiling.
void grad_scaler_errors(harness::Record&) {
  Tensor w = from_vector({1.0}).requires_grad_();
  SGD::Options o;
  o.lr = 0.5;
  SGD opt({w}, o);
  auto backward = [&](GradScaler& s, double c) {
    opt.zero_grad();
    s.scale(tb::sum(tb::mul(w, ops::Scalar(c)))).backward();
  };
  GradScaler s(8.0, 2.0, 0.5, 1);
  expect_error(
      "unscale_ before scale", [&] { s.unscale_(opt); }, "call scaler.scale(loss)");
  expect_error(
      "update before scale", [&] { s.update(); }, "call scaler.scale(loss)");
  backward(s, 3.0);
  check(w.grad().item<float>() == 24.0f, "scaled grad is not 3 * 8");
  s.unscale_(opt);
  check(w.grad().item<float>() == 3.0f, "unscaled grad is not 3");
  expect_error(
      "unscale_ twice", [&] { s.unscale_(opt); }, "already been called");
  check(s.step(opt), "a finite step was skipped");
  check(w.detach().item<float>() == 1.0f - 0.5f * 3.0f, "the step did not apply lr * grad");
  expect_error(
      "unscale_ after step", [&] { s.unscale_(opt); }, "after step()");
  expect_error(
      "step twice", [&] { s.step(opt); }, "already been called since the last update");
  s.update();
  check(s.get_scale() == 16.0 && s.growth_tracker() == 0, "interval-1 growth did not double the scale");
  expect_error(
      "update without step", [&] { s.update(); }, "No inf checks were recorded");
  opt.zero_grad();
  s.scale(tb::sum(w));  // no backward: no parameter has a grad
  expect_error(
      "step without grads", [&] { s.step(opt); }, "none of its parameters has a gradient");
  s.update(3.0);
  check(s.get_scale() == 3.0, "update(new_scale) did not set the scale");

  {  // float16 gradients are refused before any gradient changes
    Tensor h = zeros({1}, DType::Float16).requires_grad_();
    SGD hopt({h}, o);
    h.set_grad(ones({1}, DType::Float16));
    GradScaler hs;
    hs.scale(ones({}));
    expect_error(
        "fp16 grads", [&] { hs.unscale_(hopt); }, "Attempting to unscale FP16 gradients");
    check(h.grad().to(DType::Float32).item_double() == 1.0, "a refused unscale_ changed the fp16 grads");
  }
  {  // growth stops below float32's max instead of reaching inf
    GradScaler big(3e38, 2.0, 0.5, 1);
    backward(big, 0.0);
    big.step(opt);
    big.update();
    check(big.get_scale() == double(float(3e38)) && big.growth_tracker() == 0, "the scale grew past float32's max");
  }
  expect_error(
      "growth_factor <= 1", [] { GradScaler(1.0, 1.0); }, "growth factor must be > 1.0");
  expect_error(
      "load empty", [] { GradScaler().load_state_dict(json::object()); }, "source state dict is empty");
  {  // a state dict survives JSON text, and loading before the first scale() sets the initial scale
    GradScaler a(1000.0, 1.7, 0.3, 2);
    backward(a, 1.0);
    a.step(opt);
    a.update();
    GradScaler b;
    b.load_state_dict(json::parse(a.state_dict().dump()));
    check(b.state_dict() == a.state_dict(), "GradScaler state_dict round trip differs");
  }
}

void grad_scaler_disabled(harness::Record&) {
  Tensor w = from_vector({1.0}).requires_grad_();
  SGD::Options o;
  o.lr = 0.5;
  SGD opt({w}, o);
  GradScaler s(65536.0, 2.0, 0.5, 2000, false);
  Tensor loss = tb::sum(tb::mul(w, ops::Scalar(2.0)));
  check(s.scale(loss).is_same(loss), "a disabled scaler must return the loss itself");
  loss.backward();
  s.unscale_(opt);
  check(w.grad().item<float>() == 2.0f, "a disabled unscale_ changed the grads");
  check(s.step(opt), "a disabled scaler must step");
  check(w.detach().item<float>() == 0.0f, "a disabled step did not step the optimizer");
  s.update();
  check(s.get_scale() == 1.0 && s.state_dict().empty(), "a disabled scaler reports scale 1 and an empty state");
  s.load_state_dict(json::object());  // ignored, as in torch
}

}  // namespace

std::vector<harness::TestCase> schedule_tests() {
  std::vector<harness::TestCase> t;
  json sched_cases, scaler_cases;
  try {
    sched_cases = golden("lr_schedules.json")["cases"];
    scaler_cases = golden("grad_scaler.json")["cases"];
  } catch (const std::exception& e) {  // a missing golden is a failing case, not a crash
    const std::string msg = e.what();
    t.push_back({"sched/goldens", [msg] {
                   harness::Record r;
                   r.suite = "optim";
                   r.case_name = "sched/goldens";
                   r.status = harness::Status::Error;
                   r.message = msg;
                   return r;
                 }});
  }
  for (const json& gc : sched_cases) {
    const std::string name = "sched/" + gc["name"].get<std::string>();
    t.push_back(test_case(name, [gc](harness::Record& r) {
      r.tolerances = {{"rtol", kLrRtol}};
      run_golden(gc, r);
    }));
    t.push_back(test_case(name + "/torch_sd", [gc](harness::Record& r) {
      r.tolerances = {{"rtol", kLrRtol}};
      run_torch_state(gc, r);
    }));
    t.push_back(test_case(name + "/resume", [gc](harness::Record& r) {
      r.tolerances = {{"rtol", kLrRtol}};
      run_resume(gc, r);
    }));
  }
  for (const json& gc : scaler_cases)
    t.push_back(test_case("grad_scaler/" + gc["name"].get<std::string>(),
                          [gc](harness::Record& r) { run_grad_scaler(gc, r); }));
  t.push_back(test_case("sched/errors", scheduler_errors));
  t.push_back(test_case("grad_scaler/errors", grad_scaler_errors));
  t.push_back(test_case("grad_scaler/disabled", grad_scaler_disabled));
  return t;
}

}  // namespace tb::suites
