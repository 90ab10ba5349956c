// Running a LayerCase (see nn_case.h), and the shared helpers of the nn suite.
#include <chrono>
#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "suites/compare.h"
#include "suites/nn/nn_case.h"

namespace tb::suites {

namespace {

harness::Record recorded(const std::string& name, const std::function<void(harness::Record&)>& body) {
  return run_recorded("nn", name, body);
}

}  // namespace

harness::TestCase semantic_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return {name, [name, body] { return recorded(name, body); }};
}

ref::NamedTensors to_ref_state(const nn::StateDict& s) {
  ref::NamedTensors out;
  for (const auto& [name, t] : s) out.emplace_back(name, ref::to_ref(t.detach()));
  return out;
}

harness::Record run_layer_case(const LayerCase& c) {
  return recorded(c.name, [&](harness::Record& rec) {
    core::Generator gen(case_seed(c.name));
    nn::ModulePtr m = c.engine();
    // Random parameters from the case's seed (reset_parameters of each layer would use the
    // default generator), N(0, 1/fan_in) for matrices so deep stacks keep unit scale; buffers
    // stay as constructed unless the case prepares them.
    for (auto& [name, p] : m->named_parameters()) {
      autograd::NoGradGuard no_grad;
      double std = 1;
      if (p.dim() >= 2) std = 1 / std::sqrt(double(p.numel() / p.size(0)));
      p.copy_(tb::mul(randn(p.sizes(), DType::Float64, &gen), std).to(p.dtype()));
    }
    if (c.prepare) c.prepare(*m, gen);
    m->train(c.train);
    ref::NnModule r = c.reference();
    if (c.dtype != DType::Float32) r.to(c.dtype);
    r.train(c.train);
    r.load_by_name(to_ref_state(m->state_dict()));

    std::vector<tb::Tensor> in;
    for (const Input& i : c.inputs) in.push_back(make_input(i, gen));
    std::vector<ref::Tensor> rin;
    for (const tb::Tensor& t : in) rin.push_back(ref::to_ref(t));
    std::vector<size_t> wrt = c.wrt;
    if (wrt.empty())
      for (size_t i = 0; i < in.size(); ++i)
        if (core::is_floating(in[i].dtype())) wrt.push_back(i);
    for (size_t i : wrt) {
      in[i].requires_grad_();
      ref::requires_grad_(rin[i]);
    }

    const Tolerance tol = c.tol.value_or(grad_tolerance(c.dtype));
    rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}};
    std::vector<tb::Tensor> out = c.forward ? c.forward(*m, in) : std::vector<tb::Tensor>{(*m)(in.at(0))};
    std::vector<ref::Tensor> rout = c.ref_forward ? c.ref_forward(r, rin) : std::vector<ref::Tensor>{r.forward(rin)};
    check(out.size() == rout.size(),
          "engine returned " + std::to_string(out.size()) + " outputs, LibTorch " + std::to_string(rout.size()));
    for (size_t k = 0; k < out.size(); ++k)
      if (!compare_into("output " + std::to_string(k), out[k], ref::from_ref(rout[k]), tol, rec)) return;

    // Buffers after the forward (running statistics), by name.
    const ref::NamedTensors rbufs = r.named_buffers();
    for (const auto& [name, b] : m->named_buffers()) {
      tb::Tensor expected;
      for (const auto& [rn, rb] : rbufs)
        if (rn == name) expected = ref::from_ref(rb);
      check(expected.defined(), "buffer " + name + " has no LibTorch twin");
      if (!compare_into("buffer " + name, b, expected, tol, rec)) return;
    }

    tb::Tensor root = out.back();
    if (!root.requires_grad()) return;  // nothing to differentiate (e.g. eval of a parameter-free layer on a constant)
    if (c.loss_output) {
      root.backward();
      ref::backward(rout.back());
    } else {
      core::Generator ggen(case_seed(c.name) ^ 0x5bd1e995ull);
      root = out[0];
      tb::Tensor g = randn(root.sizes(), DType::Float64, &ggen).to(root.dtype());
      root.backward(g);
      ref::backward(rout[0], ref::to_ref(g));
    }
    for (size_t i : wrt)
      if (!compare_into("grad of input " + std::to_string(i), in[i].grad(),
                        ref::grad_of(rin[i]).defined() ? ref::from_ref(ref::grad_of(rin[i])) : tb::Tensor(), tol, rec))
        return;
    const ref::NamedTensors rgrads = r.named_grads();
    int64_t compared = 0;
    for (const auto& [name, p] : m->named_parameters()) {
      bool found = false;
      tb::Tensor expected;
      for (const auto& [rn, rg] : rgrads)
        if (rn == name) {
          found = true;
          if (rg.defined()) expected = ref::from_ref(rg);
        }
      check(found, "parameter " + name + " has no LibTorch twin");
      if (!compare_into("grad of " + name, p.grad(), expected, tol, rec)) return;
      ++compared;
    }
    rec.metrics["parameters_compared"] = double(compared);
  });
}

}  // namespace tb::suites
