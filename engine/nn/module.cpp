// Module: registration, traversal, state dicts, modes and hooks. See module.h.
#include "engine/nn/module.h"

#include <atomic>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "engine/autograd/checkpoint.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/core/dtype.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

namespace tb::nn {

namespace {
void forget_module(const Module* m);  // Note [Module paths]
}

struct HookStore {
  const Module* owner = nullptr;
  ~HookStore() { forget_module(owner); }  // dies with its module: no shared_ptr to it escapes
  int64_t next_id = 0;
  std::vector<std::pair<int64_t, ForwardPreHook>> pre;
  std::vector<std::pair<int64_t, ForwardHook>> fwd;
  std::vector<std::pair<int64_t, BackwardHook>> bwd;
};

void RemovableHandle::remove() {
  auto s = store_.lock();
  if (!s) return;
  auto drop = [&](auto& v) { std::erase_if(v, [&](const auto& h) { return h.first == id_; }); };
  drop(s->pre);
  drop(s->fwd);
  drop(s->bwd);
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

// Note [Module paths]
// Allocations made in a module's forward carry its path (memory::ModuleScope), as
// named_modules() names it from the module that was called first: "blocks.3.mlp.fc1"; that root
// is named by its type ("GPT"). A module does not know its parent, so the path is found the first
// time a module runs under a given parent path (a search of the parent's descendants) and kept in
// a per-thread table by module address: later calls check that the parent path is the same and
// that the parent's child of that name is this module (so a new module at a freed module's
// address is never given the old path), one string lookup. Paths are interned
// (memory::intern), so the steady state allocates nothing. (The table is outside Module so that
// module.h, included by most of the project, stays as it is.)
namespace {

struct SitePath {
  const char* parent = nullptr;  // the calling module's path (null at the root)
  const char* path = nullptr;    // this module's
  const char* prefix = nullptr;  // what its children's names follow: "" at the root, else path + "."
  std::vector<std::string> rel;  // its dotted name under the parent, split ("blocks", "3"); empty if none
  uint64_t forgotten = 0;        // g_forgotten when found: a root's path is found again after any module died
};

struct Running {
  const Module* module = nullptr;
  const char* path = nullptr;
  const char* prefix = nullptr;
};
thread_local Running t_running;
thread_local std::unordered_map<const Module*, SitePath> t_paths;

// Whether `rel` still leads from `parent` to `self` (one child lookup per part).
bool still_there(const Module* parent, const std::vector<std::string>& rel, const Module& self) {
  if (rel.empty()) return false;
  ModulePtr m;
  for (const std::string& part : rel) {
    m = (m ? m.get() : parent)->child(part);
    if (!m) return false;
  }
  return m.get() == &self;
}

// Where each module was registered (add_child), for a module whose forward is called directly
// rather than through its parent's (the training benchmark calls GPT::forward itself, so no
// parent runs around its blocks): its path is then found by walking up the registrations. A
// module's entries (as child and as parent) are dropped when it dies (its HookStore's
// destructor), so a new module at a dead one's address never inherits its place.
struct Registration {
  const Module* parent;
  std::string name;
};
std::mutex g_registrations_mu;
std::atomic<uint64_t> g_forgotten{0};                                           // modules forgotten so far
auto* g_registrations = new std::unordered_map<const Module*, Registration>();  // leaked: modules outlive statics

void forget_module(const Module* m) {
  g_forgotten.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_registrations_mu);
  g_registrations->erase(m);
  std::erase_if(*g_registrations, [m](const auto& kv) { return kv.second.parent == m; });
}

// The dotted name of `self` below the outermost module it is registered under, as that
// module's named_modules() gives it; "" if it is registered nowhere.
std::string registered_path(const Module& self) {
  std::lock_guard<std::mutex> lock(g_registrations_mu);
  std::string path;
  const Module* m = &self;
  for (int depth = 0; depth < 256; ++depth) {  // registrations form a tree; never loop regardless
    auto it = g_registrations->find(m);
    if (it == g_registrations->end()) break;
    path = path.empty() ? it->second.name : it->second.name + "." + path;
    m = it->second.parent;
  }
  return path;
}

const SitePath& site_path(const Module& self) {
  const Running parent = t_running;
  auto [it, fresh] = t_paths.try_emplace(&self);
  SitePath& sp = it->second;
  const uint64_t forgotten = g_forgotten.load(std::memory_order_relaxed);
  if (!fresh && sp.parent == parent.path &&
      (parent.module ? still_there(parent.module, sp.rel, self) : sp.forgotten == forgotten))
    return sp;
  std::string path;
  std::vector<std::string> rel;
  if (!parent.module) {
    path = registered_path(self);  // a child called directly, "blocks.0"; else the root, by type
    if (path.empty()) path = self.type_name();
  } else {
    std::string name;
    for (const auto& [n, m] : parent.module->named_modules())
      if (m == &self && !n.empty()) {
        name = n;
        break;
      }
    for (size_t b = 0; !name.empty();) {
      const size_t e = name.find('.', b);
      rel.push_back(name.substr(b, e == std::string::npos ? e : e - b));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    path = std::string(parent.prefix) + (name.empty() ? "(" + self.type_name() + ")" : name);  // unregistered
  }
  const bool root = !parent.module && path == self.type_name();
  sp = {parent.path, memory::intern(path), root ? "" : memory::intern(path + "."), std::move(rel), forgotten};
  return sp;
}

// Sets the running module (and the allocator's module path) while a forward runs.
class RunningScope {
 public:
  explicit RunningScope(const Module& m) : prev_(t_running), sp_(site_path(m)), site_(sp_.path) {
    t_running = {&m, sp_.path, sp_.prefix};
  }
  ~RunningScope() { t_running = prev_; }

 private:
  Running prev_;
  const SitePath& sp_;  // t_paths's nodes never move
  memory::ModuleScope site_;
};

}  // namespace

Module::Module(std::string type_name) : type_name_(std::move(type_name)), hooks_(std::make_shared<HookStore>()) {
  hooks_->owner = this;  // its destructor forgets this module's registrations (Note [Module paths])
}

Tensor Module::forward(const Tensor&) {
  throw core::Error(type_name_ + ".forward", "this module has no single-tensor forward; call its own forward method");
}

void Module::set_checkpoint(std::shared_ptr<const autograd::CheckpointOptions> options) {
  checkpoint_ = std::move(options);
}

bool Module::has_hooks() const {
  return hooks_ && (!hooks_->pre.empty() || !hooks_->fwd.empty() || !hooks_->bwd.empty());
}

Tensor Module::operator()(const Tensor& x) {
  return call_with_hooks({x}, [this](const TensorList& in) { return forward(in[0]); });
}

void Module::check_new_name(const std::string& name, const char* what) const {
  TB_CHECK(!name.empty(), "register_" + std::string(what), "the name must not be empty");
  TB_CHECK(name.find('.') == std::string::npos, "register_" + std::string(what), "the name '", name,
           "' must not contain '.'");
  TB_CHECK(!params_.contains(name) && !buffers_.contains(name) && !children_.contains(name),
           "register_" + std::string(what), "attribute '", name, "' already exists in ", type_name_);
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "parameter");
  if (t.defined()) {
    TB_CHECK(t.is_leaf(), "register_parameter", "parameter '", name, "' must be a leaf tensor (detach it first)");
    if (requires_grad && core::is_floating(t.dtype())) t.requires_grad_(true);
    if (t.storage()) t.storage()->set_tag(memory::Tag::Parameter);  // Note [Memory tags]
  }
  params_.insert(name, t);
  return t;
}

void Module::set_parameter(const std::string& name, Tensor t) {
  TB_CHECK(params_.contains(name), "set_parameter", type_name_, " has no parameter '", name, "'");
  TB_CHECK(t.defined() && t.is_leaf(), "set_parameter", "parameter '", name, "' must be a defined leaf tensor");
  params_.insert(name, std::move(t));
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.insert(name, Slot{t, persistent});
  return t;
}

void Module::add_child(const std::string& name, ModulePtr m) {
  check_new_name(name, "module");
  TB_CHECK(m != nullptr, "register_module", "module '", name, "' is null");
  {
    std::lock_guard<std::mutex> lock(g_registrations_mu);  // Note [Module paths]
    (*g_registrations)[m.get()] = {this, name};
  }
  children_.insert(name, std::move(m));
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [name, c] : children_)
    for (auto& [sub, m] : c->named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out{{"", this}};
  for (const auto& [name, c] : children_)
    for (auto& [sub, m] : std::as_const(*c).named_modules()) out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  auto mods = recurse ? named_modules() : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, m] : mods)
    for (const auto& [name, t] : m->params_)
      if (t.defined()) out.emplace_back(join(prefix, name), t);
  return out;
}

TensorList Module::parameters(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  auto mods = recurse ? named_modules() : std::vector<std::pair<std::string, const Module*>>{{"", this}};
  for (const auto& [prefix, m] : mods)
    for (const auto& [name, s] : m->buffers_)
      if (s.t.defined()) out.emplace_back(join(prefix, name), s.t);
  return out;
}

TensorList Module::buffers(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, ModulePtr>> Module::named_children() const {
  std::vector<std::pair<std::string, ModulePtr>> out;
  for (const auto& [name, c] : children_) out.emplace_back(name, c);
  return out;
}

ModulePtr Module::child(const std::string& name) const {
  const ModulePtr* c = children_.find(name);
  return c ? *c : nullptr;
}

Tensor Module::find_tensor(const std::string& dotted) const {
  const size_t dot = dotted.find('.');
  if (dot != std::string::npos) {
    ModulePtr c = child(dotted.substr(0, dot));
    return c ? c->find_tensor(dotted.substr(dot + 1)) : Tensor();
  }
  if (const Tensor* p = params_.find(dotted)) return *p;
  if (const Slot* b = buffers_.find(dotted)) return b->t;
  return Tensor();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& [name, t] : params_)
    if (t.defined()) out.insert(join(prefix, name), t);
  for (const auto& [name, s] : buffers_)
    if (s.t.defined() && s.persistent) out.insert(join(prefix, name), s.t);
  for (const auto& [name, c] : children_) c->collect_state(join(prefix, name), out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  LoadResult r;
  // Everything is checked before anything is copied, so a failed load leaves the module as it was.
  for (const auto& [key, t] : own) {
    const Tensor* src = state.find(key);
    if (!src) {
      r.missing_keys.push_back(key);
      continue;
    }
    TB_CHECK(src->defined(), "load_state_dict", "the state dict holds an undefined tensor for '", key, "'");
    TB_CHECK(src->sizes() == t.sizes(), "load_state_dict", "size mismatch for ", key, ": copying a param with shape ",
             shape_str(src->sizes()), " from checkpoint, the shape in current model is ", shape_str(t.sizes()), ".");
  }
  for (const auto& [key, t] : state)
    if (!own.contains(key)) r.unexpected_keys.push_back(key);
  if (strict && (!r.missing_keys.empty() || !r.unexpected_keys.empty())) {
    std::string msg = "Error(s) in loading state_dict for " + type_name_ + ":";
    auto list = [](const std::vector<std::string>& keys) {
      std::string s;
      for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
      return s;
    };
    if (!r.unexpected_keys.empty()) msg += " Unexpected key(s) in state_dict: " + list(r.unexpected_keys) + ".";
    if (!r.missing_keys.empty()) msg += " Missing key(s) in state_dict: " + list(r.missing_keys) + ".";
    throw core::Error("load_state_dict", msg);
  }
  autograd::NoGradGuard no_grad;
  for (const auto& [key, t] : own)
    if (const Tensor* src = state.find(key)) {
      Tensor dst = t;
      if (!dst.is_same(*src)) dst.copy_(*src);
    }
  return r;
}

void Module::to(DType dtype) {
  autograd::NoGradGuard no_grad;
  auto convert = [&](const Tensor& t, memory::Tag tag) {
    if (!t.defined() || !core::is_floating(t.dtype()) || t.dtype() == dtype) return;
    Tensor c = t.to(dtype).contiguous();
    if (c.storage()) c.storage()->set_tag(tag);
    // Swap the data under the same handle: the parameter stays the same tensor.
    TensorImpl* impl = t.impl();
    impl->storage = c.storage();
    impl->sizes = c.sizes();
    impl->strides = c.strides();
    impl->offset = c.storage_offset();
    impl->dtype = dtype;
    t.bump_version();  // new values (a float16 round trip rounds them): no cache may keep the old
    Tensor g = t.grad();
    if (g.defined()) {
      Tensor cg = g.to(dtype);
      if (cg.storage()) cg.storage()->set_tag(memory::Tag::Gradient);  // still .grad's memory
      t.set_grad(cg);
    }
  };
  for (auto& [n, t] : named_parameters()) convert(t, memory::Tag::Parameter);
  for (auto& [n, t] : named_buffers()) convert(t, memory::Tag::Other);
}

void Module::zero_grad(bool set_to_none) {
  for (auto& [n, p] : named_parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      autograd::NoGradGuard no_grad;
      Tensor d = g.detach();
      zero_(d);
    }
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [n, c] : children_) c->apply(fn);
  fn(*this);
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook fn) {
  const int64_t id = hooks_->next_id++;
  hooks_->pre.emplace_back(id, std::move(fn));
  return {hooks_, id};
}

RemovableHandle Module::register_forward_hook(ForwardHook fn) {
  const int64_t id = hooks_->next_id++;
  hooks_->fwd.emplace_back(id, std::move(fn));
  return {hooks_, id};
}

RemovableHandle Module::register_full_backward_hook(BackwardHook fn) {
  const int64_t id = hooks_->next_id++;
  hooks_->bwd.emplace_back(id, std::move(fn));
  return {hooks_, id};
}

namespace {

// Note [Full backward hooks]
// As PyTorch's BackwardHook: the inputs and the output pass through identity nodes
// (BackwardHookFunctionBackward, PyTorch's BackwardHookFunction); a tensor hook on the output's
// identity captures grad_output, tensor hooks on the inputs' identities capture grad_input, and
// when the last input gradient arrives the module's hooks run. A replacement the hooks return is
// applied to that last input's gradient only (the others have flowed on already); with one
// differentiable input, as in every layer here, that is PyTorch's behaviour. If no input needs a
// gradient the hooks run at the output with undefined grad_input, as in PyTorch.
// The identities share their tensor's storage and version, as the input returned as-is from a
// custom Function does in PyTorch, and like it they refuse in-place ops (and so do views of them)
// while they require grad (AutogradMeta::custom_function_view): an in-place op would rebase the
// tensor's history past the identity node, grad_output would never be captured and the hooks
// would run without it. Clone the output to modify it. The hooks always get one grad_output per
// module output (undefined if none arrived), as PyTorch passes None.
class BackwardHookFunctionNode final : public autograd::Node {
 public:
  BackwardHookFunctionNode() : Node("BackwardHookFunctionBackward", "backward_hook_function") {}
  TensorList apply(TensorList&& grads) override { return {std::move(grads.at(0))}; }
};

struct BackwardState {
  Module* module = nullptr;
  std::vector<BackwardHook> hooks;
  TensorList grad_input, grad_output{Tensor()};  // one output per module call
  size_t expected = 0, pending = 0;              // input gradients per backward, and still to come
  std::optional<TensorList> fire() {
    pending = expected;  // ready for another backward through a retained graph
    std::optional<TensorList> replaced;
    for (const BackwardHook& h : hooks) {
      std::optional<TensorList> r = h(*module, replaced ? *replaced : grad_input, grad_output);
      if (r) replaced = std::move(r);
    }
    for (Tensor& g : grad_output) g = Tensor();  // a later backward must not see this one's
    return replaced;
  }
};

// The identity node's output for `t` (which requires grad): see the Note.
Tensor identity(const Tensor& t) {
  Tensor out = t.detach();
  autograd::set_history({out}, std::make_shared<BackwardHookFunctionNode>(), {t});
  autograd::ensure_meta(out).custom_function_view = true;
  return out;
}

}  // namespace

Tensor Module::call_with_hooks(const TensorList& inputs_in, const std::function<Tensor(const TensorList&)>& fwd) {
  RunningScope running(*this);  // names its allocations (Note [Module paths])
  // A forward that records a graph allocates activations (Note [Memory tags]).
  memory::TagGuard tag(autograd::grad_mode_enabled() ? memory::Tag::Activation : memory::TagGuard::current(),
                       /*keep_outer=*/true);
  // Note [Checkpointed modules] in engine/nn/activation_checkpoint.cpp: only the forward is the region.
  auto run = [&](const TensorList& in) {
    if (!checkpoint_) return fwd(in);
    return autograd::checkpoint([fwd](const TensorList& x) { return TensorList{fwd(x)}; }, in, *checkpoint_).at(0);
  };
  if (hooks_->pre.empty() && hooks_->fwd.empty() && hooks_->bwd.empty()) return run(inputs_in);
  // Copies: a hook removed by another hook while they run must not invalidate the loop.
  const auto pre = hooks_->pre;
  const auto fwd_hooks = hooks_->fwd;
  const auto bwd = hooks_->bwd;
  TensorList inputs = inputs_in;
  for (const auto& [id, h] : pre)
    if (std::optional<TensorList> r = h(*this, inputs)) inputs = std::move(*r);

  std::shared_ptr<BackwardState> state;
  if (!bwd.empty() && autograd::grad_mode_enabled()) {
    state = std::make_shared<BackwardState>();
    state->module = this;
    for (const auto& [id, h] : bwd) state->hooks.push_back(h);
    state->grad_input.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
      inputs[i] = identity(inputs[i]);
      ++state->expected;
      ++state->pending;
      inputs[i].register_hook([state, i](const Tensor& g) -> Tensor {
        state->grad_input[i] = g;
        if (--state->pending != 0) return Tensor();
        std::optional<TensorList> r = state->fire();
        return r && i < r->size() ? (*r)[i] : Tensor();
      });
    }
  }

  Tensor out = run(inputs);
  for (const auto& [id, h] : fwd_hooks)
    if (std::optional<Tensor> r = h(*this, inputs, out)) out = std::move(*r);

  if (state && out.defined() && out.requires_grad()) {
    out = identity(out);
    out.register_hook([state](const Tensor& g) -> Tensor {
      state->grad_output[0] = g;
      if (state->expected == 0) state->fire();
      return Tensor();
    });
  }
  return out;
}

}  // namespace tb::nn
