// Shared by the distributed suites (ddp, fsdp): see dist_check.h.
#include "suites/ddp/dist_check.h"

#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"
#include "suites/recorded.h"

namespace tb::suites {

using dist::ProcessGroup;

// A group on `backend`; for gloo, a failure to start makes the case a skip (returns null).
std::shared_ptr<ProcessGroup> open_group(const std::string& backend, harness::Record& rec) {
  if (backend == "mpi") return dist::new_group(backend);
  try {
    return dist::new_group(backend);
  } catch (const std::exception& e) {
    rec.status = harness::Status::Skip;
    rec.message = "backend " + backend + " unavailable: " + e.what();
    return nullptr;
  }
}

ref::NamedTensors named_ref(const nn::Module& m) {
  ref::NamedTensors out;
  for (auto& [name, t] : m.state_dict()) out.push_back({name, ref::to_ref(t)});
  return out;
}

// FNV-1a over the bytes of every parameter and buffer (the replicated state), as int64.
int64_t state_hash(const nn::StateDict& state) {
  uint64_t h = 1469598103934665603ull;
  for (auto& [name, t] : state) {
    const Tensor c = t.detach().contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data());
    for (size_t i = 0; i < size_t(c.numel()) * c.itemsize(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return int64_t(h);
}

// Every rank's state hash equal (all_gather); throws CheckFailed naming the ranks otherwise.
void check_replicas_identical(ProcessGroup& g, const nn::StateDict& state, const std::string& when) {
  Tensor mine = from_vector_of<int64_t>({state_hash(state)}, {1});
  Tensor all = zeros({g.size()}, DType::Int64);
  g.all_gather(all, mine)->wait();
  const int64_t* h = all.data_ptr<int64_t>();
  for (int r = 1; r < g.size(); ++r)
    check(h[r] == h[0], when + ": rank " + std::to_string(r) +
                            "'s parameters and buffers differ from rank 0's (not "
                            "bitwise identical)");
}

double global_mean(ProcessGroup& g, double v) {
  Tensor t = from_vector({v}, {1}, DType::Float64);
  g.all_reduce(t, dist::ReduceOp::Avg)->wait();
  return t.data_ptr<double>()[0];
}

std::vector<ref::Tensor> ref_params(const ref::NnModule& r) {
  std::vector<ref::Tensor> out;
  for (auto& [n, t] : r.named_parameters()) out.push_back(t);
  return out;
}

namespace {
optim::AdamW::Options adamw_options() {
  optim::AdamW::Options e;
  e.lr = 1e-3;
  e.weight_decay = 0.01;
  return e;
}
optim::SGD::Options sgd_options() {
  optim::SGD::Options e;
  e.lr = 0.05;
  e.momentum = 0.9;
  return e;
}
}  // namespace

std::shared_ptr<optim::Optimizer> make_engine_opt(bool adamw, const std::vector<Tensor>& params) {
  if (adamw) return std::make_shared<optim::AdamW>(params, adamw_options());
  return std::make_shared<optim::SGD>(params, sgd_options());
}

OptPair make_opt(bool adamw, const std::vector<Tensor>& params, const std::vector<ref::Tensor>& rparams) {
  OptPair o;
  o.engine = make_engine_opt(adamw, params);
  if (adamw) {
    const optim::AdamW::Options e = adamw_options();
    o.reference = std::make_shared<ref::Optim>("adamw", std::vector<std::vector<ref::Tensor>>{rparams},
                                               std::vector<nlohmann::json>{nlohmann::json::object()},
                                               nlohmann::json{{"lr", e.lr},
                                                              {"betas", {e.betas.first, e.betas.second}},
                                                              {"eps", e.eps},
                                                              {"weight_decay", e.weight_decay}});
  } else {
    const optim::SGD::Options e = sgd_options();
    o.reference = std::make_shared<ref::Optim>("sgd", std::vector<std::vector<ref::Tensor>>{rparams},
                                               std::vector<nlohmann::json>{nlohmann::json::object()},
                                               nlohmann::json{{"lr", e.lr}, {"momentum", e.momentum}});
  }
  return o;
}

// Note [DDP equivalence tolerances]
// float64: one LibTorch process and P ranks compute the same mean gradient in different
// summation orders (per-rank means, then the average across ranks, against one mean over P*B
// rows), so they agree to ~1e-15 relative per step; after K <= 8 AdamW steps the parameters are
// held to rtol 1e-9, atol 1e-11 (AdamW divides by sqrt(v), which amplifies the difference of a
// near-zero gradient, hence not 1e-14) and the losses to rtol 1e-10.
// float32: the same rounding differences are ~1e-7 relative to the gradient. SGD's update is
// linear in the gradient (lr 0.05, momentum 0.9), so after K = 8 steps the parameters differ by
// at most ~K * lr * |g| * 1e-6 ~ 1e-7 absolute; rtol 1e-5 with atol 1e-6 leaves 10-100x margin,
// while a missing division by the world size, a bucket reduced twice or a skipped one moves
// parameters by ~lr * |g| ~ 1e-3. AdamW is not used in float32: its update's size does not
// depend on the gradient's, so rounding noise on a near-zero gradient becomes an lr-sized step.
Tolerance param_tolerance(DType dt) { return dt == DType::Float64 ? Tolerance{1e-9, 1e-11} : Tolerance{1e-5, 1e-6}; }
Tolerance loss_tolerance(DType dt) { return dt == DType::Float64 ? Tolerance{1e-10, 1e-12} : Tolerance{1e-5, 1e-6}; }

}  // namespace tb::suites
