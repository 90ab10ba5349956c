// State fences: a background reader of training state (the checkpoint room's background staging,
// which copies parameters and optimizer state while the next step's forward and backward run)
// must finish reading before anything writes that state in place.
//
// Note [State fences]
// Code that mutates training state in place between steps calls state_fence() first (the
// optimizers' step(), load_distributed); a reader registers a StateFence for as long as it may be
// reading, whose function blocks until it is done. The interface sits here, below both sides:
// optim/ may not include checkpoint/ (it is to its right), and checkpoint/ knows no optimizer.
// state_fence() costs one atomic load when no fence is registered. A fence function runs on the
// thread that calls state_fence() and must not itself call state_fence() or throw.
#pragma once
#include <cstdint>
#include <functional>

namespace tb {

// Runs every registered fence's function (in registration order).
void state_fence();

// Registers `wait` until destroyed. Destroy it on the thread that steps the optimizers (or after
// they stop): a fence being run by another thread's state_fence() is not waited for.
class StateFence {
 public:
  explicit StateFence(std::function<void()> wait);
  ~StateFence();
  StateFence(const StateFence&) = delete;
  StateFence& operator=(const StateFence&) = delete;

 private:
  uint64_t id_;
};

}  // namespace tb
