// Hang scenarios of DistributedDataParallel (Note [Hang scenarios] in hang_launch.cpp): a
// parameter that stops getting a gradient, and ranks with uneven numbers of batches.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/dist/ddp/ddp.h"
#include "engine/dist/ddp/join.h"
#include "engine/core/error.h"
#include "engine/nn/linear.h"
#include "engine/autograd/functions.h"
#include "engine/tensor/factories.h"
#include "suites/scenarios/hang_launch.h"
#include "suites/scenarios/scenarios.h"

namespace tb::suites {

namespace {

using dist::FindingKind;
using hang::Outcome;
using hang::Rank;

// A body and a head; from step `skip_from` on the head is skipped (conditional computation), so
// its parameters get no gradient.
struct Branchy : nn::Module {
  std::shared_ptr<nn::Linear> body = register_module("body", std::make_shared<nn::Linear>(16, 16));
  std::shared_ptr<nn::Linear> head = register_module("head", std::make_shared<nn::Linear>(16, 16));
  bool use_head = true;
  Tensor forward(const Tensor& x) override {
    Tensor h = (*body)(x);
    return use_head ? (*head)(h) : h;
  }
};

// One DDP training step on 8 rows; the loss is the output's mean square.
void ddp_step(dist::DistributedDataParallel& ddp, Rank& r) {
  Tensor x = full({8, 16}, 0.1 * double(r.rank + 1));
  Tensor y = ddp.forward(x);
  Tensor loss = tb::mean(tb::mul(y, y));
  loss.backward();
  r.write_peak();
}

double param_sum(nn::Module& m) {
  double s = 0;
  for (const Tensor& p : m.parameters()) {
    const Tensor c = p.contiguous();
    const float* d = c.data_ptr<float>();
    for (int64_t i = 0; i < c.numel(); ++i) s += d[i];
  }
  return s;
}

const dist::Finding* any_finding(const Outcome& o, FindingKind kind, int rank) {
  if (!o.dumps) return nullptr;
  for (const dist::Finding& f : o.dumps->findings)
    if (f.kind == kind && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end()) return &f;
  return nullptr;
}

}  // namespace

void register_ddp_hang_scenarios() {
  hang::register_hang({
      "ddp_unused_parameter",
      "under DDP without find_unused_parameters, a layer stops taking part in the loss from some step on",
      "every rank raises at the end of that backward, naming the parameters that got no gradient",
      2,
      [](Rank& r) {
        r.join();
        auto model = std::make_shared<Branchy>();
        dist::DistributedDataParallel ddp(model, r.pg);
        for (int i = 1; i <= r.plan.steps; ++i) {
          if (i == r.plan.step) {
            model->use_head = false;
            r.fault("the head leaves the loss at step " + std::to_string(i));
          }
          ddp_step(ddp, r);
        }
      },
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        for (int r = 0; r < o.world; ++r) {
          const std::string& e = o.errors[std::size_t(r)];
          if (e.find("received no gradient") == std::string::npos || e.find("head.weight") == std::string::npos ||
              e.find("head.bias") == std::string::npos || e.find("find_unused_parameters") == std::string::npos)
            return "rank " + std::to_string(r) + " raised '" + e +
                   "', not the unused-parameter error naming head.weight and head.bias";
          if (e.find("body.weight") != std::string::npos)
            return "rank " + std::to_string(r) + " names body.weight, which got its gradient: " + e;
        }
        diagnosis = o.errors[0];
        return {};
      },
  });

  hang::register_hang({
      "ddp_uneven_batches",
      "under DDP one rank has fewer batches than the others, finishes its loop and leaves (no Join)",
      "the others' watchdog names the early rank, which destroyed its group before their gradient all_reduce "
      "(its DDP bucket label)",
      2,
      [](Rank& r) {
        r.join();
        auto model = std::make_shared<Branchy>();
        {
          dist::DistributedDataParallel ddp(model, r.pg);
          const int batches = r.victim() ? r.plan.step : r.plan.steps;
          for (int i = 1; i <= batches; ++i) ddp_step(ddp, r);
          if (r.victim()) r.fault("out of batches after " + std::to_string(batches) + " steps");
        }
        r.pg.reset();
      },
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        const int v = o.plan.victim;
        // The early rank is the one absent from the dumps: it left the group and never arrived at
        // the all_reduce the others wait in.
        const dist::Finding* absent = any_finding(o, FindingKind::RankAbsent, v);
        if (!absent || absent->text.find("destroyed its process group") == std::string::npos ||
            absent->text.find("never arrived at") == std::string::npos)
          return "the dumps do not name rank " + std::to_string(v) + " as having left before the others' all_reduce";
        const std::string who = "rank " + std::to_string(v);
        bool said = false;
        for (const std::string& w : o.watchdog_lines)
          said |= w.find(who) != std::string::npos && w.find("destroyed its process group") != std::string::npos;
        if (!said) return "no watchdog line says " + who + " destroyed its process group";
        bool labelled = false;  // the call site of the collective the others wait in
        for (const std::string& w : o.watchdog_lines) labelled |= w.find("label ddp/bucket") != std::string::npos;
        if (!labelled) return "no watchdog line names the DDP bucket (label ddp/bucket ...) the others wait in";
        diagnosis = absent->text;
        return {};
      },
  });

  hang::register_hang({
      "ddp_uneven_batches_join",
      "the same uneven batches, trained under a Join context (the remedy)",
      "no hang: every rank finishes, the early rank shadows the others' remaining steps, the replicas end equal",
      2,
      [](Rank& r) {
        r.join();
        auto model = std::make_shared<Branchy>();
        {
          dist::DistributedDataParallel ddp(model, r.pg);
          dist::Join join(ddp);
          const int batches = r.victim() ? r.plan.step : r.plan.steps;
          for (int i = 1; i <= batches; ++i) ddp_step(ddp, r);
          if (r.victim()) r.fault("out of batches after " + std::to_string(batches) + " steps");
          const int64_t shadowed = join.join();
          // Every replica must end equal: the largest and smallest parameter sum over ranks agree.
          const double local = param_sum(*model);
          Tensor ext = full({2}, 0.0, DType::Float64);
          ext.data_ptr<double>()[0] = local;
          ext.data_ptr<double>()[1] = -local;
          r.pg->all_reduce(ext, dist::ReduceOp::Max)->wait();
          TB_CHECK(ext.data_ptr<double>()[0] == -ext.data_ptr<double>()[1], "scenario",
                   "the replicas differ after Join: parameter sums from ", -ext.data_ptr<double>()[1], " to ",
                   ext.data_ptr<double>()[0]);
          std::fprintf(stderr, "scenario: rank %d: joined after %d batches, shadowed %lld\n", r.rank, batches,
                       static_cast<long long>(shadowed));
        }
        r.pg.reset();
      },
      [](const Outcome& o, std::string& diagnosis) -> std::string {
        if (const std::string p = o.clean_finish(); !p.empty()) return p;
        const int v = o.plan.victim, shadow = o.plan.steps - o.plan.step;
        const std::string want = "scenario: rank " + std::to_string(v) + ": joined after " +
                                 std::to_string(o.plan.step) + " batches, shadowed " + std::to_string(shadow);
        if (o.launch.rank_output[std::size_t(v)].find(want) == std::string::npos)
          return "rank " + std::to_string(v) + " did not say '" + want + "'";
        diagnosis = "every rank finished under Join; rank " + std::to_string(v) + " shadowed the others' last " +
                    std::to_string(shadow) + " steps; the replicas are equal";
        return {};
      },
      {},
      false,
      /*remedy=*/true,
  });
}

}  // namespace tb::suites
