// Thread-local switches of autograd: grad mode (no_grad), inference mode and anomaly mode, each
// with an RAII guard named as in PyTorch's C++ API.
#pragma once

namespace tb::autograd {

bool grad_mode_enabled();
void set_grad_mode(bool enabled);
bool inference_mode_enabled();
// Anomaly mode is process-wide (torch.autograd.set_detect_anomaly): every backward checks each
// node's gradients for NaN/Inf and names the forward op of the first node that produced one.
bool anomaly_mode_enabled();
void set_anomaly_mode(bool enabled);

// No graph is recorded inside; results do not require grad.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// As NoGradGuard, and every tensor created inside is an inference tensor: it can never be saved
// for backward, and it may not be written in place (nor require grad) outside InferenceMode.
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true);
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool prev_grad_, prev_inference_;
};

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tb::autograd
