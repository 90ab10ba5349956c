// Optimizer's bookkeeping: groups, defaults, per-parameter state, state_dict/load_state_dict,
// zero_grad, and the flat-update helpers the algorithms share. No update rule lives here.
#include "engine/optim/optimizer.h"

#include <omp.h>

#include <set>

#include "engine/autograd/grad_mode.h"
#include "engine/memory/allocator.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

namespace tb::optim {

namespace {

std::string shape_str(const Shape& s) { return core::to_string(s); }

// JSON stores state indices as object keys (strings); PyTorch uses ints.
int64_t parse_index(const std::string& key) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(key, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TB_CHECK(used == key.size() && v >= 0, "Optimizer.load_state_dict", "state key '", key,
           "' is not a parameter index (expected \"0\", \"1\", ...)");
  return v;
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups, nlohmann::json defaults) : defaults_(std::move(defaults)) {
  TB_CHECK(defaults_.is_object(), "Optimizer", "defaults must be a JSON object");
  TB_CHECK(!groups.empty(), "Optimizer", "optimizer got an empty parameter list: pass at least one parameter");
  for (ParamGroup& g : groups) add_group_unchecked(std::move(g));
  size_t n = 0;
  for (const ParamGroup& g : groups_) n += g.params.size();
  TB_CHECK(n > 0, "Optimizer", "optimizer got an empty parameter list: pass at least one parameter");
}

Optimizer::~Optimizer() = default;

void Optimizer::add_group_unchecked(ParamGroup g) {
  const char* op = "Optimizer.add_param_group";
  if (g.options.is_null()) g.options = nlohmann::json::object();  // ParamGroup{params, {}}
  TB_CHECK(g.options.is_object(), op, "the options of a parameter group must be a JSON object");
  TB_CHECK(!g.options.contains("params"), op,
           "options must not contain 'params'; put the tensors in ParamGroup::params");
  std::set<TensorImpl*> seen;
  for (const ParamGroup& other : groups_)
    for (const Tensor& p : other.params) seen.insert(p.impl());
  for (size_t i = 0; i < g.params.size(); ++i) {
    const Tensor& p = g.params[i];
    TB_CHECK(p.defined(), op, "parameter ", i, " of the group is an undefined tensor");
    TB_CHECK(core::is_floating(p.dtype()), op, "parameter ", i, " is ", core::name(p.dtype()),
             "; optimizers update floating-point tensors only");
    TB_CHECK(p.is_leaf(), op, "can't optimize a non-leaf Tensor (parameter ", i,
             "): pass the leaf, or detach() it and call requires_grad_()");
    TB_CHECK(seen.insert(p.impl()).second, op, "some parameters appear in more than one parameter group (parameter ", i,
             " of the new group); pass each tensor once");
  }
  for (const auto& [key, value] : defaults_.items())
    if (!g.options.contains(key)) g.options[key] = value;
  groups_.push_back(std::move(g));
}

void Optimizer::add_param_group(ParamGroup g) {
  if (g.options.is_null()) g.options = nlohmann::json::object();
  for (const auto& [key, value] : defaults_.items())
    if (g.options.is_object() && !g.options.contains(key)) g.options[key] = value;
  if (g.options.is_object()) check_options(g.options);
  add_group_unchecked(std::move(g));
}

void Optimizer::check_all_groups() const {
  for (const ParamGroup& g : groups_) check_options(g.options);
}

int64_t Optimizer::param_index(size_t group, size_t i) const {
  int64_t base = 0;
  for (size_t k = 0; k < group; ++k) base += int64_t(groups_[k].params.size());
  return base + int64_t(i);
}

Optimizer::ParamState* Optimizer::find_state(int64_t index) {
  auto it = state_.find(index);
  return it == state_.end() ? nullptr : &it->second;
}

double Optimizer::opt_double(const ParamGroup& g, const char* key) {
  const auto it = g.options.find(key);
  TB_CHECK(it != g.options.end() && it->is_number(), "Optimizer", "parameter group option '", key,
           "' is missing or not a number (got ", it == g.options.end() ? std::string("nothing") : it->dump(), ")");
  return it->get<double>();
}

bool Optimizer::opt_bool(const ParamGroup& g, const char* key) {
  const auto it = g.options.find(key);
  TB_CHECK(it != g.options.end() && it->is_boolean(), "Optimizer", "parameter group option '", key,
           "' is missing or not a boolean (got ", it == g.options.end() ? std::string("nothing") : it->dump(), ")");
  return it->get<bool>();
}

std::pair<double, double> Optimizer::opt_pair(const ParamGroup& g, const char* key) {
  const auto it = g.options.find(key);
  TB_CHECK(it != g.options.end() && it->is_array() && it->size() == 2 && (*it)[0].is_number() && (*it)[1].is_number(),
           "Optimizer", "parameter group option '", key, "' must be a pair of numbers like [0.9, 0.999] (got ",
           it == g.options.end() ? std::string("nothing") : it->dump(), ")");
  return {(*it)[0].get<double>(), (*it)[1].get<double>()};
}

void Optimizer::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) {
      if (set_to_none) {
        p.set_grad(Tensor());
      } else if (Tensor grad = p.grad(); grad.defined()) {
        zero_(grad);
      }
    }
}

StateDict Optimizer::state_dict() const {
  StateDict sd;
  nlohmann::json state = nlohmann::json::object();
  for (const auto& [index, ps] : state_) {
    nlohmann::json entry = nlohmann::json::object();
    for (const auto& [name, t] : ps) {
      const std::string key = "state." + std::to_string(index) + "." + name;
      entry[name] = {{"tensor", key}};
      sd.tensors.emplace_back(key, t);
    }
    state[std::to_string(index)] = std::move(entry);
  }
  nlohmann::json groups = nlohmann::json::array();
  int64_t next = 0;
  for (const ParamGroup& g : groups_) {
    nlohmann::json gj = g.options;
    nlohmann::json ids = nlohmann::json::array();
    for (size_t i = 0; i < g.params.size(); ++i) ids.push_back(next++);
    gj["params"] = std::move(ids);
    groups.push_back(std::move(gj));
  }
  sd.json["state"] = std::move(state);
  sd.json["param_groups"] = std::move(groups);
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  memory::TagGuard tag(memory::Tag::OptimizerState);  // the copied state (Note [Memory tags])
  const char* op = "Optimizer.load_state_dict";
  memory::OpScope op_scope(op);  // for OOM reports
  TB_CHECK(sd.json.is_object() && sd.json.contains("state") && sd.json.contains("param_groups"), op,
           "a state dict needs the keys 'state' and 'param_groups' (got ",
           sd.json.is_object() ? "an object without them" : "no object", ")");
  const nlohmann::json& saved_groups = sd.json["param_groups"];
  const nlohmann::json& saved_state = sd.json["state"];
  TB_CHECK(saved_groups.is_array(), op, "'param_groups' must be a list");
  TB_CHECK(saved_state.is_object(), op, "'state' must be an object keyed by parameter index");
  TB_CHECK(saved_groups.size() == groups_.size(), op, "loaded state dict has ", saved_groups.size(),
           " parameter groups, this optimizer has ", groups_.size(), "; build the optimizer with the same groups");

  // Saved index -> this optimizer's parameter, by position within each group (as PyTorch).
  std::map<int64_t, std::pair<const Tensor*, int64_t>> id_map;  // -> (parameter, global index)
  std::vector<nlohmann::json> new_options;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const nlohmann::json& sg = saved_groups[gi];
    TB_CHECK(sg.is_object() && sg.contains("params") && sg["params"].is_array(), op, "parameter group ", gi,
             " of the state dict has no 'params' list");
    TB_CHECK(sg["params"].size() == groups_[gi].params.size(), op, "loaded state dict contains a parameter group (", gi,
             ") of ", sg["params"].size(), " parameters that doesn't match the size of optimizer's group (",
             groups_[gi].params.size(), ")");
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      TB_CHECK(sg["params"][i].is_number_integer(), op, "group ", gi, " 'params' must hold integer indices");
      TB_CHECK(id_map
                   .emplace(sg["params"][i].get<int64_t>(), std::make_pair(&groups_[gi].params[i], param_index(gi, i)))
                   .second,
               op, "parameter index ", sg["params"][i].get<int64_t>(), " appears twice in 'param_groups'");
    }
    nlohmann::json opts = sg;
    opts.erase("params");
    for (const auto& [key, value] : defaults_.items())
      if (!opts.contains(key)) opts[key] = value;
    check_options(opts);
    new_options.push_back(std::move(opts));
  }

  std::map<std::string, const Tensor*> by_key;
  for (const auto& [key, t] : sd.tensors) by_key[key] = &t;

  // Build the whole new state first so a bad entry leaves this optimizer untouched.
  std::map<int64_t, ParamState> new_state;
  for (const auto& [key, entry] : saved_state.items()) {
    const int64_t saved_id = parse_index(key);
    auto pit = id_map.find(saved_id);
    TB_CHECK(pit != id_map.end(), op, "state for parameter ", saved_id, " but no parameter group lists that index");
    const Tensor& p = *pit->second.first;
    TB_CHECK(entry.is_object(), op, "state of parameter ", saved_id, " must be an object of named values");
    ParamState ps;
    for (const auto& [name, v] : entry.items()) {
      const std::string what = "state." + key + "." + name;
      Tensor src;
      if (v.is_number()) {
        src = scalar_tensor(v.get<double>(), DType::Float32);  // LibTorch-style plain step counts
      } else {
        TB_CHECK(v.is_object() && v.contains("tensor") && v["tensor"].is_string(), op, what,
                 " must be {\"tensor\": \"<key>\"} or a number");
        auto tit = by_key.find(v["tensor"].get<std::string>());
        TB_CHECK(tit != by_key.end() && tit->second->defined(), op, what, " names tensor '",
                 v["tensor"].get<std::string>(), "', which is not in the state dict's tensors");
        src = *tit->second;
      }
      TB_CHECK(core::is_floating(src.dtype()), op, what, " is ", core::name(src.dtype()),
               "; expected a floating tensor");
      if (name == "step") {
        TB_CHECK(src.numel() == 1, op, what, " must hold one value, got shape ", shape_str(src.sizes()));
        ps[name] = scalar_tensor(src.item_double(), DType::Float32);
      } else {
        TB_CHECK(src.sizes() == p.sizes(), op, what, " has shape ", shape_str(src.sizes()), " but parameter ", saved_id,
                 " has shape ", shape_str(p.sizes()), "; the state dict belongs to another model");
        Tensor t = empty_like_preserve(p, p.dtype());
        t.copy_(src);
        ps[name] = std::move(t);
      }
    }
    new_state[pit->second.second] = std::move(ps);  // re-keyed by this optimizer's index
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = std::move(new_options[gi]);
  state_ = std::move(new_state);
}

// ---- flat updates ----

Tensor Optimizer::zeros_state(const Tensor& param) {
  Tensor t = empty_like_preserve(param, param.dtype());
  zero_(t);
  return t;
}

Optimizer::FlatUpdate Optimizer::flat_update(const Tensor& param, const Tensor& grad,
                                             const std::vector<Tensor>& state) {
  TB_CHECK(grad.sizes() == param.sizes(), "Optimizer.step", "gradient of shape ", shape_str(grad.sizes()),
           " for a parameter of shape ", shape_str(param.sizes()), "; set_grad a tensor of the parameter's shape");
  TB_CHECK(grad.dtype() == param.dtype(), "Optimizer.step", "gradient is ", core::name(grad.dtype()),
           " but the parameter is ", core::name(param.dtype()), "; gradients must have the parameter's dtype");
  FlatUpdate f;
  if (is_non_overlapping_and_dense(param)) {
    f.param = param;
    if (grad.strides() == param.strides() || param.numel() <= 1) {
      f.grad = grad;
    } else {
      f.grad = empty_like_preserve(param, param.dtype());
      f.grad.copy_(grad);
    }
    for (const Tensor& s : state) {
      if (s.strides() == param.strides() || param.numel() <= 1) {
        f.state.push_back(s);
        f.state_out.emplace_back();
      } else {
        Tensor w = empty_like_preserve(param, param.dtype());
        w.copy_(s);
        f.state.push_back(w);
        f.state_out.push_back(s);
      }
    }
    return f;
  }
  // A parameter with gaps (a strided slice): work on contiguous copies.
  f.param = param.clone();
  f.param_out = param;
  f.grad = grad.contiguous();
  for (const Tensor& s : state) {
    if (s.is_contiguous()) {
      f.state.push_back(s);
      f.state_out.emplace_back();
    } else {
      f.state.push_back(s.clone());
      f.state_out.push_back(s);
    }
  }
  return f;
}

void Optimizer::FlatUpdate::finish() {
  if (param_out.defined()) param_out.copy_(param);
  else param.bump_version();
  for (size_t k = 0; k < state.size(); ++k) {
    if (state_out[k].defined()) state_out[k].copy_(state[k]);
    else state[k].bump_version();
  }
}

void Optimizer::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body) {
  // Below this, waking the thread team costs more than the update itself.
  constexpr int64_t kSerial = 1 << 15;
  if (n <= kSerial || omp_get_max_threads() == 1 || omp_in_parallel()) {
    if (n > 0) body(0, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    // Chunks aligned to 16 elements keep every thread's vector loop on whole cache lines.
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t b = std::min(n, t * per), e = std::min(n, b + per);
    if (b < e) body(b, e);
  }
}

}  // namespace tb::optim
