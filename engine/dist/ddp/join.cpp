#include "engine/dist/ddp/join.h"

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
// Every iteration of a rank still training issues, in pre_forward, an all_reduce(Sum) of
// {1, sync} (sync: its backward will all-reduce gradients: grad mode on, not under no_sync); a
// joined rank issues {0, 0} in its loop. The sum tells everyone how many ranks are still training
// (0: all have joined, the loop ends) and whether they are about to run a synced iteration. For
// one, the joined rank issues what that iteration issues after the notify, in the same order:
// the buffers' broadcast (DDPOptions::broadcast_buffers) and the reducer's bucket all-reduces (and
// used-parameter map), with zeros (Reducer::shadow_backward). The ranks still training divided
// their gradients by the world size before the sum (Note [Divide before the sum] in reducer.cpp),
// so the average is over the initial world size, PyTorch's default; dividing by the ranks left
// (divide_by_initial_world_size=False) is not offered. Every rank still training must agree on
// sync (all synced or all under no_sync); a mix is an error on the joined ranks.
// At the end the last rank to join is found by an all_reduce(Max) of the rank of each rank that
// never shadowed (-1 otherwise), and its parameters and buffers are broadcast.

Join::Join(DistributedDataParallel& ddp, bool enable) : ddp_(ddp), enabled_(enable) {
  if (!enabled_) return;
  TB_CHECK(ddp_.join_ == nullptr, kOp, "this DistributedDataParallel is already inside a Join");
  flag_ = zeros({2}, DType::Int64);
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

void Join::notify(bool sync) {
  TB_CHECK(!joined_, kOp, "a forward after join(): this rank has already joined");
  int64_t* f = flag_.data_ptr<int64_t>();
  f[0] = 1;
  f[1] = sync ? 1 : 0;
  CallSite site("ddp/join notify");
  ddp_.group_->all_reduce(flag_, ReduceOp::Sum)->wait();
}

int64_t Join::join() {
  if (!enabled_ || joined_) return 0;
  joined_ = true;
  ddp_.join_ = nullptr;
  ProcessGroup& g = *ddp_.group_;
  int64_t shadowed = 0;
  int64_t* f = flag_.data_ptr<int64_t>();
  for (;;) {
    f[0] = f[1] = 0;
    {
      CallSite site("ddp/join notify");
      g.all_reduce(flag_, ReduceOp::Sum)->wait();
    }
    const int64_t training = f[0], synced = f[1];
    if (training == 0) break;
    ++shadowed;
    if (synced == 0) continue;
    TB_CHECK(synced == training, kOp, synced, " of the ", training,
             " ranks still training run a synced iteration and the others are under no_sync; under a Join every "
             "rank still training must sync the same iterations");
    if (ddp_.options_.broadcast_buffers) ddp_.broadcast_buffers();
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
