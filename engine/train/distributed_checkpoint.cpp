// distributed_state / load_distributed_state: see distributed_checkpoint.h.
#include "engine/train/distributed_checkpoint.h"

#include <map>
#include <utility>

#include "engine/autograd/grad_mode.h"
#include "engine/core/error.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/tensor/factories.h"

namespace tb::train {

namespace {

using nlohmann::json;
constexpr const char* kOp = "checkpoint.distributed_state";

struct Layout {
  std::map<std::string, dist::ShardedTensor> by_fqn;  // the model's entries (sharded or whole)
  std::vector<std::string> fqn_of;                    // the optimizer's parameter index -> name
};

// The model's rows on this rank, and which parameter each optimizer index is.
Layout layout_of(nn::Module& model, const optim::Optimizer* opt) {
  Layout l;
  for (auto& [key, s] : dist::sharded_state_dict(model)) l.by_fqn.emplace(key, std::move(s));
  if (!opt) return l;
  std::map<const TensorImpl*, std::string> names;
  for (const auto& [n, p] : model.named_parameters()) names.emplace(p.impl(), n);
  for (const optim::ParamGroup& g : opt->param_groups())
    for (const Tensor& p : g.params) {
      auto it = names.find(p.impl());
      TB_CHECK(it != names.end(), kOp,
               "an optimizer parameter is not a parameter of the model (was the optimizer made before fully_shard?)");
      l.fqn_of.push_back(it->second);
    }
  return l;
}

// "state.<index>.<key>" -> (index, key).
std::pair<size_t, std::string> parse_state_name(const std::string& n) {
  const size_t dot = n.find('.', 6);
  TB_CHECK(n.rfind("state.", 0) == 0 && dot != std::string::npos, kOp, "unexpected optimizer tensor name '", n, "'");
  return {size_t(std::stoull(n.substr(6, dot - 6))), n.substr(dot + 1)};
}

// An optimizer state tensor `t` of parameter `fqn`: the parameter's rows when it has the live
// parameter's (possibly padded shard) shape, else whole.
checkpoint::ShardedEntry state_entry(const std::string& name, const Tensor& t, const Tensor& live_param,
                                     const dist::ShardedTensor& param) {
  checkpoint::ShardedEntry e;
  e.name = name;
  if (t.dim() > 0 && t.sizes() == live_param.sizes() && !param.global_shape.empty()) {
    e.local = t.narrow(0, 0, param.local.size(0));
    e.global_shape = param.global_shape;
    e.row_offset = param.row_offset;
  } else {
    e.local = t;
    e.global_shape = t.sizes();
  }
  return e;
}

std::vector<Tensor> flat_params(const optim::Optimizer& opt) {
  std::vector<Tensor> out;
  for (const optim::ParamGroup& g : opt.param_groups())
    for (const Tensor& p : g.params) out.push_back(p);
  return out;
}

}  // namespace

checkpoint::DistributedState distributed_state(nn::Module& model, const optim::Optimizer* optimizer, int64_t step,
                                               const nlohmann::json& extra, const std::string& layout) {
  checkpoint::DistributedState s;
  s.step = step;
  s.layout = layout;
  Layout l = layout_of(model, optimizer);
  for (auto& [fqn, t] : l.by_fqn) s.tensors.push_back({"model." + fqn, t.local, t.global_shape, t.row_offset});
  s.state = {{"extra", extra}};
  if (optimizer) {
    optim::StateDict sd = optimizer->state_dict();
    const std::vector<Tensor> params = flat_params(*optimizer);
    std::map<std::string, std::string> renamed;
    for (auto& [n, t] : sd.tensors) {
      const auto [i, key] = parse_state_name(n);
      TB_CHECK(i < l.fqn_of.size(), kOp, "optimizer state '", n, "' names no parameter");
      const std::string fqn = l.fqn_of[i];
      const std::string name = "optim." + fqn + "." + key;
      s.tensors.push_back(state_entry(name, t.detach(), params[i], l.by_fqn.at(fqn)));
      renamed[n] = name;
    }
    json j = sd.json;
    if (j.contains("state"))
      for (auto& [idx, st] : j["state"].items())
        for (auto& [key, v] : st.items())
          if (v.is_object() && v.contains("tensor")) v["tensor"] = renamed.at(v["tensor"].get<std::string>());
    s.state["optimizer"] = j;
  }
  return s;
}

checkpoint::DistributedState load_distributed_state(nn::Module& model, optim::Optimizer* optimizer,
                                                    const std::string& path, dist::ProcessGroup& group,
                                                    const checkpoint::DistributedLoadOptions& options) {
  const char* op = "checkpoint.load";
  autograd::NoGradGuard ng;
  // Read here to size the optimizer state; a rank that cannot read it still takes part in the
  // load's first exchange, so every rank raises (naming it) instead of the others waiting.
  checkpoint::DistributedMetadata meta;
  try {
    meta = checkpoint::read_distributed_metadata(path);
  } catch (const core::Error&) {
    checkpoint::DistributedState none;
    checkpoint::load_distributed(none, path, group, options);
    throw;
  }
  Layout l = layout_of(model, optimizer);
  checkpoint::DistributedState s;
  for (auto& [fqn, t] : l.by_fqn) s.tensors.push_back({"model." + fqn, t.local, t.global_shape, t.row_offset});
  // The optimizer's state tensors are made here, in the live parameters' (shard) shapes, and
  // handed to the optimizer after the load.
  json opt_json;
  optim::StateDict sd;
  if (optimizer) {
    TB_CHECK(meta.state.is_object() && meta.state.contains("optimizer"), op, "'", meta.step_dir,
             "' holds no optimizer state; load it without an optimizer");
    opt_json = meta.state["optimizer"];
    const std::vector<Tensor> params = flat_params(*optimizer);
    if (opt_json.contains("state") && opt_json["state"].is_object())
      for (auto& [idx, st] : opt_json["state"].items()) {
        size_t i = 0;
        try {
          i = size_t(std::stoull(idx));
        } catch (const std::exception&) {
          TB_CHECK(false, op, "'", meta.step_dir, "': optimizer state index '", idx, "' is not a number");
        }
        TB_CHECK(i < params.size() && st.is_object(), op, "'", meta.step_dir, "': optimizer state for parameter ", idx,
                 ", which this optimizer (", params.size(), " parameters) does not have");
        const std::string& fqn = l.fqn_of[i];
        for (auto& [key, v] : st.items()) {
          if (!v.is_object() || !v.contains("tensor") || !v["tensor"].is_string()) continue;
          const std::string name = v["tensor"].get<std::string>();
          TB_CHECK(name == "optim." + fqn + "." + key, op, "'", meta.step_dir, "': optimizer parameter ", i, " is '",
                   fqn, "' here but its state is '", name,
                   "' in the checkpoint (a different model or parameter order)");
          const checkpoint::SavedTensor* saved = meta.find(name);
          TB_CHECK(saved, op, "'", meta.step_dir, "' has no tensor '", name, "'");
          const dist::ShardedTensor& p = l.by_fqn.at(fqn);
          Tensor t = saved->shape == p.global_shape && !p.global_shape.empty() ? zeros(params[i].sizes(), saved->dtype)
                                                                               : empty(saved->shape, saved->dtype);
          s.tensors.push_back(state_entry(name, t, params[i], p));
          const std::string local_name = "state." + std::to_string(i) + "." + key;
          sd.tensors.emplace_back(local_name, t);
          v["tensor"] = local_name;
        }
      }
  }
  checkpoint::load_distributed(s, path, group, options);
  // FSDP units gathered now (an explicit unshard()) hold the values from before the load in their
  // layers' weights: drop them, as load_full_state_dict does, so the next use gathers the loaded.
  for (auto& [name, m] : model.named_modules())
    if (auto unit = dist::fsdp_unit(*m)) unit->reshard();
  if (optimizer) {
    sd.json = opt_json;
    optimizer->load_state_dict(sd);
  }
  return s;
}

}  // namespace tb::train
