// The Reducer: buckets, gradient hooks, in-order bucket launches and the end-of-backward
// finalize. See reducer.h.
#include "engine/dist/ddp/reducer.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>
#include <type_traits>
#include <unordered_set>

#include "engine/core/env.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/dist/call_site.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/placement.h"
#include "engine/dist/process_group.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb::dist {

namespace {

constexpr const char* kOp = "DistributedDataParallel";

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool reducible(DType dt) { return dt == DType::Float32 || dt == DType::Float64 || dt == DType::BFloat16; }

// The ranks of this job on this host, from the launcher's environment; 0 when none says.
int local_ranks_from_env() { return world_from_env().local_size; }

// The cores this process may run on (its affinity mask: a rank bound to one core sees one).
int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Whether `g` is exactly the tensor `slot` (the same memory, sizes and strides).
bool same_view(const Tensor& g, const Tensor& slot) {
  return g.shares_storage(slot) && g.storage_offset() == slot.storage_offset() && g.sizes() == slot.sizes() &&
         g.strides() == slot.strides() && g.dtype() == slot.dtype();
}

}  // namespace

// dst = src / world, elementwise, in one pass over memory (Note [Divide before the sum]). dst is
// a bucket slot (contiguous); src may be dst itself. bfloat16 divides in float and rounds back.
void divide_into(Tensor& dst, const Tensor& src, int world, const char* op) {
  TB_CHECK(src.sizes() == dst.sizes(), op, "a gradient of shape ", core::to_string(src.sizes()),
           " for a parameter of shape ", core::to_string(dst.sizes()));
  const Tensor* from = &src;
  if (src.data() != dst.data() && (!src.is_contiguous() || src.dtype() != dst.dtype())) {
    dst.copy_(src);  // a layout the loop below does not read: copy, then divide in place
    from = &dst;
  }
  if (world == 1 && from->data() == dst.data()) return;
  const int64_t n = dst.numel();
  core::dispatch(dst.dtype(), [&]<typename T>() {
    const T* in = static_cast<const T*>(from->data());
    T* out = static_cast<T*>(dst.data());
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T w = T(world);
      if ((world & (world - 1)) == 0) {  // a power of two: x * (1/w) is x / w exactly, and cheaper
        const T r = T(1) / w;
        for (int64_t i = 0; i < n; ++i) out[i] = in[i] * r;
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = in[i] / w;
      }
    } else if constexpr (std::is_same_v<T, core::BFloat16>) {
      const float w = float(world);
      for (int64_t i = 0; i < n; ++i) out[i] = T(float(in[i]) / w);
    } else {
      throw core::Error(op, std::string("cannot average gradients of dtype ") + core::name(dst.dtype()));
    }
  });
}

double comm_seconds(ProcessGroup& group, uint64_t first_seq, uint64_t last_seq) {
  double s = 0;
  for (const CallRecord& c : group.recorder().entries())
    if (c.state == CallState::Completed && c.seq >= first_seq && c.seq <= last_seq)
      s += seconds_between(c.started, c.ended);
  return s;
}

double hidden_fraction(double comm_wait_s, double comm_busy_s) {
  if (comm_busy_s <= 0) return 0;
  return std::clamp(1.0 - comm_wait_s / comm_busy_s, 0.0, 1.0);
}

// Note [Bucket launch order]
// Every rank must issue the same collectives in the same order, but gradients may become ready
// in a different order on different ranks (and a later bucket may fill before an earlier one).
// So buckets are launched strictly in bucket order: a full bucket waits until every bucket
// before it has been launched, as PyTorch's reducer does (next_bucket_). Buckets are built in
// reverse registration order, which is roughly the order backward produces gradients, so in
// practice each bucket launches as soon as its last gradient arrives.
Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, std::shared_ptr<ProcessGroup> group,
                 const DDPOptions& options)
    : group_(std::move(group)), options_(options) {
  TB_CHECK(group_ != nullptr, kOp, "a process group is required");
  TB_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0, kOp,
           "bucket caps must be positive (bucket_cap_mb ", options_.bucket_cap_mb, ", first_bucket_cap_mb ",
           options_.first_bucket_cap_mb, ")");
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& [name, t] = params[k];
    if (!t.requires_grad()) continue;
    TB_CHECK(reducible(t.dtype()), kOp, "parameter '", name, "' has dtype ", core::name(t.dtype()),
             "; gradients can be all-reduced in float32, float64 or bfloat16");
    TB_CHECK(t.device().type == core::DeviceType::CPU, kOp, "parameter '", name, "' is on ", t.device().str(),
             "; this DDP reduces CPU tensors");
    Param p;
    p.name = name;
    p.index = int64_t(k);
    p.tensor = t;
    params_.push_back(std::move(p));
  }
  TB_CHECK(!params_.empty(), kOp, "the module has no parameter that requires grad");

  // PyTorch's compute_bucket_assignment_by_size: walk the parameters in reverse, one open bucket
  // per dtype; a bucket closes once it holds at least its cap (the first per dtype: the first
  // bucket cap). Buckets are ordered by their first (= latest registered) parameter.
  const auto mib = [](double m) { return int64_t(m * 1024 * 1024); };
  std::map<DType, Bucket> open;
  std::map<DType, int64_t> closed_count;
  std::vector<Bucket> done;
  for (int64_t i = int64_t(params_.size()) - 1; i >= 0; --i) {
    const Tensor& t = params_[size_t(i)].tensor;
    Bucket& b = open[t.dtype()];
    b.dtype = t.dtype();
    b.params.push_back(i);
    b.offsets.push_back(b.numel);
    b.numel += t.numel();
    const int64_t cap = closed_count[t.dtype()] == 0 ? mib(options_.first_bucket_cap_mb) : mib(options_.bucket_cap_mb);
    if (b.numel * int64_t(t.itemsize()) >= cap) {
      done.push_back(std::move(b));
      open.erase(t.dtype());
      ++closed_count[t.dtype()];
    }
  }
  for (auto& [dt, b] : open) done.push_back(std::move(b));
  std::sort(done.begin(), done.end(), [](const Bucket& a, const Bucket& b) { return a.params[0] > b.params[0]; });
  buckets_ = std::move(done);
  memory::TagGuard tag(memory::Tag::Communication);
  const bool info = group_->options().debug != Options::Debug::Off && group_->rank() == 0;
  if (info)
    std::fprintf(stderr, "trainbench: ddp: %zu parameters in %zu buckets (caps %.1f MiB, first %.1f MiB)\n",
                 params_.size(), buckets_.size(), options_.bucket_cap_mb, options_.first_bucket_cap_mb);
  memory::OpScope op("ddp.bucket");  // names the buckets in OOM reports
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    b.flat = zeros({b.numel}, b.dtype);
    for (size_t s = 0; s < b.params.size(); ++s) {
      params_[size_t(b.params[s])].bucket = int64_t(bi);
      params_[size_t(b.params[s])].slot = int64_t(s);
    }
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f", double(b.numel) * double(core::itemsize(b.dtype)) / (1024.0 * 1024.0));
    b.label = "ddp/bucket " + std::to_string(bi) + " (" + std::to_string(b.params.size()) +
              (b.params.size() == 1 ? " param, " : " params, ") + mib + " MiB)";
    if (info) {
      std::string names;
      for (int64_t i : b.params) names += (names.empty() ? "" : ", ") + params_[size_t(i)].name;
      std::fprintf(stderr, "trainbench: ddp: %s %s: %s\n", b.label.c_str(), core::name(b.dtype), names.c_str());
    }
  }
  if (info) std::fflush(stderr);
  if (options_.find_unused_parameters) used_map_ = zeros({int64_t(params_.size())}, DType::Int64);
  local_ranks_ = local_ranks_from_env();
  cores_ = cores_available();
  if (options_.gradient_as_bucket_view) {
    // As PyTorch's initialize_bucket_views: an existing gradient moves into its slot.
    autograd::NoGradGuard no_grad;
    for (Param& p : params_) {
      if (!p.tensor.is_contiguous()) continue;  // keeps its own .grad (copied back in finalize)
      const Tensor g = p.tensor.grad();
      if (!g.defined()) continue;
      Tensor slot = slot_view(p);
      slot.copy_(g);
      p.tensor.set_grad(slot);
    }
  }
  reset_iteration();
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    p.accumulator = autograd::edge_of(p.tensor).fn;
    TB_CHECK(p.accumulator != nullptr, kOp, "parameter '", p.name, "' has no gradient accumulator");
    p.accumulator->post_hooks.push_back([weak, i](const autograd::TensorList&, const autograd::TensorList&) {
      if (auto self = weak.lock()) self->on_grad_ready(int64_t(i));
    });
  }
}

Reducer::~Reducer() {
  offer_slots(false);  // the bare module's later backwards allocate their own gradients
  // No collective may outlive its buffers: wait for whatever a failed backward left in flight.
  for (Bucket& b : buckets_)
    if (b.work) try {
        b.work->wait();
      } catch (...) {
      }
  if (used_map_work_) try {
      used_map_work_->wait();
    } catch (...) {
    }
}

std::vector<std::vector<int64_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<int64_t>> out;
  for (const Bucket& b : buckets_) {
    out.emplace_back();
    for (int64_t i : b.params) out.back().push_back(params_[size_t(i)].index);
  }
  return out;
}

void Reducer::offer_slots(bool on) {
  for (Param& p : params_)
    if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(p.accumulator.get()))
      acc->offer_grad_buffer(on && p.tensor.is_contiguous() ? slot_view(p) : Tensor());
}

void Reducer::reset_iteration() {
  offer_slots(false);
  for (Param& p : params_) {
    p.ready = p.unused = false;
    p.kept_grad = Tensor();
  }
  for (Bucket& b : buckets_) {
    b.pending = int64_t(b.params.size());
    b.work.reset();
  }
  used_map_work_.reset();
  next_bucket_ = 0;
  started_ = false;
  expect_hooks_ = false;
}

// Note [Unused parameters]
// A parameter whose gradient never arrives would leave its bucket unlaunched and, on the ranks
// that did launch it, the all_reduce waiting forever. With find_unused_parameters the graph is
// walked from the forward outputs (prepare_for_backward) and unreached parameters are marked
// ready when the first hook of the backward fires: their slot carries zeros (or the gradient
// accumulated under no_sync). Which parameters got a gradient on ANY rank is then agreed by an
// all_reduce of a per-parameter used map after the buckets; a parameter no rank used keeps its
// .grad untouched (as PyTorch leaves it None), so optimizers skip it exactly as one process would.
// Without the flag, the callback at the end of backward finds parameters that are not ready,
// waits for the buckets already launched and raises naming them; the condition depends only on
// the model's graph, so every rank raises the same error at the same point (a graph that differs
// between ranks needs find_unused_parameters, and is otherwise caught by the watchdog).
void Reducer::prepare_for_backward(const TensorList& outputs) {
  ensure_prior_reduction_finished();  // never drop a launched bucket unwaited
  reset_iteration();
  expect_hooks_ = true;
  // A parameter whose .grad will be its slot may have its gradient computed straight into it
  // (Note [Gradient buffers]): mark_ready then only divides it in place.
  if (options_.gradient_as_bucket_view) offer_slots(true);
  switch (options_.overlap) {  // Note [Overlap needs a spare core]
    case DDPOptions::Overlap::Always: overlap_ = true; break;
    case DDPOptions::Overlap::AtEnd: overlap_ = false; break;
    case DDPOptions::Overlap::Auto:
      // A rank pinned to cores of its own (Note [A core of its own]) shares them with no rank.
      overlap_ = local_ranks_ == 0 || group_->size() == 1 || group_->backend() == "nccl" ||
                 int64_t(pinned_cpus() > 0 ? 1 : local_ranks_) * (num_threads() + 1) <= cores_;
      break;
  }
  if (!options_.find_unused_parameters) return;
  std::unordered_set<autograd::Node*> seen;
  std::vector<autograd::Node*> stack;
  for (const Tensor& o : outputs) {
    autograd::Edge e = autograd::edge_of(o);
    if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    for (const autograd::Edge& e : n->next_edges)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  for (Param& p : params_) p.unused = !seen.count(p.accumulator.get());
}

void Reducer::on_grad_ready(int64_t i) {
  Param& p = params_[size_t(i)];
  p.used = true;
  if (!expect_hooks_) return;  // not armed: gradients accumulate locally (no_sync)
  if (!started_) {
    started_ = true;
    std::weak_ptr<Reducer> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
    for (size_t u = 0; u < params_.size(); ++u)
      if (params_[u].unused) mark_ready(int64_t(u));
  }
  TB_CHECK(!p.ready, kOp, "parameter '", p.name, "' (index ", p.index, ") received a gradient ",
           p.unused
               ? "although it was not reached from the forward outputs passed to prepare_for_backward (a loss term "
                 "that uses the parameter outside the module's forward?)"
               : "twice in one backward (a second backward through the same graph, or a reentrant backward)",
           "; each parameter may be marked ready only once per synced iteration");
  mark_ready(i);
}

// Note [Divide before the sum]
// Each rank divides its gradient by the world size while copying it into the bucket, and the
// buckets are all-reduced with Sum: the average costs no pass of its own (an Avg all-reduce
// divides the whole bucket again after the sum, and the copy back out of the bucket would be a
// third pass). PyTorch's reducer does the same (div_factor before the all-reduce). With a world
// size that is a power of two it is bitwise the same as dividing the sum; otherwise it differs
// by rounding only, and every rank still receives the same bytes.
//
// Note [Gradients as bucket views]
// With DDPOptions::gradient_as_bucket_view, finalize() leaves each (contiguous) parameter's .grad
// a view of its bucket slot, so the averages are never copied back. The next backward then
// either accumulates into that view (zero_grad(set_to_none = false), no_sync) and mark_ready
// only divides it in place, or finds .grad None (set_to_none) or replaced and divides the fresh
// gradient into the slot. With .grad None, a backward formula that can (linear's weight
// gradient) computes the gradient straight into the slot, which prepare_for_backward offers to
// every parameter's accumulator (Note [Gradient buffers] in engine/autograd/node.cpp), and the
// division is again in place: the copy into the bucket disappears. A slot marked ready for an
// unused parameter (Note [Unused parameters]) whose .grad is the view itself is about to be
// overwritten by the all-reduce, so its value is kept aside (kept_grad) and put back if no rank
// used the parameter.
Tensor Reducer::slot_view(const Param& p) const {
  const Bucket& b = buckets_[size_t(p.bucket)];
  return b.flat.narrow(0, b.offsets[size_t(p.slot)], p.tensor.numel()).view(p.tensor.sizes());
}

void Reducer::mark_ready(int64_t i) {
  Param& p = params_[size_t(i)];
  autograd::NoGradGuard no_grad;
  Tensor slot = slot_view(p);
  const Tensor g = p.tensor.grad();
  if (g.defined()) {
    if (p.unused && options_.find_unused_parameters && same_view(g, slot)) p.kept_grad = g.clone();
    divide_into(slot, g, group_->size(), kOp);  // Note [Divide before the sum]
  } else {
    zero_(slot);
  }
  p.ready = true;
  if (--buckets_[size_t(p.bucket)].pending == 0 && overlap_) launch_ready_buckets();
}

// Note [Overlap needs a spare core]
// Issuing a bucket's all-reduce as soon as it fills lets it run on the group's worker while
// backward goes on, which hides it when the worker has a core to itself (or when the transfer is a
// NIC's or a GPU's work). Between ranks on one host a CPU backend's all-reduce is CPU work itself
// (MPI's shared-memory copies and sums, Gloo's loopback TCP): where every core already runs a
// rank's compute threads, the worker only takes turns with backward on the same core, so the copies
// cost as much as before and on top come the context switches, MPI's yield-polling for a peer whose
// worker is descheduled and the worker's polling for its peers (Note [Waiting for the peers]). On
// the 2-core VM (`bench --suite ddp --threads 2`: 2 ranks of 1 thread, MLP 784-1024-1024-10, 7.45
// MB of gradients in 2 buckets) issuing at the end of backward (measured together with
// AccumulateGrad no longer copying hooked gradients, node.cpp) took backward from 9.3-10.1 to
// 8.5-8.7 ms and the collectives' run time from 3.6-4.1 to 1.05-1.2 ms per step, and the step from
// 17.1-19.1 to 16.7-17.5 ms (3 alternating runs each, the VM shared with other jobs). So
// DDPOptions::Overlap::Auto issues buckets during backward only when local ranks x (intra-op
// threads + 1 worker) <= the cores this process may use (a rank pinned to cores of its own counts
// as the only rank on them); otherwise (and with AtEnd) finalize()
// issues them all, in bucket order, and waits on the last one, which runs them back to back on the
// training thread (Note [Collective worker]). The collectives, their order and their bytes are the
// same either way, so the results are too. Unknown ranks per host (no launcher variable), a world
// of 1 and the nccl backend keep PyTorch's overlap. The default stays PyTorch's (Always).
void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_++];
    CallSite site{std::string_view(b.label)};
    b.work = group_->all_reduce(b.flat, ReduceOp::Sum);  // already divided (Note [Divide before the sum])
  }
}

std::string Reducer::unready_parameters() const {
  std::ostringstream idx, names;
  bool first = true;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i].ready) {
      idx << (first ? "" : " ") << params_[i].index;
      names << (first ? "" : ", ") << params_[i].name;
      first = false;
    }
  return "Parameter indices which did not receive grad for rank " + std::to_string(group_->rank()) + ": " + idx.str() +
         "; parameters which did not receive grad for rank " + std::to_string(group_->rank()) + ": " + names.str();
}

void Reducer::abort_iteration() {
  for (Bucket& b : buckets_)
    if (b.work) b.work->wait();
  if (used_map_work_) used_map_work_->wait();
  reset_iteration();
}

void Reducer::ensure_prior_reduction_finished() {
  if (!started_) return;
  const std::string unready = unready_parameters();
  abort_iteration();
  throw core::Error(kOp,
                    "Expected to have finished reduction in the prior iteration before starting a new one. The "
                    "previous synced backward began reducing gradients but did not finish (it raised, or some "
                    "parameters received no gradient); pass find_unused_parameters = true if the module has "
                    "parameters that do not take part in the loss. " +
                        unready);
}

void Reducer::shadow_backward() {
  ensure_prior_reduction_finished();
  reset_iteration();
  for (Bucket& b : buckets_) {
    zero_(b.flat);
    CallSite site{std::string_view(b.label)};
    b.work = group_->all_reduce(b.flat, ReduceOp::Sum);
  }
  if (options_.find_unused_parameters) {
    zero_(used_map_);
    CallSite site("ddp/unused parameter map");
    used_map_work_ = group_->all_reduce(used_map_, ReduceOp::Max);
    used_map_work_->wait();
  }
  for (auto b = buckets_.rbegin(); b != buckets_.rend(); ++b) b->work->wait();
  reset_iteration();
}

void Reducer::finalize() {
  const auto t0 = std::chrono::steady_clock::now();
  launch_ready_buckets();  // all of them unless overlapped (Note [Overlap needs a spare core])
  if (next_bucket_ < buckets_.size()) {
    // Some parameter received no gradient (Note [Unused parameters]).
    const std::string unready = unready_parameters();
    abort_iteration();
    throw core::Error(
        kOp,
        "some parameters received no gradient in this backward, so their buckets cannot be reduced. This error "
        "indicates that your module has parameters that were not used in producing loss. You can enable "
        "unused parameter detection by constructing DistributedDataParallel with DDPOptions::find_unused_parameters "
        "= true, and by making sure all forward outputs participate in calculating the loss (passed to "
        "prepare_for_backward when you call the module's own forward). " +
            unready);
  }
  if (options_.find_unused_parameters) {
    int64_t* u = used_map_.data_ptr<int64_t>();
    for (size_t i = 0; i < params_.size(); ++i) u[i] = params_[i].used ? 1 : 0;
    CallSite site("ddp/unused parameter map");
    used_map_work_ = group_->all_reduce(used_map_, ReduceOp::Max);
  }
  // The last call first: a wait runs the calls still queued up to its own on this thread, so
  // buckets issued here go back to back without a handoff to the worker (Note [Collective worker]).
  if (used_map_work_) used_map_work_->wait();
  for (auto b = buckets_.rbegin(); b != buckets_.rend(); ++b) b->work->wait();
  const auto t1 = std::chrono::steady_clock::now();

  autograd::NoGradGuard no_grad;
  const int64_t* used = options_.find_unused_parameters ? used_map_.data_ptr<int64_t>() : nullptr;
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    Tensor avg = slot_view(p);
    Tensor g = p.tensor.grad();
    if (used && used[i] == 0) {                           // no rank used it: .grad stays as it was
      if (p.kept_grad.defined()) avg.copy_(p.kept_grad);  // .grad is the slot itself
      continue;
    }
    if (options_.gradient_as_bucket_view && p.tensor.is_contiguous()) {
      if (!(g.defined() && same_view(g, avg))) p.tensor.set_grad(avg);  // Note [Gradients as bucket views]
    } else if (g.defined() && g.sizes() == p.tensor.sizes() && g.dtype() == p.tensor.dtype()) {
      g.copy_(avg);
    } else {
      memory::TagGuard tag(memory::Tag::Gradient);
      Tensor fresh = empty_like_preserve(p.tensor, p.tensor.dtype());
      fresh.copy_(avg);
      p.tensor.set_grad(fresh);
    }
  }

  stats_ = DDPStats{};
  stats_.buckets = int64_t(buckets_.size());
  for (const Bucket& b : buckets_) stats_.bytes += b.numel * int64_t(core::itemsize(b.dtype));
  if (used_map_work_) stats_.bytes += used_map_.numel() * 8;
  stats_.comm_wait_s = seconds_between(t0, t1);
  stats_.overlapped = overlap_;
  stats_.first_seq = buckets_.front().work->seq();
  stats_.last_seq = used_map_work_ ? used_map_work_->seq() : buckets_.back().work->seq();
  for (Param& p : params_) p.used = false;
  reset_iteration();
}

}  // namespace tb::dist
