// DistributedDataParallel: the module wrapper (state sync at construction, buffers before the
// forward, arming the Reducer after it, no_sync). The gradient reduction is reducer.cpp.
#include "engine/dist/ddp/ddp.h"

#include <map>

#include "engine/autograd/grad_mode.h"
#include "engine/dist/call_site.h"
#include "engine/dist/ddp/join.h"
#include "engine/dist/ddp/reducer.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

namespace tb::dist {

namespace {

constexpr const char* kOp = "DistributedDataParallel";

// The dtype a tensor travels in: the process groups carry float32, float64, bfloat16 and int64;
// the rest widen exactly.
DType wire_dtype(DType dt) {
  switch (dt) {
    case DType::Float32:
    case DType::Float64:
    case DType::BFloat16:
    case DType::Int64: return dt;
    case DType::Float16: return DType::Float32;
    default: return DType::Int64;  // int32, bool
  }
}

}  // namespace

void broadcast_coalesced(ProcessGroup& group, const TensorList& tensors, int root) {
  if (group.size() == 1) return;
  autograd::NoGradGuard no_grad;
  memory::TagGuard tag(memory::Tag::Communication);
  memory::OpScope op("ddp.broadcast");  // names its buffers in OOM reports
  std::map<DType, std::vector<const Tensor*>> by_wire;
  for (const Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) by_wire[wire_dtype(t.dtype())].push_back(&t);
  for (auto& [wire, list] : by_wire) {  // std::map: the same order on every rank
    int64_t n = 0;
    for (const Tensor* t : list) n += t->numel();
    Tensor flat = empty({n}, wire);
    int64_t off = 0;
    for (const Tensor* t : list) {
      flat.narrow(0, off, t->numel()).view(t->sizes()).copy_(*t);
      off += t->numel();
    }
    group.broadcast(flat, root)->wait();
    off = 0;
    for (const Tensor* t : list) {
      Tensor dst = *t;
      dst.copy_(flat.narrow(0, off, t->numel()).view(t->sizes()));
      off += t->numel();
    }
  }
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group, DDPOptions options)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), group_(std::move(group)), options_(options) {
  TB_CHECK(module_ != nullptr, kOp, "a module is required");
  TB_CHECK(group_ != nullptr, kOp, "a process group is required");
  register_module("module", module_);
  // Every replica starts from rank 0's state (PyTorch's _sync_module_states).
  TensorList state = module_->parameters();
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  CallSite site("ddp/sync module states");
  broadcast_coalesced(*group_, state, 0);
  reducer_ = std::make_shared<Reducer>(module_->named_parameters(), group_, options_);
  reducer_->install_hooks();
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::broadcast_buffers(int root) {
  CallSite site("ddp/broadcast buffers");
  broadcast_coalesced(*group_, module_->buffers(), root);
}

void DistributedDataParallel::pre_forward() {
  reducer_->ensure_prior_reduction_finished();
  const bool sync = require_sync_ && autograd::grad_mode_enabled();
  const int buffer_root = join_ ? join_->notify(sync) : 0;  // Note [Join] in join.cpp
  if (options_.broadcast_buffers && sync) broadcast_buffers(buffer_root);
}

void DistributedDataParallel::prepare_for_backward(const TensorList& outputs) {
  if (require_sync_ && autograd::grad_mode_enabled()) reducer_->prepare_for_backward(outputs);
  else reducer_->disarm();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  pre_forward();
  Tensor out = (*module_)(x);
  prepare_for_backward({out});
  return out;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_sync_) {
  ddp_.require_sync_ = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.require_sync_ = prev_; }

const DDPStats& DistributedDataParallel::last_stats() const { return reducer_->stats(); }

std::vector<std::vector<int64_t>> DistributedDataParallel::bucket_indices() const { return reducer_->bucket_indices(); }

}  // namespace tb::dist
