// The grad-mode flag and a requires-grad query, kept below ops/ (beside inference_mode_flag in
// tensor.h) so that ops/ kernels can refuse a tensor that requires grad while grad mode is on
// (Note [Bare kernels] in engine/ops/common.h). engine/autograd/grad_mode.h is the flag's API
// (NoGradGuard, ...); engine/autograd/variable.cpp installs the query when it is linked in.
#pragma once

namespace tb {

class Tensor;

bool& grad_mode_flag();  // thread-local: grad mode is on (no NoGradGuard active) on this thread
using RequiresGradFn = bool (*)(const Tensor& t);
RequiresGradFn& requires_grad_hook();  // Tensor::requires_grad; null until autograd is linked

}  // namespace tb
