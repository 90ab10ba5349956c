// Sequential, ModuleList, ModuleDict. See container.h.
#include "engine/nn/container.h"

#include <typeinfo>

#include "engine/autograd/functions.h"
#include "engine/nn/activation.h"
#include "engine/nn/linear.h"

namespace tb::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : Module("Sequential") {
  for (const ModulePtr& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

// Note [Sequential fuses Linear + ReLU]
// A Linear followed by a ReLU (exactly those classes, neither hooked) runs as one
// tb::linear_relu: the bias and the relu happen in the product's epilogue and the backward
// masks the gradient in the pass that sums the bias gradient, so the MLP's activations cost no
// passes of their own. The values are the unfused pair's: the relu commutes with the product's
// one rounding. Subclasses (which may override forward), hooked and checkpointed modules run
// one by one.
Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < items_.size(); ++i) {
    const ModulePtr& m = items_[i];
    if (i + 1 < items_.size() && typeid(*m) == typeid(Linear) && typeid(*items_[i + 1]) == typeid(ReLU) &&
        !m->has_hooks() && !items_[i + 1]->has_hooks() && !m->checkpointed() && !items_[i + 1]->checkpointed()) {
      const auto& lin = static_cast<const Linear&>(*m);
      y = tb::linear_relu(y, lin.weight, lin.bias);
      ++i;
      continue;
    }
    y = (*m)(y);
  }
  return y;
}

void ModuleList::push_back(ModulePtr m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

ModulePtr ModuleDict::operator[](const std::string& key) const {
  ModulePtr m = child(key);
  TB_CHECK(m != nullptr, "ModuleDict", "no module named '", key, "'");
  return m;
}

}  // namespace tb::nn
