#include "engine/dist/fsdp/fsdp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd/engine.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/autograd/variable.h"
#include "engine/dist/call_site.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/ddp/reducer.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

namespace tb::dist {

// Note [Per-parameter shards]
// FSDP1 flattens a unit's parameters into one FlatParameter and shards that; FSDP2 shards each
// parameter along dim 0. We follow FSDP2: a shard is rows of the parameter, so the optimizer
// state, the sharded state dict and a checkpoint's chunks are plain row ranges of the original
// tensors (resharding to another world size is a row-range plan, no flat-index arithmetic), and a
// rank's shard of an (out, in) weight keeps its meaning. The price is a copy: one all-gather per
// unit lands as rank-major chunks that are copied out into each parameter (and gradients copied
// in before the reduce-scatter), as FSDP2 does; it is a memory pass over the unit, small beside
// the unit's matrix products. A parameter of d0 rows is padded to ceil(d0 / W) * W rows; rank r
// holds rows [r * c, (r + 1) * c), c = ceil(d0 / W), the padding rows are zero and stay zero.
//
// Note [The layers keep their tensors]
// A layer computes with its own handle (Linear::weight); FSDP keeps that handle (P) and only
// swaps what it holds: while a unit is sharded, P's storage is freed (Storage::reallocate(0)) and
// its sizes are {0}; gathering reallocates the same Storage object and restores the shape, so the
// autograd graph's saved views of P see the gathered values again in backward. P is a leaf that
// requires grad: backward accumulates the unit's whole gradient into P.grad, whose AccumulateGrad
// post-hook tells the unit; the master shard S (float32, registered on the module in P's place)
// gets the reduced rows as S.grad.

namespace {

constexpr const char* kOp = "fully_shard";

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Shard and replica groups of HybridShard, made once per (group, shard size): every split is a
// collective, and every unit of a model shares them.
std::shared_ptr<ProcessGroup> cached_split(const std::shared_ptr<ProcessGroup>& g, int group_size, bool shard) {
  static std::mutex mu;
  static std::map<std::tuple<ProcessGroup*, int, bool>, std::weak_ptr<ProcessGroup>> cache;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(g.get(), group_size, shard);
  if (auto it = cache.find(key); it != cache.end())
    if (auto sp = it->second.lock()) return sp;
  auto made = g->split(shard ? g->rank() / group_size : g->rank() % group_size);
  cache[key] = made;
  return made;
}

}  // namespace

const char* sharding_strategy_name(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::FullShard: return "full_shard";
    case ShardingStrategy::ShardGradOp: return "shard_grad_op";
    case ShardingStrategy::NoShard: return "no_shard";
    case ShardingStrategy::HybridShard: return "hybrid_shard";
  }
  return "?";
}

ShardingStrategy parse_sharding_strategy(const std::string& s) {
  for (auto st : {ShardingStrategy::FullShard, ShardingStrategy::ShardGradOp, ShardingStrategy::NoShard,
                  ShardingStrategy::HybridShard})
    if (s == sharding_strategy_name(st)) return st;
  throw core::Error(kOp, "unknown sharding strategy '" + s +
                             "' (expected full_shard, shard_grad_op, no_shard or hybrid_shard)");
}

struct FSDPRoot;

struct FSDPParam {
  std::string name;  // dotted, relative to the unit's module
  nn::Module* owner = nullptr;
  std::string local_name;                                 // its name on `owner`
  std::vector<std::pair<nn::Module*, std::string>> also;  // other modules it is tied to
  Tensor full;   // P: the layer's handle (Note [The layers keep their tensors])
  Tensor shard;  // S: float32 master rows, registered on `owner`
  Shape shape;   // P's whole shape
  int64_t rows = 1, rest = 1, rows_per_shard = 1, offset = 0;  // offset: in the unit's chunk
  std::shared_ptr<autograd::Node> accumulator;
  bool ready = false, got_grad = false;
  int64_t shard_numel() const { return rows_per_shard * rest; }
  int64_t valid_rows(int r) const { return std::clamp<int64_t>(rows - int64_t(r) * rows_per_shard, 0, rows_per_shard); }
};

struct FSDPUnit : std::enable_shared_from_this<FSDPUnit> {
  nn::Module* module = nullptr;
  FSDPOptions options;
  std::shared_ptr<ProcessGroup> group;            // the world of this model
  std::shared_ptr<ProcessGroup> shard_group;      // null when shard_size == 1
  std::shared_ptr<ProcessGroup> replicate_group;  // null when replicas == 1
  int shard_size = 1, shard_rank = 0, replicas = 1;
  DType param_dtype = DType::Float32, reduce_dtype = DType::Float32;
  std::vector<FSDPParam> params;
  int64_t chunk = 0;   // elements of this rank's shards, together
  Tensor flat;         // float32 master rows of every parameter (the shards are views of it)
  bool alias = false;  // NoShard in float32: P shares S's storage, nothing is ever gathered
  bool has_parent = false;
  std::shared_ptr<FSDPRoot> root;  // set at the first forward (lazy init)
  bool is_root = false;

  // Gathering. P's version moves when its values do (so autograd's saved-tensor check and
  // autocast's caches see an optimizer step or a load): flat's version when the gather in flight
  // started, and the one P's values came from (none before the first gather). A re-gather of the
  // same values, FULL_SHARD's before backward, leaves what was saved from P valid.
  uint64_t gather_version = 0, full_version = UINT64_MAX;
  bool gathered = false;
  WorkPtr gather_work;
  Tensor gather_in, gather_out;
  // Reducing.
  bool reduce_launched = false, resharded_after_backward = false;
  bool replicas_reduced = false;  // NoShard: the all-reduce was issued with the launch
  WorkPtr reduce_work;
  Tensor reduce_in, reduce_out;
  bool requires_sync = true;
  // Call-site labels of its collectives (call_site.h), set at lazy init from its module's name:
  // "fsdp/blocks.0 all_gather", "... reduce_scatter", "... all_reduce".
  std::string label_gather, label_reduce, label_replicas;

  std::vector<nn::RemovableHandle> hooks;

  void start_gather();
  void finish_gather();
  void unshard();
  void reshard();
  void launch_reduce();
  void finish_reduce(const std::vector<bool>& used_anywhere, size_t first);
  bool all_ready() const {
    for (const FSDPParam& p : params)
      if (!p.ready) return false;
    return true;
  }
};

// The state a root shares with every unit below it: the order units ran in, the backward's
// bookkeeping and the step's counters.
struct FSDPRoot {
  std::vector<FSDPUnit*> units;          // pre-order of the module tree, the root first
  std::vector<FSDPUnit*> forward_order;  // this iteration's
  std::vector<FSDPUnit*> last_forward_order;
  std::vector<FSDPUnit*> reduce_order;  // reverse forward order, fixed at the first backward hook
  size_t next_reduce = 0;
  bool backward_armed = false, finalize_queued = false;
  FSDPStats stats;
  std::shared_ptr<ProcessGroup> group;
  void count(ProcessGroup& g, const WorkPtr& w, int64_t bytes, int64_t FSDPStats::*counter) {
    stats.*counter += 1;
    stats.bytes += bytes;
    if (&g == group.get()) {
      if (stats.first_seq == 0) stats.first_seq = w->seq();
      stats.last_seq = w->seq();
    }
  }
  void wait(const WorkPtr& w) {
    const auto t0 = std::chrono::steady_clock::now();
    w->wait();
    stats.comm_wait_s += since(t0);
  }
  void reset_iteration();
  void on_grad_ready();
  void launch_ready_units();
  void finalize();
};

namespace {

std::mutex registry_mu;
std::unordered_map<const nn::Module*, std::weak_ptr<FSDPUnit>> registry;

std::shared_ptr<FSDPUnit> unit_of(const nn::Module* m) {
  std::lock_guard lock(registry_mu);
  auto it = registry.find(m);
  if (it == registry.end()) return nullptr;
  auto u = it->second.lock();
  if (!u) registry.erase(it);
  return u;
}

// The tensor's sizes as if contiguous, restored when a unit gathers.
void set_shape(const Tensor& t, const Shape& shape, DType dtype) {
  TensorImpl* impl = t.impl();
  impl->sizes = shape;
  impl->strides = core::contiguous_strides(shape);
  impl->offset = 0;
  impl->dtype = dtype;
}

// x.to(dtype) that never aliases x (a fresh contiguous buffer).
Tensor converted(const Tensor& x, DType dtype) {
  autograd::NoGradGuard ng;
  Tensor c = x.to(dtype);
  return c.is_same(x) || c.shares_storage(x) ? x.clone() : c.contiguous();
}

}  // namespace

// ---------------------------------------------------------------- gathering

void FSDPUnit::start_gather() {
  if (alias || gathered || gather_work || params.empty()) return;
  autograd::NoGradGuard ng;
  memory::TagGuard tag(memory::Tag::Communication);
  memory::OpScope op("fsdp.all_gather");  // names its buffers in OOM reports
  gather_version = flat.version();
  gather_in = param_dtype == DType::Float32 ? flat : converted(flat, param_dtype);
  if (shard_size == 1) return;  // nothing to exchange: finish_gather copies out of gather_in
  gather_out = empty({int64_t(shard_size) * chunk}, param_dtype);
  CallSite site{std::string_view(label_gather)};
  gather_work = shard_group->all_gather(gather_out, gather_in);
  root->count(*shard_group, gather_work, gather_out.numel() * int64_t(gather_out.itemsize()), &FSDPStats::all_gathers);
}

void FSDPUnit::finish_gather() {
  if (gather_work) root->wait(gather_work);
  const Tensor& src = shard_size == 1 ? gather_in : gather_out;
  const size_t isz = core::itemsize(param_dtype);
  const auto* base = static_cast<const char*>(src.data());
  const bool moved = gather_version != full_version;
  full_version = gather_version;
  for (FSDPParam& p : params) {
    if (moved) p.full.bump_version();
    {
      memory::TagGuard tag(memory::Tag::Parameter);
      p.full.storage()->reallocate(size_t(p.rows * p.rest) * isz);
    }
    set_shape(p.full, p.shape, param_dtype);
    auto* dst = static_cast<char*>(p.full.data());
    for (int r = 0; r < shard_size; ++r) {
      const int64_t n = p.valid_rows(r) * p.rest;
      if (n > 0)
        std::memcpy(dst + size_t(int64_t(r) * p.rows_per_shard * p.rest) * isz,
                    base + size_t(int64_t(r) * chunk + p.offset) * isz, size_t(n) * isz);
    }
  }
  gather_work.reset();
  gather_in = Tensor();
  gather_out = Tensor();
  gathered = true;
}

void FSDPUnit::unshard() {
  if (alias || gathered) return;
  if (params.empty()) {  // a root whose parameters all sit in units below
    gathered = true;
    return;
  }
  start_gather();
  finish_gather();
}

void FSDPUnit::reshard() {
  if (alias) return;
  if (gather_work) {  // a prefetch nobody used: it must still finish before its buffers go
    root->wait(gather_work);
    gather_work.reset();
    gather_in = gather_out = Tensor();
  }
  if (!gathered) return;
  for (FSDPParam& p : params) {
    p.full.storage()->reallocate(0);
    set_shape(p.full, {0}, param_dtype);
  }
  gathered = false;
}

// ---------------------------------------------------------------- reducing

// Note [FSDP gradient reduction]
// When every parameter of a unit has its gradient (its AccumulateGrad post-hooks), the unit's
// whole gradients are copied, divided by the data-parallel world (Note [Divide before the sum] in
// ddp/reducer.cpp: the same division as DDP, so where the backend sums in the same order the
// result equals DDP's bit for bit), into one rank-major buffer in reduce_dtype, and
// reduce-scattered (sum) over the shard group on the group's worker while backward goes on; HybridShard then all-reduces the
// result across the replicas at the end of backward, NoShard only all-reduces (issued at the
// launch: its replica group is the world group itself). Units launch strictly in reverse forward
// order, the same on every rank. At the end of backward (a queued callback) the units whose
// parameters did not all get a gradient launch with zeros in their place, every launch is waited
// for, and which parameters got a gradient on any rank is agreed by one all-reduce: a parameter
// no rank used keeps .grad as it was (None stays None, as one process would leave it).
void FSDPUnit::launch_reduce() {
  reduce_launched = true;
  if (params.empty()) return;
  autograd::NoGradGuard ng;
  if (!requires_sync) return;
  memory::OpScope op("fsdp.reduce_scatter");  // names its buffers in OOM reports
  {
    memory::TagGuard tag(memory::Tag::Communication);
    // Not zeros(): every element is written below (the gradient, or zeros in the padding rows
    // and for a parameter without a gradient), which saves a pass over the whole buffer.
    reduce_in = empty({int64_t(shard_size) * chunk}, reduce_dtype);
  }
  const int world = shard_size * replicas;
  const size_t isz = core::itemsize(reduce_dtype);
  auto* base = static_cast<char*>(reduce_in.data());
  for (FSDPParam& p : params) {
    Tensor g = p.full.grad();
    Tensor src;
    if (g.defined()) {
      p.got_grad = true;
      src = g.dtype() == reduce_dtype && g.is_contiguous() ? g : converted(g, reduce_dtype);
    }
    for (int r = 0; r < shard_size; ++r) {
      char* seg = base + size_t(int64_t(r) * chunk + p.offset) * isz;
      const int64_t n = src.defined() ? p.valid_rows(r) * p.rest : 0;
      if (n < p.shard_numel()) std::memset(seg + size_t(n) * isz, 0, size_t(p.shard_numel() - n) * isz);
      if (n <= 0) continue;
      Tensor dst = from_blob(seg, {n}, {1}, reduce_dtype);
      Tensor part = src.view({p.rows * p.rest}).narrow(0, int64_t(r) * p.rows_per_shard * p.rest, n);
      divide_into(dst, part, world, kOp);
    }
    if (!g.defined()) continue;
    p.full.set_grad(Tensor());  // reduced: only the shard's gradient is kept
  }
  if (shard_size > 1) {
    memory::TagGuard tag(memory::Tag::Communication);
    reduce_out = empty({chunk}, reduce_dtype);
    CallSite site{std::string_view(label_reduce)};
    reduce_work = shard_group->reduce_scatter(reduce_out, reduce_in, ReduceOp::Sum);
    root->count(*shard_group, reduce_work, reduce_in.numel() * int64_t(isz), &FSDPStats::reduce_scatters);
  } else {
    reduce_out = reduce_in;
    // NoShard: the replicas' all-reduce can go now, on the world group itself (so it stays in
    // order with every other call of that group and overlaps the rest of backward).
    if (replicas > 1 && replicate_group.get() == group.get()) {
      CallSite site{std::string_view(label_replicas)};
      reduce_work = group->all_reduce(reduce_out, ReduceOp::Sum);
      root->count(*group, reduce_work, reduce_out.numel() * int64_t(isz), &FSDPStats::all_reduces);
      replicas_reduced = true;
    }
  }
}

void FSDPUnit::finish_reduce(const std::vector<bool>& used_anywhere, size_t first) {
  if (!requires_sync || params.empty()) return;
  autograd::NoGradGuard ng;
  if (reduce_work) root->wait(reduce_work);  // the replicas' all-reduce (finalize issued it)
  const DType master = flat.dtype();
  Tensor out = reduce_out.dtype() == master ? reduce_out : converted(reduce_out, master);
  // A shard without a gradient takes a view of `out` as its .grad (no copy: the buffer is this
  // step's own, and stays alive as long as one of its views does), tagged as gradient memory.
  if (out.storage()) out.storage()->set_tag(memory::Tag::Gradient);
  for (size_t i = 0; i < params.size(); ++i) {
    FSDPParam& p = params[i];
    if (!used_anywhere[first + i]) continue;
    Tensor g = out.narrow(0, p.offset, p.shard_numel()).view(p.shard.sizes());
    Tensor old = p.shard.grad();
    if (old.defined()) {
      tb::add_(old, g);
    } else {
      p.shard.set_grad(g);
    }
  }
  reduce_work.reset();
  reduce_in = reduce_out = Tensor();
}

void FSDPRoot::reset_iteration() {
  for (FSDPUnit* u : units) {
    u->reduce_launched = false;
    u->replicas_reduced = false;
    u->resharded_after_backward = false;
    for (FSDPParam& p : u->params) p.ready = p.got_grad = false;
  }
  reduce_order.clear();
  next_reduce = 0;
  backward_armed = false;
  finalize_queued = false;
}

void FSDPRoot::launch_ready_units() {
  while (next_reduce < reduce_order.size() && reduce_order[next_reduce]->all_ready()) {
    FSDPUnit* u = reduce_order[next_reduce++];
    u->launch_reduce();
    // The unit's backward is over: its gathered parameters go (all strategies; the next forward
    // gathers the stepped shards).
    if (!u->is_root) {
      u->reshard();
      u->resharded_after_backward = true;
    }
  }
}

void FSDPRoot::on_grad_ready() {
  if (!finalize_queued) {
    finalize_queued = true;
    // Weak: a model destroyed before its backward ends must not be touched.
    std::weak_ptr<FSDPUnit> weak = units.front()->weak_from_this();
    autograd::queue_callback([weak] {
      if (auto u = weak.lock()) u->root->finalize();
    });
  }
  launch_ready_units();
}

void FSDPRoot::finalize() {
  // Units not yet launched (a parameter without a gradient on this rank) launch now, in order.
  for (; next_reduce < reduce_order.size(); ++next_reduce) {
    FSDPUnit* u = reduce_order[next_reduce];
    for (FSDPParam& p : u->params) p.ready = true;
    u->launch_reduce();
  }
  // Every reduce-scatter ends before a collective on another group starts (the world's flags
  // below, the replicas' all-reduces): with MPI serialised, a rank blocked in one group's call
  // while its peer waits in another's would deadlock.
  for (FSDPUnit* u : units)
    if (u->reduce_work) {
      wait(u->reduce_work);
      u->reduce_work.reset();
    }
  bool sync = false;
  for (FSDPUnit* u : units) sync = sync || (u->requires_sync && !u->params.empty());
  // Which parameters got a gradient on any rank (Note [FSDP gradient reduction]).
  std::vector<size_t> first(units.size());
  size_t n = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    first[i] = n;
    n += units[i]->params.size();
  }
  std::vector<bool> used(n, false);
  if (sync) {
    autograd::NoGradGuard ng;
    Tensor flags = zeros({int64_t(std::max<size_t>(n, 1))}, DType::Float32);
    float* f = flags.data_ptr<float>();
    for (size_t i = 0; i < units.size(); ++i)
      for (size_t j = 0; j < units[i]->params.size(); ++j) f[first[i] + j] = units[i]->params[j].got_grad ? 1.f : 0.f;
    if (group->size() > 1) {
      CallSite site("fsdp/used parameter flags");
      WorkPtr w = group->all_reduce(flags, ReduceOp::Max);
      count(*group, w, flags.numel() * 4, &FSDPStats::all_reduces);
      // Waiting here also orders it after the reduce-scatters issued before it on every rank.
      wait(w);
    }
    for (size_t k = 0; k < n; ++k) used[k] = f[k] > 0;
  }
  // HybridShard: every unit's replica all-reduce is issued before any is waited for, so the
  // group's worker runs them back to back (all on the one replica group: the same order on every
  // rank).
  for (FSDPUnit* u : units)
    if (u->requires_sync && !u->params.empty() && u->replicas > 1 && !u->replicas_reduced) {
      autograd::NoGradGuard ng;
      CallSite site{std::string_view(u->label_replicas)};
      u->reduce_work = u->replicate_group->all_reduce(u->reduce_out, ReduceOp::Sum);
      count(*u->replicate_group, u->reduce_work, u->reduce_out.numel() * int64_t(u->reduce_out.itemsize()),
            &FSDPStats::all_reduces);
      u->replicas_reduced = true;
    }
  for (size_t i = 0; i < units.size(); ++i) units[i]->finish_reduce(used, first[i]);
  for (FSDPUnit* u : units) u->reshard();
  const auto order = forward_order;
  reset_iteration();
  last_forward_order = order;
}

// ---------------------------------------------------------------- forward and backward hooks

namespace {

void lazy_init(const std::shared_ptr<FSDPUnit>& top) {
  auto root = std::make_shared<FSDPRoot>();
  root->group = top->group;
  for (auto& [name, m] : top->module->named_modules())
    if (auto u = unit_of(m)) {
      TB_CHECK(u->group == top->group, kOp, "the unit at '", name,
               "' was sharded over a different process group than its root; one model, one group");
      u->root = root;
      u->is_root = u.get() == top.get();
      const std::string where = "fsdp/" + (name.empty() ? std::string("root") : name);
      u->label_gather = where + " all_gather";
      u->label_reduce = where + " reduce_scatter";
      u->label_replicas = where + " all_reduce";
      root->units.push_back(u.get());
    }
  // Every rank must have wrapped the same modules with the same parameters: compare a
  // fingerprint (a rank that differs would otherwise hang a collective or corrupt the shards).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
  };
  std::string desc;
  for (FSDPUnit* u : root->units) {
    mix(sharding_strategy_name(u->options.strategy));
    for (const FSDPParam& p : u->params) mix(p.name + core::to_string(p.shape));
    mix("|");
  }
  if (top->group->size() > 1) {
    autograd::NoGradGuard ng;
    Tensor mine = from_vector_of<int64_t>({int64_t(h)}, {1});
    Tensor all = zeros({top->group->size()}, DType::Int64);
    CallSite site("fsdp/lazy init check");
    top->group->all_gather(all, mine)->wait();
    const int64_t* a = all.data_ptr<int64_t>();
    std::string differ;
    for (int r = 0; r < top->group->size(); ++r)
      if (a[r] != a[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    TB_CHECK(differ.empty(), kOp, "ranks ", differ,
             " wrapped the model differently from rank 0 (other modules made units, other parameters or "
             "strategies); every rank must call fully_shard on the same modules with the same options");
  }
}

void check_shards_intact(FSDPUnit& u) {
  for (const FSDPParam& p : u.params) {
    nn::Module* owner = p.owner;
    bool same = false;
    for (auto& [n, t] : owner->named_parameters(false))
      if (n == p.local_name) same = t.is_same(p.shard);
    TB_CHECK(same && p.shard.sizes() == Shape([&] {
                       Shape s = p.shape;
                       if (s.empty()) s = {1};
                       s[0] = p.rows_per_shard;
                       return s;
                     }()),
             kOp, "parameter '", p.name, "' was replaced or changed shape after fully_shard (now ",
             core::to_string(p.shard.sizes()), "); change parameters before wrapping, or wrap again");
  }
}

std::optional<nn::TensorList> pre_forward(const std::shared_ptr<FSDPUnit>& u, const nn::TensorList& inputs) {
  if (!u->has_parent) {
    if (!u->root) lazy_init(u);
    FSDPRoot& r = *u->root;
    if (r.backward_armed) {  // the previous forward was never backpropagated: start over
      for (FSDPUnit* x : r.units) x->reshard();
      r.reset_iteration();
    }
    if (!r.forward_order.empty()) r.last_forward_order = r.forward_order;
    r.forward_order.clear();
    r.stats = FSDPStats{};
  }
  TB_CHECK(u->root != nullptr, kOp, "a unit's forward ran outside its root's forward (call the root module)");
  FSDPRoot& r = *u->root;
  check_shards_intact(*u);
  u->unshard();
  r.forward_order.push_back(u.get());
  if (u->options.forward_prefetch) {
    const auto& order = r.last_forward_order.empty() ? r.units : r.last_forward_order;
    auto it = std::find(order.begin(), order.end(), u.get());
    if (it != order.end() && it + 1 != order.end()) (*(it + 1))->start_gather();
  }
  if (u->options.param_dtype && u->options.cast_forward_inputs) {
    nn::TensorList cast = inputs;
    bool changed = false;
    for (Tensor& t : cast)
      if (t.defined() && core::is_floating(t.dtype()) && t.dtype() != u->param_dtype) {
        t = t.to(u->param_dtype);  // differentiable: the input's gradient flows back in its own dtype
        changed = true;
      }
    if (changed) return cast;
  }
  return std::nullopt;
}

void pre_backward(const std::shared_ptr<FSDPUnit>& u) {
  FSDPRoot& r = *u->root;
  if (!r.backward_armed) {
    r.backward_armed = true;
    r.reduce_order.assign(r.forward_order.rbegin(), r.forward_order.rend());
    // Units that did not run in this forward still reduce (zeros), last.
    for (FSDPUnit* x : r.units)
      if (std::find(r.reduce_order.begin(), r.reduce_order.end(), x) == r.reduce_order.end())
        r.reduce_order.push_back(x);
    r.on_grad_ready();  // queues the end-of-backward callback
  }
  u->unshard();
  if (u->options.backward_prefetch) {
    auto it = std::find(r.reduce_order.begin(), r.reduce_order.end(), u.get());
    // The next unit whose backward comes (skipping units already reduced).
    if (it != r.reduce_order.end())
      for (++it; it != r.reduce_order.end(); ++it)
        if (!(*it)->reduce_launched) {
          (*it)->start_gather();
          break;
        }
  }
}

std::optional<Tensor> post_forward(const std::shared_ptr<FSDPUnit>& u, const Tensor& output) {
  Tensor out = output;
  if (u->options.output_dtype && out.defined() && core::is_floating(out.dtype()) &&
      out.dtype() != *u->options.output_dtype)
    out = out.to(*u->options.output_dtype);
  const bool backward_follows = autograd::grad_mode_enabled() && out.defined() && out.requires_grad();
  if (backward_follows) {
    std::weak_ptr<FSDPUnit> weak = u;
    out.register_hook([weak](const Tensor&) -> Tensor {
      if (auto x = weak.lock()) pre_backward(x);
      return Tensor();
    });
  }
  const bool free_now = !backward_follows || (!u->is_root && u->options.strategy != ShardingStrategy::ShardGradOp &&
                                              u->options.strategy != ShardingStrategy::NoShard);
  if (free_now && !u->is_root) u->reshard();
  if (!backward_follows && u->is_root)
    for (FSDPUnit* x : u->root->units) x->reshard();
  if (out.is_same(output)) return std::nullopt;
  return out;
}

}  // namespace

// ---------------------------------------------------------------- fully_shard

std::shared_ptr<FSDPModule> fully_shard(const std::shared_ptr<nn::Module>& module, std::shared_ptr<ProcessGroup> group,
                                        FSDPOptions options) {
  TB_CHECK(module != nullptr, kOp, "the module is null");
  TB_CHECK(group != nullptr, kOp, "the process group is null");
  TB_CHECK(!unit_of(module.get()), kOp, "this ", module->type_name(),
           " is already sharded (fully_shard was called on it before); wrap each module once");
  if (options.param_dtype)
    TB_CHECK(*options.param_dtype == DType::Float32 || *options.param_dtype == DType::BFloat16 ||
                 *options.param_dtype == DType::Float64,
             kOp, "param_dtype must be float32, bfloat16 or float64, got ", core::name(*options.param_dtype));
  auto u = std::make_shared<FSDPUnit>();
  u->module = module.get();
  u->options = options;
  u->group = group;
  const int world = group->size();
  switch (options.strategy) {
    case ShardingStrategy::FullShard:
    case ShardingStrategy::ShardGradOp: u->shard_size = world; break;
    case ShardingStrategy::NoShard: u->shard_size = 1; break;
    case ShardingStrategy::HybridShard: {
      int s = options.shard_group_size;
      if (s == 0) {
        const int local = world_from_env().local_size;
        s = local > 0 && world % local == 0 ? local : world;
      }
      TB_CHECK(s > 0 && world % s == 0, kOp, "HYBRID_SHARD: shard_group_size ", s, " does not divide the world size ",
               world);
      u->shard_size = s;
      break;
    }
  }
  u->replicas = world / u->shard_size;
  if (u->shard_size > 1 && u->replicas > 1) {
    u->shard_group = cached_split(group, u->shard_size, true);
    u->replicate_group = cached_split(group, u->shard_size, false);
  } else if (u->shard_size > 1) {
    u->shard_group = group;
  } else if (u->replicas > 1) {
    u->replicate_group = group;
  }
  u->shard_rank = u->shard_group ? u->shard_group->rank() : 0;

  // The parameters no unit below holds (deduplicated: a tied parameter is sharded once).
  std::unordered_set<const TensorImpl*> taken, taken_full;
  for (auto& [name, m] : module->named_modules()) {
    if (m == module.get()) continue;
    if (auto below = unit_of(m)) {
      below->has_parent = true;
      below->root.reset();  // a unit that ran as a root is one no more
      below->is_root = false;
      for (const FSDPParam& p : below->params) {
        taken.insert(p.shard.impl());
        taken_full.insert(p.full.impl());
      }
    }
  }
  DType master = DType::Float32;
  for (auto& [mname, m] : module->named_modules()) {
    for (auto& [pname, t] : m->named_parameters(false)) {
      const std::string full_name = mname.empty() ? pname : mname + "." + pname;
      TB_CHECK(!taken_full.count(t.impl()), kOp, "parameter '", full_name,
               "' is tied to a parameter of a unit below (its other user is sharded with that unit); "
               "put every user of a tied parameter in one unit (e.g. leave them to the root)");
      if (!t.defined()) continue;
      if (auto it = std::find_if(u->params.begin(), u->params.end(),
                                 [&](const FSDPParam& q) { return q.full.is_same(t); });
          it != u->params.end()) {
        it->also.emplace_back(m, pname);  // tied inside this unit: one shard, registered under both names
        continue;
      }
      if (taken.count(t.impl())) continue;
      taken.insert(t.impl());
      TB_CHECK(core::is_floating(t.dtype()) && t.is_leaf(), kOp, "parameter '", full_name,
               "' must be a floating leaf tensor, got ", core::name(t.dtype()));
      TB_CHECK(t.is_contiguous(), kOp, "parameter '", full_name, "' is not contiguous");
      FSDPParam p;
      p.name = full_name;
      p.owner = m;
      p.local_name = pname;
      p.full = t;
      p.shape = t.sizes();
      p.rows = t.dim() == 0 ? 1 : t.size(0);
      p.rest = p.rows == 0 ? 0 : t.numel() / std::max<int64_t>(p.rows, 1);
      if (t.dim() > 0 && p.rows == 0) p.rest = 1;  // an empty parameter: no rows to shard
      p.rows_per_shard = (p.rows + u->shard_size - 1) / u->shard_size;
      if (t.dtype() == DType::Float64) master = DType::Float64;
      u->params.push_back(std::move(p));
    }
  }
  u->param_dtype = options.param_dtype.value_or(u->params.empty() ? DType::Float32 : u->params[0].full.dtype());
  u->reduce_dtype = options.reduce_dtype.value_or(u->param_dtype);
  TB_CHECK(master == DType::Float32 || !options.param_dtype, kOp,
           "float64 parameters take no param_dtype (mixed precision is for float32 masters)");

  // Rank 0's values everywhere first (sync_module_states), then each rank's rows.
  if (options.sync_module_states && world > 1) {
    TensorList ts;
    for (FSDPParam& p : u->params) ts.push_back(p.full);
    for (auto& [n, b] : module->named_buffers()) ts.push_back(b);
    broadcast_coalesced(*group, ts, 0);
  }
  for (FSDPParam& p : u->params) {
    p.offset = u->chunk;
    u->chunk += p.shard_numel();
  }
  const DType flat_dtype = u->params.empty() ? DType::Float32 : u->params[0].full.dtype();
  for (const FSDPParam& p : u->params)
    TB_CHECK(p.full.dtype() == flat_dtype, kOp, "the parameters of one unit must share a dtype: '", p.name, "' is ",
             core::name(p.full.dtype()), ", '", u->params[0].name, "' ", core::name(flat_dtype));
  if (!u->params.empty()) {
    autograd::NoGradGuard ng;
    {
      memory::TagGuard tag(memory::Tag::Parameter);
      u->flat = zeros({u->chunk}, flat_dtype);
    }
    const size_t isz = core::itemsize(flat_dtype);
    auto* base = static_cast<char*>(u->flat.data());
    for (FSDPParam& p : u->params) {
      const int64_t n = p.valid_rows(u->shard_rank) * p.rest;
      if (n > 0)
        std::memcpy(base + size_t(p.offset) * isz,
                    static_cast<const char*>(p.full.data()) +
                        size_t(int64_t(u->shard_rank) * p.rows_per_shard * p.rest) * isz,
                    size_t(n) * isz);
      Shape s = p.shape;
      if (s.empty()) s = {1};
      s[0] = p.rows_per_shard;
      p.shard = u->flat.narrow(0, p.offset, p.shard_numel()).view(s).detach();
      p.shard.requires_grad_(true);
    }
  }
  u->alias = u->shard_size == 1 && u->param_dtype == flat_dtype;
  for (FSDPParam& p : u->params) {
    p.accumulator = autograd::edge_of(p.full).fn;
    TB_CHECK(p.accumulator != nullptr, kOp, "parameter '", p.name, "' does not require grad");
    // The gradient the engine hands P's accumulator has P's gathered shape and compute dtype
    // (the accumulator recorded P's metadata when it was made, perhaps before param_dtype).
    if (!p.accumulator->outputs.empty()) p.accumulator->outputs[0] = {p.shape, u->param_dtype};
    p.full.set_grad(Tensor());
    p.owner->set_parameter(p.local_name, p.shard);
    for (auto& [m, n] : p.also) m->set_parameter(n, p.shard);
    if (u->alias) {  // NoShard in the master dtype: the layer computes on the master itself
      p.full.impl()->storage = p.shard.storage();
      p.full.impl()->version = p.shard.impl()->version;  // the optimizer's writes to S are P's
      p.full.impl()->sizes = p.shape;
      p.full.impl()->strides = core::contiguous_strides(p.shape);
      p.full.impl()->offset = p.shard.storage_offset();
    } else {
      // A Storage of its own (empty until gathered): the original one may hold other tensors too.
      p.full.impl()->storage = std::make_shared<Storage>(0, memory::cpu_allocator());
      set_shape(p.full, {0}, u->param_dtype);
    }
  }
  u->gathered = u->alias;

  std::weak_ptr<FSDPUnit> weak = u;
  for (size_t i = 0; i < u->params.size(); ++i)
    u->params[i].accumulator->post_hooks.push_back([weak, i](const autograd::TensorList&, const autograd::TensorList&) {
      auto x = weak.lock();
      if (!x || !x->root || !x->root->backward_armed) return;
      x->params[i].ready = true;
      x->root->on_grad_ready();
    });
  // The hooks own the unit (the module owns its hooks); the unit points back at the module.
  u->hooks.push_back(module->register_forward_pre_hook(
      [u](nn::Module&, const nn::TensorList& in) -> std::optional<nn::TensorList> { return pre_forward(u, in); }));
  u->hooks.push_back(module->register_forward_hook(
      [weak](nn::Module&, const nn::TensorList&, const Tensor& out) -> std::optional<Tensor> {
        if (auto x = weak.lock()) return post_forward(x, out);
        return std::nullopt;
      }));
  {
    std::lock_guard lock(registry_mu);
    registry[module.get()] = u;
  }
  return std::make_shared<FSDPModule>(u);
}

std::shared_ptr<FSDPModule> fsdp_unit(const nn::Module& module) {
  auto u = unit_of(&module);
  return u ? std::make_shared<FSDPModule>(u) : nullptr;
}

nn::Module& FSDPModule::module() const { return *unit_->module; }
ShardingStrategy FSDPModule::strategy() const { return unit_->options.strategy; }

void FSDPModule::set_requires_gradient_sync(bool on) {
  for (auto& [n, m] : unit_->module->named_modules())
    if (auto u = unit_of(m)) u->requires_sync = on;
}

void FSDPModule::unshard() {
  if (!unit_->root) {
    TB_CHECK(!unit_->has_parent, kOp, "unshard: run a forward of the root first (this unit is not a root)");
    lazy_init(unit_);
  }
  unit_->unshard();
}
void FSDPModule::reshard() {
  if (unit_->root) unit_->reshard();
}
FSDPStats FSDPModule::stats() const { return unit_->root && unit_->is_root ? unit_->root->stats : FSDPStats{}; }

std::vector<Tensor> FSDPModule::sharded_parameters() const {
  std::vector<Tensor> out;
  for (const FSDPParam& p : unit_->params) out.push_back(p.shard);
  return out;
}

// ---------------------------------------------------------------- wrap policies

WrapPolicy wrap_module_types(std::vector<std::string> types) {
  return [types = std::move(types)](const std::string&, const nn::Module& m) {
    return std::find(types.begin(), types.end(), m.type_name()) != types.end();
  };
}

WrapPolicy wrap_min_params(int64_t min_params) {
  return [min_params](const std::string&, const nn::Module& m) {
    int64_t n = 0;
    for (auto& [name, t] : m.named_parameters()) n += t.numel();
    return n >= min_params;
  };
}

std::shared_ptr<FSDPModule> fully_shard_tree(const std::shared_ptr<nn::Module>& root,
                                             std::shared_ptr<ProcessGroup> group, const WrapPolicy& policy,
                                             FSDPOptions options) {
  // Deepest first: a post-order walk over shared_ptr children. output_dtype applies to the root
  // alone: a unit's output feeds the root's next layer, which computes in param_dtype.
  FSDPOptions inner = options;
  inner.output_dtype.reset();
  std::function<void(const std::string&, const std::shared_ptr<nn::Module>&)> walk =
      [&](const std::string& prefix, const std::shared_ptr<nn::Module>& m) {
        for (auto& [n, c] : m->named_children()) {
          const std::string name = prefix.empty() ? n : prefix + "." + n;
          walk(name, c);
          if (policy(name, *c)) fully_shard(c, group, inner);
        }
      };
  walk("", root);
  return fully_shard(root, group, options);
}

// ---------------------------------------------------------------- state dicts

namespace {

// Every (unit, parameter) of the model under `root`, keyed by the shard's TensorImpl.
std::unordered_map<const TensorImpl*, std::pair<FSDPUnit*, const FSDPParam*>> shard_index(nn::Module& root) {
  std::unordered_map<const TensorImpl*, std::pair<FSDPUnit*, const FSDPParam*>> idx;
  for (auto& [n, m] : root.named_modules())
    if (auto u = unit_of(m))
      for (const FSDPParam& p : u->params) idx[p.shard.impl()] = {u.get(), &p};
  return idx;
}

// The whole float32 (master dtype) tensor of one parameter: its shards gathered over the group.
Tensor gather_whole(FSDPUnit& u, const FSDPParam& p) {
  autograd::NoGradGuard ng;
  Tensor mine = p.shard.detach().contiguous().view({p.shard_numel()});
  Tensor all = mine;
  if (u.shard_size > 1) {
    all = empty({int64_t(u.shard_size) * p.shard_numel()}, mine.dtype());
    u.shard_group->all_gather(all, mine)->wait();
  }
  Tensor whole = all.narrow(0, 0, p.rows * p.rest).clone().view(p.shape);
  return whole;
}

}  // namespace

nn::StateDict full_state_dict(nn::Module& root) {
  const auto idx = shard_index(root);
  nn::StateDict out;
  for (auto& [key, t] : root.state_dict()) {
    auto it = idx.find(t.impl());
    out.insert(key, it == idx.end() ? t.detach().clone() : gather_whole(*it->second.first, *it->second.second));
  }
  return out;
}

void load_full_state_dict(nn::Module& root, const nn::StateDict& state) {
  const auto idx = shard_index(root);
  nn::StateDict plain;  // buffers and unsharded parameters go through Module::load_state_dict
  std::vector<std::string> unexpected;
  const nn::StateDict mine = root.state_dict();
  for (auto& [key, t] : state) {
    const Tensor* cur = mine.find(key);
    if (!cur) {
      unexpected.push_back(key);
      continue;
    }
    auto it = idx.find(cur->impl());
    if (it == idx.end()) {
      plain.insert(key, t);
      continue;
    }
    FSDPUnit& u = *it->second.first;
    const FSDPParam& p = *it->second.second;
    TB_CHECK(t.sizes() == p.shape, "load_full_state_dict", "'", key, "': expected shape ", core::to_string(p.shape),
             ", got ", core::to_string(t.sizes()));
    autograd::NoGradGuard ng;
    Tensor rows = p.shard.view({p.shard_numel()});
    tb::zero_(rows);
    const int64_t n = p.valid_rows(u.shard_rank) * p.rest;
    if (n > 0)
      rows.narrow(0, 0, n).copy_(t.detach()
                                     .contiguous()
                                     .view({p.rows * p.rest})
                                     .narrow(0, int64_t(u.shard_rank) * p.rows_per_shard * p.rest, n));
    plain.insert(key, *cur);  // counted as present
  }
  TB_CHECK(unexpected.empty(), "load_full_state_dict", "unexpected keys: ", [&] {
    std::string s;
    for (auto& k : unexpected) s += (s.empty() ? "" : ", ") + k;
    return s;
  }());
  // Missing keys and buffer values: Module::load_state_dict (shards are loaded onto themselves).
  root.load_state_dict(plain, /*strict=*/true);
  for (auto& [n, m] : root.named_modules())
    if (auto u = unit_of(m)) u->reshard();  // gathered copies are stale now
}

std::vector<std::pair<std::string, ShardedTensor>> sharded_state_dict(nn::Module& root) {
  const auto idx = shard_index(root);
  std::vector<std::pair<std::string, ShardedTensor>> out;
  for (auto& [key, t] : root.state_dict()) {
    ShardedTensor s;
    auto it = idx.find(t.impl());
    if (it == idx.end()) {
      s.local = t.detach();
      s.global_shape = t.sizes();
      s.replicated = true;
    } else {
      FSDPUnit& u = *it->second.first;
      const FSDPParam& p = *it->second.second;
      const int64_t n = p.valid_rows(u.shard_rank);
      s.local = p.shard.detach().narrow(0, 0, n);
      if (p.shape.empty()) s.local = s.local.view({});
      s.global_shape = p.shape;
      s.row_offset = std::min<int64_t>(int64_t(u.shard_rank) * p.rows_per_shard, p.rows);
      s.replicated = u.shard_size == 1;
    }
    out.emplace_back(key, std::move(s));
  }
  return out;
}

// ---------------------------------------------------------------- clipping

Tensor clip_grad_norm_(nn::Module& root, double max_norm, double norm_type) {
  TB_CHECK(norm_type > 0 || std::isinf(norm_type), "clip_grad_norm_", "norm_type must be positive or inf, got ",
           norm_type);
  const bool inf = std::isinf(norm_type);
  // Per shard group: the local sum of |g|^p (or max |g|) over its units' shards.
  // Keyed by shard size, which names the group (the world, or HybridShard's one split): the
  // all-reduces below then run in the same order on every rank.
  std::map<int, std::pair<std::shared_ptr<ProcessGroup>, double>> by_group;
  double local_only = 0;  // units whose shards are whole (NoShard)
  auto fold = [&](double acc, const Tensor& g) {
    Tensor c = converted(g, DType::Float64);
    const double* d = c.data_ptr<double>();
    for (int64_t i = 0; i < c.numel(); ++i) {
      const double a = std::abs(d[i]);
      acc = inf ? std::max(acc, a) : acc + std::pow(a, norm_type);
    }
    return acc;
  };
  std::vector<Tensor> grads;
  for (auto& [n, m] : root.named_modules()) {
    auto u = unit_of(m);
    if (!u) continue;
    for (const FSDPParam& p : u->params) {
      Tensor g = p.shard.grad();
      if (!g.defined()) continue;
      grads.push_back(g);
      if (u->shard_size > 1) {
        auto& e = by_group[u->shard_size];
        e.first = u->shard_group;
        e.second = fold(e.second, g);
      } else {
        local_only = fold(local_only, g);
      }
    }
  }
  double total = local_only;
  for (auto& [k, e] : by_group) {
    autograd::NoGradGuard ng;
    Tensor t = from_vector({e.second}, {1}, DType::Float64);
    e.first->all_reduce(t, inf ? ReduceOp::Max : ReduceOp::Sum)->wait();
    const double v = t.data_ptr<double>()[0];
    total = inf ? std::max(total, v) : total + v;
  }
  const double norm = inf ? total : std::pow(total, 1.0 / norm_type);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    autograd::NoGradGuard ng;
    for (Tensor& g : grads) tb::mul_(g, coef);
  }
  return scalar_tensor(norm, DType::Float32);
}

}  // namespace tb::dist
