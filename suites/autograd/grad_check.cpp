// The gradient modes of an OpCase with `grad` set: the LibTorch autograd comparison (grad/) and
// the finite-difference gradcheck (gradcheck/).
#include <chrono>
#include <cmath>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

std::vector<size_t> wrt_of(const OpCase& c, const std::vector<tb::Tensor>& in) {
  if (!c.wrt.empty()) return c.wrt;
  std::vector<size_t> w;
  for (size_t i = 0; i < in.size(); ++i)
    if (core::is_floating(in[i].dtype())) w.push_back(i);
  return w;
}

// Outputs that carry a gradient: floating ones.
std::vector<size_t> diff_outputs(const std::vector<tb::Tensor>& out) {
  std::vector<size_t> d;
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].defined() && core::is_floating(out[k].dtype())) d.push_back(k);
  return d;
}

harness::Record guarded_record(const OpCase& c, const std::string& prefix,
                               const std::function<void(harness::Record&)>& body) {
  // The seed recorded is the inputs' (keyed by the case name, not the record's prefixed name).
  return run_recorded(
      "autograd", prefix + c.name,
      [&](harness::Record& rec) {
        rec.metrics["seed"] = double(case_seed(c.name) & 0xFFFFFFFF);
        body(rec);
      },
      /*with_seed=*/false);
}

}  // namespace

harness::Record run_grad_case(const OpCase& c) {
  return guarded_record(c, "grad/", [&](harness::Record& rec) {
    std::vector<tb::Tensor> in = make_inputs(c);
    std::vector<ref::Tensor> rin;
    for (const tb::Tensor& t : in) rin.push_back(ref::to_ref(t));
    const std::vector<size_t> wrt = wrt_of(c, in);
    for (size_t i : wrt) {
      in[i].requires_grad_();
      ref::requires_grad_(rin[i]);
    }
    std::vector<tb::Tensor> out = c.engine(in);
    std::vector<ref::Tensor> rout = c.reference(rin);
    if (out.size() != rout.size()) {
      rec.status = harness::Status::Fail;
      rec.message = "engine returned " + std::to_string(out.size()) + " outputs, LibTorch " +
                    std::to_string(rout.size());
      return;
    }
    DType dt = DType::Float32;  // the first floating input's dtype sets the default tolerance
    for (auto it = c.inputs.rbegin(); it != c.inputs.rend(); ++it)
      if (core::is_floating(it->dtype)) dt = it->dtype;
    Tolerance tol = c.grad_tol.value_or(grad_tolerance(dt));
    rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}};
    for (size_t k = 0; k < out.size(); ++k)
      if (!compare_into("output " + std::to_string(k), out[k], ref::from_ref(rout[k]), tol, rec)) return;

    // The same random output gradients on both sides.
    core::Generator gen(case_seed(c.name) ^ 0x5bd1e995ull);
    std::vector<tb::Tensor> outs, gouts, ins;
    std::vector<ref::Tensor> routs, rgouts, rins;
    for (size_t k : diff_outputs(out)) {
      if (!out[k].requires_grad()) continue;
      tb::Tensor g = randn(out[k].sizes(), DType::Float64, &gen).to(out[k].dtype());
      outs.push_back(out[k]);
      gouts.push_back(g);
      routs.push_back(rout[k]);
      rgouts.push_back(ref::to_ref(g));
    }
    if (outs.empty()) {
      rec.status = harness::Status::Fail;
      rec.message = "no engine output requires grad";
      return;
    }
    for (size_t i : wrt) {
      ins.push_back(in[i]);
      rins.push_back(rin[i]);
    }
    std::vector<tb::Tensor> grads = autograd::grad(outs, ins, gouts, false, /*allow_unused=*/true);
    std::vector<ref::Tensor> rgrads = ref::grad(routs, rins, rgouts, false, /*allow_unused=*/true);
    for (size_t j = 0; j < wrt.size(); ++j) {
      tb::Tensor expected = rgrads[j].defined() ? ref::from_ref(rgrads[j]) : tb::Tensor();
      if (!compare_into("grad of input " + std::to_string(wrt[j]), grads[j], expected, tol, rec)) return;
    }
  });
}

namespace {

// sum_k <f_k(inputs), v_k> with grad mode off.
double project(const OpCase& c, const std::vector<tb::Tensor>& in, const std::vector<tb::Tensor>& v,
               const std::vector<size_t>& outs) {
  autograd::NoGradGuard no_grad;
  std::vector<tb::Tensor> out = c.engine(in);
  double s = 0;
  for (size_t j = 0; j < outs.size(); ++j) {
    tb::Tensor a = out[outs[j]].to(DType::Float64).contiguous();
    tb::Tensor b = v[j].contiguous();
    const double* pa = a.data_ptr<double>();
    const double* pb = b.data_ptr<double>();
    for (int64_t i = 0; i < a.numel(); ++i) s += pa[i] * pb[i];
  }
  return s;
}

}  // namespace

harness::Record run_gradcheck(const OpCase& c) {
  return guarded_record(c, "gradcheck/", [&](harness::Record& rec) {
    constexpr double eps = 1e-6, atol = 1e-5, rtol = 1e-3;  // torch.autograd.gradcheck's defaults
    constexpr int64_t max_points = 40;                      // per input: keeps the suite fast
    rec.tolerances = {{"rtol", rtol}, {"atol", atol}, {"eps", eps}};
    std::vector<tb::Tensor> in = make_inputs(c);
    for (tb::Tensor& t : in) t = t.contiguous().detach();  // perturb plain storage
    const std::vector<size_t> wrt = wrt_of(c, in);
    for (size_t i : wrt) in[i].requires_grad_();
    std::vector<tb::Tensor> out = c.engine(in);
    core::Generator gen(case_seed(c.name) ^ 0x27d4eb2full);
    std::vector<size_t> outs;
    std::vector<tb::Tensor> v, douts;
    for (size_t k : diff_outputs(out))
      if (out[k].requires_grad()) {
        outs.push_back(k);
        douts.push_back(out[k]);
        v.push_back(randn(out[k].sizes(), DType::Float64, &gen));
      }
    std::vector<tb::Tensor> ins;
    for (size_t i : wrt) ins.push_back(in[i]);
    std::vector<tb::Tensor> vg;
    for (size_t j = 0; j < v.size(); ++j) vg.push_back(v[j].to(douts[j].dtype()));
    std::vector<tb::Tensor> grads = autograd::grad(douts, ins, vg, false, true);
    double worst = 0;
    int64_t checked = 0;
    for (size_t j = 0; j < wrt.size(); ++j) {
      tb::Tensor x = in[wrt[j]];
      TB_CHECK(x.dtype() == DType::Float64, "gradcheck", "gradcheck runs on float64 rows only");
      tb::Tensor g = grads[j].defined() ? grads[j].to(DType::Float64).contiguous() : zeros(x.sizes(), DType::Float64);
      double* px = x.data_ptr<double>();
      const double* pg = g.data_ptr<double>();
      const int64_t n = x.numel(), step = std::max<int64_t>(1, n / max_points);
      for (int64_t e = 0; e < n; e += step, ++checked) {
        const double saved = px[e];
        px[e] = saved + eps;
        const double hi = project(c, in, v, outs);
        px[e] = saved - eps;
        const double lo = project(c, in, v, outs);
        px[e] = saved;
        const double numeric = (hi - lo) / (2 * eps), analytic = pg[e];
        const double err = std::fabs(numeric - analytic);
        worst = std::max(worst, err);
        if (err > atol + rtol * std::fabs(numeric)) {
          rec.status = harness::Status::Fail;
          rec.message = "input " + std::to_string(wrt[j]) + " element " + std::to_string(e) + ": analytic " +
                        std::to_string(analytic) + " vs finite difference " + std::to_string(numeric);
          return;
        }
      }
    }
    rec.metrics["max_abs"] = worst;
    rec.metrics["points"] = double(checked);
  });
}

bool wants_gradcheck(const OpCase& c) {
  if (!c.grad || !c.gradcheck) return false;
  for (const Input& in : c.inputs)
    if (core::is_floating(in.dtype) && in.dtype != DType::Float64) return false;
  return true;
}

std::vector<OpCase> all_grad_cases() {
  std::vector<OpCase> all;
  for (OpCase& c : all_op_cases())
    if (c.grad) all.push_back(std::move(c));
  return all;
}

}  // namespace tb::suites
