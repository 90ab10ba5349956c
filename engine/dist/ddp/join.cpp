#include "engine/dist/ddp/join.h"

#include <cstdio>
#include <exception>

#include "engine/autograd/grad_mode.h"
#include "engine/dist/call_site.h"
#include "engine/dist/ddp/reducer.h"
#include "engine/tensor/factories.h"

namespace tb::dist {

namespace {
constexpr const char* kOp = "Join";
}

// Note [Join]
// Every iteration of a rank still training issues, in pre_forward, an all_reduce(Max) of four
// flags: {1, synced, unsynced, its rank}. synced: its backward will all-reduce gradients (grad
// mode on, not under no_sync); unsynced: it will not. A joined rank issues {0, 0, 0, -1} in its
// loop. The maxima say whether any rank is still training (none: all have joined, the loop ends),
// whether the iteration is synced, and which rank is the highest still training. For a synced
// iteration the joined rank issues what that iteration issues after the notify, in the same
// order: the buffers' broadcast (DDPOptions::broadcast_buffers) and the reducer's bucket
// all-reduces (and used-parameter map), with zeros (Reducer::shadow_backward). The buffers come
// from the highest rank still training, not rank 0, which may have joined with stale buffers
// (PyTorch's authoritative rank, its _find_common_rank; it spends a second all-reduce on it).
// The ranks still training divided their gradients by the world size before the sum (Note
// [Divide before the sum] in reducer.cpp), so the average is over the initial world size,
// PyTorch's default; dividing by the ranks left (divide_by_initial_world_size=False) is not
// offered. Every rank still training must agree on sync (all synced or all under no_sync): a mix
// is an error raised on every rank from the same flags, before anyone issues the iteration's
// collectives, so nobody hangs.
// At the end the last rank to join is found by an all_reduce(Max) of the rank of each rank that
// never shadowed (-1 otherwise), and its parameters and buffers are broadcast.

namespace {
// The flags after the all-reduce: the mix of synced and unsynced ranks is an error everywhere.
void check_agreement(const int64_t* f) {
  TB_CHECK(!(f[1] == 1 && f[2] == 1), kOp,
           "some of the ranks still training run a synced iteration and the others are under no_sync; under a "
           "Join every rank still training must sync the same iterations");
}
}  // namespace

Join::Join(DistributedDataParallel& ddp, bool enable) : ddp_(ddp), enabled_(enable) {
  if (!enabled_) return;
  TB_CHECK(ddp_.join_ == nullptr, kOp, "this DistributedDataParallel is already inside a Join");
  flag_ = zeros({4}, DType::Int64);
  ddp_.join_ = this;
}

Join::~Join() {
  if (enabled_ && !joined_ && std::uncaught_exceptions() == 0) {
    try {
      join();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trainbench: Join: joining at the end of the context failed: %s\n", e.what());
    }
  }
  if (enabled_ && ddp_.join_ == this) ddp_.join_ = nullptr;
}

int Join::notify(bool sync) {
  TB_CHECK(!joined_, kOp, "a forward after join(): this rank has already joined");
  int64_t* f = flag_.data_ptr<int64_t>();
  f[0] = 1;
  f[1] = sync ? 1 : 0;
  f[2] = sync ? 0 : 1;
  f[3] = ddp_.group_->rank();
  {
    CallSite site("ddp/join notify");
    ddp_.group_->all_reduce(flag_, ReduceOp::Max)->wait();
  }
  check_agreement(f);
  return int(f[3]);
}

int64_t Join::join() {
  if (!enabled_ || joined_) return 0;
  joined_ = true;
  ddp_.join_ = nullptr;
  ProcessGroup& g = *ddp_.group_;
  int64_t shadowed = 0;
  int64_t* f = flag_.data_ptr<int64_t>();
  for (;;) {
    f[0] = f[1] = f[2] = 0;
    f[3] = -1;
    {
      CallSite site("ddp/join notify");
      g.all_reduce(flag_, ReduceOp::Max)->wait();
    }
    if (f[0] == 0) break;  // every rank has joined
    ++shadowed;
    check_agreement(f);
    if (f[1] == 0) continue;  // under no_sync: the iteration issues nothing more
    if (ddp_.options_.broadcast_buffers) ddp_.broadcast_buffers(int(f[3]));
    ddp_.reducer_->shadow_backward();
  }
  // The last rank to join trained on every iteration: its state is the one to keep.
  Tensor who = full({1}, double(shadowed == 0 ? g.rank() : -1), DType::Int64);
  {
    CallSite site("ddp/join last joiner");
    g.all_reduce(who, ReduceOp::Max)->wait();
  }
  const int root = int(who.data_ptr<int64_t>()[0]);
  TensorList state = ddp_.module_->parameters();
  for (const Tensor& b : ddp_.module_->buffers()) state.push_back(b);
  CallSite site("ddp/join sync final model");
  autograd::NoGradGuard no_grad;
  broadcast_coalesced(g, state, root);
  return shadowed;
}

}  // namespace tb::dist
