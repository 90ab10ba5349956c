// Containers, as torch.nn's: Sequential (children named 0, 1, ...; forward chains them through
// their hooks), ModuleList (indexed children, no forward) and ModuleDict (keyed children).
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/module.h"

namespace tb::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<ModulePtr> modules);
  void push_back(ModulePtr m);
  size_t size() const { return items_.size(); }
  const ModulePtr& operator[](size_t i) const { return items_.at(i); }
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<ModulePtr> items_;
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(ModulePtr m);
  size_t size() const { return items_.size(); }
  const ModulePtr& operator[](size_t i) const { return items_.at(i); }
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>(items_.at(i));
    TB_CHECK(p != nullptr, "ModuleList", "item ", i, " is a ", items_[i]->type_name(), ", not the requested type");
    return p;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<ModulePtr> items_;
};

class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  void insert(const std::string& key, ModulePtr m) { add_child(key, std::move(m)); }
  bool contains(const std::string& key) const { return child(key) != nullptr; }
  ModulePtr operator[](const std::string& key) const;
  size_t size() const { return named_children().size(); }
};

}  // namespace tb::nn
