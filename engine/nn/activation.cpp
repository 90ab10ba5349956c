// Activation and dropout layers over the autograd functions. See activation.h.
#include "engine/nn/activation.h"

#include "engine/autograd/functions.h"

namespace tb::nn {

Tensor ReLU::forward(const Tensor& x) { return tb::relu(x); }

GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  TB_CHECK(approximate == "none" || approximate == "tanh", "GELU", "approximate must be 'none' or 'tanh', got '",
           approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return tb::gelu(x, approximate); }

Tensor SiLU::forward(const Tensor& x) { return tb::silu(x); }

Tensor Tanh::forward(const Tensor& x) { return tb::tanh(x); }

Dropout::Dropout(double p_, core::Generator* g) : Module("Dropout"), p(p_), gen(g) {
  TB_CHECK(p >= 0 && p <= 1, "Dropout", "dropout probability has to be between 0 and 1, but got ", p);
}
Tensor Dropout::forward(const Tensor& x) { return tb::dropout(x, p, is_training(), gen); }

}  // namespace tb::nn
