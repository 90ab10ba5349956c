// The ddp suite's correctness cases, run inside every rank (names prefixed by the backend):
//   <b>/equivalence/{mlp,gpt}/{float64,float32}: P ranks, per-rank batch B, K optimizer steps
//     (AdamW in float64, SGD with momentum in float32) from different per-rank initial weights
//     (DDP must broadcast rank 0's) against ONE LibTorch process (computed by every rank itself)
//     trained on the concatenated P*B batch with the mean loss: the global loss at every step and
//     every parameter at the end, and all ranks' parameters bitwise identical. Small bucket caps,
//     so several buckets are reduced while backward runs (DDPOptions::Overlap::Always), except
//     the MLP: float32 issues all its buckets at the end of backward (Overlap::AtEnd), float64
//     lets Overlap::Auto choose (AtEnd on a host whose cores the ranks fill). b = mpi, and gloo
//     for the float64 MLP (skipped when the gloo backend cannot start).
//   mpi/no_sync/mlp: k micro-batches, k-1 of them under no_sync (which must issue no collective),
//     equal one LibTorch step on the concatenated k*P*B batch.
//   mpi/unused/find_unused: a parameter no rank uses and one only even ranks use, with
//     find_unused_parameters: equals LibTorch; the never-used parameter keeps no gradient.
//   mpi/unused/error_without_flag: the same model without the flag raises the clear error (naming
//     the parameter and the flag) at the end of backward on every rank, and the group still works.
//   mpi/broadcast/params_and_buffers: construction broadcasts rank 0's parameters and buffers;
//     broadcast_buffers resets buffers before each forward (and does not when off).
//   mpi/buckets/layout: the bucket assignment follows PyTorch's rule (reverse order, first cap,
//     then cap).
//   mpi/trainer/resume: engine/train's Trainer with DDP and a DistributedSampler: N steps, a
//     checkpoint (rank 0 writes, barrier), a fresh Trainer resumes and trains N more == 2N
//     uninterrupted steps, bit for bit, on every rank.
//   mpi/fashion_mnist/mlp (world 2 only, the main job's world): the MLP on Fashion-MNIST with the
//     DDP Trainer, global batch 256 split across the ranks, reaches the training suite's accuracy
//     floor; per-epoch curves (engine_epoch_*) beside the single-process run of the training suite.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/core/env.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/rng.h"
#include "engine/data/dataloader.h"
#include "engine/data/fashion_mnist.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/flight_recorder.h"
#include "engine/nn/models.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/index.h"
#include "engine/ops/reduce.h"
#include "engine/optim/adam.h"
#include "engine/optim/lr_scheduler.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"
#include "engine/train/trainer.h"
#include "reference/autograd.h"
#include "reference/elementwise.h"
#include "reference/index.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "reference/optim.h"
#include "suites/ddp/ddp_suite.h"
#include "suites/ddp/dist_check.h"
#include "suites/ops/tolerance.h"
#include "suites/recorded.h"
#include "suites/training/compare.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace fs = std::filesystem;
using dist::DistributedDataParallel;
using dist::ProcessGroup;

harness::TestCase ddp_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("ddp", name, std::move(body), /*with_seed=*/false);
}

struct Equivalence {
  std::string backend = "mpi";
  DType dtype = DType::Float64;
  int64_t steps = 8;
  std::function<std::shared_ptr<nn::Module>()> make_model;  // called after a per-rank seed
  std::function<ref::NnModule()> make_ref;
  std::function<Tensor(nn::Module& ddp, const Tensor& x, const Tensor& y)> loss_e;
  std::function<ref::Tensor(const ref::NnModule&, const ref::Tensor&, const ref::Tensor&)> loss_r;
  std::function<std::pair<Tensor, Tensor>(int64_t step, int rank)> batch;  // one rank's batch
  dist::DDPOptions ddp;
  bool set_to_none = true;  // zero_grad(set_to_none); false zeroes .grad in place
};

void run_equivalence(const Equivalence& q, harness::Record& rec) {
  auto g = open_group(q.backend, rec);
  if (!g) return;
  const int P = g->size(), rank = g->rank();
  const bool adamw = q.dtype == DType::Float64;
  core::manual_seed(100 + uint64_t(rank));  // different per rank: DDP must broadcast rank 0's
  std::shared_ptr<nn::Module> model = q.make_model();
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, q.ddp);
  check_replicas_identical(*g, *model, "after construction");
  ref::NnModule r = q.make_ref();
  r.load_by_name(named_ref(*model));
  OptPair opt = make_opt(adamw, model->parameters(), ref_params(r));
  const Tolerance ptol = param_tolerance(q.dtype), ltol = loss_tolerance(q.dtype);
  nlohmann::json el = nlohmann::json::array(), rl = nlohmann::json::array();
  double worst_loss = 0;
  for (int64_t s = 0; s < q.steps; ++s) {
    auto [x, y] = q.batch(s, rank);
    opt.engine->zero_grad(q.set_to_none);
    Tensor loss = q.loss_e(*ddp, x, y);
    loss.backward();
    if (q.ddp.gradient_as_bucket_view && rec.status == harness::Status::Pass) {
      // Every .grad of a bucket is a view of that bucket's one buffer.
      const std::vector<Tensor> params = model->parameters();
      for (const std::vector<int64_t>& bucket : ddp->bucket_indices())
        for (int64_t i : bucket)
          if (!params[size_t(i)].grad().defined() ||
              !params[size_t(i)].grad().shares_storage(params[size_t(bucket[0])].grad())) {
            rec.status = harness::Status::Fail;
            rec.message = "gradient_as_bucket_view: parameter " + std::to_string(i) +
                          "'s .grad is not a view of its bucket's buffer after step " + std::to_string(s);
          }
    }
    opt.engine->step();
    const double le = global_mean(*g, loss.item_double());
    // LibTorch: one process, the concatenated batch of every rank, the mean loss.
    std::vector<Tensor> xs, ys;
    for (int k = 0; k < P; ++k) {
      auto [xk, yk] = q.batch(s, k);
      xs.push_back(xk);
      ys.push_back(yk);
    }
    opt.reference->zero_grad();
    ref::Tensor rloss = q.loss_r(r, ref::to_ref(tb::cat(xs)), ref::to_ref(tb::cat(ys)));
    ref::backward(rloss);
    opt.reference->step();
    const double lr_ = ref::from_ref(rloss).item_double();
    el.push_back(le);
    rl.push_back(lr_);
    const double ratio = std::fabs(le - lr_) / (ltol.atol + ltol.rtol * std::fabs(lr_));
    worst_loss = std::max(worst_loss, ratio);
    if (ratio > 1 && rec.status == harness::Status::Pass) {
      rec.status = harness::Status::Fail;
      rec.message = "step " + std::to_string(s) + ": mean loss over the ranks " + std::to_string(le) +
                    " vs LibTorch on the concatenated batch " + std::to_string(lr_);
    }
  }
  std::string where;
  const double worst_param = worst_param_ratio(*model, r.named_parameters(), ptol, &where);
  if (worst_param > 1 && rec.status == harness::Status::Pass) {
    rec.status = harness::Status::Fail;
    rec.message = "parameters after " + std::to_string(q.steps) + " steps differ from LibTorch's: " + where;
  }
  check_replicas_identical(*g, *model, "after " + std::to_string(q.steps) + " steps");
  rec.series = {{"engine_loss", el}, {"reference_loss", rl}};
  rec.metrics["world"] = P;
  rec.metrics["steps"] = q.steps;
  rec.metrics["buckets"] = double(ddp->bucket_indices().size());
  rec.metrics["bytes_per_step"] = double(ddp->last_stats().bytes);
  rec.metrics["worst_loss_tolerance_ratio"] = worst_loss;
  rec.metrics["worst_param_tolerance_ratio"] = worst_param;
  rec.tolerances = {{"param_rtol", ptol.rtol},
                    {"param_atol", ptol.atol},
                    {"loss_rtol", ltol.rtol},
                    {"loss_atol", ltol.atol},
                    {"replicas", "bitwise"}};
  g->synchronize();
}

// Small caps: several buckets even for the small test models.
dist::DDPOptions small_buckets() {
  dist::DDPOptions o;
  o.first_bucket_cap_mb = 0.004;
  o.bucket_cap_mb = 0.05;
  o.overlap = dist::DDPOptions::Overlap::Always;
  return o;
}

Equivalence mlp_equivalence(const std::string& backend, DType dt) {
  static constexpr int64_t In = 64, H = 128, Out = 10, B = 8;
  Equivalence q;
  q.backend = backend;
  q.dtype = dt;
  q.make_model = [dt] { return std::make_shared<nn::MLP>(In, H, Out, dt); };
  q.make_ref = [dt] {
    ref::NnModule r = ref::nn_mlp(In, H, Out);
    r.to(dt);
    return r;
  };
  q.loss_e = [](nn::Module& m, const Tensor& x, const Tensor& y) { return tb::cross_entropy(m(x), y); };
  q.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
    return ref::cross_entropy(r.forward(x), y);
  };
  q.batch = [dt](int64_t s, int rank) {
    core::Generator gen(5000 + 97 * uint64_t(s) + uint64_t(rank));
    return std::pair{randn({B, In}, dt, &gen), randint(0, Out, {B}, DType::Int64, &gen)};
  };
  q.ddp = small_buckets();
  q.ddp.overlap = dt == DType::Float32 ? dist::DDPOptions::Overlap::AtEnd : dist::DDPOptions::Overlap::Auto;
  return q;
}

Equivalence gpt_equivalence(DType dt) {
  nn::GPTConfig c;
  c.vocab = 64, c.d_model = 32, c.n_layers = 2, c.n_heads = 4, c.max_seq = 16;
  c.dtype = dt;
  static constexpr int64_t B = 2;
  Equivalence q;
  q.dtype = dt;
  q.steps = 6;
  q.make_model = [c] { return std::make_shared<nn::GPT>(c); };
  q.make_ref = [c, dt] {
    ref::NnModule r = ref::nn_gpt(c.vocab, c.d_model, c.n_layers, c.n_heads, c.max_seq, c.dropout, c.gelu_approximate);
    r.to(dt);
    return r;
  };
  q.loss_e = [](nn::Module& m, const Tensor& x, const Tensor& y) { return nn::GPT::loss(m.forward(x), y); };
  q.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
    return ref::gpt_loss(r.forward(x), y);
  };
  q.batch = [c](int64_t s, int rank) {
    core::Generator gen(7000 + 97 * uint64_t(s) + uint64_t(rank));
    return std::pair{randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen),
                     randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen)};
  };
  q.ddp = small_buckets();
  return q;
}

// The highest sequence number the group has issued (0 before any call).
uint64_t last_seq(ProcessGroup& g) {
  const auto e = g.recorder().entries();
  return e.empty() ? 0 : e.back().seq;
}

// ---- no_sync ----
void run_no_sync(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  constexpr int64_t k = 3, steps = 3;
  Equivalence q = mlp_equivalence("mpi", DType::Float64);
  core::manual_seed(200 + uint64_t(rank));
  std::shared_ptr<nn::Module> model = q.make_model();
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, q.ddp);
  ref::NnModule r = q.make_ref();
  r.load_by_name(named_ref(*model));
  OptPair opt = make_opt(true, model->parameters(), ref_params(r));
  int64_t quiet_backwards = 0;
  std::string problem;  // checked after the collectives, so no rank leaves the others waiting
  for (int64_t s = 0; s < steps; ++s) {
    opt.engine->zero_grad(true);
    for (int64_t j = 0; j < k; ++j) {
      auto [x, y] = q.batch(s * k + j, rank);
      if (j < k - 1) {
        auto guard = ddp->no_sync();
        const uint64_t before = last_seq(*g);
        tb::mul(q.loss_e(*ddp, x, y), 1.0 / double(k)).backward();
        if (last_seq(*g) != before && problem.empty())
          problem = "a backward under no_sync issued collectives (seq " + std::to_string(before) + " -> " +
                    std::to_string(last_seq(*g)) + ")";
        else ++quiet_backwards;
      } else {
        tb::mul(q.loss_e(*ddp, x, y), 1.0 / double(k)).backward();
      }
    }
    opt.engine->step();
    std::vector<Tensor> xs, ys;
    for (int rr = 0; rr < P; ++rr)
      for (int64_t j = 0; j < k; ++j) {
        auto [x, y] = q.batch(s * k + j, rr);
        xs.push_back(x);
        ys.push_back(y);
      }
    opt.reference->zero_grad();
    ref::backward(q.loss_r(r, ref::to_ref(tb::cat(xs)), ref::to_ref(tb::cat(ys))));
    opt.reference->step();
  }
  check_replicas_identical(*g, *model, "after no_sync accumulation");  // collective first: every rank gets here
  check(problem.empty(), problem);
  const Tolerance tol = param_tolerance(DType::Float64);
  std::string where;
  const double worst = worst_param_ratio(*model, r.named_parameters(), tol, &where);
  check(worst <= 1, "after " + std::to_string(steps) + " steps of " + std::to_string(k) +
                        " accumulated micro-batches the parameters differ from LibTorch's one " + std::to_string(k) +
                        "x larger batch: " + where);
  rec.metrics["world"] = P;
  rec.metrics["micro_batches"] = k;
  rec.metrics["steps"] = steps;
  rec.metrics["no_sync_backwards_without_collectives"] = quiet_backwards;
  rec.metrics["worst_param_tolerance_ratio"] = worst;
  rec.tolerances = {{"param_rtol", tol.rtol}, {"param_atol", tol.atol}, {"replicas", "bitwise"}};
  g->synchronize();
}

// ---- unused parameters ----
// out = fc(x) [+ odd(x) where use_odd]; `never` takes part in nothing.
class Branchy : public nn::Module {
 public:
  Branchy(bool use_odd, DType dt) : nn::Module("Branchy"), use_odd_(use_odd) {
    fc = register_module("fc", std::make_shared<nn::Linear>(16, 6, true, dt));
    odd = register_module("odd", std::make_shared<nn::Linear>(16, 6, true, dt));
    never = register_module("never", std::make_shared<nn::Linear>(16, 6, true, dt));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*fc)(x);
    return use_odd_ ? tb::add(y, (*odd)(x)) : y;
  }
  std::shared_ptr<nn::Linear> fc, odd, never;

 private:
  bool use_odd_;
};

std::pair<Tensor, Tensor> branchy_batch(int64_t s, int rank) {
  core::Generator gen(9000 + 97 * uint64_t(s) + uint64_t(rank));
  return {randn({4, 16}, DType::Float64, &gen), randint(0, 6, {4}, DType::Int64, &gen)};
}

void run_find_unused(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  constexpr int64_t steps = 4;
  core::manual_seed(300 + uint64_t(rank));
  auto model = std::make_shared<Branchy>(/*use_odd=*/rank % 2 == 0, DType::Float64);
  dist::DDPOptions o;
  o.find_unused_parameters = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
  const Tensor never_before = model->never->find_tensor("weight").detach().clone();
  auto make_lin = [&](const nn::Linear& l) {
    ref::NnModule m = ref::nn_linear(16, 6);
    m.to(DType::Float64);
    m.load_by_name(named_ref(l));
    return m;
  };
  ref::NnModule rfc = make_lin(*model->fc), rodd = make_lin(*model->odd), rnever = make_lin(*model->never);
  std::vector<ref::Tensor> rp = ref_params(rfc);
  for (auto* m : {&rodd, &rnever})
    for (auto& t : ref_params(*m)) rp.push_back(t);
  OptPair opt = make_opt(true, model->parameters(), rp);
  std::string problem;  // checked after the collectives, so no rank leaves the others waiting
  for (int64_t s = 0; s < steps; ++s) {
    auto [x, y] = branchy_batch(s, rank);
    opt.engine->zero_grad(true);
    tb::cross_entropy((*ddp)(x), y).backward();
    if (model->never->find_tensor("weight").grad().defined() && problem.empty())
      problem = "never.weight has a gradient although no rank used it (it must stay None, as in PyTorch)";
    if (!model->odd->find_tensor("weight").grad().defined() && problem.empty())
      problem = "odd.weight has no gradient on rank " + std::to_string(rank) + " although rank 0 used it";
    opt.engine->step();
    // LibTorch: the mean over ranks of each rank's loss, each with that rank's branches.
    opt.reference->zero_grad();
    ref::Tensor total;
    for (int rr = 0; rr < P; ++rr) {
      auto [xr, yr] = branchy_batch(s, rr);
      ref::Tensor rx = ref::to_ref(xr);
      ref::Tensor out = rfc.forward(rx);
      if (rr % 2 == 0) out = ref::add(out, rodd.forward(rx));
      ref::Tensor l = ref::cross_entropy(out, ref::to_ref(yr));
      total = total.defined() ? ref::add(total, l) : l;
    }
    ref::backward(ref::mul(total, 1.0 / double(P)));
    opt.reference->step();
  }
  ref::NamedTensors all;
  for (auto& [n, t] : rfc.named_parameters()) all.push_back({"fc." + n, t});
  for (auto& [n, t] : rodd.named_parameters()) all.push_back({"odd." + n, t});
  for (auto& [n, t] : rnever.named_parameters()) all.push_back({"never." + n, t});
  check_replicas_identical(*g, *model, "after training with unused parameters");
  check(problem.empty(), problem);
  const Tolerance tol = param_tolerance(DType::Float64);
  std::string where;
  const double worst = worst_param_ratio(*model, all, tol, &where);
  check(worst <= 1, "with find_unused_parameters the parameters differ from LibTorch's: " + where);
  const Tensor never_after = model->never->find_tensor("weight").detach();
  check(std::memcmp(never_before.data(), never_after.data(), size_t(never_before.numel()) * 8) == 0,
        "never.weight changed although it never had a gradient");
  rec.metrics["world"] = P;
  rec.metrics["steps"] = steps;
  rec.metrics["worst_param_tolerance_ratio"] = worst;
  rec.metrics["bytes_per_step"] = double(ddp->last_stats().bytes);
  rec.tolerances = {{"param_rtol", tol.rtol}, {"param_atol", tol.atol}, {"replicas", "bitwise"}};
  g->synchronize();
}

void run_unused_error(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  core::manual_seed(400);
  auto model = std::make_shared<Branchy>(/*use_odd=*/true, DType::Float64);
  auto ddp = std::make_shared<DistributedDataParallel>(model, g);  // find_unused_parameters off
  std::string message;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second shows the DDP recovered
    auto [x, y] = branchy_batch(attempt, rank);
    model->zero_grad(true);
    try {
      tb::cross_entropy((*ddp)(x), y).backward();
    } catch (const core::Error& e) {
      message = e.what();
      check(message.find("find_unused_parameters") != std::string::npos,
            "the error does not suggest find_unused_parameters: " + message);
      check(message.find("never.weight") != std::string::npos && message.find("never.bias") != std::string::npos,
            "the error does not name the parameters that got no gradient: " + message);
      check(message.find("odd.weight") == std::string::npos, "the error names a used parameter: " + message);
      continue;
    }
    throw CheckFailed("a backward that left never.weight and never.bias without gradients did not raise (attempt " +
                      std::to_string(attempt) + ")");
  }
  // The group still works: nothing was left in flight or out of step.
  Tensor one = ones({5}, DType::Float64);
  g->all_reduce(one, dist::ReduceOp::Sum)->wait();
  check(one.data_ptr<double>()[4] == double(P),
        "an all_reduce after the error gave " + std::to_string(one.data_ptr<double>()[4]) + ", not the world size");
  rec.metrics["world"] = P;
  rec.message = "raised as expected: " + message.substr(0, 600);
  g->synchronize();
}

// ---- broadcast ----
class WithBuffers : public nn::Module {
 public:
  explicit WithBuffers(int rank) : nn::Module("WithBuffers") {
    lin = register_module("lin", std::make_shared<nn::Linear>(4, 3));
    stat = register_buffer("stat", full({3}, double(rank + 1)));
    count = register_buffer("count", full({1}, double(rank + 1), DType::Int64));
  }
  Tensor forward(const Tensor& x) override { return (*lin)(x); }
  std::shared_ptr<nn::Linear> lin;
  Tensor stat, count;
};

void run_broadcast(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int rank = g->rank();
  core::manual_seed(500 + uint64_t(rank));
  auto model = std::make_shared<WithBuffers>(rank);
  Tensor x = ones({2, 4});
  {
    auto ddp = std::make_shared<DistributedDataParallel>(model, g);
    check_replicas_identical(*g, *model, "after construction");
    check(model->stat.data_ptr<float>()[0] == 1.0f && model->count.data_ptr<int64_t>()[0] == 1,
          "buffers after construction are not rank 0's");
    fill_(model->stat, 10.0 + rank);
    (*ddp)(x);  // broadcast_buffers: rank 0's buffers before the forward
    check(model->stat.data_ptr<float>()[2] == 10.0f,
          "broadcast_buffers did not restore rank 0's buffer before the forward (rank " + std::to_string(rank) +
              " has " + std::to_string(model->stat.data_ptr<float>()[2]) + ")");
    A::NoGradGuard no_grad;
    fill_(model->stat, 30.0 + rank);
    (*ddp)(x);  // no grad mode: no broadcast (as PyTorch syncs only for training forwards)
    check(model->stat.data_ptr<float>()[0] == float(30 + rank), "buffers were broadcast under no_grad");
  }
  {
    dist::DDPOptions o;
    o.broadcast_buffers = false;
    auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);  // broadcasts again at construction
    check(model->stat.data_ptr<float>()[0] == 30.0f, "construction did not broadcast the buffers");
    fill_(model->stat, 20.0 + rank);
    (*ddp)(x);
    check(model->stat.data_ptr<float>()[0] == float(20 + rank), "buffers were broadcast with broadcast_buffers off");
  }
  rec.metrics["world"] = g->size();
  g->synchronize();
}

// ---- bucket layout ----
// PyTorch's compute_bucket_assignment_by_size over Linear(256, 256) x 6 in float32 (indices:
// 2i = layer i's weight, 256 KiB; 2i+1 its bias, 1 KiB), parameters taken in reverse:
//   first cap 1 MiB, cap 25 MiB: 4 layers reach 1028 KiB >= 1 MiB -> [11..4], then [3..0];
//   first cap 0.5 MiB, cap 0.6 MiB: [11..8] (514 KiB), [7..2] (771 KiB), [1, 0].
void run_bucket_layout(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  auto model = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 6; ++i) model->push_back(std::make_shared<nn::Linear>(256, 256));
  using Layout = std::vector<std::vector<int64_t>>;
  auto show = [](const Layout& l) {
    std::string s;
    for (const auto& b : l) {
      s += "[";
      for (size_t i = 0; i < b.size(); ++i) s += (i ? " " : "") + std::to_string(b[i]);
      s += "]";
    }
    return s;
  };
  {
    DistributedDataParallel ddp(model, g);
    const Layout want{{11, 10, 9, 8, 7, 6, 5, 4}, {3, 2, 1, 0}};
    check(ddp.bucket_indices() == want,
          "default caps: buckets " + show(ddp.bucket_indices()) + ", expected " + show(want));
  }
  {
    dist::DDPOptions o;
    o.first_bucket_cap_mb = 0.5;
    o.bucket_cap_mb = 0.6;
    DistributedDataParallel ddp(model, g, o);
    const Layout want{{11, 10, 9, 8}, {7, 6, 5, 4, 3, 2}, {1, 0}};
    check(ddp.bucket_indices() == want,
          "caps 0.5/0.6 MiB: buckets " + show(ddp.bucket_indices()) + ", expected " + show(want));
  }
  rec.metrics["world"] = g->size();
  g->synchronize();
}

// ---- the DDP Trainer: resume ----
constexpr int64_t kResumeSteps = 12;  // N; an epoch is 512 / (16 P) batches per rank

struct ResumeRun {
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<DistributedDataParallel> ddp;
  std::shared_ptr<optim::AdamW> opt;
  std::shared_ptr<optim::LRScheduler> sched;
  std::shared_ptr<data::DataLoader> loader;
  std::unique_ptr<train::Trainer> trainer;
};

ResumeRun make_resume_run(const std::shared_ptr<ProcessGroup>& g, int64_t max_steps, const std::string& dir) {
  core::manual_seed(7);
  ResumeRun r;
  r.model = std::make_shared<nn::Sequential>();
  r.model->push_back(std::make_shared<nn::Linear>(20, 32));
  r.model->push_back(std::make_shared<nn::ReLU>());
  r.model->push_back(std::make_shared<nn::Dropout>(0.2));
  r.model->push_back(std::make_shared<nn::Linear>(32, 5));
  r.ddp = std::make_shared<DistributedDataParallel>(r.model, g);
  core::Generator gen(99);
  auto ds = std::make_shared<data::TensorDataset>(randn({512, 20}, DType::Float32, &gen),
                                                  randint(0, 5, {512}, DType::Int64, &gen));
  auto sampler = std::make_shared<data::DistributedSampler>(512, g->size(), g->rank(), /*shuffle=*/true, /*seed=*/5);
  data::DataLoader::Options lo;
  lo.batch_size = 16;
  r.loader = std::make_shared<data::DataLoader>(ds, sampler, lo);
  optim::AdamW::Options o;
  o.lr = 3e-3;
  r.opt = std::make_shared<optim::AdamW>(r.model->parameters(), o);
  r.sched = std::make_shared<optim::LambdaLR>(*r.opt, optim::warmup_cosine(5, 2 * kResumeSteps, 0.1));
  train::Options to;
  to.epochs = 100;
  to.max_steps = max_steps;
  to.clip_grad_norm = 1.0;
  to.checkpoint_dir = dir;
  to.log = [](const std::string&) {};
  to.ddp = r.ddp;
  r.trainer = std::make_unique<train::Trainer>(
      r.model, r.opt, r.sched,
      [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); }, to);
  return r;
}

std::vector<Tensor> resume_state(const ResumeRun& r) {
  std::vector<Tensor> out;
  for (auto& [n, t] : r.model->state_dict()) out.push_back(t.detach().contiguous());
  for (auto& [n, t] : r.opt->state_dict().tensors) out.push_back(t.contiguous());
  return out;
}

// A checkpoint directory every rank agrees on (rank 0's pid decides the name), under
// TRAINBENCH_DDP_CHECKPOINT_DIR when set (a shared folder for ranks on several hosts), else
// /dev/shm when it has room, else the temporary directory. Why /dev/shm: checkpoints fsync, and
// on a disk busy with other writers an fsync can take minutes, which the other ranks spend at the
// barrier after the save, long enough for the watchdog to end the run.
fs::path shared_dir(ProcessGroup& g, const std::string& what) {
  Tensor id = from_vector_of<int64_t>({int64_t(getpid())}, {1});
  g.broadcast(id, 0)->wait();
  fs::path base = fs::temp_directory_path();
  std::error_code ec;
  if (const char* env = std::getenv("TRAINBENCH_DDP_CHECKPOINT_DIR"); env && *env) base = env;
  else if (fs::space("/dev/shm", ec).available >= (uintmax_t(256) << 20) && !ec) base = "/dev/shm";
  return base / ("trainbench-ddp-" + what + "-" + std::to_string(id.data_ptr<int64_t>()[0]));
}

void run_trainer_resume(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const fs::path dir = shared_dir(*g, "resume");
  if (g->rank() == 0) fs::remove_all(dir);
  g->barrier()->wait();
  struct Cleanup {
    ProcessGroup& g;
    fs::path p;
    ~Cleanup() {
      try {
        g.barrier()->wait();
      } catch (...) {
      }
      if (g.rank() == 0) fs::remove_all(p);
    }
  } cleanup{*g, dir};
  ResumeRun whole = make_resume_run(g, 2 * kResumeSteps, (dir / "whole").string());
  whole.trainer->fit(*whole.loader);
  const std::vector<Tensor> expected = resume_state(whole);
  ResumeRun first = make_resume_run(g, kResumeSteps, (dir / "split").string());
  first.trainer->fit(*first.loader);  // rank 0 saves at the stop, then a barrier
  ResumeRun second = make_resume_run(g, 2 * kResumeSteps, (dir / "split").string());
  check(second.trainer->resume((dir / "split").string()),
        "no checkpoint to resume from on rank " + std::to_string(g->rank()));
  check(second.trainer->step() == kResumeSteps, "resumed at step " + std::to_string(second.trainer->step()));
  second.trainer->fit(*second.loader);
  const std::vector<Tensor> got = resume_state(second);
  check(got.size() == expected.size(), "the resumed run has a different set of state tensors");
  for (size_t i = 0; i < got.size(); ++i)
    check(got[i].sizes() == expected[i].sizes() &&
              std::memcmp(got[i].data(), expected[i].data(), size_t(got[i].numel()) * got[i].itemsize()) == 0,
          "state tensor " + std::to_string(i) + " differs between 2N steps and N + resume + N (not bit-exact)");
  check_replicas_identical(*g, *second.model, "after the resumed run");
  rec.metrics["world"] = g->size();
  rec.metrics["steps"] = 2 * kResumeSteps;
  rec.tolerances = {{"exact", 1}};
  g->synchronize();
}

// ---- fashion_mnist/mlp ----
constexpr double kAccuracyFloor = 0.88;  // the training suite's single-process floor

void run_fashion(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  const std::string root = core::env_string("TRAINBENCH_FASHION_MNIST").value_or("/usr/share/datasets/fashion-mnist");
  auto train_set = std::make_shared<data::FashionMNIST>(root, true);
  auto test_set = std::make_shared<data::FashionMNIST>(root, false);
  const int64_t epochs = core::env_int64("TRAINBENCH_FASHION_EPOCHS", 5, 1, 1000);
  constexpr int64_t kGlobalBatch = 256;  // the single-process run's batch, split across the ranks
  data::DataLoader::Options lo;
  lo.batch_size = kGlobalBatch / P;
  lo.num_workers = 1;
  data::DataLoader train_loader(train_set,
                                std::make_shared<data::DistributedSampler>(train_set->size(), P, rank, /*shuffle=*/true,
                                                                           /*seed=*/1),
                                lo);
  data::DataLoader::Options eo;
  eo.batch_size = 1000;
  data::DataLoader test_loader(test_set,
                               std::make_shared<data::DistributedSampler>(test_set->size(), P, rank, /*shuffle=*/false),
                               eo);

  core::manual_seed(3);
  auto model = std::make_shared<nn::MLP>(784, 1024, 10);
  auto ddp = std::make_shared<DistributedDataParallel>(model, g);
  optim::AdamW::Options o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  auto opt = std::make_shared<optim::AdamW>(model->parameters(), o);
  const int64_t total = epochs * train_loader.size();
  auto sched = std::make_shared<optim::LambdaLR>(*opt, optim::warmup_cosine(100, total, 0.05));
  const fs::path dir = shared_dir(*g, "fmnist");
  struct Cleanup {
    int rank;
    fs::path p;
    ~Cleanup() {
      if (rank == 0) fs::remove_all(p);
    }
  } cleanup{rank, dir};
  train::Options to;
  to.epochs = epochs;
  to.clip_grad_norm = 1.0;
  to.checkpoint_dir = dir.string();
  to.keep_last = 1;
  to.ddp = ddp;
  to.config = {{"model", "MLP 784-1024-1024-10"},
               {"optimizer", "AdamW lr 1e-3 wd 0.01"},
               {"epochs", epochs},
               {"world", P},
               {"global_batch", lo.batch_size * P}};
  train::Trainer trainer(
      model, opt, sched, [](nn::Module& m, const data::Batch& b) { return tb::cross_entropy(m(b.input), b.target); },
      to);
  train::Trainer::EvalFn eval = [](nn::Module& m, const data::Batch& b) {
    Tensor logits = m(b.input);
    train::EvalCounts c;
    c.loss_sum = tb::cross_entropy(logits, b.target, {}, "sum").item_double();
    c.correct = tb::sum(tb::eq(tb::argmax(logits, 1), b.target)).item<int64_t>();
    c.count = b.target.numel();
    return c;
  };
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<train::EpochStats> stats = trainer.fit(train_loader, &test_loader, &eval);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_replicas_identical(*g, *model, "after training");
  nlohmann::json tl = nlohmann::json::array(), vl = nlohmann::json::array(), va = nlohmann::json::array();
  for (const train::EpochStats& st : stats) {
    tl.push_back(st.train_loss);
    vl.push_back(st.val_loss);
    va.push_back(st.val_accuracy);
  }
  const double acc = va.back().get<double>();
  rec.series = {{"engine_epoch_train_loss", tl}, {"engine_epoch_val_loss", vl}, {"engine_epoch_val_accuracy", va}};
  rec.metrics["test_accuracy"] = acc;
  rec.metrics["epochs"] = epochs;
  rec.metrics["steps"] = trainer.step();
  rec.metrics["world"] = P;
  rec.metrics["per_rank_batch"] = lo.batch_size;
  rec.metrics["global_batch"] = lo.batch_size * P;
  rec.metrics["engine_train_s"] = seconds;
  rec.metrics["test_samples_evaluated"] = double(test_loader.sampler().size() * P);
  rec.tolerances = {{"min_test_accuracy", kAccuracyFloor}};
  if (acc < kAccuracyFloor) {
    rec.status = harness::Status::Fail;
    rec.message = "test accuracy " + std::to_string(acc) + " is below " + std::to_string(kAccuracyFloor);
  }
  g->synchronize();
}

}  // namespace

std::vector<harness::TestCase> ddp_rank_tests(int world) {
  std::vector<harness::TestCase> t;
  for (DType dt : {DType::Float64, DType::Float32}) {
    const std::string d = core::name(dt);
    t.push_back(ddp_case("mpi/equivalence/mlp/" + d,
                         [dt](harness::Record& r) { run_equivalence(mlp_equivalence("mpi", dt), r); }));
    t.push_back(
        ddp_case("mpi/equivalence/gpt/" + d, [dt](harness::Record& r) { run_equivalence(gpt_equivalence(dt), r); }));
  }
  t.push_back(ddp_case("gloo/equivalence/mlp/float64",
                       [](harness::Record& r) { run_equivalence(mlp_equivalence("gloo", DType::Float64), r); }));
  // gradient_as_bucket_view, with .grad dropped each step (the fresh gradient is divided into the
  // slot) and zeroed in place (backward accumulates into the slot itself).
  for (const bool none : {true, false})
    t.push_back(ddp_case(std::string("mpi/equivalence/mlp/bucket_view_") + (none ? "set_to_none" : "zeroed"),
                         [none](harness::Record& r) {
                           Equivalence q = mlp_equivalence("mpi", none ? DType::Float32 : DType::Float64);
                           q.ddp.gradient_as_bucket_view = true;
                           q.set_to_none = none;
                           run_equivalence(q, r);
                         }));
  t.push_back(ddp_case("mpi/no_sync/mlp", run_no_sync));
  t.push_back(ddp_case("mpi/unused/find_unused", run_find_unused));
  t.push_back(ddp_case("mpi/unused/error_without_flag", run_unused_error));
  t.push_back(ddp_case("mpi/broadcast/params_and_buffers", run_broadcast));
  t.push_back(ddp_case("mpi/buckets/layout", run_bucket_layout));
  t.push_back(ddp_case("mpi/trainer/resume", run_trainer_resume));
  // The Fashion-MNIST run takes minutes: only at world 2, the main job's DDP run.
  if (world == 2) t.push_back(ddp_case("mpi/fashion_mnist/mlp", run_fashion));
  return t;
}

}  // namespace tb::suites
