// Running an OpCase: input generation, the side-by-side call, the comparison and the record.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <mutex>

#include "engine/core/env.h"
#include "engine/ops/index.h"
#include "engine/tensor/factories.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

uint64_t case_seed(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the case name, mixed with TRAINBENCH_SEED
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  if (const auto s = core::env_string("TRAINBENCH_SEED"))
    h ^= core::parse_uint64("TRAINBENCH_SEED", *s) * 0x9E3779B97F4A7C15ull;
  return h;
}

namespace {

// Values of the requested kind, in float64, shaped like `shape`.
tb::Tensor make_values(const Input& in, const Shape& shape, core::Generator& gen) {
  const DType dt = in.dtype;
  switch (in.values) {
    case Values::Zeros: return zeros(shape, dt);
    case Values::Bool: return randint(0, 2, shape, DType::Int64, &gen).to(dt);
    case Values::Index: return randint(0, std::max<int64_t>(in.hi, 1), shape, DType::Int64, &gen).to(dt);
    case Values::Perm:  // the order of random values, along the last dim
      if (shape.empty()) return zeros(shape, dt);
      return ops::argsort(rand(shape, DType::Float64, &gen), -1).to(dt);
    default: break;
  }
  if (!core::is_floating(dt)) {
    if (dt == DType::Bool) return randint(0, 2, shape, DType::Int64, &gen).to(dt);
    int64_t lo = in.values == Values::Positive || in.values == Values::NonZero ? 1 : -5;
    return randint(lo, 6, shape, DType::Int64, &gen).to(dt);
  }
  tb::Tensor u = rand(shape, DType::Float64, &gen);
  double* p = u.data_ptr<double>();
  const int64_t n = u.numel();
  switch (in.values) {
    case Values::Positive:
      for (int64_t i = 0; i < n; ++i) p[i] = 0.1 + 2.9 * p[i];
      break;
    case Values::Unit:
      for (int64_t i = 0; i < n; ++i) p[i] = -0.9 + 1.8 * p[i];
      break;
    case Values::NearOne:
      for (int64_t i = 0; i < n; ++i) p[i] = 0.9 + 0.2 * p[i];
      break;
    case Values::NonZero: {
      tb::Tensor s = rand(shape, DType::Float64, &gen);
      const double* q = s.data_ptr<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = (q[i] < 0.5 ? -1 : 1) * (0.5 + 2.5 * p[i]);
      break;
    }
    default: {  // Normal
      u = randn(shape, DType::Float64, &gen);
      break;
    }
  }
  return u.to(dt);
}

}  // namespace

tb::Tensor make_input(const Input& in, core::Generator& gen) {
  const Shape& s = in.shape;
  switch (in.layout) {
    case Layout::Contiguous: return make_values(in, s, gen);
    case Layout::Transposed: {
      if (s.size() < 2) return make_values(in, s, gen);
      Shape base = s;
      std::swap(base[base.size() - 1], base[base.size() - 2]);
      return make_values(in, base, gen).transpose(-1, -2);
    }
    case Layout::Strided: {
      if (s.empty()) return make_values(in, s, gen);
      Shape base = s;
      base.back() = 2 * s.back() + 1;
      return make_values(in, base, gen).slice(-1, 1, std::nullopt, 2);
    }
    case Layout::Expanded: {
      if (s.empty()) return make_values(in, s, gen);
      Shape base = s;
      base[0] = 1;
      return make_values(in, base, gen).expand(s);
    }
    case Layout::ChannelsLast: {
      if (s.size() != 4 && s.size() != 5) return make_values(in, s, gen);
      Shape base = s, order{0};  // channels moved last, then put back by a permute
      base.erase(base.begin() + 1);
      base.push_back(s[1]);
      order.push_back(int64_t(s.size()) - 1);
      for (int64_t d = 1; d + 1 < int64_t(s.size()); ++d) order.push_back(d);
      return make_values(in, base, gen).permute(order);
    }
  }
  return make_values(in, s, gen);
}

namespace {

std::string fail_layout(const char* what, const Shape& a, const Shape& b) {
  return std::string(what) + " differ: engine " + core::to_string(a) + " vs LibTorch " + core::to_string(b);
}

// Fills rec for Check::Values / Check::View; returns false on the first failure.
void check_outputs(const OpCase& c, const std::vector<tb::Tensor>& in, const std::vector<tb::Tensor>& out,
                   const std::vector<ref::Tensor>& rin, const std::vector<ref::Tensor>& rout, harness::Record& rec) {
  if (out.size() != rout.size()) {
    rec.status = harness::Status::Fail;
    rec.message = "engine returned " + std::to_string(out.size()) + " outputs, LibTorch " + std::to_string(rout.size());
    return;
  }
  double max_abs = 0, max_rel = 0, nmse = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    const std::string which = out.size() > 1 ? "output " + std::to_string(k) + ": " : "";
    tb::Tensor expected = ref::from_ref(rout[k]);
    if (out[k].dtype() != expected.dtype()) {
      rec.status = harness::Status::Fail;
      rec.message = which + "dtype " + core::name(out[k].dtype()) + " vs LibTorch " + core::name(expected.dtype());
      return;
    }
    if (out[k].sizes() != expected.sizes()) {
      rec.status = harness::Status::Fail;
      rec.message = which + fail_layout("shapes", out[k].sizes(), expected.sizes());
      return;
    }
    if (c.check == Check::View) {
      if (out[k].strides() != expected.strides()) {
        rec.status = harness::Status::Fail;
        rec.message = which + fail_layout("strides", out[k].strides(), expected.strides());
        return;
      }
      if (out[k].storage_offset() != expected.storage_offset()) {
        rec.status = harness::Status::Fail;
        rec.message = which + "storage offsets differ: engine " + std::to_string(out[k].storage_offset()) +
                      " vs LibTorch " + std::to_string(expected.storage_offset());
        return;
      }
      if (!in.empty()) {
        bool es = out[k].shares_storage(in[0]), rs = rout[k].shares_storage(rin[0]);
        if (es != rs) {
          rec.status = harness::Status::Fail;
          rec.message = which + std::string("engine output ") + (es ? "shares" : "does not share") +
                        " storage with input 0; LibTorch's " + (rs ? "does" : "does not");
          return;
        }
      }
    }
    const Tolerance tol = c.tol.value_or(default_tolerance(out[k].dtype()));
    rec.tolerances = {{"rtol", tol.rtol}, {"atol", tol.atol}};
    Diff d = compare_values(out[k], expected, tol);
    max_abs = std::max(max_abs, d.max_abs);
    max_rel = std::max(max_rel, d.max_rel);
    nmse = std::max(nmse, d.nmse);
    if (d.mismatches > 0) {
      rec.status = harness::Status::Fail;
      rec.message = which + std::to_string(d.mismatches) + " of " + std::to_string(out[k].numel()) +
                    " elements outside rtol=" + std::to_string(tol.rtol) + " atol=" + std::to_string(tol.atol) +
                    "; first " + d.first;
    }
  }
  rec.metrics["max_abs"] = max_abs;
  rec.metrics["max_rel"] = max_rel;
  rec.metrics["nmse"] = nmse;
}

void check_stats(const OpCase& c, const std::vector<tb::Tensor>& out, const std::vector<ref::Tensor>& rout,
                 harness::Record& rec) {
  tb::Tensor e = out.at(0), r = ref::from_ref(rout.at(0));
  if (e.dtype() != r.dtype() || e.sizes() != r.sizes()) {
    rec.status = harness::Status::Fail;
    rec.message = "dtype/shape " + std::string(core::name(e.dtype())) + core::to_string(e.sizes()) + " vs LibTorch " +
                  core::name(r.dtype()) + core::to_string(r.sizes());
    return;
  }
  tb::Tensor v = e.to(DType::Float64).contiguous();
  const double* p = v.data_ptr<double>();
  const int64_t n = v.numel();
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += p[i];
  mean /= double(std::max<int64_t>(n, 1));
  for (int64_t i = 0; i < n; ++i) var += (p[i] - mean) * (p[i] - mean);
  const double sd = std::sqrt(var / double(std::max<int64_t>(n - 1, 1)));
  rec.metrics["mean"] = mean;
  rec.metrics["std"] = sd;
  // Six standard errors: a false alarm about once in 10^8 runs.
  const double se = c.stats_std / std::sqrt(double(std::max<int64_t>(n, 1)));
  if (std::fabs(mean - c.stats_mean) > 6 * se || std::fabs(sd - c.stats_std) > 0.05 * c.stats_std + 6 * se) {
    rec.status = harness::Status::Fail;
    rec.message = "sample mean " + std::to_string(mean) + " / std " + std::to_string(sd) + " far from expected " +
                  std::to_string(c.stats_mean) + " / " + std::to_string(c.stats_std);
  }
}

}  // namespace

std::vector<tb::Tensor> make_inputs(const OpCase& c) {
  core::Generator gen(case_seed(c.name));
  std::vector<tb::Tensor> in;
  for (const Input& i : c.inputs) in.push_back(make_input(i, gen));
  return in;
}

harness::Record run_case(const OpCase& c) {
  return run_recorded("ops", c.name, [&](harness::Record& rec) {
    std::vector<tb::Tensor> in = make_inputs(c);
    std::vector<ref::Tensor> rin;
    for (const tb::Tensor& t : in) rin.push_back(ref::to_ref(t));
    if (c.check == Check::Error) {
      std::string engine_msg, ref_msg;
      bool engine_threw = false, ref_threw = false;
      try {
        c.engine(in);
      } catch (const core::Error& e) {
        engine_threw = true;
        engine_msg = e.what();
      }
      try {
        c.reference(rin);
      } catch (const ref::RefError& e) {
        ref_threw = true;
        ref_msg = e.what();
      }
      if (!engine_threw || !ref_threw) {
        rec.status = harness::Status::Fail;
        rec.message = std::string("expected both to raise; engine ") + (engine_threw ? "raised" : "did not raise") +
                      ", LibTorch " + (ref_threw ? "raised: " + ref_msg.substr(0, 200) : "did not raise");
      } else {
        rec.message = engine_msg.substr(0, 300);
      }
    } else {
      std::vector<ref::Tensor> rout = c.reference(rin);
      std::vector<tb::Tensor> out = c.engine(in);
      if (c.check == Check::Stats) check_stats(c, out, rout, rec);
      else check_outputs(c, in, out, rin, rout, rec);
    }
  });
}

harness::BenchCase make_bench(const OpCase& c) {
  // The inputs are made on the first call (the harness's warm-up), not when the case list is
  // built: listing the suite or filtering it then costs nothing, and the large benchmark inputs
  // exist only for the benchmarks that run.
  struct Inputs {
    std::once_flag made;
    std::vector<tb::Tensor> in;
    std::vector<ref::Tensor> rin;
  };
  auto row = std::make_shared<const OpCase>(c);
  auto inputs = std::make_shared<Inputs>();
  auto ready = [row, inputs]() -> Inputs& {
    std::call_once(inputs->made, [&] {
      inputs->in = make_inputs(*row);
      for (const tb::Tensor& t : inputs->in) inputs->rin.push_back(ref::to_ref(t));
    });
    return *inputs;
  };
  harness::BenchCase b;
  b.name = c.name;
  b.engine = [ready, f = c.engine] { f(ready().in); };
  b.reference = [ready, f = c.reference] { f(ready().rin); };
  b.flops_per_call = c.flops;
  b.bytes_per_call = c.bytes;
  // Every benchmark record names the BLAS each side ran with, beside its figures.
  static const std::string reference_blas = ref::info().value("reference_blas", "unknown");
  b.extra = {{"reference_blas", reference_blas}, {"engine_blas", "oneDNN"}};
  return b;
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto family : {tensor_cases, elementwise_cases, reduce_cases, linalg_cases, index_cases, nn_cases, nn_norm_cases,
                      loss_cases, sweep_cases}) {
    auto cs = family();
    all.insert(all.end(), std::make_move_iterator(cs.begin()), std::make_move_iterator(cs.end()));
  }
  return all;
}

}  // namespace tb::suites
