// Join: DDP training with uneven inputs, after PyTorch's torch.distributed.algorithms.Join with
// DistributedDataParallel's join hook. Without it a rank that runs out of batches stops issuing
// the all-reduces the others' backward still issues, and they hang (the watchdog ends them).
// Under a Join every forward of a rank still training first all-reduces "I am still here"; a rank
// that has called join() answers those with zeros and shadows each synced backward's
// collectives (zero gradients into every bucket's all-reduce), so the others finish their batches.
// Gradients are divided by the initial world size, as PyTorch's default
// (divide_by_initial_world_size=True): a step with k of W ranks left averages k gradients over W.
// When every rank has joined, the parameters and buffers of the rank that joined last (the one
// that trained longest) are broadcast to all, so every replica ends equal (PyTorch's
// _sync_final_model).
//
// Use:
//   {
//     dist::Join join(ddp);
//     for (auto& batch : my_batches) { loss(ddp(batch.x), batch.y).backward(); opt.step(); }
//     join.join();  // or let the destructor do it (not while an exception unwinds)
//   }
#pragma once
#include "engine/dist/ddp/ddp.h"

namespace tb::dist {

class Join {
 public:
  // Every rank enters it (it issues nothing until the first forward or join()). `enable` false:
  // a no-op context, as PyTorch's Join(enable=False).
  explicit Join(DistributedDataParallel& ddp, bool enable = true);
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank has no more inputs: shadows the others' collectives until every rank has joined,
  // then syncs the final model. Returns how many synced iterations this rank shadowed.
  int64_t join();

 private:
  friend class DistributedDataParallel;
  // A forward of a rank still training: one all-reduce(Max) of its flags (Note [Join] in
  // join.cpp). Returns the rank the buffers are broadcast from: the highest rank still training.
  int notify(bool sync);

  DistributedDataParallel& ddp_;
  bool enabled_, joined_ = false;
  Tensor flag_;  // int64 {training, synced, unsynced, rank}, reduced with Max (Note [Join])
};

}  // namespace tb::dist
