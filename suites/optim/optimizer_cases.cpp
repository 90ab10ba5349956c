// The optimizer half of the optim suite: SGD/Adam/AdamW trajectories against torch::optim (same
// initial parameters in awkward layouts, the same seeded gradient sequence, 10 steps, every
// option, parameter groups, float32/float64/bfloat16), state and option layout against
// LibTorch's, state_dict round trips (bit for bit), clip_grad_norm_/clip_grad_value_ against
// torch::nn::utils, and error cases. LibTorch's C++ optimizers have no `maximize`: those cases
// feed LibTorch the negated gradients, which is exactly what maximize means (negation is exact).
// Not here: LR schedulers and the GradScaler (schedule_cases.cpp).
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <set>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/optim/adam.h"
#include "engine/optim/clip_grad.h"
#include "engine/optim/sgd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"
#include "harness/suite.h"
#include "reference/autograd.h"
#include "reference/optim.h"
#include "suites/compare.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

using nlohmann::json;

harness::TestCase test_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("optim", name, std::move(body), /*with_seed=*/true);
}

// Compares under tol, records the worst differences, throws CheckFailed on a mismatch.
void expect_close(const std::string& what, const tb::Tensor& actual, const tb::Tensor& expected, Tolerance tol,
                  harness::Record& rec) {
  check(actual.defined() && expected.defined(), what + ": defined on one side only");
  check(actual.sizes() == expected.sizes() && actual.dtype() == expected.dtype(),
        what + ": engine " + core::name(actual.dtype()) + core::to_string(actual.sizes()) + " vs LibTorch " +
            core::name(expected.dtype()) + core::to_string(expected.sizes()));
  const Diff d = compare_values(actual, expected, tol);
  record_diff(rec, d);
  check(d.mismatches == 0, mismatch_message(what, d, actual.numel(), tol));
}

tb::Tensor from_ref_value(const ref::Tensor& t) { return ref::from_ref(ref::detach(t)); }

// Trajectory tolerances. float64: both sides do the same double arithmetic up to operation order
// (LibTorch's C++ Adam uses mul+add where Python's uses lerp), so ~1e-12 relative. float32: a few
// ulps (eps = 1.2e-7) per step, times the 10 steps. bfloat16: a couple of ulps (eps = 7.8e-3).
Tolerance trajectory_tol(DType t) {
  switch (t) {
    case DType::Float64: return {1e-12, 1e-12};
    case DType::Float32: return {4 * 10 * 1.2e-7, 4 * 10 * 1.2e-7};
    // bfloat16: LibTorch rounds some scalars and intermediates differently inside its C++
    // optimizers, so 10 steps drift by a few ulps at the values' scale (|x| up to ~4: ulp 0.016).
    default: return {2e-2, 5e-2};
  }
}

// ---- parameters and gradients: same values and layouts on both sides ----

struct ParamSpec {
  Shape shape;
  Layout layout;
};

const std::vector<ParamSpec>& default_params() {
  static const std::vector<ParamSpec> specs = {
      {{4, 5}, Layout::Contiguous}, {{3, 6}, Layout::Transposed}, {{7}, Layout::Contiguous},
      {{2, 3, 4}, Layout::Strided}, {{}, Layout::Contiguous},  // a 0-dim parameter
  };
  return specs;
}

// A tensor of `shape` in `layout` with standard normal values.
tb::Tensor make_laid_out(const Shape& shape, Layout layout, DType dtype, core::Generator& gen) {
  Shape base = shape;
  if (layout == Layout::Transposed && shape.size() >= 2) std::swap(base[base.size() - 1], base[base.size() - 2]);
  if (layout == Layout::Strided && !shape.empty()) base.back() = base.back() * 2 + 1;
  tb::Tensor t = randn(base, DType::Float64, &gen).to(dtype);
  if (layout == Layout::Transposed && shape.size() >= 2) return t.transpose(-1, -2);
  if (layout == Layout::Strided && !shape.empty()) return t.slice(int64_t(shape.size()) - 1, 1, std::nullopt, 2);
  return t;
}

struct Params {
  std::vector<tb::Tensor> engine;
  std::vector<ref::Tensor> reference;
};

Params make_params(const std::vector<ParamSpec>& specs, DType dtype, core::Generator& gen) {
  Params p;
  for (const ParamSpec& s : specs) {
    tb::Tensor t = make_laid_out(s.shape, s.layout, dtype, gen);
    ref::Tensor r = ref::to_ref(t);
    t.requires_grad_();
    ref::requires_grad_(r);
    p.engine.push_back(t);
    p.reference.push_back(r);
  }
  return p;
}

// Gradient of parameter k at step s (undefined: no gradient this step). Param 1 has none at step
// 3, param 2 none before step 2 (its state starts late); every third gradient is transposed.
tb::Tensor make_grad(const ParamSpec& spec, size_t k, int step, DType dtype, core::Generator& gen) {
  tb::Tensor g = make_laid_out(spec.shape, (k + size_t(step)) % 3 == 0 ? Layout::Transposed : Layout::Contiguous, dtype,
                               gen);
  if ((k == 1 && step == 3) || (k == 2 && step < 2)) return {};
  return g;
}

// ---- the optimizers under test ----

struct OptCase {
  std::string kind;          // sgd | adam | adamw
  json defaults;             // PyTorch's option names
  std::vector<json> groups;  // per-group options; empty: one group
  DType dtype = DType::Float32;
  std::string label;
};

std::unique_ptr<optim::Optimizer> make_engine(const OptCase& c, const std::vector<std::vector<tb::Tensor>>& groups) {
  std::vector<optim::ParamGroup> pg;
  for (size_t g = 0; g < groups.size(); ++g)
    pg.push_back({groups[g], g < c.groups.size() ? c.groups[g] : json::object()});
  const json& d = c.defaults;
  if (c.kind == "sgd") {
    optim::SGD::Options o;
    o.lr = d.value("lr", o.lr);
    o.momentum = d.value("momentum", 0.0);
    o.dampening = d.value("dampening", 0.0);
    o.weight_decay = d.value("weight_decay", 0.0);
    o.nesterov = d.value("nesterov", false);
    o.maximize = d.value("maximize", false);
    return std::make_unique<optim::SGD>(pg, o);
  }
  auto fill = [&](auto o) {
    o.lr = d.value("lr", o.lr);
    if (d.contains("betas")) o.betas = {d["betas"][0].get<double>(), d["betas"][1].get<double>()};
    o.eps = d.value("eps", o.eps);
    o.weight_decay = d.value("weight_decay", o.weight_decay);
    o.amsgrad = d.value("amsgrad", false);
    o.maximize = d.value("maximize", false);
    return o;
  };
  if (c.kind == "adam") return std::make_unique<optim::Adam>(pg, fill(optim::Adam::Options{}));
  return std::make_unique<optim::AdamW>(pg, fill(optim::AdamW::Options{}));
}

bool group_maximize(const OptCase& c, size_t g) {
  if (g < c.groups.size() && c.groups[g].contains("maximize")) return c.groups[g]["maximize"].get<bool>();
  return c.defaults.value("maximize", false);
}

json without_maximize(json o) {
  o.erase("maximize");
  return o;
}

// Splits the parameters into the case's groups: group g takes every len(groups)-th parameter.
std::vector<std::vector<size_t>> group_members(const OptCase& c, size_t n) {
  const size_t ng = std::max<size_t>(1, c.groups.size());
  std::vector<std::vector<size_t>> m(ng);
  for (size_t k = 0; k < n; ++k) m[k % ng].push_back(k);
  return m;
}

// Runs the trajectory on both sides; compares parameters after every step, then state and
// option layouts.
void run_trajectory(const OptCase& c, harness::Record& rec) {
  core::Generator gen(case_seed(c.label));
  const auto& specs = default_params();
  Params p = make_params(specs, c.dtype, gen);
  const auto members = group_members(c, specs.size());
  std::vector<std::vector<tb::Tensor>> eg;
  std::vector<std::vector<ref::Tensor>> rg;
  std::vector<json> ropts;
  std::vector<bool> negate(specs.size());
  for (size_t g = 0; g < members.size(); ++g) {
    eg.emplace_back();
    rg.emplace_back();
    for (size_t k : members[g]) {
      eg.back().push_back(p.engine[k]);
      rg.back().push_back(p.reference[k]);
      negate[k] = group_maximize(c, g);
    }
    ropts.push_back(without_maximize(g < c.groups.size() ? c.groups[g] : json::object()));
  }
  auto opt = make_engine(c, eg);
  ref::Optim ropt(c.kind, rg, ropts, without_maximize(c.defaults));
  const Tolerance tol = trajectory_tol(c.dtype);
  rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}};
  for (int s = 0; s < 10; ++s) {
    for (size_t k = 0; k < specs.size(); ++k) {
      tb::Tensor g = make_grad(specs[k], k, s, c.dtype, gen);
      p.engine[k].set_grad(g);
      // maximize on the engine == minimize on the negated gradient in LibTorch (exact).
      ref::set_grad(p.reference[k], g.defined() ? ref::to_ref(negate[k] ? tb::neg(g) : g) : ref::Tensor());
    }
    opt->step();
    ropt.step();
    for (size_t k = 0; k < specs.size(); ++k)
      expect_close("parameter " + std::to_string(k) + " after step " + std::to_string(s + 1), p.engine[k].detach(),
                   from_ref_value(p.reference[k]), tol, rec);
  }
  // State: the same fields (PyTorch's names) with the same values, and the same options.
  const optim::StateDict sd = opt->state_dict();
  std::map<std::string, tb::Tensor> etensors(sd.tensors.begin(), sd.tensors.end());
  int64_t index = 0;
  for (size_t g = 0; g < members.size(); ++g) {
    for (size_t k : members[g]) {
      const auto rstate = ropt.state_of(p.reference[k]);
      const json& es = sd.json["state"].value(std::to_string(index), json::object());
      std::set<std::string> ekeys, rkeys;
      for (const auto& [name, v] : es.items()) ekeys.insert(name);
      for (const auto& [name, t] : rstate) rkeys.insert(name);
      check(ekeys == rkeys, "state fields of parameter " + std::to_string(index) + ": engine " + json(ekeys).dump() +
                                " vs LibTorch " + json(rkeys).dump());
      for (const auto& [name, t] : rstate) {
        const tb::Tensor e = etensors.at(es[name]["tensor"].get<std::string>());
        expect_close("state." + std::to_string(index) + "." + name, e, from_ref_value(t),
                     name == "step" ? Tolerance{0, 0} : tol, rec);
      }
      ++index;
    }
    const json ro = ropt.group_options(g);
    const json& eo = sd.json["param_groups"][g];
    for (const auto& [key, v] : ro.items())
      check(eo.contains(key) && eo[key] == v, "param_groups[" + std::to_string(g) + "]." + key + ": engine " +
                                                  (eo.contains(key) ? eo[key].dump() : "missing") + " vs LibTorch " +
                                                  v.dump());
  }
  rec.metrics["steps"] = 10;
}

// ---- state_dict round trip: stop after 5 steps, load into a fresh optimizer over copies of the
// parameters, continue both for 5 more steps: parameters and state must agree bit for bit. The
// state dict also goes through JSON text, as a checkpoint stores it. ----
void run_round_trip(const OptCase& c, harness::Record& rec) {
  core::Generator gen(case_seed(c.label));
  const auto& specs = default_params();
  Params p = make_params(specs, c.dtype, gen);
  const auto members = group_members(c, specs.size());
  std::vector<std::vector<tb::Tensor>> eg(members.size());
  for (size_t g = 0; g < members.size(); ++g)
    for (size_t k : members[g]) eg[g].push_back(p.engine[k]);
  auto opt = make_engine(c, eg);
  std::vector<std::vector<tb::Tensor>> grads;
  for (int s = 0; s < 10; ++s) {
    grads.emplace_back();
    for (size_t k = 0; k < specs.size(); ++k) grads.back().push_back(make_grad(specs[k], k, s, c.dtype, gen));
  }
  auto run_steps = [&](optim::Optimizer& o, std::vector<tb::Tensor>& ps, int from, int to) {
    for (int s = from; s < to; ++s) {
      for (size_t k = 0; k < ps.size(); ++k) ps[k].set_grad(grads[size_t(s)][k]);
      o.step();
    }
  };
  run_steps(*opt, p.engine, 0, 5);

  // A snapshot: state_dict() holds the live state (as PyTorch's does), so clone what is kept.
  optim::StateDict saved = opt->state_dict();
  for (auto& [key, t] : saved.tensors) t = t.clone();
  saved.json = json::parse(saved.json.dump());
  std::vector<tb::Tensor> copies;
  for (const tb::Tensor& t : p.engine) {
    tb::Tensor c2 = empty_like_preserve(t, t.dtype());
    c2.copy_(t.detach());
    c2.requires_grad_();
    copies.push_back(c2);
  }
  std::vector<std::vector<tb::Tensor>> cg(members.size());
  for (size_t g = 0; g < members.size(); ++g)
    for (size_t k : members[g]) cg[g].push_back(copies[k]);
  // Built with different defaults on purpose: load_state_dict must restore the saved options.
  OptCase other = c;
  other.defaults = json{{"lr", 0.5}};
  other.groups.clear();
  other.groups.resize(c.groups.size(), json::object());
  auto resumed = make_engine(other, cg);
  resumed->load_state_dict(saved);
  run_steps(*opt, p.engine, 5, 10);
  run_steps(*resumed, copies, 5, 10);
  for (size_t k = 0; k < specs.size(); ++k)
    expect_close("parameter " + std::to_string(k) + " after resuming", copies[k].detach(), p.engine[k].detach(), {0, 0},
                 rec);
  const optim::StateDict a = opt->state_dict(), b = resumed->state_dict();
  check(a.json == b.json, "state_dict JSON differs after resuming: " + a.json.dump() + " vs " + b.json.dump());
  check(a.tensors.size() == b.tensors.size(), "state_dict tensor count differs after resuming");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    check(a.tensors[i].first == b.tensors[i].first,
          "state_dict tensor keys differ: " + a.tensors[i].first + " vs " + b.tensors[i].first);
    expect_close(a.tensors[i].first + " after resuming", b.tensors[i].second, a.tensors[i].second, {0, 0}, rec);
  }
  rec.tolerances = {{"rtol", 0}, {"atol", 0}};
}

// ---- the case table ----

std::vector<OptCase> trajectory_cases() {
  std::vector<OptCase> cases;
  auto add = [&](std::string kind, json defaults, std::vector<json> groups, std::string variant) {
    for (DType t : {DType::Float32, DType::Float64})
      cases.push_back({kind, defaults, groups, t, kind + "/" + core::name(t) + "/" + variant});
  };
  add("sgd", {{"lr", 0.1}}, {}, "plain");
  add("sgd", {{"lr", 0.1}, {"momentum", 0.9}}, {}, "momentum");
  add("sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.3}}, {}, "momentum_dampening");
  add("sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}}, {}, "nesterov");
  add("sgd", {{"lr", 0.1}, {"weight_decay", 0.05}}, {}, "weight_decay");
  add("sgd", {{"lr", 0.05}, {"momentum", 0.8}, {"weight_decay", 0.1}, {"nesterov", true}}, {}, "nesterov_weight_decay");
  add("sgd", {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.01}, {"maximize", true}}, {},
      "maximize_momentum_weight_decay");
  add("sgd", {{"lr", 0.1}, {"maximize", true}}, {}, "maximize");
  add("sgd", {{"lr", 0.1}},
      {{{"momentum", 0.9}},
       {{"lr", 0.01}, {"momentum", 0.5}, {"nesterov", true}},
       {{"weight_decay", 0.1}, {"maximize", true}}},
      "groups");
  add("adam", json::object(), {}, "defaults");
  add("adam", {{"lr", 0.01}}, {}, "lr");
  add("adam", {{"lr", 0.01}, {"amsgrad", true}}, {}, "amsgrad");
  add("adam", {{"lr", 0.01}, {"weight_decay", 0.1}}, {}, "weight_decay");
  add("adam", {{"lr", 0.01}, {"weight_decay", 0.1}, {"amsgrad", true}}, {}, "amsgrad_weight_decay");
  add("adam", {{"lr", 0.02}, {"betas", {0.8, 0.99}}, {"eps", 1e-6}}, {}, "betas_eps");
  add("adam", {{"lr", 0.01}, {"maximize", true}}, {}, "maximize");
  add("adam", {{"lr", 0.01}, {"maximize", true}, {"amsgrad", true}, {"weight_decay", 0.05}}, {},
      "maximize_amsgrad_weight_decay");
  add("adam", {{"lr", 0.01}},
      {{{"amsgrad", true}}, {{"lr", 0.001}, {"betas", {0.5, 0.9}}}, {{"weight_decay", 0.1}, {"maximize", true}}},
      "groups");
  add("adamw", json::object(), {}, "defaults");
  add("adamw", {{"lr", 0.01}, {"weight_decay", 0.1}}, {}, "weight_decay");
  add("adamw", {{"lr", 0.01}, {"amsgrad", true}}, {}, "amsgrad");
  add("adamw", {{"lr", 0.01}, {"weight_decay", 0}}, {}, "no_weight_decay");
  add("adamw", {{"lr", 0.01}, {"maximize", true}, {"amsgrad", true}}, {}, "maximize_amsgrad");
  add("adamw", {{"lr", 0.01}}, {{{"weight_decay", 0.3}}, {{"lr", 0.03}, {"amsgrad", true}}}, "groups");
  // bf16 parameters compute in float and round where PyTorch stores; LibTorch's C++ optimizers
  // round differently inside (mul+add vs lerp), hence the bf16 tolerance.
  cases.push_back({"sgd", {{"lr", 0.1}, {"momentum", 0.9}}, {}, DType::BFloat16, "sgd/bfloat16/momentum"});
  cases.push_back({"adamw", {{"lr", 0.01}, {"weight_decay", 0.1}}, {}, DType::BFloat16, "adamw/bfloat16/weight_decay"});
  return cases;
}

// ---- clipping against torch::nn::utils ----

struct ClipSetup {
  std::vector<tb::Tensor> engine;
  std::vector<ref::Tensor> reference;
};

// Four parameters: grads of several shapes (one transposed, one strided), one without a grad.
// `special` plants a non-finite value: 0 none, 1 inf, 2 nan.
ClipSetup clip_setup(const std::string& name, DType dtype, int special) {
  core::Generator gen(case_seed(name));
  ClipSetup c;
  const std::vector<ParamSpec> specs = {{{5, 4}, Layout::Contiguous},
                                        {{3, 6}, Layout::Transposed},
                                        {{2, 9}, Layout::Strided},
                                        {{4}, Layout::Contiguous}};
  for (size_t k = 0; k < specs.size(); ++k) {
    tb::Tensor p = zeros(specs[k].shape, dtype);
    ref::Tensor r = ref::to_ref(p);
    p.requires_grad_();
    ref::requires_grad_(r);
    if (k != 3) {
      tb::Tensor g = make_laid_out(specs[k].shape, specs[k].layout, DType::Float64, gen);
      g = tb::mul(g, double(k + 1)).to(dtype);  // different scales per tensor
      if (special && k == 1) {
        tb::Tensor flat = g.select(0, 1);
        fill_(flat, special == 1 ? std::numeric_limits<double>::infinity() : std::nan(""));
      }
      p.set_grad(g);
      ref::set_grad(r, ref::to_ref(g));
    }
    c.engine.push_back(p);
    c.reference.push_back(r);
  }
  return c;
}

Tolerance clip_tol(DType t) { return t == DType::Float64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-6}; }

std::vector<harness::TestCase> clip_grad_tests() {
  std::vector<harness::TestCase> t;
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::Float32, DType::Float64})
    for (double norm : {2.0, 1.0, inf, 0.5})
      for (double max_norm : {1.0, 1e4}) {  // clipping active / coefficient clamped to 1
        const std::string name = std::string("clip_grad_norm_/") + core::name(dtype) + "/p=" + json(norm).dump() +
                                 (std::isinf(norm) ? "inf" : "") + "/max_norm=" + json(max_norm).dump();
        t.push_back(test_case(name, [=](harness::Record& rec) {
          ClipSetup c = clip_setup(name, dtype, 0);
          const Tolerance tol = clip_tol(dtype);
          rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}};
          const tb::Tensor total = optim::clip_grad_norm_(c.engine, max_norm, norm);
          const double rtotal = ref::clip_grad_norm_(c.reference, max_norm, norm, false);
          check(total.dim() == 0 && total.dtype() == dtype,
                "total norm must be a 0-dim " + std::string(core::name(dtype)) + " tensor, got " + total.str());
          expect_close("total norm", total.to(DType::Float64), scalar_tensor(rtotal, DType::Float64), tol, rec);
          for (size_t k = 0; k < c.engine.size(); ++k) {
            const ref::Tensor rg = ref::grad_of(c.reference[k]);
            check(c.engine[k].grad().defined() == rg.defined(),
                  "grad " + std::to_string(k) + " defined on one side only");
            if (rg.defined())
              expect_close("grad " + std::to_string(k), c.engine[k].grad(), ref::from_ref(rg), tol, rec);
          }
        }));
      }
  // Norm 0, checked by exact math: Python's clip_grad_norm_ takes vector_norm(ord=0) of each
  // gradient (its count of non-zeros) and then of the stacked norms, so the total counts the
  // gradients that have a non-zero (torch 2.11 prints tensor(2.) for this input). LibTorch's C++
  // clip_grad_norm_ returns the number of gradients instead, hence no LibTorch here.
  t.push_back(test_case("clip_grad_norm_/float32/p=0", [](harness::Record& rec) {
    tb::Tensor a = zeros({4}), b = zeros({3}), c = zeros({2});
    a.requires_grad_();
    b.requires_grad_();
    c.requires_grad_();
    a.set_grad(from_vector({0, 2, 0, -1}));
    b.set_grad(from_vector({3, 0, 5}));
    c.set_grad(zeros({2}));
    const tb::Tensor total = optim::clip_grad_norm_({a, b, c}, 1.5, 0.0);
    check(total.item_double() == 2, "p=0 total must count the 2 gradients with a non-zero, got " + total.str());
    const float coef = 1.5f / (2.0f + float(1e-6));  // clip_coef = max_norm / (total + 1e-6), in float32
    expect_close("grad", a.grad(), from_vector({0, 2 * coef, 0, -1 * coef}), {0, 0}, rec);
  }));
  for (int special : {1, 2}) {
    const std::string what = special == 1 ? "inf" : "nan";
    t.push_back(test_case("clip_grad_norm_/float32/error_if_nonfinite_" + what, [=](harness::Record& rec) {
      ClipSetup c = clip_setup("clip_nonfinite", DType::Float32, special);
      bool engine_threw = false, ref_threw = false;
      std::string msg;
      try {
        optim::clip_grad_norm_(c.engine, 1.0, 2.0, true);
      } catch (const core::Error& e) {
        engine_threw = true;
        msg = e.what();
      }
      try {
        ref::clip_grad_norm_(c.reference, 1.0, 2.0, true);
      } catch (const ref::RefError&) {
        ref_threw = true;
      }
      check(ref_threw, "LibTorch did not raise on a non-finite norm");
      check(engine_threw, "engine did not raise on a non-finite norm");
      check(msg.find("total norm of order 2") != std::string::npos && msg.find("non-finite") != std::string::npos,
            "error should name the norm: " + msg);
      // Without the flag both scale by the non-finite norm (inf -> 0 and NaN, nan -> NaN).
      ClipSetup d = clip_setup("clip_nonfinite", DType::Float32, special);
      const tb::Tensor total = optim::clip_grad_norm_(d.engine, 1.0, 2.0, false);
      const double rtotal = ref::clip_grad_norm_(d.reference, 1.0, 2.0, false);
      expect_close("total norm", total.to(DType::Float64), scalar_tensor(rtotal, DType::Float64), {0, 0}, rec);
      for (size_t k = 0; k < 3; ++k)
        expect_close("grad " + std::to_string(k), d.engine[k].grad(), ref::from_ref(ref::grad_of(d.reference[k])),
                     {1e-5, 1e-6}, rec);
    }));
  }
  for (DType dtype : {DType::Float32, DType::Float64})
    for (double v : {0.5, 2.0, -0.3}) {
      const std::string name = std::string("clip_grad_value_/") + core::name(dtype) + "/" + json(v).dump();
      t.push_back(test_case(name, [=](harness::Record& rec) {
        ClipSetup c = clip_setup(name, dtype, v < 0 ? 0 : 2);  // NaN stays NaN
        optim::clip_grad_value_(c.engine, v);
        ref::clip_grad_value_(c.reference, v);
        for (size_t k = 0; k < 3; ++k)
          expect_close("grad " + std::to_string(k), c.engine[k].grad(), ref::from_ref(ref::grad_of(c.reference[k])),
                       {0, 0}, rec);
        check(!c.engine[3].grad().defined(), "a parameter without grad must stay without grad");
      }));
    }
  t.push_back(test_case("clip_grad_norm_/no_grads", [](harness::Record& rec) {
    tb::Tensor a = zeros({3});
    a.requires_grad_();
    const tb::Tensor total = optim::clip_grad_norm_({a}, 1.0);
    check(total.dim() == 0 && total.dtype() == DType::Float32 && total.item_double() == 0,
          "no gradients: total norm must be a float32 0, got " + total.str());
  }));
  return t;
}

// ---- errors and small semantics ----

// body must throw a core::Error whose message contains `phrase`.
void expect_error(const std::string& what, const std::string& phrase, const std::function<void()>& body) {
  try {
    body();
  } catch (const core::Error& e) {
    check(std::string(e.what()).find(phrase) != std::string::npos,
          what + ": error should mention '" + phrase + "', got: " + e.what());
    return;
  }
  throw CheckFailed(what + ": no error raised");
}

tb::Tensor leaf(const Shape& s, DType t = DType::Float32) {
  tb::Tensor x = ones(s, t);
  x.requires_grad_();
  return x;
}

std::vector<harness::TestCase> optim_error_tests() {
  std::vector<harness::TestCase> t;
  t.push_back(test_case("errors/constructor_options", [](harness::Record&) {
    const std::vector<tb::Tensor> ps{leaf({2})};
    expect_error("SGD lr<0", "Invalid learning rate", [&] { optim::SGD(ps, {.lr = -1}); });
    expect_error("SGD momentum<0", "Invalid momentum value", [&] { optim::SGD(ps, {.lr = 0.1, .momentum = -0.5}); });
    expect_error("SGD weight_decay<0", "Invalid weight_decay value",
                 [&] { optim::SGD(ps, {.lr = 0.1, .weight_decay = -1}); });
    expect_error("SGD nesterov without momentum", "Nesterov momentum requires",
                 [&] { optim::SGD(ps, {.lr = 0.1, .nesterov = true}); });
    expect_error("SGD nesterov with dampening", "Nesterov momentum requires",
                 [&] { optim::SGD(ps, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); });
    expect_error("Adam lr<0", "Invalid learning rate", [&] { optim::Adam(ps, {.lr = -1e-3}); });
    expect_error("Adam eps<0", "Invalid epsilon value", [&] { optim::Adam(ps, {.eps = -1}); });
    expect_error("Adam beta1=1", "Invalid beta parameter at index 0", [&] {
      optim::Adam(ps, {.betas = {1.0, 0.999}});
    });
    expect_error("Adam beta2<0", "Invalid beta parameter at index 1", [&] { optim::Adam(ps, {.betas = {0.9, -0.1}}); });
    expect_error("Adam weight_decay<0", "Invalid weight_decay value", [&] { optim::Adam(ps, {.weight_decay = -1}); });
    expect_error("AdamW beta2=1", "AdamW", [&] { optim::AdamW(ps, {.betas = {0.9, 1.0}}); });
    expect_error("empty parameter list", "empty parameter list", [&] { optim::SGD(std::vector<tb::Tensor>{}, {}); });
    expect_error("integer parameter", "floating-point", [&] { optim::SGD({ones({2}, DType::Int64)}, {}); });
    tb::Tensor x = leaf({2});
    tb::Tensor y = tb::mul(x, 2.0);  // has a grad_fn
    expect_error("non-leaf parameter", "non-leaf", [&] { optim::SGD({y}, {}); });
    expect_error("duplicate parameter", "more than one parameter group", [&] { optim::SGD({x, x}, {}); });
    expect_error("group option of the wrong type", "'lr'", [&] {
      optim::SGD(std::vector<optim::ParamGroup>{{{x}, {{"lr", "fast"}}}}, {});
    });
  }));
  t.push_back(test_case("errors/add_param_group", [](harness::Record&) {
    tb::Tensor a = leaf({2}), b = leaf({3});
    optim::Adam opt({a}, {});
    expect_error("bad lr in a new group", "Invalid learning rate", [&] { opt.add_param_group({{b}, {{"lr", -1.0}}}); });
    check(opt.param_groups().size() == 1, "a rejected group must not be added");
    expect_error("parameter already in a group", "more than one parameter group", [&] {
      opt.add_param_group({{a}, {}});
    });
    opt.add_param_group({{b}, {{"lr", 0.5}}});
    check(opt.param_groups().size() == 2, "the valid group must be added");
    const json& o = opt.param_groups()[1].options;
    check(o["lr"] == 0.5 && o["betas"] == json({0.9, 0.999}) && o["eps"] == 1e-8,
          "a new group takes missing options from the defaults: " + o.dump());
  }));
  t.push_back(test_case("errors/step_bad_grad", [](harness::Record&) {
    tb::Tensor a = leaf({2, 3});
    optim::SGD opt({a}, {.lr = 0.1});
    // Tensor::set_grad already refuses a mismatched gradient; step() checks again in case the
    // gradient was changed behind its back.
    for (const tb::Tensor& bad : {ones({3, 2}), ones({2, 3}, DType::Float64)}) {
      bool refused = false;
      try {
        a.set_grad(bad);
      } catch (const core::Error&) {
        refused = true;
      }
      if (!refused) expect_error("mismatched grad", "gradient", [&] { opt.step(); });
    }
  }));
  t.push_back(test_case("errors/load_state_dict", [](harness::Record& rec) {
    tb::Tensor a = leaf({2, 3}), b = leaf({4});
    optim::Adam opt({a, b}, {.lr = 0.1});
    a.set_grad(ones({2, 3}));
    b.set_grad(ones({4}));
    opt.step();
    const optim::StateDict good = opt.state_dict();
    tb::Tensor c = leaf({2, 3}), d = leaf({5});
    optim::Adam wrong_shape({c, d}, {});
    expect_error("state tensor of another shape", "has shape [4]", [&] { wrong_shape.load_state_dict(good); });
    check(wrong_shape.state_dict().json["state"].empty() && wrong_shape.param_groups()[0].options["lr"] == 1e-3,
          "a failed load must leave the optimizer unchanged");
    optim::Adam one_param({c}, {});
    expect_error("group of another size", "doesn't match the size", [&] { one_param.load_state_dict(good); });
    optim::Adam two_groups(std::vector<optim::ParamGroup>{{{c}, {}}, {{leaf({4})}, {}}}, {});
    expect_error("another number of groups", "parameter groups", [&] { two_groups.load_state_dict(good); });
    optim::StateDict missing = good;
    missing.tensors.pop_back();
    optim::Adam fresh({leaf({2, 3}), leaf({4})}, {});
    expect_error("missing tensor", "not in the state dict's tensors", [&] { fresh.load_state_dict(missing); });
    optim::StateDict no_state;
    expect_error("no keys", "'state' and 'param_groups'", [&] { fresh.load_state_dict(no_state); });
    // A state dict in the layout PyTorch writes (float64 tensors cast to the parameter's dtype).
    optim::StateDict cast = good;
    for (auto& [k, v] : cast.tensors) v = v.to(DType::Float64);
    fresh.load_state_dict(cast);
    const optim::StateDict back = fresh.state_dict();
    for (size_t i = 0; i < back.tensors.size(); ++i) {
      check(back.tensors[i].second.dtype() == DType::Float32, back.tensors[i].first + " must come back as float32");
      expect_close(back.tensors[i].first, back.tensors[i].second, good.tensors[i].second, {0, 0}, rec);
    }
  }));
  t.push_back(test_case("semantics/zero_grad_and_layout", [](harness::Record&) {
    tb::Tensor a = leaf({2, 2}), b = leaf({3});
    optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
    a.set_grad(ones({2, 2}));
    opt.step();  // b has no grad: skipped, no state
    const optim::StateDict sd = opt.state_dict();
    check(sd.json["state"].size() == 1 && sd.json["state"].contains("0") &&
              sd.json["state"]["0"].contains("momentum_buffer"),
          "only parameter 0 has state: " + sd.json.dump());
    check(sd.json["param_groups"][0]["params"] == json({0, 1}),
          "param_groups[0].params must be [0, 1]: " + sd.json.dump());
    check(sd.tensors.size() == 1 && sd.tensors[0].first == "state.0.momentum_buffer",
          "tensor key must be state.0.momentum_buffer");
    const void* storage = a.grad().data();
    opt.zero_grad(false);
    check(a.grad().defined() && a.grad().data() == storage && tb::sum(tb::abs(a.grad())).item_double() == 0,
          "zero_grad(false) zeroes in place");
    opt.zero_grad();
    check(!a.grad().defined() && !b.grad().defined(), "zero_grad() sets grads to none");
    optim::Adam adam({a}, {});
    a.set_grad(ones({2, 2}));
    adam.step();
    const optim::StateDict asd = adam.state_dict();
    std::set<std::string> keys;
    for (const auto& [k, v] : asd.tensors) keys.insert(k);
    check(keys == std::set<std::string>{"state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq"},
          "Adam state keys: " + asd.json.dump());
    for (const auto& [k, v] : asd.tensors)
      if (k == "state.0.step")
        check(v.dim() == 0 && v.dtype() == DType::Float32 && v.item_double() == 1, "step must be a 0-dim float32 1");
  }));
  return t;
}

}  // namespace

std::vector<harness::TestCase> optimizer_tests() {
  std::vector<harness::TestCase> t;
  for (const OptCase& c : trajectory_cases())
    t.push_back(test_case(c.label, [c](harness::Record& rec) { run_trajectory(c, rec); }));
  for (const OptCase& c : trajectory_cases()) {
    if (c.dtype == DType::Float64) continue;
    OptCase r = c;
    r.label = c.label + "/state_dict_round_trip";
    t.push_back(test_case(r.label, [r](harness::Record& rec) { run_round_trip(r, rec); }));
  }
  for (harness::TestCase& c : clip_grad_tests()) t.push_back(std::move(c));
  for (harness::TestCase& c : optim_error_tests()) t.push_back(std::move(c));
  return t;
}

}  // namespace tb::suites
