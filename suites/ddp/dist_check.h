// What the distributed suites (ddp, fsdp) share: the group a case runs on, hashes that prove
// replicas bitwise identical, the global mean of a per-rank figure, the optimizer pairs both sides
// step, and the equivalence tolerances (Note [DDP equivalence tolerances] in dist_check.cpp).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/dist/process_group.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "harness/suite.h"
#include "reference/nn_modules.h"
#include "reference/optim.h"
#include "suites/ops/tolerance.h"

namespace tb::suites {

// A group on `backend`; for gloo, a failure to start makes the case a skip (returns null).
std::shared_ptr<dist::ProcessGroup> open_group(const std::string& backend, harness::Record& rec);
// The module's state dict as LibTorch tensors, by name.
ref::NamedTensors named_ref(const nn::Module& m);
// FNV-1a over the bytes of every tensor of a state dict, as int64.
int64_t state_hash(const nn::StateDict& state);
// Every rank's state hash equal (all_gather); throws CheckFailed naming the ranks otherwise.
void check_replicas_identical(dist::ProcessGroup& g, const nn::StateDict& state, const std::string& when);
inline void check_replicas_identical(dist::ProcessGroup& g, const nn::Module& m, const std::string& when) {
  check_replicas_identical(g, m.state_dict(), when);
}
// The mean of `v` over the ranks.
double global_mean(dist::ProcessGroup& g, double v);
std::vector<ref::Tensor> ref_params(const ref::NnModule& r);

// The optimizers both sides use: AdamW (float64 cases) or SGD with momentum (float32 cases).
struct OptPair {
  std::shared_ptr<optim::Optimizer> engine;
  std::shared_ptr<ref::Optim> reference;
};
// The engine side alone (for a second engine model beside the pair).
std::shared_ptr<optim::Optimizer> make_engine_opt(bool adamw, const std::vector<Tensor>& params);
OptPair make_opt(bool adamw, const std::vector<Tensor>& params, const std::vector<ref::Tensor>& rparams);

Tolerance param_tolerance(DType dt);
Tolerance loss_tolerance(DType dt);

}  // namespace tb::suites
