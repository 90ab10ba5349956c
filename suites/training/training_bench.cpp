// The training suite's benchmarks: steps of the reference models, engine beside LibTorch on the
// same weights, inputs and thread count.
//   fwd_bwd/mlp, train_step/mlp: MLP 784-1024-1024-10, batch 256, cross-entropy.
//   fwd_bwd/gpt, train_step/gpt: GPT-style model d=256, 4 layers, 8 heads, T=128, batch 16,
//     vocabulary 1024.
// fwd_bwd is zero_grad(set_to_none) + forward + loss + backward; train_step adds the AdamW step
// (LibTorch's: its fused kernel, see reference_adamw_fused).
//   train_step/mlp/bfloat16, train_step/gpt/bfloat16: the same step with the forward and loss
//     under bfloat16 autocast (the engine's AutocastGuard, LibTorch's CPU autocast as
//     torch.autocast("cpu", dtype=torch.bfloat16) sets it), float32 master weights, AdamW in
//     float32: the recipe engine/train's Trainer runs with Options::autocast. Peak memory of one step is measured
// outside the timed loop: for the engine from its allocator's statistics; for LibTorch, whose CPU
// allocator keeps none, as the rise of the process's peak RSS over the step. See
// docs/results.md for how to read the two.
#include <malloc.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/core/env.h"
#include "engine/core/rng.h"
#include "engine/memory/allocator.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "reference/training.h"
#include "suites/training/training_bench.h"

namespace tb::suites {

namespace {

// VmRSS / VmHWM of this process in bytes.
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return -1;
}

// Rise of the peak RSS while f runs: LibTorch's live bytes at their peak. glibc's mmap threshold
// is pinned (128 KiB) so that every large buffer is its own mapping, returned to the OS when
// freed; the RSS then follows the live bytes, as the engine's allocator statistics do, instead
// of a heap that kept the previous step's memory. Returns -1 where the kernel cannot reset the
// peak (VmHWM stays above the current RSS).
int64_t peak_rss_rise(const std::function<void()>& f) {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  const int64_t before = proc_status_bytes("VmRSS");
  const bool resettable = proc_status_bytes("VmHWM") <= before + (1 << 20);
  if (resettable) f();
  const int64_t rise = proc_status_bytes("VmHWM") - before;
  // Give malloc back the thresholds its dynamic mode converges to after a few steps (32 MiB,
  // trim at twice that): a pinned 128 KiB threshold would make every LibTorch activation an
  // mmap + page faults + munmap in the timed steps that follow, slowing LibTorch unfairly.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  return resettable ? rise : -1;
}

// Peak bytes the engine's allocator held above its level before f.
int64_t engine_peak_rise(const std::function<void()>& f) {
  memory::CpuCachingAllocator& a = memory::cpu_allocator();
  a.reset_peak();
  const int64_t before = a.stats().allocated_bytes;
  f();
  return a.stats().peak_allocated_bytes - before;
}

ref::NamedTensors to_named_ref(const nn::Module& m) {
  ref::NamedTensors out;
  for (auto& [name, t] : m.state_dict()) out.push_back({name, ref::to_ref(t)});
  return out;
}

// One benchmark's two sides. The models are built on first use, so listing the suite is instant.
struct Side {
  std::function<void()> engine, reference;
  // Drop each side's gradients, so a measured step starts from the state a training loop's
  // step starts from after its optimizer step (no gradient buffers held).
  std::function<void()> engine_clear, reference_clear;
};

// LibTorch's AdamW in the train_step benchmarks: its fused kernel (one pass per parameter, as the
// engine's AdamW), unless TRAINBENCH_TRAINING_REF_ADAMW=standard asks for torch::optim::AdamW
// (about ten tensor ops per parameter). The record's metric reference_adamw names it.
bool reference_adamw_fused() {
  return core::env_choice("TRAINBENCH_TRAINING_REF_ADAMW", "fused", {"fused", "standard"}) == "fused";
}

// AdamW on both sides with PyTorch's defaults and weight decay 0.01 (null when not wanted).
std::pair<std::shared_ptr<optim::AdamW>, std::shared_ptr<ref::AdamW>> make_adamw(const nn::Module& model,
                                                                                 const ref::NnModule& rmodel,
                                                                                 bool wanted) {
  if (!wanted) return {};
  optim::AdamW::Options o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  const auto kind = reference_adamw_fused() ? ref::AdamW::Kind::Fused : ref::AdamW::Kind::Standard;
  return {std::make_shared<optim::AdamW>(model.parameters(), o),
          std::make_shared<ref::AdamW>(rmodel, o.lr, o.betas.first, o.betas.second, o.eps, o.weight_decay, kind)};
}

// f under bfloat16 autocast when `autocast`, else plain; the engine's and LibTorch's.
template <typename F>
auto engine_autocast(bool autocast, F&& f) {
  autograd::AutocastGuard guard(autocast, DType::BFloat16);
  return f();
}
template <typename F>
ref::Tensor reference_autocast(bool autocast, F&& f) {
  if (!autocast) return f();
  ref::Tensor out;
  ref::with_autocast([&] { out = f(); });
  return out;
}

harness::BenchCase make_step_bench(const std::string& name, std::function<Side()> build, double flops,
                                   nlohmann::json extra) {
  auto side = std::make_shared<std::shared_ptr<Side>>();
  auto get = [side, build]() -> Side& {
    if (!*side) *side = std::make_shared<Side>(build());
    return **side;
  };
  extra["reference_blas"] = ref::info().value("reference_blas", "unknown");
  extra["engine_blas"] = "oneDNN";
  if (name.rfind("train_step/", 0) == 0) extra["reference_adamw"] = reference_adamw_fused() ? "fused" : "standard";
  harness::BenchCase b;
  b.name = name;
  b.engine = [get] { get().engine(); };
  b.reference = [get] { get().reference(); };
  // The harness has run one call per side (the warm-up: caches, oneDNN primitives, first touch).
  b.measure = [get] {
    Side& s = get();
    nlohmann::json m;
    s.engine_clear();
    m["engine_peak_bytes"] = engine_peak_rise(s.engine);
    s.reference_clear();
    m["reference_peak_bytes"] = peak_rss_rise(s.reference);
    return m;
  };
  b.flops_per_call = flops;
  b.extra = std::move(extra);
  return b;
}

// with_adamw: the full training step (train_step/*), else forward + backward (fwd_bwd/*);
// autocast: forward and loss under bfloat16 autocast (train_step/<model>/bfloat16).
std::string step_name(const char* model, bool with_adamw, bool autocast) {
  return std::string(with_adamw ? "train_step/" : "fwd_bwd/") + model + (autocast ? "/bfloat16" : "");
}

harness::BenchCase mlp_bench(bool with_adamw, bool autocast = false) {
  static constexpr int64_t B = 256, In = 784, H = 1024, Out = 10;
  auto build = [with_adamw, autocast] {
    core::manual_seed(0);
    auto model = std::make_shared<nn::MLP>(In, H, Out);
    ref::NnModule rmodel = ref::nn_mlp(In, H, Out);
    rmodel.load_by_name(to_named_ref(*model));
    core::Generator gen(1);
    auto x = std::make_shared<Tensor>(randn({B, In}, DType::Float32, &gen));
    auto y = std::make_shared<Tensor>(randint(0, Out, {B}, DType::Int64, &gen));
    auto rx = std::make_shared<ref::Tensor>(ref::to_ref(*x));
    auto ry = std::make_shared<ref::Tensor>(ref::to_ref(*y));
    auto [opt, ropt] = make_adamw(*model, rmodel, with_adamw);
    Side s;
    s.engine = [model, x, y, opt, autocast] {
      model->zero_grad(true);
      engine_autocast(autocast, [&] { return tb::cross_entropy((*model)(*x), *y); }).backward();
      if (opt) opt->step();
    };
    s.reference = [rmodel, rx, ry, ropt, autocast] {
      rmodel.zero_grad();
      ref::backward(reference_autocast(autocast, [&] { return ref::cross_entropy(rmodel.forward(*rx), *ry); }));
      if (ropt) ropt->step();
    };
    s.engine_clear = [model] { model->zero_grad(true); };
    s.reference_clear = [rmodel] { rmodel.zero_grad(); };
    return s;
  };
  // Forward 2*B*P for the three products; backward 2*B*P for the weight gradients and 2*B*P for
  // the input gradients of the second and third layers (the data needs none).
  const double p1 = In * H, p2 = H * H, p3 = H * Out;
  const double flops = 2.0 * B * (p1 + p2 + p3) * 2 + 2.0 * B * (p2 + p3);
  return make_step_bench(step_name("mlp", with_adamw, autocast), build, flops,
                         {{"batch", B},
                          {"parameters", double(p1 + p2 + p3 + H + H + Out)},
                          {"autocast", autocast ? "bfloat16" : "none"}});
}

harness::BenchCase gpt_bench(bool with_adamw, bool autocast = false) {
  nn::GPTConfig c;
  c.vocab = 1024, c.d_model = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq = 128, c.dropout = 0;
  static constexpr int64_t B = 16;
  const int64_t T = c.max_seq;
  auto build = [c, with_adamw, autocast] {
    core::manual_seed(0);
    auto model = std::make_shared<nn::GPT>(c);
    ref::NnModule rmodel = ref::nn_gpt(c.vocab, c.d_model, c.n_layers, c.n_heads, c.max_seq, c.dropout,
                                       c.gelu_approximate);
    rmodel.load_by_name(to_named_ref(*model));
    core::Generator gen(2);
    auto idx = std::make_shared<Tensor>(randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen));
    auto tgt = std::make_shared<Tensor>(randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen));
    auto ridx = std::make_shared<ref::Tensor>(ref::to_ref(*idx));
    auto rtgt = std::make_shared<ref::Tensor>(ref::to_ref(*tgt));
    auto [opt, ropt] = make_adamw(*model, rmodel, with_adamw);
    Side s;
    s.engine = [model, idx, tgt, opt, autocast] {
      model->zero_grad(true);
      engine_autocast(autocast, [&] { return nn::GPT::loss(model->forward(*idx), *tgt); }).backward();
      if (opt) opt->step();
    };
    s.reference = [rmodel, ridx, rtgt, ropt, autocast] {
      rmodel.zero_grad();
      ref::backward(reference_autocast(autocast, [&] { return ref::gpt_loss(rmodel.forward(*ridx), *rtgt); }));
      if (ropt) ropt->step();
    };
    s.engine_clear = [model] { model->zero_grad(true); };
    s.reference_clear = [rmodel] { rmodel.zero_grad(); };
    return s;
  };
  // Matrix products per layer: qkv (3d^2) + out (d^2) + mlp (8d^2) weights, and the two
  // attention products (2*T*d per token); plus the head (d*V). Backward does twice the forward.
  const double d = double(c.d_model), N = double(B * T), L = double(c.n_layers), V = double(c.vocab);
  const double fwd = 2.0 * N * (12.0 * d * d * L + d * V) + 2.0 * 2.0 * N * double(T) * d * L;
  // Embeddings (V*d + T*d), per layer 12d^2 weights + 9d biases and norms, final norm, head.
  const double params = V * d + double(T) * d + L * (12.0 * d * d + 13.0 * d) + 2.0 * d + d * V;
  return make_step_bench(step_name("gpt", with_adamw, autocast), build, 3 * fwd,
                         {{"batch", B},
                          {"seq_len", T},
                          {"tokens", B * T},
                          {"parameters", params},
                          {"autocast", autocast ? "bfloat16" : "none"}});
}

}  // namespace

std::vector<harness::BenchCase> training_benches() {
  std::vector<harness::BenchCase> b;
  for (bool with_adamw : {false, true}) {
    b.push_back(mlp_bench(with_adamw));
    b.push_back(gpt_bench(with_adamw));
  }
  b.push_back(mlp_bench(true, /*autocast=*/true));
  b.push_back(gpt_bench(true, /*autocast=*/true));
  return b;
}

}  // namespace tb::suites
