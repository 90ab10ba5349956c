// The LibTorch side of the optim suite: torch::optim::{SGD, Adam, AdamW} built from JSON options,
// their per-parameter state read back field by field, and torch::nn::utils's clipping.
#include "reference/optim.h"

#include "reference/torch_access.h"

namespace tb::ref {

struct Optim::Impl {
  std::string kind;
  std::unique_ptr<torch::optim::Optimizer> opt;
};

namespace {

double num(const nlohmann::json& o, const nlohmann::json& d, const char* key, double fallback) {
  if (o.contains(key)) return o[key].get<double>();
  if (d.contains(key)) return d[key].get<double>();
  return fallback;
}
bool flag(const nlohmann::json& o, const nlohmann::json& d, const char* key, bool fallback) {
  if (o.contains(key)) return o[key].get<bool>();
  if (d.contains(key)) return d[key].get<bool>();
  return fallback;
}
std::tuple<double, double> betas(const nlohmann::json& o, const nlohmann::json& d, std::tuple<double, double> fb) {
  const nlohmann::json* b = o.contains("betas") ? &o["betas"] : d.contains("betas") ? &d["betas"] : nullptr;
  return b ? std::make_tuple((*b)[0].get<double>(), (*b)[1].get<double>()) : fb;
}

template <typename Opts>
std::unique_ptr<Opts> adam_like(const nlohmann::json& o, const nlohmann::json& d) {
  Opts def;  // LibTorch's defaults (AdamW: weight_decay 1e-2)
  auto r = std::make_unique<Opts>(num(o, d, "lr", def.lr()));
  r->betas(betas(o, d, def.betas()))
      .eps(num(o, d, "eps", def.eps()))
      .weight_decay(num(o, d, "weight_decay", def.weight_decay()))
      .amsgrad(flag(o, d, "amsgrad", def.amsgrad()));
  return r;
}

std::unique_ptr<torch::optim::OptimizerOptions> make_options(const std::string& kind, const nlohmann::json& o,
                                                             const nlohmann::json& d) {
  if (flag(o, d, "maximize", false)) throw RefError("Optim: LibTorch's C++ optimizers have no maximize option");
  if (kind == "sgd") {
    auto r = std::make_unique<torch::optim::SGDOptions>(num(o, d, "lr", 1e-3));
    r->momentum(num(o, d, "momentum", 0))
        .dampening(num(o, d, "dampening", 0))
        .weight_decay(num(o, d, "weight_decay", 0))
        .nesterov(flag(o, d, "nesterov", false));
    return r;
  }
  if (kind == "adam") return adam_like<torch::optim::AdamOptions>(o, d);
  if (kind == "adamw") return adam_like<torch::optim::AdamWOptions>(o, d);
  throw RefError("Optim: unknown optimizer kind '" + kind + "' (sgd, adam, adamw)");
}

Tensor step_tensor(int64_t step) { return wrap(torch::tensor(double(step), torch::kFloat32).reshape({})); }

}  // namespace

Optim::Optim(const std::string& kind, const std::vector<std::vector<Tensor>>& groups,
             const std::vector<nlohmann::json>& group_options, const nlohmann::json& defaults) {
  guarded("Optim", [&] {
    impl_ = std::make_shared<Impl>();
    impl_->kind = kind;
    std::vector<torch::optim::OptimizerParamGroup> pg;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<torch::Tensor> ps;
      for (const Tensor& t : groups[g]) ps.push_back(T(t));
      const nlohmann::json o = g < group_options.size() ? group_options[g] : nlohmann::json::object();
      pg.emplace_back(ps, make_options(kind, o, defaults));
    }
    auto def = make_options(kind, nlohmann::json::object(), defaults);
    if (kind == "sgd")
      impl_->opt = std::make_unique<torch::optim::SGD>(pg, static_cast<torch::optim::SGDOptions&>(*def));
    else if (kind == "adam")
      impl_->opt = std::make_unique<torch::optim::Adam>(pg, static_cast<torch::optim::AdamOptions&>(*def));
    else impl_->opt = std::make_unique<torch::optim::AdamW>(pg, static_cast<torch::optim::AdamWOptions&>(*def));
  });
}

void Optim::step() {
  guarded("Optim.step", [&] { impl_->opt->step(); });
}
void Optim::zero_grad() {
  guarded("Optim.zero_grad", [&] { impl_->opt->zero_grad(); });
}

std::vector<std::pair<std::string, Tensor>> Optim::state_of(const Tensor& param) const {
  return guarded("Optim.state_of", [&] {
    std::vector<std::pair<std::string, Tensor>> out;
    auto& st = impl_->opt->state();
    auto it = st.find(T(param).unsafeGetTensorImpl());
    if (it == st.end()) return out;
    auto put = [&](const char* name, const torch::Tensor& t) {
      if (t.defined()) out.emplace_back(name, wrap(t));
    };
    if (impl_->kind == "sgd") {
      put("momentum_buffer", static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer());
    } else if (impl_->kind == "adam") {
      auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
      out.emplace_back("step", step_tensor(s.step()));
      put("exp_avg", s.exp_avg());
      put("exp_avg_sq", s.exp_avg_sq());
      put("max_exp_avg_sq", s.max_exp_avg_sq());
    } else {
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      out.emplace_back("step", step_tensor(s.step()));
      put("exp_avg", s.exp_avg());
      put("exp_avg_sq", s.exp_avg_sq());
      put("max_exp_avg_sq", s.max_exp_avg_sq());
    }
    return out;
  });
}

nlohmann::json Optim::group_options(size_t g) const {
  return guarded("Optim.group_options", [&] {
    auto& o = impl_->opt->param_groups().at(g).options();
    if (impl_->kind == "sgd") {
      auto& s = static_cast<torch::optim::SGDOptions&>(o);
      return nlohmann::json{{"lr", s.lr()},
                            {"momentum", s.momentum()},
                            {"dampening", s.dampening()},
                            {"weight_decay", s.weight_decay()},
                            {"nesterov", s.nesterov()}};
    }
    auto fill = [](const auto& s) {
      return nlohmann::json{{"lr", s.lr()},
                            {"betas", {std::get<0>(s.betas()), std::get<1>(s.betas())}},
                            {"eps", s.eps()},
                            {"weight_decay", s.weight_decay()},
                            {"amsgrad", s.amsgrad()}};
    };
    if (impl_->kind == "adam") return fill(static_cast<torch::optim::AdamOptions&>(o));
    return fill(static_cast<torch::optim::AdamWOptions&>(o));
  });
}

void set_grad(const Tensor& param, const Tensor& grad) {
  guarded("set_grad", [&] {
    torch::Tensor p = T(param);
    p.mutable_grad() = grad.defined() ? T(grad).clone(at::MemoryFormat::Preserve) : torch::Tensor();
  });
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  return guarded("clip_grad_norm_", [&] {
    std::vector<torch::Tensor> ps;
    for (const Tensor& t : params) ps.push_back(T(t));
    return torch::nn::utils::clip_grad_norm_(ps, max_norm, norm_type, error_if_nonfinite);
  });
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  guarded("clip_grad_value_", [&] {
    std::vector<torch::Tensor> ps;
    for (const Tensor& t : params) ps.push_back(T(t));
    torch::nn::utils::clip_grad_value_(ps, clip_value);
  });
}

}  // namespace tb::ref
