// The fsdp suite's correctness cases, run inside every rank (names prefixed by the backend):
//   mpi/equivalence/{mlp,gpt}/<strategy>/{float64,float32}: K optimizer steps (AdamW in float64,
//     SGD with momentum in float32, as the ddp suite) of a model sharded per layer (MLP: each
//     Linear; GPT: each TransformerBlock) and at the root, from different per-rank initial weights
//     (sync_module_states takes rank 0's), against ONE LibTorch process on the concatenated batch
//     with the mean loss: the loss at every step, the first step's reduced gradient rows on every
//     rank, and every parameter at the end; and against the engine's DDP on the same inputs (the
//     same tolerances; `bitwise_equal_to_ddp` says whether they agree to the bit). Layer sizes do
//     not divide 3 or 4 (padding). Strategies full_shard, shard_grad_op, no_shard; hybrid_shard
//     at world 4 (2 x 2).
//   mpi/no_sync/mlp: k micro-batches, the first k-1 with gradient sync off (no reduce-scatter, no
//     all-reduce), equal one LibTorch step on the concatenated k*P*B batch.
//   mpi/unused/mlp: a parameter no rank uses keeps no gradient; one only even ranks use is averaged;
//     equal to one engine process on the concatenated batch (itself checked against LibTorch by the
//     training suite).
//   mpi/tied/linear: two layers sharing one weight inside one unit: one shard, registered under
//     both names; equal to one engine process.
//   mpi/state_dict/round_trip: full_state_dict has the plain model's keys and shapes; loading it
//     into a model wrapped from other weights gives it back bit for bit; the sharded state dict's
//     rows are the full tensor's rows and the ranks' rows cover each tensor once.
//   mpi/clip_grad_norm/gpt: the total norm across ranks and the clipped gradients equal
//     optim::clip_grad_norm_ of one process on the concatenated batch.
//   mpi/mixed_precision/{mlp,gpt}/bf16_reduce_{float32,bfloat16}: param_dtype bfloat16 with float32 masters
//     against LibTorch running the same recipe (Note [FSDP bf16 tolerances]).
//   mpi/memory/gpt/<strategy>: the allocator's peak of parameters + gradients + optimizer state within
//     10% of the estimator; FULL_SHARD at world 4 at most 0.35x world 1 (Note [FSDP memory against
//     the estimator]).
//   mpi/activation_checkpointing/gpt: GPT blocks checkpointed inside FULL_SHARD units, with dropout:
//     loss and gradient shards bitwise those without checkpointing, the activation peak lower.
//   mpi/bad_input/{wrap_twice,different_wrapping,parameter_replaced}: a clear error on every rank,
//     never a hang.
#include "suites/fsdp/fsdp_suite.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/rng.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/fsdp/estimate.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/memory/tag_peaks.h"
#include "engine/nn/activation_checkpoint.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/optim/clip_grad.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "reference/autograd.h"
#include "reference/loss.h"
#include "reference/models.h"
#include "reference/optim.h"
#include "reference/views.h"
#include "suites/compare.h"
#include "suites/ddp/dist_check.h"
#include "suites/recorded.h"
#include "suites/training/compare.h"

namespace tb::suites {

namespace {

using dist::ProcessGroup;
using dist::ShardingStrategy;

harness::TestCase fsdp_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("fsdp", name, std::move(body), /*with_seed=*/false);
}

// A model the suite shards: how to build it on both sides, its loss and its data, and which of
// its modules become units.
struct ModelSpec {
  std::string name;
  int64_t steps = 6;
  std::function<std::shared_ptr<nn::Module>(DType)> make;
  std::function<ref::NnModule(DType)> make_ref;
  std::function<Tensor(nn::Module&, const Tensor&, const Tensor&)> loss_e;
  std::function<ref::Tensor(const ref::NnModule&, const ref::Tensor&, const ref::Tensor&)> loss_r;
  std::function<std::pair<Tensor, Tensor>(int64_t step, int rank, DType)> batch;
  std::vector<std::string> unit_types;
  std::function<ref::Tensor(const ref::Tensor& logits, const ref::Tensor& y)> loss_on_logits_r;
};

// 64 -> 100 -> 100 -> 10: 100 rows over 3 ranks and 10 over 3 or 4 need padding.
ModelSpec mlp_spec() {
  static constexpr int64_t In = 64, H = 100, Out = 10, B = 4;
  ModelSpec m;
  m.name = "mlp";
  m.steps = 8;
  m.make = [](DType dt) { return std::make_shared<nn::MLP>(In, H, Out, dt); };
  m.make_ref = [](DType dt) {
    ref::NnModule r = ref::nn_mlp(In, H, Out);
    r.to(dt);
    return r;
  };
  m.loss_e = [](nn::Module& mod, const Tensor& x, const Tensor& y) { return tb::cross_entropy(mod(x), y); };
  m.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
    return ref::cross_entropy(r.forward(x), y);
  };
  m.batch = [](int64_t s, int rank, DType dt) {
    core::Generator gen(15000 + 97 * uint64_t(s) + uint64_t(rank));
    return std::pair{randn({B, In}, dt, &gen), randint(0, Out, {B}, DType::Int64, &gen)};
  };
  m.unit_types = {"Linear"};
  m.loss_on_logits_r = [](const ref::Tensor& logits, const ref::Tensor& y) { return ref::cross_entropy(logits, y); };
  return m;
}

// vocab 50 and d_model 20 divide neither 3 nor 4... nor do the 60-row fused attention weights by 4
// evenly into blocks of the others: every world pads some parameter.
nn::GPTConfig gpt_config(DType dt) {
  nn::GPTConfig c;
  c.vocab = 50, c.d_model = 20, c.n_layers = 2, c.n_heads = 4, c.max_seq = 8;
  c.dtype = dt;
  return c;
}

ModelSpec gpt_spec() {
  static constexpr int64_t B = 2;
  ModelSpec m;
  m.name = "gpt";
  m.steps = 6;
  m.make = [](DType dt) { return std::make_shared<nn::GPT>(gpt_config(dt)); };
  m.make_ref = [](DType dt) {
    const nn::GPTConfig c = gpt_config(dt);
    ref::NnModule r = ref::nn_gpt(c.vocab, c.d_model, c.n_layers, c.n_heads, c.max_seq, c.dropout, c.gelu_approximate);
    r.to(dt);
    return r;
  };
  m.loss_e = [](nn::Module& mod, const Tensor& x, const Tensor& y) { return nn::GPT::loss(mod(x), y); };
  m.loss_r = [](const ref::NnModule& r, const ref::Tensor& x, const ref::Tensor& y) {
    return ref::gpt_loss(r.forward(x), y);
  };
  m.batch = [](int64_t s, int rank, DType) {
    const nn::GPTConfig c = gpt_config(DType::Float32);
    core::Generator gen(17000 + 97 * uint64_t(s) + uint64_t(rank));
    return std::pair{randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen),
                     randint(0, c.vocab, {B, c.max_seq}, DType::Int64, &gen)};
  };
  m.unit_types = {"TransformerBlock"};
  m.loss_on_logits_r = [](const ref::Tensor& logits, const ref::Tensor& y) { return ref::gpt_loss(logits, y); };
  return m;
}

std::pair<Tensor, Tensor> concatenated(const ModelSpec& m, int64_t s, int P, DType dt) {
  std::vector<Tensor> xs, ys;
  for (int k = 0; k < P; ++k) {
    auto [x, y] = m.batch(s, k, dt);
    xs.push_back(x);
    ys.push_back(y);
  }
  return {tb::cat(xs), tb::cat(ys)};
}

ref::NamedTensors to_ref_named(const nn::StateDict& sd) {
  ref::NamedTensors out;
  for (auto& [n, t] : sd) out.push_back({n, ref::to_ref(t)});
  return out;
}

std::vector<std::pair<std::string, Tensor>> as_list(const nn::StateDict& sd) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, t] : sd) out.emplace_back(n, t);
  return out;
}

// Same dtype, shape and bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor x = a.detach().contiguous(), y = b.detach().contiguous();
  return std::memcmp(x.data(), y.data(), size_t(x.numel()) * x.itemsize()) == 0;
}

void fail_once(harness::Record& rec, const std::string& why) {
  if (rec.status != harness::Status::Pass) return;
  rec.status = harness::Status::Fail;
  rec.message = why;
}

// The first step's reduced gradient rows on this rank against LibTorch's whole gradient.
double check_grad_rows(nn::Module& model, const ref::NnModule& r, Tolerance tol, std::string* where) {
  std::unordered_map<std::string, Tensor> grads;
  for (auto& [n, p] : model.named_parameters()) grads[n] = p.grad();
  double worst = 0;
  for (auto& [name, st] : dist::sharded_state_dict(model)) {
    auto it = grads.find(name);
    if (it == grads.end()) continue;  // a buffer
    const Tensor g = it->second;
    check(g.defined(), "parameter " + name + " has no gradient after the first backward");
    ref::Tensor rp;
    for (auto& [rn, rt] : r.named_parameters())
      if (rn == name) rp = rt;
    const Tensor whole = ref::from_ref(ref::grad_of(rp));
    const int64_t n = st.local.dim() == 0 ? 1 : st.local.size(0);
    if (n == 0) continue;
    Tensor mine = st.local.dim() == 0 ? g.view({}) : g.narrow(0, 0, n);
    Tensor theirs = whole.dim() == 0 ? whole : whole.narrow(0, st.row_offset, n);
    const Diff d = compare_values(mine.detach(), theirs, tol);
    if (d.worst_ratio > worst) {
      worst = d.worst_ratio;
      *where = name + " rows from " + std::to_string(st.row_offset) + " [" + std::to_string(d.worst_index) +
               "]: engine " + std::to_string(d.worst_actual) + " vs LibTorch " + std::to_string(d.worst_expected);
    }
  }
  return worst;
}

// Gradient rows after one step: the same summation-order argument as the losses (Note [DDP
// equivalence tolerances] in suites/ddp/dist_check.cpp): float64 1e-10 relative, float32 1e-5.
Tolerance grad_tolerance_for(DType dt) { return loss_tolerance(dt); }

struct EquivalenceCase {
  ModelSpec model;
  ShardingStrategy strategy = ShardingStrategy::FullShard;
  DType dtype = DType::Float64;
  int shard_group_size = 0;
};

void run_equivalence(const EquivalenceCase& q, harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  const bool adamw = q.dtype == DType::Float64;
  core::manual_seed(400 + uint64_t(rank));  // different per rank: sync_module_states takes rank 0's
  std::shared_ptr<nn::Module> model = q.model.make(q.dtype);
  dist::FSDPOptions o;
  o.strategy = q.strategy;
  o.shard_group_size = q.shard_group_size;
  auto root = dist::fully_shard_tree(model, g, dist::wrap_module_types(q.model.unit_types), o);
  const nn::StateDict init = dist::full_state_dict(*model);
  // LibTorch on the concatenated batch; the engine's DDP on the same per-rank batches.
  ref::NnModule r = q.model.make_ref(q.dtype);
  r.load_by_name(to_ref_named(init));
  std::shared_ptr<nn::Module> twin = q.model.make(q.dtype);
  twin->load_state_dict(init);
  dist::DDPOptions dopt;
  dopt.overlap = dist::DDPOptions::Overlap::AtEnd;
  auto ddp = std::make_shared<dist::DistributedDataParallel>(twin, g, dopt);
  OptPair opt = make_opt(adamw, model->parameters(), ref_params(r));
  std::shared_ptr<optim::Optimizer> ddp_opt = make_engine_opt(adamw, twin->parameters());
  const Tolerance ptol = param_tolerance(q.dtype), ltol = loss_tolerance(q.dtype);
  nlohmann::json el = nlohmann::json::array(), rl = nlohmann::json::array();
  double worst_loss = 0, worst_grad = 0;
  int64_t bytes = 0, gathers = 0, scatters = 0;
  for (int64_t s = 0; s < q.model.steps; ++s) {
    auto [x, y] = q.model.batch(s, rank, q.dtype);
    opt.engine->zero_grad(true);
    Tensor loss = q.model.loss_e(*model, x, y);
    loss.backward();
    const dist::FSDPStats st = root->stats();
    bytes = st.bytes, gathers = st.all_gathers, scatters = st.reduce_scatters;
    // LibTorch: one process, the concatenated batch of every rank, the mean loss.
    auto [xa, ya] = concatenated(q.model, s, P, q.dtype);
    opt.reference->zero_grad();
    ref::Tensor rloss = q.model.loss_r(r, ref::to_ref(xa), ref::to_ref(ya));
    ref::backward(rloss);
    if (s == 0) {
      std::string where;
      worst_grad = check_grad_rows(*model, r, grad_tolerance_for(q.dtype), &where);
      if (worst_grad > 1) fail_once(rec, "first step: rank " + std::to_string(rank) + "'s reduced gradient " + where);
    }
    opt.engine->step();
    opt.reference->step();
    ddp_opt->zero_grad(true);
    q.model.loss_e(*ddp, x, y).backward();
    ddp_opt->step();
    const double le = global_mean(*g, loss.item_double());
    const double lr_ = ref::from_ref(rloss).item_double();
    el.push_back(le);
    rl.push_back(lr_);
    const double ratio = std::fabs(le - lr_) / (ltol.atol + ltol.rtol * std::fabs(lr_));
    worst_loss = std::max(worst_loss, ratio);
    if (ratio > 1)
      fail_once(rec, "step " + std::to_string(s) + ": mean loss over the ranks " + std::to_string(le) +
                         " vs LibTorch on the concatenated batch " + std::to_string(lr_));
  }
  const nn::StateDict final_state = dist::full_state_dict(*model);
  std::string where;
  const double worst_param = worst_param_ratio(as_list(final_state), r.named_parameters(), ptol, &where);
  if (worst_param > 1)
    fail_once(rec, "parameters after " + std::to_string(q.model.steps) + " steps differ from LibTorch's: " + where);
  ref::NamedTensors ddp_named = named_ref(*twin);
  std::string dwhere;
  const double worst_ddp = worst_param_ratio(as_list(final_state), ddp_named, ptol, &dwhere);
  if (worst_ddp > 1) fail_once(rec, "parameters differ from the engine's DDP on the same inputs: " + dwhere);
  bool bitwise = true;
  for (auto& [n, t] : final_state)
    if (const Tensor* d = twin->state_dict().find(n)) bitwise = bitwise && bitwise_equal(t, *d);
  check_replicas_identical(*g, final_state, "after " + std::to_string(q.model.steps) + " steps");
  rec.series = {{"engine_loss", el}, {"reference_loss", rl}};
  rec.metrics["world"] = P;
  rec.metrics["steps"] = q.model.steps;
  rec.metrics["bytes_per_step"] = double(bytes);
  rec.metrics["all_gathers_per_step"] = double(gathers);
  rec.metrics["reduce_scatters_per_step"] = double(scatters);
  rec.metrics["worst_loss_tolerance_ratio"] = worst_loss;
  rec.metrics["worst_first_grad_tolerance_ratio"] = worst_grad;
  rec.metrics["worst_param_tolerance_ratio"] = worst_param;
  rec.metrics["worst_param_vs_ddp_tolerance_ratio"] = worst_ddp;
  rec.metrics["bitwise_equal_to_ddp"] = bitwise ? 1 : 0;
  rec.tolerances = {{"param_rtol", ptol.rtol},
                    {"param_atol", ptol.atol},
                    {"loss_rtol", ltol.rtol},
                    {"loss_atol", ltol.atol},
                    {"replicas", "bitwise"}};
  g->synchronize();
}

// ---- gradient accumulation with sync off ----
void run_no_sync(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  constexpr int64_t k = 3, steps = 3;
  const ModelSpec m = mlp_spec();
  core::manual_seed(500 + uint64_t(rank));
  std::shared_ptr<nn::Module> model = m.make(DType::Float64);
  auto root = dist::fully_shard_tree(model, g, dist::wrap_module_types(m.unit_types), {});
  ref::NnModule r = m.make_ref(DType::Float64);
  r.load_by_name(to_ref_named(dist::full_state_dict(*model)));
  OptPair opt = make_opt(true, model->parameters(), ref_params(r));
  int64_t quiet = 0;
  std::string problem;  // checked after the collectives, so no rank leaves the others waiting
  for (int64_t s = 0; s < steps; ++s) {
    opt.engine->zero_grad(true);
    for (int64_t j = 0; j < k; ++j) {
      auto [x, y] = m.batch(s * k + j, rank, DType::Float64);
      root->set_requires_gradient_sync(j == k - 1);
      tb::mul(m.loss_e(*model, x, y), 1.0 / double(k)).backward();
      const dist::FSDPStats st = root->stats();
      if (j < k - 1) {
        if (st.reduce_scatters + st.all_reduces != 0 && problem.empty())
          problem = "a backward with gradient sync off reduced gradients (" + std::to_string(st.reduce_scatters) +
                    " reduce-scatters, " + std::to_string(st.all_reduces) + " all-reduces)";
        else ++quiet;
      }
    }
    opt.engine->step();
    std::vector<Tensor> xs, ys;
    for (int rr = 0; rr < P; ++rr)
      for (int64_t j = 0; j < k; ++j) {
        auto [x, y] = m.batch(s * k + j, rr, DType::Float64);
        xs.push_back(x);
        ys.push_back(y);
      }
    opt.reference->zero_grad();
    ref::backward(m.loss_r(r, ref::to_ref(tb::cat(xs)), ref::to_ref(tb::cat(ys))));
    opt.reference->step();
  }
  const nn::StateDict final_state = dist::full_state_dict(*model);
  check_replicas_identical(*g, final_state, "after accumulation");
  check(problem.empty(), problem);
  const Tolerance tol = param_tolerance(DType::Float64);
  std::string where;
  const double worst = worst_param_ratio(as_list(final_state), r.named_parameters(), tol, &where);
  check(worst <= 1, "after " + std::to_string(steps) + " steps of " + std::to_string(k) +
                        " accumulated micro-batches the parameters differ from LibTorch's " + std::to_string(k) +
                        "x larger batch: " + where);
  rec.metrics["world"] = P;
  rec.metrics["micro_batches"] = k;
  rec.metrics["quiet_backwards"] = quiet;
  rec.metrics["worst_param_tolerance_ratio"] = worst;
  rec.tolerances = {{"param_rtol", tol.rtol}, {"param_atol", tol.atol}};
  g->synchronize();
}

// ---- unused and tied parameters ----
// out = fc(x) [+ odd(x) on even ranks]; `never` takes part in nothing; with `tie`, head's weight
// is fc's (registered in both).
class Small : public nn::Module {
 public:
  Small(bool use_odd, bool tie) : nn::Module("Small"), use_odd_(use_odd), tie_(tie) {
    fc = register_module("fc", std::make_shared<nn::Linear>(6, 6, true, DType::Float64));
    odd = register_module("odd", std::make_shared<nn::Linear>(6, 6, true, DType::Float64));
    never = register_module("never", std::make_shared<nn::Linear>(6, 6, true, DType::Float64));
    head = register_module("head", std::make_shared<nn::Linear>(6, 6, false, DType::Float64));
    if (tie) head->weight = fc->weight;  // the layer's handle; the registered one follows below
  }
  void finish_tie() {
    // Registered under both names, as PyTorch's model.head.weight = model.fc.weight.
    if (tie_) head->set_parameter("weight", fc->weight);
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = (*fc)(x);
    if (use_odd_) y = tb::add(y, (*odd)(x));
    return (*head)(tb::tanh(y));
  }
  std::shared_ptr<nn::Linear> fc, odd, never, head;

 private:
  bool use_odd_, tie_;
};

std::pair<Tensor, Tensor> small_batch(int64_t s, int rank) {
  core::Generator gen(19000 + 97 * uint64_t(s) + uint64_t(rank));
  return {randn({3, 6}, DType::Float64, &gen), randint(0, 6, {3}, DType::Int64, &gen)};
}

// FSDP ranks (odd used on even ranks only) against one process on the concatenated batch, where
// `odd` sees only the even ranks' rows: the reference computes fc on all rows and odd on the even
// ranks' rows, as the ranks do.
void run_small(bool tie, harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  constexpr int64_t steps = 4;
  core::manual_seed(600 + uint64_t(rank));
  auto model = std::make_shared<Small>(rank % 2 == 0, tie);
  model->finish_tie();
  dist::fully_shard(model, g, {});
  const nn::StateDict init = dist::full_state_dict(*model);
  core::manual_seed(600);
  auto plain = std::make_shared<Small>(true, tie);
  plain->finish_tie();
  plain->load_state_dict(init);
  optim::AdamW::Options ao;
  ao.lr = 1e-2;
  ao.weight_decay = 0.01;
  // A tied weight is listed under both names; an optimizer takes each tensor once (as PyTorch's
  // parameters() dedups).
  auto unique = [](const std::vector<Tensor>& ps) {
    std::vector<Tensor> out;
    for (const Tensor& p : ps)
      if (std::none_of(out.begin(), out.end(), [&](const Tensor& q) { return q.is_same(p); })) out.push_back(p);
    return out;
  };
  optim::AdamW opt(unique(model->parameters()), ao), popt(unique(plain->parameters()), ao);
  for (int64_t s = 0; s < steps; ++s) {
    auto [x, y] = small_batch(s, rank);
    opt.zero_grad(true);
    tb::cross_entropy((*model)(x), y).backward();
    opt.step();
    // One process: rank k's rows go through odd only where rank k uses it; mean over all rows.
    popt.zero_grad(true);
    std::vector<Tensor> losses;
    for (int k = 0; k < P; ++k) {
      auto [xk, yk] = small_batch(s, k);
      Tensor yh = (*plain->fc)(xk);
      if (k % 2 == 0) yh = tb::add(yh, (*plain->odd)(xk));
      losses.push_back(tb::cross_entropy((*plain->head)(tb::tanh(yh)), yk));
    }
    Tensor total = losses[0];
    for (size_t i = 1; i < losses.size(); ++i) total = tb::add(total, losses[i]);
    tb::mul(total, 1.0 / double(P)).backward();
    popt.step();
  }
  const nn::StateDict final_state = dist::full_state_dict(*model);
  check_replicas_identical(*g, final_state, "after " + std::to_string(steps) + " steps");
  const Tolerance tol = param_tolerance(DType::Float64);
  std::string where;
  const double worst = worst_param_ratio(as_list(final_state), named_ref(*plain), tol, &where);
  check(worst <= 1, "parameters differ from one process on the concatenated batch: " + where);
  for (auto& [n, p] : model->named_parameters())
    if (n.rfind("never.", 0) == 0) check(!p.grad().defined(), "parameter " + n + " that no rank uses has a gradient");
  if (tie) {
    const nn::StateDict sd = model->state_dict();
    check(sd.find("head.weight") && sd.find("fc.weight") && sd.find("head.weight")->is_same(*sd.find("fc.weight")),
          "the tied weight is not one shard registered under both names");
    const nn::StateDict plain_sd = plain->state_dict();
    for (auto& [n, t] : plain_sd)
      check(final_state.find(n) && final_state.find(n)->sizes() == t.sizes(),
            "full_state_dict lacks " + n + " or has another shape");
  }
  rec.metrics["world"] = P;
  rec.metrics["worst_param_tolerance_ratio"] = worst;
  rec.tolerances = {{"param_rtol", tol.rtol}, {"param_atol", tol.atol}};
  g->synchronize();
}

// ---- state dicts ----
void run_state_dict(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int rank = g->rank();
  const ModelSpec m = gpt_spec();
  core::manual_seed(700);
  auto plain = m.make(DType::Float32);
  const nn::StateDict plain_sd = plain->state_dict();
  core::manual_seed(701 + uint64_t(rank));
  auto a = m.make(DType::Float32);
  a->load_state_dict(plain_sd);
  dist::fully_shard_tree(a, g, dist::wrap_module_types(m.unit_types), {});
  const nn::StateDict full = dist::full_state_dict(*a);
  check(full.keys() == plain_sd.keys(), "full_state_dict's keys are not the plain model's");
  for (auto& [n, t] : plain_sd) {
    check(full.find(n)->sizes() == t.sizes(), "full_state_dict: " + n + " has another shape");
    check(bitwise_equal(*full.find(n), t), "full_state_dict: " + n + " changed values");
  }
  // Into a model wrapped from other weights: back bit for bit.
  core::manual_seed(900 + uint64_t(rank));
  auto b = m.make(DType::Float32);
  dist::fully_shard_tree(b, g, dist::wrap_module_types(m.unit_types), {.sync_module_states = false});
  dist::load_full_state_dict(*b, full);
  const nn::StateDict back = dist::full_state_dict(*b);
  for (auto& [n, t] : plain_sd) check(bitwise_equal(*back.find(n), t), "load_full_state_dict: " + n + " not restored");
  // Sharded: rows of the whole tensor, and together the ranks hold each row once.
  const auto sharded = dist::sharded_state_dict(*b);
  std::vector<double> rows;
  for (auto& [n, st] : sharded) {
    const Tensor& whole = *plain_sd.find(n);
    check(st.global_shape == whole.sizes(), "sharded_state_dict: " + n + " global shape");
    if (st.replicated) {
      rows.push_back(0);
      continue;
    }
    const int64_t k = st.local.dim() == 0 ? 1 : st.local.size(0);
    if (k > 0 && whole.dim() > 0)
      check(bitwise_equal(st.local, whole.narrow(0, st.row_offset, k)),
            "sharded_state_dict: " + n + " rows differ from the full tensor's");
    rows.push_back(double(k));
  }
  Tensor cover = from_vector(rows, {int64_t(rows.size())}, DType::Float64);
  g->all_reduce(cover, dist::ReduceOp::Sum)->wait();
  size_t i = 0;
  for (auto& [n, st] : sharded) {
    const double want = st.replicated ? 0 : double(st.global_shape.empty() ? 1 : st.global_shape[0]);
    check(cover.data_ptr<double>()[i++] == want,
          "sharded_state_dict: the ranks' rows of " + n + " do not cover the tensor exactly once");
  }
  rec.metrics["world"] = g->size();
  rec.metrics["tensors"] = double(sharded.size());
  g->synchronize();
}

// ---- clip_grad_norm_ ----
void run_clip(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  const ModelSpec m = gpt_spec();
  core::manual_seed(800);
  auto plain = m.make(DType::Float64);
  const nn::StateDict init = plain->state_dict();
  auto model = m.make(DType::Float64);
  model->load_state_dict(init);
  dist::fully_shard_tree(model, g, dist::wrap_module_types(m.unit_types), {});
  auto [x, y] = m.batch(0, rank, DType::Float64);
  m.loss_e(*model, x, y).backward();
  const double norm = dist::clip_grad_norm_(*model, 0.05).item_double();
  auto [xa, ya] = concatenated(m, 0, P, DType::Float64);
  m.loss_e(*plain, xa, ya).backward();
  const double want = optim::clip_grad_norm_(plain->parameters(), 0.05).item_double();
  const Tolerance tol{1e-6, 1e-9};  // float32 result of a float64 sum over different orders
  check(std::fabs(norm - want) <= tol.atol + tol.rtol * std::fabs(want),
        "total norm " + std::to_string(norm) + " vs one process's " + std::to_string(want));
  // The clipped gradient rows equal the one process's.
  std::unordered_map<std::string, Tensor> pg;
  for (auto& [n, p] : plain->named_parameters()) pg[n] = p.grad();
  std::unordered_map<std::string, Tensor> mg;
  for (auto& [n, p] : model->named_parameters()) mg[n] = p.grad();
  double worst = 0;
  for (auto& [n, st] : dist::sharded_state_dict(*model)) {
    if (!mg.count(n)) continue;
    const int64_t k = st.local.dim() == 0 ? 1 : st.local.size(0);
    if (k == 0 || st.global_shape.empty()) continue;
    worst = std::max(worst, compare_values(mg[n].narrow(0, 0, k), pg[n].narrow(0, st.row_offset, k),
                                           param_tolerance(DType::Float64))
                                .worst_ratio);
  }
  check(worst <= 1,
        "clipped gradients differ from one process's (worst tolerance ratio " + std::to_string(worst) + ")");
  rec.metrics["world"] = P;
  rec.metrics["total_norm"] = norm;
  rec.metrics["worst_grad_tolerance_ratio"] = worst;
  g->synchronize();
}

// ---- mixed precision ----
// Note [FSDP bf16 tolerances]
// FSDP with param_dtype bfloat16 (gathered compute copies), float32 master shards stepped by SGD
// with momentum, output_dtype float32 (the loss in float32), reduce_dtype as the case says,
// against LibTorch running the same recipe in one process: each step a bfloat16 copy of the
// float32 master computes forward and backward on the concatenated batch, its gradients are
// cast to float32 and the master steps. The two differ by bfloat16 rounding in different places
// (per-rank means of B rows and a division by the world against one mean of P*B rows): ~2^-8
// relative per gradient. SGD (lr 0.05, momentum 0.9) moves parameters linearly in the gradient,
// so after K = 5 steps they differ by ~K * lr * |g| * 1e-2 ~ 1e-4; rtol 2e-2 / atol 2e-3 leaves a
// margin of 10, while a missed division by the world or a gradient dropped moves a parameter by
// ~lr * |g| ~ 5e-3 at once. Losses rtol 2e-2.
void run_mixed_precision(const ModelSpec& m, DType reduce_dtype, harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size(), rank = g->rank();
  // At more than one intra-op thread this case found oneDNN's AMX bfloat16 matmul going wrong for
  // products with 49 to 63 columns (the head's vocab of 50, in_proj's 60): the engine routes those
  // around it (Note [oneDNN AMX bfloat16 with 49 <= N <= 63] in engine/ops/cpu/linalg_gemm.cpp), so
  // the case runs at every thread count.
  constexpr int64_t steps = 5;
  core::manual_seed(1400 + uint64_t(rank));
  std::shared_ptr<nn::Module> model = m.make(DType::Float32);
  dist::FSDPOptions o;
  o.param_dtype = DType::BFloat16;
  o.reduce_dtype = reduce_dtype;
  o.output_dtype = DType::Float32;
  dist::fully_shard_tree(model, g, dist::wrap_module_types(m.unit_types), o);
  const nn::StateDict init = dist::full_state_dict(*model);
  ref::NnModule master = m.make_ref(DType::Float32);
  master.load_by_name(to_ref_named(init));
  OptPair opt = make_opt(false, model->parameters(), ref_params(master));
  const Tolerance ptol{2e-2, 2e-3}, ltol{2e-2, 2e-3};
  double worst_loss = 0;
  for (int64_t s = 0; s < steps; ++s) {
    auto [x, y] = m.batch(s, rank, DType::Float32);
    opt.engine->zero_grad(true);
    Tensor loss = m.loss_e(*model, x, y);
    loss.backward();
    opt.engine->step();
    const double le = global_mean(*g, loss.item_double());
    // LibTorch: a bfloat16 copy of the master computes; its gradients step the float32 master.
    ref::NnModule compute = m.make_ref(DType::Float32);
    compute.load_by_name(master.named_parameters());
    compute.to(DType::BFloat16);
    auto [xa, ya] = concatenated(m, s, P, DType::Float32);
    const Tensor xin = core::is_floating(xa.dtype()) ? xa.to(DType::BFloat16) : xa;  // token ids stay int64
    ref::Tensor logits = ref::to(compute.forward(ref::to_ref(xin)), DType::Float32);
    ref::Tensor rloss = m.loss_on_logits_r(logits, ref::to_ref(ya));
    ref::backward(rloss);
    const ref::NamedTensors grads = compute.named_grads();
    const ref::NamedTensors params = master.named_parameters();
    for (size_t i = 0; i < params.size(); ++i)
      ref::set_grad(params[i].second, ref::to(grads[i].second, DType::Float32));
    opt.reference->step();
    const double lr_ = ref::from_ref(rloss).item_double();
    const double ratio = std::fabs(le - lr_) / (ltol.atol + ltol.rtol * std::fabs(lr_));
    worst_loss = std::max(worst_loss, ratio);
    if (ratio > 1)
      fail_once(rec, "step " + std::to_string(s) + ": mean loss " + std::to_string(le) + " vs LibTorch's bf16 recipe " +
                         std::to_string(lr_));
  }
  const nn::StateDict final_state = dist::full_state_dict(*model);
  std::string where;
  const double worst = worst_param_ratio(as_list(final_state), master.named_parameters(), ptol, &where);
  if (worst > 1) fail_once(rec, "float32 masters after " + std::to_string(steps) + " steps differ: " + where);
  check_replicas_identical(*g, final_state, "after the bf16 steps");
  rec.metrics["world"] = P;
  rec.metrics["worst_loss_tolerance_ratio"] = worst_loss;
  rec.metrics["worst_param_tolerance_ratio"] = worst;
  rec.tolerances = {{"param_rtol", ptol.rtol}, {"param_atol", ptol.atol}, {"loss_rtol", ltol.rtol}};
  g->synchronize();
}

// ---- memory against the estimator ----
// A GPT big enough that the allocator's rounding is small beside it (~0.4 M parameters), with
// eight blocks so that the two units a prefetching FULL_SHARD holds gathered are a small part of
// the model, as in the models FSDP is for (a 4-block GPT holds half its blocks gathered at once).
nn::GPTConfig memory_config() {
  nn::GPTConfig c;
  c.vocab = 64, c.d_model = 64, c.n_layers = 8, c.n_heads = 4, c.max_seq = 16;
  return c;
}

// The peak of parameters + gradients + optimizer state (allocator tags) over two AdamW steps of
// the model sharded over `g` with `o`.
int64_t measured_model_state_peak(const std::shared_ptr<ProcessGroup>& g, const dist::FSDPOptions& o) {
  const nn::GPTConfig c = memory_config();
  core::manual_seed(1200);
  auto model = std::make_shared<nn::GPT>(c);
  dist::fully_shard_tree(model, g, dist::wrap_module_types({"TransformerBlock"}), o);
  optim::AdamW opt(model->parameters(), {});
  memory::reset_tag_peaks();
  for (int64_t s = 0; s < 2; ++s) {
    core::Generator gen(1300 + uint64_t(s) + 10 * uint64_t(g->rank()));
    Tensor x = randint(0, c.vocab, {2, c.max_seq}, DType::Int64, &gen);
    Tensor y = randint(0, c.vocab, {2, c.max_seq}, DType::Int64, &gen);
    opt.zero_grad(true);
    nn::GPT::loss((*model)(x), y).backward();
    opt.step();
  }
  return memory::tag_peaks().model_state;
}

dist::Strategy estimator_strategy(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FullShard: return dist::Strategy::FullShard;
    case ShardingStrategy::ShardGradOp: return dist::Strategy::ShardGradOp;
    case ShardingStrategy::NoShard: return dist::Strategy::NoShard;
    case ShardingStrategy::HybridShard: return dist::Strategy::HybridShard;
  }
  return dist::Strategy::FullShard;
}

// Note [FSDP memory against the estimator]
// The estimator (engine/dist/fsdp/estimate.h, allocator_blocks) predicts the largest parameters
// + gradients + optimizer state one rank holds during a steady step: master shards, their
// gradients and AdamW's two states, plus the gathered units and the unsharded gradients awaiting
// their reduction (two units with prefetch). The measurement is the allocator's peak of those
// three tags over two steps. They must agree within 10%; and FULL_SHARD must shrink it with the
// world: at world 4 at most 0.35x the same model unsharded (world 1, measured in the same process
// on a one-rank group split from the world).
void run_memory(ShardingStrategy st, int shard_group, harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int P = g->size();
  dist::FSDPOptions o;
  o.strategy = st;
  o.shard_group_size = shard_group;
  const int64_t measured = measured_model_state_peak(g, o);
  dist::MemoryEstimateInput in;
  in.model = dist::gpt_model(memory_config());
  in.strategy = estimator_strategy(st);
  in.world = P;
  in.shard_group = st == ShardingStrategy::HybridShard ? shard_group : 0;
  in.allocator_blocks = true;
  const dist::MemoryEstimate e = dist::estimate_memory(in);
  const double ratio = double(measured) / double(e.peak_model_state_bytes);
  // The same model on this rank alone.
  auto alone = g->split(g->rank());
  dist::FSDPOptions o1;
  o1.strategy = ShardingStrategy::FullShard;
  const int64_t world1 = measured_model_state_peak(alone, o1);
  const double shrink = double(measured) / double(world1);
  rec.metrics["world"] = P;
  rec.metrics["measured_model_state_peak_bytes"] = double(measured);
  rec.metrics["estimate_model_state_peak_bytes"] = double(e.peak_model_state_bytes);
  rec.metrics["measured_over_estimate"] = ratio;
  rec.metrics["world1_model_state_peak_bytes"] = double(world1);
  rec.metrics["measured_over_world1"] = shrink;
  rec.tolerances = {{"estimate_rtol", 0.10}, {"full_shard_w4_over_w1_max", 0.35}};
  g->synchronize();
  check(std::fabs(ratio - 1) <= 0.10, "measured peak of parameters + gradients + optimizer state " +
                                          std::to_string(measured) + " B vs the estimator's " +
                                          std::to_string(e.peak_model_state_bytes) + " B (ratio " +
                                          std::to_string(ratio) + ", allowed 0.9-1.1)");
  if (st == ShardingStrategy::FullShard && P == 4)
    check(shrink <= 0.35, "FULL_SHARD at world 4 holds " + std::to_string(shrink) +
                              "x the world-1 model state (at most 0.35x expected)");
}

// ---- activation checkpointing inside units ----
// The GPT with dropout, each block a FULL_SHARD unit, with and without its blocks checkpointed
// (nn::checkpoint_blocks) from the same weights and generator state: the loss and every rank's
// gradient shards bit for bit equal (the rerun replays the dropout masks; FSDP gathers a unit
// again before its region recomputes), and the activation peak lower.
void run_checkpointed(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const int rank = g->rank();
  nn::GPTConfig c;
  c.vocab = 64, c.d_model = 32, c.n_layers = 3, c.n_heads = 4, c.max_seq = 16, c.dropout = 0.1;
  struct Run {
    double loss = 0;
    std::vector<Tensor> grads;
    int64_t activation_peak = 0;
  };
  auto run = [&](bool checkpointed) {
    core::manual_seed(1500);
    auto model = std::make_shared<nn::GPT>(c);
    if (checkpointed) nn::checkpoint_blocks(*model);
    dist::fully_shard_tree(model, g, dist::wrap_module_types({"TransformerBlock"}), {});
    core::Generator gen(1600 + uint64_t(rank));
    Tensor x = randint(0, c.vocab, {4, c.max_seq}, DType::Int64, &gen);
    Tensor y = randint(0, c.vocab, {4, c.max_seq}, DType::Int64, &gen);
    core::manual_seed(1700 + uint64_t(rank));  // the dropout stream
    memory::reset_tag_peaks();
    Run r;
    Tensor loss = nn::GPT::loss((*model)(x), y);
    loss.backward();
    r.activation_peak = memory::tag_peaks().by_tag[size_t(memory::Tag::Activation)];
    r.loss = loss.item_double();
    for (const Tensor& p : model->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    return r;
  };
  const Run plain = run(false), ckpt = run(true);
  g->synchronize();
  check(plain.loss == ckpt.loss,
        "the loss differs with checkpointing: " + std::to_string(ckpt.loss) + " vs " + std::to_string(plain.loss));
  check(plain.grads.size() == ckpt.grads.size(), "another parameter count with checkpointing");
  for (size_t i = 0; i < plain.grads.size(); ++i)
    check(plain.grads[i].defined() == ckpt.grads[i].defined() &&
              (!plain.grads[i].defined() || bitwise_equal(plain.grads[i], ckpt.grads[i])),
          "gradient shard " + std::to_string(i) + " differs with checkpointing (not bitwise equal)");
  check(ckpt.activation_peak < plain.activation_peak,
        "the activation peak is not lower with checkpointing: " + std::to_string(ckpt.activation_peak) + " B vs " +
            std::to_string(plain.activation_peak) + " B");
  rec.metrics["world"] = g->size();
  rec.metrics["activation_peak_bytes"] = double(plain.activation_peak);
  rec.metrics["activation_peak_checkpointed_bytes"] = double(ckpt.activation_peak);
  rec.tolerances = {{"gradients", "bitwise"}};
}

// ---- bad input ----
void expect_error(const std::function<void()>& f, const std::string& needle, const std::string& what) {
  std::string msg;
  try {
    f();
  } catch (const std::exception& e) {
    msg = e.what();
  }
  check(!msg.empty(), what + ": no error");
  check(msg.find(needle) != std::string::npos, what + ": the error does not say '" + needle + "': " + msg);
}

void run_wrap_twice(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  auto model = mlp_spec().make(DType::Float32);
  dist::fully_shard(model, g, {});
  expect_error([&] { dist::fully_shard(model, g, {}); }, "already sharded", "fully_shard twice");
  rec.metrics["world"] = g->size();
  g->synchronize();
}

void run_different_wrapping(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const ModelSpec m = mlp_spec();
  core::manual_seed(1000);
  auto model = m.make(DType::Float32);
  dist::FSDPOptions o;
  o.sync_module_states = false;  // so the first collective that disagrees is the check itself
  if (g->rank() == 0) dist::fully_shard_tree(model, g, dist::wrap_module_types(m.unit_types), o);
  else dist::fully_shard(model, g, o);
  auto [x, y] = m.batch(0, g->rank(), DType::Float32);
  if (g->size() > 1)
    expect_error([&] { m.loss_e(*model, x, y); }, "wrapped the model differently", "rank 0 wraps each Linear");
  rec.metrics["world"] = g->size();
  g->synchronize();
}

void run_parameter_replaced(harness::Record& rec) {
  auto g = dist::new_group("mpi");
  const ModelSpec m = mlp_spec();
  core::manual_seed(1100);
  auto model = std::dynamic_pointer_cast<nn::MLP>(m.make(DType::Float32));
  dist::fully_shard(model, g, {});
  auto first = std::dynamic_pointer_cast<nn::Linear>(model->child("0"));
  first->set_parameter("weight", zeros({3, 3}).requires_grad_(true));
  auto [x, y] = m.batch(0, g->rank(), DType::Float32);
  expect_error([&] { m.loss_e(*model, x, y); }, "was replaced or changed shape", "a parameter replaced");
  rec.metrics["world"] = g->size();
  g->synchronize();
}

}  // namespace

std::vector<harness::TestCase> fsdp_rank_tests(int world) {
  std::vector<harness::TestCase> t;
  std::vector<std::pair<ShardingStrategy, int>> strategies = {{ShardingStrategy::FullShard, 0},
                                                              {ShardingStrategy::ShardGradOp, 0},
                                                              {ShardingStrategy::NoShard, 0}};
  if (world == 4) strategies.push_back({ShardingStrategy::HybridShard, 2});
  for (const ModelSpec& m : {mlp_spec(), gpt_spec()})
    for (auto [st, sg] : strategies)
      for (DType dt : {DType::Float64, DType::Float32}) {
        EquivalenceCase q{m, st, dt, sg};
        t.push_back(fsdp_case(std::string("mpi/equivalence/") + m.name + "/" + dist::sharding_strategy_name(st) + "/" +
                                  core::name(dt),
                              [q](harness::Record& rec) { run_equivalence(q, rec); }));
      }
  for (auto [st, sg] : strategies)
    t.push_back(fsdp_case(std::string("mpi/memory/gpt/") + dist::sharding_strategy_name(st),
                          [st, sg](harness::Record& rec) { run_memory(st, sg, rec); }));
  for (const ModelSpec& m : {mlp_spec(), gpt_spec()})
    for (DType rd : {DType::Float32, DType::BFloat16})
      t.push_back(fsdp_case("mpi/mixed_precision/" + m.name + "/bf16_reduce_" + core::name(rd),
                            [m, rd](harness::Record& rec) { run_mixed_precision(m, rd, rec); }));
  t.push_back(fsdp_case("mpi/activation_checkpointing/gpt", run_checkpointed));
  t.push_back(fsdp_case("mpi/no_sync/mlp", run_no_sync));
  t.push_back(fsdp_case("mpi/unused/small", [](harness::Record& rec) { run_small(false, rec); }));
  t.push_back(fsdp_case("mpi/tied/small", [](harness::Record& rec) { run_small(true, rec); }));
  t.push_back(fsdp_case("mpi/state_dict/round_trip", run_state_dict));
  t.push_back(fsdp_case("mpi/clip_grad_norm/gpt", run_clip));
  t.push_back(fsdp_case("mpi/bad_input/wrap_twice", run_wrap_twice));
  t.push_back(fsdp_case("mpi/bad_input/different_wrapping", run_different_wrapping));
  t.push_back(fsdp_case("mpi/bad_input/parameter_replaced", run_parameter_replaced));
  return t;
}

}  // namespace tb::suites
