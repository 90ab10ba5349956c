// The analytic memory estimator. See estimate.h; the formulas are in docs/distributed.md,
// "FSDP memory estimator", and the comments below name which of them each line computes.
#include "engine/dist/fsdp/estimate.h"

#include <algorithm>
#include <map>

#include "engine/core/error.h"

namespace tb::dist {
namespace {

constexpr const char* kOp = "estimate_memory";

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  TB_CHECK(!__builtin_add_overflow(a, b, &r), kOp, "byte count past int64 (", a, " + ", b, ")");
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  TB_CHECK(!__builtin_mul_overflow(a, b, &r), kOp, "byte count past int64 (", a, " x ", b, ")");
  return r;
}

// One parameter on one rank: its rows (dim 0), the elements per row, and the rows per shard.
struct Rows {
  int64_t rows = 1, row_numel = 1, shard_rows = 1;
  int64_t numel() const { return mul(rows, row_numel); }
  int64_t shard() const { return mul(shard_rows, row_numel); }
};

Rows rows_of(const ParamSpec& p, int64_t s) {
  Rows r;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    TB_CHECK(p.shape[d] >= 0, kOp, "parameter '", p.name, "' has a negative dimension (", p.shape[d], ")");
    if (d == 0) r.rows = p.shape[0];
    else r.row_numel = mul(r.row_numel, p.shape[d]);
  }
  // ceil(d0 / S): the padded rows each rank keeps (not (d0 + S - 1) / S, which overflows near int64).
  r.shard_rows = r.rows / s + (r.rows % s != 0 ? 1 : 0);
  return r;
}

// Bytes per unit (index units.size() = the root) of each kind of tensor.
struct UnitBytes {
  int64_t master = 0;    // parameter shards (DDP: the parameters)
  int64_t gshard = 0;    // gradient shards (DDP: the gradients)
  int64_t opt = 0;       // optimizer state
  int64_t gathered = 0;  // unsharded compute copies
  int64_t ugrad = 0;     // unsharded gradients before their reduction
  int64_t comm = 0;      // the unit's reduce-scatter / all-reduce buffer
  int64_t acts = 0;
};

bool is_fsdp(Strategy s) { return s != Strategy::Ddp; }

}  // namespace

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Ddp: return "ddp";
    case Strategy::FullShard: return "full_shard";
    case Strategy::ShardGradOp: return "shard_grad_op";
    case Strategy::NoShard: return "no_shard";
    case Strategy::HybridShard: return "hybrid_shard";
  }
  return "?";
}

Strategy strategy_from_name(const std::string& s) {
  for (Strategy x :
       {Strategy::Ddp, Strategy::FullShard, Strategy::ShardGradOp, Strategy::NoShard, Strategy::HybridShard})
    if (s == strategy_name(x)) return x;
  TB_CHECK(false, kOp, "unknown strategy '", s, "'; valid: ddp, full_shard, shard_grad_op, no_shard, hybrid_shard");
  return Strategy::Ddp;
}

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::SgdMomentum: return "sgd-momentum";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

OptimizerKind optimizer_from_name(const std::string& s) {
  for (OptimizerKind x : {OptimizerKind::Sgd, OptimizerKind::SgdMomentum, OptimizerKind::Adam, OptimizerKind::AdamW})
    if (s == optimizer_name(x)) return x;
  TB_CHECK(false, kOp, "unknown optimizer '", s, "'; valid: adamw, adam, sgd, sgd-momentum");
  return OptimizerKind::Sgd;
}

int64_t ModelSpec::numel() const {
  int64_t n = 0;
  for (const ParamSpec& p : params) n = add(n, rows_of(p, 1).numel());
  return n;
}

int64_t MemoryBytes::model_state() const { return add(add(parameters, gradients), optimizer_state); }
int64_t MemoryBytes::total() const { return add(add(model_state(), activations), communication); }

int64_t MemoryEstimate::model_state_bytes() const {
  return add(add(parameter_bytes, gradient_bytes), optimizer_state_bytes);
}

int64_t MemoryBytes::of(memory::Tag t) const {
  switch (t) {
    case memory::Tag::Parameter: return parameters;
    case memory::Tag::Gradient: return gradients;
    case memory::Tag::OptimizerState: return optimizer_state;
    case memory::Tag::Activation: return activations;
    case memory::Tag::Communication: return communication;
    case memory::Tag::Other: return 0;
  }
  return 0;
}

ModelSpec model_from_parameter_count(int64_t n, int64_t units, int64_t activation_bytes) {
  TB_CHECK(n >= 1, kOp, "the parameter count must be positive (got ", n, ")");
  TB_CHECK(units >= 0 && units <= n, kOp, "units must be between 0 and the parameter count ", n, " (got ", units, ")");
  TB_CHECK(units <= kMaxUnits, kOp, "at most ", kMaxUnits, " units (got ", units, ")");
  TB_CHECK(activation_bytes >= 0, kOp, "activation bytes must not be negative (got ", activation_bytes, ")");
  ModelSpec m;
  if (units == 0) {
    m.params.push_back({"params", {n}, -1});
    m.root_activation_bytes = activation_bytes;
    return m;
  }
  const int64_t each = n / units;
  for (int64_t u = 0; u < units; ++u) {
    const std::string name = "unit" + std::to_string(u);
    m.params.push_back({name + ".params", {u + 1 == units ? n - each * (units - 1) : each}, int(u)});
    m.units.push_back({name, activation_bytes / units + (u + 1 == units ? activation_bytes % units : 0)});
  }
  return m;
}

ModelSpec mlp_model(int64_t in, int64_t hidden, int64_t out, int64_t batch, DType act_dtype) {
  TB_CHECK(in >= 1 && hidden >= 1 && out >= 1, kOp, "MLP sizes must be positive (got ", in, ", ", hidden, ", ", out,
           ")");
  TB_CHECK(batch >= 0, kOp, "batch must not be negative (got ", batch, ")");
  ModelSpec m;
  const int64_t dims[4] = {in, hidden, hidden, out};
  const int64_t b = int64_t(core::itemsize(act_dtype));
  for (int l = 0; l < 3; ++l) {
    const std::string name = std::to_string(2 * l);  // Sequential indices: Linear, ReLU, Linear, ...
    m.params.push_back({name + ".weight", {dims[l + 1], dims[l]}, l});
    m.params.push_back({name + ".bias", {dims[l + 1]}, l});
    // Linear saves its input (the previous ReLU's output, counted there); ReLU saves its output.
    m.units.push_back({name, l < 2 ? mul(mul(batch, hidden), b) : 0});
  }
  // The logits and cross-entropy's saved log-probabilities (float32).
  m.root_activation_bytes = add(mul(mul(batch, out), b), mul(mul(batch, out), 4));
  return m;
}

ModelSpec gpt_model(const nn::GPTConfig& c, int64_t batch, int64_t seq, DType act_dtype) {
  TB_CHECK(c.vocab >= 1 && c.d_model >= 1 && c.n_layers >= 0 && c.n_heads >= 1 && c.max_seq >= 1, kOp,
           "GPT sizes must be positive (vocab ", c.vocab, ", d_model ", c.d_model, ", layers ", c.n_layers, ", heads ",
           c.n_heads, ", max_seq ", c.max_seq, ")");
  TB_CHECK(c.d_model % c.n_heads == 0, kOp, "d_model ", c.d_model, " is not divisible by the ", c.n_heads, " heads");
  TB_CHECK(batch >= 0 && seq >= 0 && seq <= c.max_seq, kOp, "batch must not be negative and seq must be in 0..max_seq ",
           c.max_seq, " (got batch ", batch, ", seq ", seq, ")");
  TB_CHECK(c.n_layers <= kMaxLayers, kOp, "at most ", kMaxLayers, " layers (got ", c.n_layers, ")");
  const int64_t d = c.d_model, V = c.vocab, H = c.n_heads;
  const int64_t d3 = mul(3, d), d4 = mul(4, d);
  ModelSpec m;
  m.params.push_back({"tok_emb.weight", {V, d}, -1});
  m.params.push_back({"pos_emb.weight", {c.max_seq, d}, -1});
  const int64_t b = int64_t(core::itemsize(act_dtype));
  const int64_t bt = mul(batch, seq);
  // Per block (see Note in docs/distributed.md): x, ln1 out, q, k, v, attention output, y, ln2 out
  // (8 B T d), fc1 out and GELU out (8 B T d), the softmax output (B H T^2), LayerNorm mean and
  // rstd x 2 (4 B T, float32).
  const int64_t block_acts = add(mul(add(mul(mul(bt, d), 16), mul(mul(bt, seq), H)), b), mul(mul(bt, 4), 4));
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    const int u = int(l);
    m.params.push_back({p + "ln1.weight", {d}, u});
    m.params.push_back({p + "ln1.bias", {d}, u});
    m.params.push_back({p + "attn.in_proj_weight", {d3, d}, u});
    m.params.push_back({p + "attn.in_proj_bias", {d3}, u});
    m.params.push_back({p + "attn.out_proj.weight", {d, d}, u});
    m.params.push_back({p + "attn.out_proj.bias", {d}, u});
    m.params.push_back({p + "ln2.weight", {d}, u});
    m.params.push_back({p + "ln2.bias", {d}, u});
    m.params.push_back({p + "mlp.0.weight", {d4, d}, u});
    m.params.push_back({p + "mlp.0.bias", {d4}, u});
    m.params.push_back({p + "mlp.2.weight", {d, d4}, u});
    m.params.push_back({p + "mlp.2.bias", {d}, u});
    m.units.push_back({"blocks." + std::to_string(l), block_acts});
  }
  m.params.push_back({"ln_f.weight", {d}, -1});
  m.params.push_back({"ln_f.bias", {d}, -1});
  m.params.push_back({"head.weight", {V, d}, -1});
  // Root: ln_f's input and output (2 B T d), its statistics (2 B T float32), the logits (B T V)
  // and cross-entropy's float32 log-probabilities (B T V).
  m.root_activation_bytes = add(add(mul(mul(mul(bt, d), 2), b), mul(mul(bt, 2), 4)),
                                add(mul(mul(bt, V), b), mul(mul(bt, V), 4)));
  return m;
}

MemoryEstimate estimate_memory(const MemoryEstimateInput& in) {
  const Strategy st = in.strategy;
  TB_CHECK(in.world >= 1, kOp, "world must be at least 1 (got ", in.world, ")");
  if (st == Strategy::HybridShard) {
    TB_CHECK(in.shard_group >= 1 && in.shard_group <= in.world && in.world % in.shard_group == 0, kOp,
             "HYBRID_SHARD needs a shard group of 1..world ranks that divides the world ", in.world, " (got ",
             in.shard_group, ")");
  } else {
    TB_CHECK(in.shard_group == 0, kOp, "a shard group (", in.shard_group, ") is only for hybrid_shard, not ",
             strategy_name(st));
  }
  for (DType t : {in.param_dtype, in.reduce_dtype})
    TB_CHECK(core::is_floating(t), kOp, "parameter and reduce dtypes must be floating, got ", core::name(t));
  TB_CHECK(in.bucket_cap_mb > 0 && in.first_bucket_cap_mb > 0, kOp, "bucket caps must be positive");

  // S: the ranks one parameter is split over.
  const int64_t S = st == Strategy::FullShard || st == Strategy::ShardGradOp ? in.world
                    : st == Strategy::HybridShard                            ? in.shard_group
                                                                             : 1;
  const int64_t bp = int64_t(core::itemsize(in.param_dtype));
  const int64_t br = int64_t(core::itemsize(in.reduce_dtype));
  // Master dtype: float32 under FSDP; DDP trains the parameters in their own dtype.
  const int64_t bm = is_fsdp(st) ? 4 : bp;
  const bool adam = in.optimizer == OptimizerKind::Adam || in.optimizer == OptimizerKind::AdamW;
  const int64_t k = adam ? (in.amsgrad ? 3 : 2) : in.optimizer == OptimizerKind::SgdMomentum ? 1 : 0;
  // A parameter split over one rank (NO_SHARD, or any strategy at world 1) in float32 computes
  // with the master itself; anything else (or a bf16 compute dtype) makes unsharded copies.
  const bool gathers = is_fsdp(st) && !(S == 1 && in.param_dtype == DType::Float32);
  const bool blocks = in.allocator_blocks;
  auto sz = [&](int64_t bytes) { return blocks ? int64_t(memory::block_size(size_t(bytes))) : bytes; };

  const int64_t n = int64_t(in.model.units.size());
  std::vector<UnitBytes> u(size_t(n + 1));  // u[n]: the root
  std::vector<int64_t> padded(size_t(n + 1), 0);
  MemoryEstimate e;
  e.shard_world = int(S);
  for (const ParamSpec& p : in.model.params) {
    TB_CHECK(p.unit >= -1 && p.unit < n, kOp, "parameter '", p.name, "' names unit ", p.unit, " of ", n);
    UnitBytes& x = u[size_t(p.unit < 0 ? n : p.unit)];
    const Rows r = rows_of(p, S);
    e.numel = add(e.numel, r.numel());
    const int64_t shard = r.shard(), full = r.numel();
    const int64_t pad = mul(shard, S);  // the padded full size: ceil(d0/S) * S rows
    if (is_fsdp(st)) {
      x.master = add(x.master, sz(mul(shard, bm)));
      x.gshard = add(x.gshard, sz(mul(shard, bm)));
      x.opt = add(x.opt, mul(k, sz(mul(shard, bm))));
      if (gathers) x.gathered = add(x.gathered, sz(mul(pad, bp)));
      x.ugrad = add(x.ugrad, sz(mul(full, bp)));
      padded[size_t(p.unit < 0 ? n : p.unit)] = add(padded[size_t(p.unit < 0 ? n : p.unit)], pad);
    } else {
      x.master = add(x.master, sz(mul(full, bm)));
      // With gradient_as_bucket_view the .grad is a view of the bucket (communication).
      const int64_t g = in.gradient_as_bucket_view ? 0 : sz(mul(full, bm));
      x.gshard = add(x.gshard, g);
      x.ugrad = add(x.ugrad, g);  // DDP's gradient is whole from the start: no separate shard
      x.opt = add(x.opt, mul(k, sz(mul(full, bm))));
    }
    if (adam && blocks) x.opt = add(x.opt, sz(4));  // the 0-dim float32 "step"
  }
  // FSDP: one flat buffer per unit for its reduce-scatter (all-reduce under NO_SHARD).
  for (int64_t i = 0; i <= n; ++i)
    if (is_fsdp(st) && padded[size_t(i)] > 0) u[size_t(i)].comm = sz(mul(padded[size_t(i)], br));
  for (int64_t i = 0; i < n; ++i) u[size_t(i)].acts = in.model.units[size_t(i)].activation_bytes;
  u[size_t(n)].acts = in.model.root_activation_bytes;
  for (const UnitBytes& x : u) TB_CHECK(x.acts >= 0, kOp, "activation bytes must not be negative");

  // DDP's buckets: PyTorch's assignment over the parameters in reverse registration order, the
  // first closed at first_bucket_cap_mb, the rest at bucket_cap_mb (engine/dist/ddp/reducer.cpp).
  int64_t buckets = 0;
  if (!is_fsdp(st)) {
    // A cap past int64 bytes (or infinite) is no cap: converting it would be undefined.
    const auto mib = [](double m) { return m * 1024 * 1024 < 0x1p63 ? int64_t(m * 1024 * 1024) : INT64_MAX; };
    int64_t open = 0;
    bool first = true;
    for (auto it = in.model.params.rbegin(); it != in.model.params.rend(); ++it) {
      open = add(open, mul(rows_of(*it, 1).numel(), bp));
      if (open >= (first ? mib(in.first_bucket_cap_mb) : mib(in.bucket_cap_mb))) {
        buckets = add(buckets, sz(open));
        open = 0;
        first = false;
      }
    }
    if (open > 0) buckets = add(buckets, sz(open));
  }

  UnitBytes total;
  for (const UnitBytes& x : u) {
    total.master = add(total.master, x.master);
    total.gshard = add(total.gshard, x.gshard);
    total.opt = add(total.opt, x.opt);
    total.acts = add(total.acts, x.acts);
  }
  e.parameter_bytes = total.master;
  e.gradient_bytes = total.gshard;
  e.optimizer_state_bytes = total.opt;
  e.persistent_communication_bytes = buckets;
  e.activation_bytes = total.acts;

  const UnitBytes& root = u[size_t(n)];
  const bool ov = in.prefetch && is_fsdp(st);
  const bool keep = st == Strategy::ShardGradOp;  // gathered from forward to the end of backward
  auto at = [&](int64_t i) -> const UnitBytes& {
    static const UnitBytes none;
    return i >= 0 && i < n ? u[size_t(i)] : none;
  };
  auto moment = [&](int64_t gathered, int64_t grads, int64_t comm, int64_t acts, bool opt) {
    MemoryBytes b;
    b.parameters = add(total.master, gathered);
    b.gradients = grads;
    b.optimizer_state = opt ? total.opt : 0;
    b.activations = acts;
    b.communication = add(buckets, comm);
    e.gathered_parameter_bytes = std::max(e.gathered_parameter_bytes, gathered);
    e.peak_model_state_bytes = std::max(e.peak_model_state_bytes, b.model_state());
    return b;
  };
  auto keep_max = [](MemoryBytes& phase, const MemoryBytes& b) {
    if (b.total() > phase.total()) phase = b;
  };

  e.after_init = moment(0, 0, 0, 0, false);
  // Forward: unit i runs (the next one prefetched); activations of units <= i and the root held.
  // Running sums over units 0..i keep both passes linear in the units. Every partial sum of
  // activations is at most total.acts, already summed; SHARD_GRAD_OP's gathered units are summed
  // here (checked), and the backward only subtracts from these sums.
  int64_t acts_upto = root.acts, gathered_upto = 0;  // units 0..i (and the root's activations)
  for (int64_t i = 0; i < n; ++i) {
    acts_upto = add(acts_upto, u[size_t(i)].acts);
    if (keep) gathered_upto = add(gathered_upto, u[size_t(i)].gathered);
    const int64_t g = add(add(root.gathered, keep ? gathered_upto : at(i).gathered), ov ? at(i + 1).gathered : 0);
    keep_max(e.forward, moment(g, 0, 0, acts_upto, true));
  }
  keep_max(e.forward, moment(add(root.gathered, gathered_upto), 0, 0, total.acts, true));

  // Backward: the moment unit i's reduction is issued (its unsharded gradient and its reduce
  // buffer live, its gathered parameters not yet freed); with prefetch unit i-1 is gathered and
  // unit i+1's reduce buffer is still in flight. The root's unsharded gradient is counted
  // throughout (its head is produced first, its embeddings last). Under FSDP a unit's unsharded
  // gradient is freed as soon as it is copied into the reduce buffer, and the shard gradients
  // appear only when every reduction has been waited for, at the end of backward
  // (engine/dist/fsdp/README.md, steps 4 and 5); DDP's gradients stay whole.
  const bool fsdp = is_fsdp(st);
  auto unsharded = [&](int64_t i) {  // unit i's gradient (and, DDP-like, unit i+1's in flight)
    const int64_t g = add(add(root.ugrad, at(i).ugrad), ov && !fsdp ? at(i + 1).ugrad : 0);
    if (fsdp) e.unsharded_gradient_bytes = std::max(e.unsharded_gradient_bytes, g);
    return g;
  };
  // DDP: the whole gradients of the units already reduced, units i+1.. (i+2.. with unit i+1's
  // reduction in flight), a running sum from the last unit down.
  const int64_t in_flight = ov ? 1 : 0;
  int64_t gshard_after = 0;
  // Here acts_upto = total.acts and gathered_upto = SHARD_GRAD_OP's units 0..n-1 (0 otherwise).
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t g = add(add(root.gathered, keep ? gathered_upto : at(i).gathered),
                          ov && !keep ? at(i - 1).gathered : 0);
    const int64_t grads = add(unsharded(i), fsdp ? 0 : gshard_after);
    const int64_t comm = add(at(i).comm, ov ? at(i + 1).comm : 0);
    keep_max(e.backward, moment(g, grads, comm, acts_upto, true));
    // Unit i-1 next: units 0..i-1, and the gradients of units i+in_flight..
    acts_upto -= u[size_t(i)].acts;
    if (keep) gathered_upto -= u[size_t(i)].gathered;
    if (!fsdp) gshard_after = add(gshard_after, at(i + in_flight).gshard);
  }
  // The root's reduction, after its embeddings' backward: activations are gone, unit 0's
  // reduction may still be in flight.
  {
    const int64_t unsharded_now = add(root.ugrad, ov && !fsdp ? at(0).ugrad : 0);
    if (fsdp) e.unsharded_gradient_bytes = std::max(e.unsharded_gradient_bytes, unsharded_now);
    // gshard_after: units in_flight..n-1, as the loop left it.
    const int64_t grads = add(unsharded_now, fsdp ? 0 : gshard_after);
    keep_max(e.backward, moment(root.gathered, grads, add(root.comm, ov ? at(0).comm : 0), 0, true));
  }
  // FSDP, the end of backward: every reduction waited for, the shard gradients written while the
  // root is still gathered.
  if (fsdp) keep_max(e.backward, moment(root.gathered, total.gshard, 0, 0, true));
  e.optimizer_step = moment(0, total.gshard, 0, 0, true);
  for (auto [name, p] : {std::pair<const char*, const MemoryBytes*>{"after_init", &e.after_init},
                         {"forward", &e.forward},
                         {"backward", &e.backward},
                         {"optimizer_step", &e.optimizer_step}})
    if (e.peak_phase.empty() || p->total() > e.peak.total()) {
      e.peak = *p;
      e.peak_phase = name;
    }
  return e;
}

}  // namespace tb::dist
