#include "engine/autograd/grad_mode.h"

#include <atomic>

#include "engine/tensor/grad_mode_flag.h"
#include "engine/tensor/tensor.h"

namespace tb::autograd {

namespace {
std::atomic<bool> anomaly{false};
}  // namespace

// The grad-mode flag lives in tensor/ (grad_mode_flag), below ops/, whose kernels read it.

bool grad_mode_enabled() { return grad_mode_flag(); }
void set_grad_mode(bool enabled) { grad_mode_flag() = enabled; }
bool inference_mode_enabled() { return inference_mode_flag(); }
bool anomaly_mode_enabled() { return anomaly.load(std::memory_order_relaxed); }
void set_anomaly_mode(bool enabled) { anomaly.store(enabled); }

NoGradGuard::NoGradGuard() : prev_(grad_mode_flag()) { grad_mode_flag() = false; }
NoGradGuard::~NoGradGuard() { grad_mode_flag() = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(grad_mode_flag()) { grad_mode_flag() = true; }
EnableGradGuard::~EnableGradGuard() { grad_mode_flag() = prev_; }

InferenceMode::InferenceMode(bool enabled) : prev_grad_(grad_mode_flag()), prev_inference_(inference_mode_flag()) {
  if (enabled) {
    grad_mode_flag() = false;
    inference_mode_flag() = true;
  } else {
    inference_mode_flag() = false;
  }
}
InferenceMode::~InferenceMode() {
  grad_mode_flag() = prev_grad_;
  inference_mode_flag() = prev_inference_;
}

DetectAnomalyGuard::DetectAnomalyGuard() : prev_(anomaly_mode_enabled()) { set_anomaly_mode(true); }
DetectAnomalyGuard::~DetectAnomalyGuard() { set_anomaly_mode(prev_); }

}  // namespace tb::autograd
