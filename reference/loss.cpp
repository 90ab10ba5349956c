// LibTorch one-liners behind reference/loss.h.
#include "reference/loss.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
namespace F = torch::nn::functional;
torch::Tensor opt(const Tensor& t) { return t.defined() ? T(t) : torch::Tensor(); }

// reduction as LibTorch's option variant; an unknown string raises as Python's would.
template <typename Options>
void set_reduction(Options& o, const std::string& r) {
  if (r == "mean") o.reduction(torch::kMean);
  else if (r == "sum") o.reduction(torch::kSum);
  else if (r == "none") o.reduction(torch::kNone);
  else throw RefError(r + " is not a valid value for reduction");
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                int64_t ignore_index) {
  return guarded("nll_loss", [&] {
    // torch.nn.functional.nll_loss's own path (nll_loss_nd), which takes an unbatched (C) input
    // with a 0-dim target; the C++ functional's at::nll_loss wants a batch dim.
    const int64_t red = reduction == "mean"   ? at::Reduction::Mean
                        : reduction == "sum"  ? at::Reduction::Sum
                        : reduction == "none" ? at::Reduction::None
                                              : throw RefError(reduction + " is not a valid value for reduction");
    return wrap(torch::nll_loss_nd(T(input), T(target), opt(weight), red, ignore_index));
  });
}
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  return guarded("cross_entropy", [&] {
    auto o =
        F::CrossEntropyFuncOptions().weight(opt(weight)).ignore_index(ignore_index).label_smoothing(label_smoothing);
    set_reduction(o, reduction);
    return wrap(F::cross_entropy(T(input), T(target), o));
  });
}
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return guarded("mse_loss", [&] {
    auto o = F::MSELossFuncOptions();
    set_reduction(o, reduction);
    return wrap(F::mse_loss(T(input), T(target), o));
  });
}
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return guarded("l1_loss", [&] {
    auto o = F::L1LossFuncOptions();
    set_reduction(o, reduction);
    return wrap(F::l1_loss(T(input), T(target), o));
  });
}
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  return guarded("binary_cross_entropy_with_logits", [&] {
    auto o = F::BinaryCrossEntropyWithLogitsFuncOptions().weight(opt(weight)).pos_weight(opt(pos_weight));
    set_reduction(o, reduction);
    return wrap(F::binary_cross_entropy_with_logits(T(input), T(target), o));
  });
}

}  // namespace tb::ref
