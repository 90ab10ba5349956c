// DistributedDataParallel: data parallelism over a ProcessGroup, after PyTorch's
// torch.nn.parallel.DistributedDataParallel. Every rank holds a full replica of the module; at
// construction rank 0's parameters and buffers are broadcast to all; in each backward the
// gradients are averaged across ranks by the Reducer (reducer.h) in buckets that are all-reduced
// while backward is still running (DDPOptions::overlap can move them to its end), so after backward every rank holds the same averaged .grad and identical
// optimizer steps keep the replicas bit for bit equal.
//
// Use (a module with a single-tensor forward):
//   auto ddp = std::make_shared<dist::DistributedDataParallel>(model, group);
//   Tensor loss = cross_entropy((*ddp)(x), y);   // forward through DDP: it prepares the reduction
//   loss.backward();                             // gradients all-reduced and averaged here
//   opt.step();
// Other forward signatures: call ddp.pre_forward(), the module's own forward, then
// ddp.prepare_for_backward({outputs...}) (what forward() does around module(x)).
// Gradient accumulation: { auto guard = ddp.no_sync(); ... backward ...; } then a synced backward
// all-reduces the accumulated sum.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dist/process_group.h"
#include "engine/nn/module.h"

namespace tb::dist {

using TensorList = std::vector<Tensor>;

struct DDPOptions {
  // Bucket size caps in MiB, as PyTorch's bucket_cap_mb (25) and its first bucket
  // (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, 1 MiB): the first bucket is small so the
  // first all-reduce starts early in backward.
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
  // Walk the autograd graph from the forward outputs and treat parameters it does not reach as
  // ready (their gradient contributes zero). Without it, a parameter that gets no gradient in a
  // synced backward is an error at the end of that backward (never a hang).
  bool find_unused_parameters = false;
  // Broadcast rank 0's buffers (e.g. running statistics) before each synced forward.
  bool broadcast_buffers = true;
  // PyTorch's gradient_as_bucket_view: after a synced backward each parameter's .grad is a view
  // into its bucket's buffer instead of a copy of it, which saves copying the averages back and
  // a gradient's worth of memory. .grad then aliases DDP's buffer: the next synced backward
  // overwrites it (clone it to keep it), and zero_grad(set_to_none = false) zeroes the bucket in
  // place. Note [Gradients as bucket views] in reducer.cpp.
  bool gradient_as_bucket_view = false;
  // When a full bucket's all-reduce is issued (Note [Overlap needs a spare core] in reducer.cpp).
  // Always (the default, PyTorch's way): as soon as the bucket fills, so it runs on the group's
  // worker while backward goes on. AtEnd: all buckets when backward has finished, in the same
  // order, run by the thread that called backward. Auto: Always when this host has a core for
  // each local rank's collective worker beside its compute threads (or the ranks per host are
  // unknown, the world is 1 or the backend is nccl), AtEnd otherwise -- for CPU ranks that fill
  // every core, where overlap only time-slices. The averaged gradients are the same bytes either way.
  enum class Overlap { Auto, Always, AtEnd };
  Overlap overlap = Overlap::Always;
};

// What one synced backward communicated, for benchmarks (DistributedDataParallel::last_stats).
struct DDPStats {
  int64_t buckets = 0;      // gradient all-reduces launched
  int64_t bytes = 0;        // bytes all-reduced: the buckets (+ the used-parameter map)
  double comm_wait_s = 0;   // time the end of backward blocked waiting for them
  bool overlapped = false;  // issued during backward (DDPOptions::overlap), not at its end
  // The group sequence numbers of those collectives (Work::seq), for comm_seconds().
  uint64_t first_seq = 0, last_seq = 0;
};

// The time the collectives with sequence numbers in [first_seq, last_seq] ran on the group's
// worker (start to end, from the flight recorder; they run one after another). Copies the
// recorder, so call it outside timed loops. Entries that left the ring are not counted.
double comm_seconds(ProcessGroup& group, uint64_t first_seq, uint64_t last_seq);
// The share of communication time that overlapped computation: 1 - wait / busy, clamped to
// [0, 1] (0 when nothing was communicated).
double hidden_fraction(double comm_wait_s, double comm_busy_s);

class Reducer;
class Join;

class DistributedDataParallel : public nn::Module {
 public:
  // Broadcasts rank 0's parameters and buffers (a collective: every rank must construct it).
  // The module is registered as the child "module" (state_dict keys gain "module.", as in
  // PyTorch); checkpoint the wrapped module itself to keep the plain names.
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DDPOptions options = {});
  ~DistributedDataParallel() override;

  // pre_forward(), module(x), prepare_for_backward({output}).
  Tensor forward(const Tensor& x) override;
  // Before a forward: checks that the previous synced backward finished its reduction and
  // broadcasts buffers (broadcast_buffers, grad mode on, not under no_sync).
  void pre_forward();
  // After a forward whose outputs will be backpropagated: arms the gradient hooks for the next
  // backward (grad mode on and not under no_sync; otherwise gradients stay local) and, with
  // find_unused_parameters, finds the parameters the outputs do not depend on.
  void prepare_for_backward(const TensorList& outputs);

  // Gradient accumulation without communication while the guard lives (PyTorch's no_sync()).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  bool require_backward_grad_sync() const { return require_sync_; }

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& process_group() const { return *group_; }
  const DDPOptions& options() const { return options_; }
  // The last synced backward's communication.
  const DDPStats& last_stats() const;
  // Parameter indices (module().parameters() order) of each bucket, in launch order.
  std::vector<std::vector<int64_t>> bucket_indices() const;

 private:
  friend class Join;
  // From `root`: rank 0, or under a Join the highest rank still training (Note [Join]).
  void broadcast_buffers(int root);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  std::shared_ptr<Reducer> reducer_;
  bool require_sync_ = true;
  Join* join_ = nullptr;  // the Join context this rank trains under (join.h), if any
};

// Broadcasts `tensors` from `root` in place, coalesced into one buffer per wire dtype (bool and
// int32 travel as int64, float16 as float32). A collective: every rank passes tensors of the same
// shapes and dtypes, in the same order.
void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root);

}  // namespace tb::dist
