// Case table of the loss family (engine/autograd/functions/loss.cpp vs reference/loss.h): every
// loss x reduction (mean, sum, none) x its options (class weights, ignore_index, label_smoothing,
// probability targets, weight, pos_weight), float32 and float64, plain and awkward layouts, views
// first and chains, and the losses under autocast. Every row checks the value and the gradients.
// Class-index targets are int64 inputs; floating targets and weights that PyTorch does not
// differentiate by default are left out of .wrt.
#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/tensor/factories.h"
#include "reference/elementwise.h"
#include "reference/linalg.h"
#include "reference/loss.h"
#include "reference/nn_norm.h"
#include "reference/views.h"
#include "suites/ops/autocast_case.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

tb::Tensor opt(const In& x, int i) { return i >= 0 ? x[size_t(i)] : tb::Tensor(); }
ref::Tensor opt(const RIn& x, int i) { return i >= 0 ? x[size_t(i)] : ref::Tensor(); }

const char* const kReductions[] = {"mean", "sum", "none"};

// Class-loss shapes: input, then the class-index target's shape.
struct ClassShape {
  std::string name;
  Shape input, target;
  Layout layout;
};
const std::vector<ClassShape> kClassShapes = {
    {"2d", {5, 4}, {5}, Layout::Contiguous},
    {"2d_transposed", {6, 3}, {6}, Layout::Transposed},
    {"spatial", {2, 3, 2, 2}, {2, 2, 2}, Layout::Strided},
    {"unbatched", {4}, {}, Layout::Contiguous},
};

// Options of a class-index loss row.
struct ClassOpts {
  std::string name;
  bool weight;
  int64_t ignore_index;
  double label_smoothing;
};

void nll_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const std::vector<ClassOpts> opts = {{"plain", false, -100, 0},
                                       {"weight", true, -100, 0},
                                       {"ignore", false, 1, 0},
                                       {"weight_ignore", true, 2, 0}};
  for (const ClassShape& s : kClassShapes)
    for (const ClassOpts& o : opts)
      for (const char* red : kReductions) {
        const int64_t C = s.input.size() == 1 ? s.input[0] : s.input[1];  // unbatched (C): a 0-dim target
        std::vector<Input> in = {{s.input, dt, s.layout},
                                 {s.target, DType::Int64, Layout::Contiguous, Values::Index, C}};
        const int wi = o.weight ? 2 : -1;
        if (o.weight) in.push_back({{C}, dt, Layout::Contiguous, Values::Positive});
        const std::string r = red;
        const int64_t ig = o.ignore_index;
        OpCase c = make_grad_case(
            "nll_loss/" + d + "/" + s.name + "_" + o.name + "_" + r, in,
            [=](const In& x) { return one(tb::nll_loss(x[0], x[1], opt(x, wi), r, ig)); },
            [=](const RIn& x) { return one(R::nll_loss(x[0], x[1], opt(x, wi), r, ig)); });
        c.wrt = {0};
        v.push_back(std::move(c));
      }
  // Chain: log_softmax then nll_loss over a view (what cross_entropy fuses).
  OpCase c = make_grad_case(
      "nll_loss/" + d + "/chain_log_softmax_view",
      {{{4, 6}, dt}, {{6}, DType::Int64, Layout::Contiguous, Values::Index, 4}},
      [](const In& x) { return one(tb::nll_loss(tb::log_softmax(x[0].t(), 1), x[1])); },
      [](const RIn& x) { return one(R::nll_loss(R::log_softmax(R::t(x[0]), 1), x[1])); });
  c.wrt = {0};
  v.push_back(std::move(c));
  OpCase z = make_grad_case(
      "nll_loss/" + d + "/zero_batch_sum", {{{0, 3}, dt}, {{0}, DType::Int64, Layout::Contiguous, Values::Index, 3}},
      [](const In& x) { return one(tb::nll_loss(x[0], x[1], {}, "sum")); },
      [](const RIn& x) { return one(R::nll_loss(x[0], x[1], {}, "sum")); });
  z.wrt = {0};
  v.push_back(std::move(z));
}

void cross_entropy_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  const std::vector<ClassOpts> opts = {{"plain", false, -100, 0},
                                       {"weight", true, -100, 0},
                                       {"ignore", false, 1, 0},
                                       {"smooth", false, -100, 0.1},
                                       {"weight_ignore_smooth", true, 2, 0.2}};
  for (const ClassShape& s : kClassShapes)
    for (const ClassOpts& o : opts)
      for (const char* red : kReductions) {
        const int64_t C = s.input.size() == 1 ? s.input[0] : s.input[1];
        std::vector<Input> in = {{s.input, dt, s.layout},
                                 {s.target, DType::Int64, Layout::Contiguous, Values::Index, C}};
        const int wi = o.weight ? 2 : -1;
        if (o.weight) in.push_back({{C}, dt, Layout::Contiguous, Values::Positive});
        const std::string r = red;
        const int64_t ig = o.ignore_index;
        const double ls = o.label_smoothing;
        OpCase c = make_grad_case(
            "cross_entropy/" + d + "/" + s.name + "_" + o.name + "_" + r, in,
            [=](const In& x) { return one(tb::cross_entropy(x[0], x[1], opt(x, wi), r, ig, ls)); },
            [=](const RIn& x) { return one(R::cross_entropy(x[0], x[1], opt(x, wi), r, ig, ls)); });
        c.wrt = {0};
        v.push_back(std::move(c));
      }
  // Probability targets (floating, the input's shape), with smoothing and weights.
  const std::vector<ClassOpts> popts = {{"prob", false, -100, 0}, {"prob_weight_smooth", true, -100, 0.1}};
  for (const ClassShape& s : kClassShapes)
    for (const ClassOpts& o : popts)
      for (const char* red : kReductions) {
        const int64_t C = s.input.size() == 1 ? s.input[0] : s.input[1];
        std::vector<Input> in = {{s.input, dt, s.layout}, {s.input, dt, Layout::Contiguous, Values::Positive}};
        const int wi = o.weight ? 2 : -1;
        if (o.weight) in.push_back({{C}, dt, Layout::Contiguous, Values::Positive});
        const std::string r = red;
        const double ls = o.label_smoothing;
        OpCase c = make_grad_case(
            "cross_entropy/" + d + "/" + s.name + "_" + o.name + "_" + r, in,
            [=](const In& x) { return one(tb::cross_entropy(x[0], x[1], opt(x, wi), r, -100, ls)); },
            [=](const RIn& x) { return one(R::cross_entropy(x[0], x[1], opt(x, wi), r, -100, ls)); });
        c.wrt = {0};
        v.push_back(std::move(c));
      }
  // One class: every loss is a zero, whose sign a reciprocal shows. PyTorch's is +0 for an
  // unbatched input with a class-index target (its one term summed into a zero), -0 otherwise.
  for (const bool batched : {false, true})
    for (const double ls : {0.0, 0.2})
      for (const char* red : kReductions) {
        const std::string r = red;
        const Shape xs = batched ? Shape{3, 1} : Shape{1}, ts = batched ? Shape{3} : Shape{};
        v.push_back(make_case(
            "cross_entropy/" + d + "/one_class_zero_sign" + (batched ? "_batched" : "_unbatched") +
                (ls > 0 ? "_smooth_" : "_") + r,
            {{xs, dt}, {ts, DType::Int64, Layout::Contiguous, Values::Index, 1}},
            [=](const In& x) { return one(tb::reciprocal(tb::cross_entropy(x[0], x[1], {}, r, -100, ls))); },
            [=](const RIn& x) { return one(R::reciprocal(R::cross_entropy(x[0], x[1], {}, r, -100, ls))); }));
      }
  // The target's gradient too (probability targets are differentiable in PyTorch).
  OpCase t = make_grad_case(
      "cross_entropy/" + d + "/prob_target_grad", {{{3, 5}, dt}, {{3, 5}, dt, Layout::Transposed, Values::Positive}},
      [](const In& x) { return one(tb::cross_entropy(x[0], x[1], {}, "mean", -100, 0.3)); },
      [](const RIn& x) { return one(R::cross_entropy(x[0], x[1], {}, "mean", -100, 0.3)); });
  t.wrt = {0, 1};
  v.push_back(std::move(t));
  // A view first: logits of the middle of a (B, T, V) batch, flattened as a language model does.
  OpCase c = make_grad_case(
      "cross_entropy/" + d + "/view_lm", {{{2, 4, 6}, dt}, {{4}, DType::Int64, Layout::Contiguous, Values::Index, 6}},
      [](const In& x) {
        return one(tb::cross_entropy(x[0].narrow(1, 1, 2).reshape({4, 6}), x[1]));
      },
      [](const RIn& x) {
        return one(R::cross_entropy(R::reshape(R::narrow(x[0], 1, 1, 2), {4, 6}), x[1]));
      });
  c.wrt = {0};
  v.push_back(std::move(c));
  if (dt == DType::Float32) {
    // A GPT-like head: 64 positions over a 512-word vocabulary.
    OpCase lm = make_grad_case(
        "cross_entropy/" + d + "/lm_rows",
        {{{64, 512}, dt}, {{64}, DType::Int64, Layout::Contiguous, Values::Index, 512}},
        [](const In& x) { return one(tb::cross_entropy(x[0], x[1])); },
        [](const RIn& x) { return one(R::cross_entropy(x[0], x[1])); });
    lm.wrt = {0};
    v.push_back(std::move(lm));
  }
}

void elementwise_loss_rows(std::vector<OpCase>& v, DType dt) {
  const std::string d = core::name(dt);
  for (const char* red : kReductions) {
    const std::string r = red;
    v.push_back(make_grad_case(
        "mse_loss/" + d + "/" + r, {{{3, 4}, dt, Layout::Transposed}, {{3, 4}, dt, Layout::Strided}},
        [r](const In& x) { return one(tb::mse_loss(x[0], x[1], r)); },
        [r](const RIn& x) { return one(R::mse_loss(x[0], x[1], r)); }));
    v.push_back(make_grad_case(
        "l1_loss/" + d + "/" + r, {{{3, 4}, dt, Layout::Strided}, {{3, 4}, dt}},
        [r](const In& x) { return one(tb::l1_loss(x[0], x[1], r)); },
        [r](const RIn& x) { return one(R::l1_loss(x[0], x[1], r)); }));
    // Target not differentiated (the usual case).
    OpCase m = make_grad_case(
        "mse_loss/" + d + "/input_only_" + r, {{{5}, dt}, {{5}, dt}},
        [r](const In& x) { return one(tb::mse_loss(x[0], x[1], r)); },
        [r](const RIn& x) { return one(R::mse_loss(x[0], x[1], r)); });
    m.wrt = {0};
    v.push_back(std::move(m));
  }
  v.push_back(make_grad_case(
      "mse_loss/" + d + "/scalar", {{{}, dt}, {{}, dt}}, [](const In& x) { return one(tb::mse_loss(x[0], x[1])); },
      [](const RIn& x) { return one(R::mse_loss(x[0], x[1])); }));
  v.push_back(make_grad_case(
      "l1_loss/" + d + "/view_chain", {{{4, 3}, dt}, {{3, 2}, dt}},
      [](const In& x) { return one(tb::l1_loss(tb::softmax(x[0].t().narrow(1, 0, 2), 1), x[1], "sum")); },
      [](const RIn& x) { return one(R::l1_loss(R::softmax(R::narrow(R::t(x[0]), 1, 0, 2), 1), x[1], "sum")); }));

  // binary_cross_entropy_with_logits: weight (per column, broadcast) and pos_weight (per class).
  struct BceOpts {
    std::string name;
    bool weight, pos_weight;
  };
  for (const BceOpts& o : std::vector<BceOpts>{{"plain", false, false},
                                               {"weight", true, false},
                                               {"pos_weight", false, true},
                                               {"weight_pos_weight", true, true}})
    for (const char* red : kReductions) {
      const std::string r = red;
      std::vector<Input> in = {{{4, 3}, dt, Layout::Transposed}, {{4, 3}, dt, Layout::Contiguous, Values::Unit}};
      const int wi = o.weight ? int(in.size()) : -1;
      if (o.weight) in.push_back({{3}, dt, Layout::Contiguous, Values::Positive});
      const int pi = o.pos_weight ? int(in.size()) : -1;
      if (o.pos_weight) in.push_back({{3}, dt, Layout::Contiguous, Values::Positive});
      OpCase c = make_grad_case(
          "binary_cross_entropy_with_logits/" + d + "/" + o.name + "_" + r, in,
          [=](const In& x) { return one(tb::binary_cross_entropy_with_logits(x[0], x[1], opt(x, wi), r, opt(x, pi))); },
          [=](const RIn& x) {
            return one(R::binary_cross_entropy_with_logits(x[0], x[1], opt(x, wi), r, opt(x, pi)));
          });
      c.wrt = {0};
      v.push_back(std::move(c));
    }
  // Infinite logits against targets 0, 1/2 and 1: PyTorch's grouping (1 - t) x + softplus(-x) gives
  // inf at (+inf, 0) and NaN at (+inf, 1) and (-inf, t); the gradient stays sigmoid(x) - t.
  for (const bool pw : {false, true}) {
    OpCase c = make_grad_case(
        "binary_cross_entropy_with_logits/" + d + (pw ? "/infinite_logits_pos_weight" : "/infinite_logits"),
        {{{2, 3}, dt}, {{3}, dt, Layout::Contiguous, Values::Positive}},
        [dt, pw](const In& x) {
          const tb::Tensor shift = tb::from_vector({INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY},
                                                   {2, 3}, dt);
          const tb::Tensor t = tb::from_vector({0, 0.5, 1, 0, 0.5, 1}, {2, 3}, dt);
          return one(
              tb::binary_cross_entropy_with_logits(tb::add(x[0], shift), t, {}, "none", pw ? x[1] : tb::Tensor()));
        },
        [dt, pw](const RIn& x) {
          const ref::Tensor shift = ref::to_ref(
              tb::from_vector({INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY}, {2, 3}, dt));
          const ref::Tensor t = ref::to_ref(tb::from_vector({0, 0.5, 1, 0, 0.5, 1}, {2, 3}, dt));
          return one(
              R::binary_cross_entropy_with_logits(R::add(x[0], shift), t, {}, "none", pw ? x[1] : ref::Tensor()));
        });
    c.wrt = {0};
    c.gradcheck = false;  // infinite inputs
    v.push_back(std::move(c));
  }
  // The target's gradient too (weight and pos_weight are not differentiable in LibTorch).
  OpCase all = make_grad_case(
      "binary_cross_entropy_with_logits/" + d + "/target_grad",
      {{{2, 3}, dt},
       {{2, 3}, dt, Layout::Strided, Values::Unit},
       {{2, 1}, dt, Layout::Contiguous, Values::Positive},
       {{3}, dt, Layout::Contiguous, Values::Positive}},
      [](const In& x) { return one(tb::binary_cross_entropy_with_logits(x[0], x[1], x[2], "mean", x[3])); },
      [](const RIn& x) { return one(R::binary_cross_entropy_with_logits(x[0], x[1], x[2], "mean", x[3])); });
  all.wrt = {0, 1};
  v.push_back(std::move(all));
}

// Losses under autocast: LibTorch's float32 list (bf16 inputs compute in float32), and an MLP step
// as a model runs it (bf16 products, float32 residual add, float32 loss).
void autocast_rows(std::vector<OpCase>& v) {
  const DType f = DType::Float32, b = DType::BFloat16;
  v.push_back(autocast_case(
      "cross_entropy/bfloat16", {{{6, 5}, b}, {{6}, DType::Int64, Layout::Contiguous, Values::Index, 5}},
      [](const In& x) { return tb::cross_entropy(x[0], x[1]); },
      [](const RIn& x) { return R::cross_entropy(x[0], x[1]); }));
  v.back().wrt = {0};
  v.push_back(autocast_case(
      "mse_loss/bfloat16", {{{4, 5}, b}, {{4, 5}, b}}, [](const In& x) { return tb::mse_loss(x[0], x[1]); },
      [](const RIn& x) { return R::mse_loss(x[0], x[1]); }));
  v.push_back(autocast_case(
      "mlp_step/float32",
      {{{8, 16}, f},
       {{32, 16}, f},
       {{32}, f},
       {{5, 32}, f},
       {{5}, f},
       {{8}, DType::Int64, Layout::Contiguous, Values::Index, 5}},
      [](const In& x) {
        const tb::Tensor h = tb::relu(tb::linear(x[0], x[1], x[2]));
        return tb::cross_entropy(tb::linear(h, x[3], x[4]), x[5]);
      },
      [](const RIn& x) {
        const R::Tensor h = R::relu(R::linear(x[0], x[1], x[2]));
        return R::cross_entropy(R::linear(h, x[3], x[4]), x[5]);
      }));
  v.back().wrt = {0, 1, 2, 3, 4};
}

}  // namespace

std::vector<OpCase> loss_cases() {
  std::vector<OpCase> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    nll_rows(v, dt);
    cross_entropy_rows(v, dt);
    elementwise_loss_rows(v, dt);
  }
  autocast_rows(v);
  return v;
}

}  // namespace tb::suites
