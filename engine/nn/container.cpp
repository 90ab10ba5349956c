// Sequential, ModuleList, ModuleDict. See container.h.
#include "engine/nn/container.h"

namespace tb::nn {

Sequential::Sequential(std::initializer_list<ModulePtr> modules) : Module("Sequential") {
  for (const ModulePtr& m : modules) push_back(m);
}

void Sequential::push_back(ModulePtr m) {
  add_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (const ModulePtr& m : items_) y = (*m)(y);
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
