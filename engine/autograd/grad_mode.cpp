#include "engine/autograd/grad_mode.h"

#include <atomic>

#include "engine/tensor/tensor.h"

namespace tb::autograd {

namespace {
thread_local bool grad_enabled = true;
std::atomic<bool> anomaly{false};
}  // namespace

bool grad_mode_enabled() { return grad_enabled; }
void set_grad_mode(bool enabled) { grad_enabled = enabled; }
bool inference_mode_enabled() { return inference_mode_flag(); }
bool anomaly_mode_enabled() { return anomaly.load(std::memory_order_relaxed); }
void set_anomaly_mode(bool enabled) { anomaly.store(enabled); }

NoGradGuard::NoGradGuard() : prev_(grad_enabled) { grad_enabled = false; }
NoGradGuard::~NoGradGuard() { grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(grad_enabled) { grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { grad_enabled = prev_; }

InferenceMode::InferenceMode(bool enabled) : prev_grad_(grad_enabled), prev_inference_(inference_mode_flag()) {
  if (enabled) {
    grad_enabled = false;
    inference_mode_flag() = true;
  } else {
    inference_mode_flag() = false;
  }
}
InferenceMode::~InferenceMode() {
  grad_enabled = prev_grad_;
  inference_mode_flag() = prev_inference_;
}

DetectAnomalyGuard::DetectAnomalyGuard() : prev_(anomaly_mode_enabled()) { set_anomaly_mode(true); }
DetectAnomalyGuard::~DetectAnomalyGuard() { set_anomaly_mode(prev_); }

}  // namespace tb::autograd
