// Gradient cases of the linear-algebra ops (engine/autograd/functions/linalg.cpp): mm, bmm,
// matmul in each of PyTorch's 1-D/2-D/N-D broadcasting forms, dot, addmm (beta/alpha, beta = 0),
// linear (2-D, N-D, 1-D, with and without bias), linear_relu, outer, and einsum (contractions, diagonals,
// traces, broadcasting "...", implicit outputs, labels summed in one operand, three operands).
// Float32 and float64, contiguous and transposed/strided/expanded operands, views before the op.
#include "engine/autograd/functions.h"
#include "reference/elementwise.h"
#include "reference/linalg.h"
#include "reference/reduce.h"
#include "reference/views.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

namespace {

namespace A = tb::autograd;
namespace R = tb::ref;
using In = std::vector<tb::Tensor>;
using RIn = std::vector<ref::Tensor>;

struct LayoutName {
  Layout layout;
  const char* name;
};

// einsum rows: equation and operand shapes.
struct EinsumRow {
  const char* name;
  const char* equation;
  std::vector<Shape> shapes;
};
const std::vector<EinsumRow> kEinsum = {
    {"mm", "ij,jk->ik", {{3, 4}, {4, 5}}},
    {"bmm", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 3}}},
    {"transpose", "ij->ji", {{3, 4}}},
    {"sum_all", "ij->", {{3, 4}}},
    {"row_sum", "ij->i", {{3, 4}}},
    {"diag", "ii->i", {{4, 4}}},
    {"trace", "ii->", {{4, 4}}},
    {"batch_diag", "bii->bi", {{2, 3, 3}}},
    {"diag_contract", "iij,jk->ik", {{3, 3, 4}, {4, 2}}},
    {"diag_both", "ii,ij->j", {{3, 3}, {3, 4}}},
    {"outer", "i,j->ij", {{3}, {4}}},
    {"dot", "i,i->", {{5}, {5}}},
    {"mv", "ij,j->i", {{3, 4}, {4}}},
    {"hadamard", "ab,ab->ab", {{3, 4}, {3, 4}}},
    {"only_in_one", "ij,k->ik", {{3, 4}, {5}}},
    {"implicit", "ij,jk", {{3, 4}, {4, 2}}},
    {"implicit_upper", "Ab,bC", {{3, 4}, {4, 2}}},
    {"three", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
    {"ellipsis", "...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 3}}},
    {"ellipsis_broadcast", "...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}},
    {"ellipsis_middle", "i...j,j->i...", {{2, 3, 4}, {4}}},
    {"ellipsis_implicit", "...ij,...jk", {{2, 3, 4}, {4, 2}}},
    {"ellipsis_sum", "...i->...", {{2, 3, 4}}},
    {"spaces", "i j , j k -> i k", {{3, 4}, {4, 2}}},
    {"label_broadcast", "ij,ij->ij", {{3, 1}, {3, 4}}},
    {"diag_broadcast_batch", "bii,bi->b", {{1, 3, 3}, {2, 3}}},
};

}  // namespace

std::vector<OpCase> grad_linalg_cases() {
  std::vector<OpCase> v;
  auto row = [&v](std::string name, std::vector<Input> in, EngineFn e, RefFn r) -> OpCase& {
    v.push_back(make_grad_case(std::move(name), std::move(in), std::move(e), std::move(r)));
    return v.back();
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = core::name(dt);
    for (const LayoutName& l : {LayoutName{Layout::Contiguous, "contig"}, LayoutName{Layout::Transposed, "transposed"},
                                LayoutName{Layout::Strided, "strided"}, LayoutName{Layout::Expanded, "expanded"}}) {
      const std::string ln = l.name;
      row("mm/" + d + "/" + ln, {{{3, 4}, dt, l.layout}, {{4, 5}, dt, l.layout}},
          [](const In& x) { return one(tb::mm(x[0], x[1])); }, [](const RIn& x) { return one(R::mm(x[0], x[1])); });
      row("bmm/" + d + "/" + ln, {{{2, 3, 4}, dt, l.layout}, {{2, 4, 3}, dt}},
          [](const In& x) { return one(tb::bmm(x[0], x[1])); }, [](const RIn& x) { return one(R::bmm(x[0], x[1])); });
      row("matmul/" + d + "/3d_2d_" + ln, {{{2, 3, 4}, dt, l.layout}, {{4, 3}, dt, l.layout}},
          [](const In& x) { return one(tb::matmul(x[0], x[1])); }, [](const RIn& x) { return one(R::matmul(x[0], x[1])); });
      row("dot/" + d + "/" + ln, {{{6}, dt, l.layout}, {{6}, dt, Layout::Strided}},
          [](const In& x) { return one(tb::dot(x[0], x[1])); }, [](const RIn& x) { return one(R::dot(x[0], x[1])); });
      row("addmm/" + d + "/" + ln, {{{3, 5}, dt, l.layout}, {{3, 4}, dt, l.layout}, {{4, 5}, dt, Layout::Transposed}},
          [](const In& x) { return one(tb::addmm(x[0], x[1], x[2])); },
          [](const RIn& x) { return one(R::addmm(x[0], x[1], x[2])); });
      row("linear/" + d + "/" + ln, {{{4, 3}, dt, l.layout}, {{5, 3}, dt, l.layout}, {{5}, dt, Layout::Strided}},
          [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
          [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
      row("outer/" + d + "/" + ln, {{{3}, dt, l.layout}, {{4}, dt, Layout::Strided}},
          [](const In& x) { return one(tb::outer(x[0], x[1])); }, [](const RIn& x) { return one(R::outer(x[0], x[1])); });
    }
    // matmul: every dimensionality case of torch.matmul.
    struct MatmulRow {
      const char* name;
      Shape a, b;
    };
    for (const MatmulRow& m : std::vector<MatmulRow>{{"1d_1d", {4}, {4}},
                                                     {"1d_2d", {4}, {4, 3}},
                                                     {"2d_1d", {3, 4}, {4}},
                                                     {"2d_2d", {3, 4}, {4, 2}},
                                                     {"3d_1d", {2, 3, 4}, {4}},
                                                     {"1d_3d", {4}, {2, 4, 3}},
                                                     {"2d_3d", {3, 4}, {2, 4, 2}},
                                                     {"3d_3d", {2, 3, 4}, {2, 4, 2}},
                                                     {"4d_3d_broadcast", {2, 1, 3, 4}, {3, 4, 2}},
                                                     {"3d_4d_broadcast", {1, 2, 3}, {2, 2, 3, 2}},
                                                     {"4d_2d", {2, 2, 3, 4}, {4, 2}},
                                                     {"empty_batch", {0, 3, 4}, {4, 2}},
                                                     {"empty_k", {3, 0}, {0, 2}},
                                                     // Zero-size inner dim on the folded paths (the
                                                     // backward once lost the rows: reshape [0, N]).
                                                     {"3d_2d_empty_k", {2, 3, 0}, {0, 2}},
                                                     {"4d_2d_empty_k", {2, 1, 3, 0}, {0, 4}},
                                                     {"3d_3d_empty_k", {2, 3, 0}, {2, 0, 2}},
                                                     {"1d_2d_empty_k", {0}, {0, 3}},
                                                     {"3d_empty_n", {2, 3, 4}, {4, 0}}}) {
      row("matmul/" + d + "/" + m.name, {{m.a, dt, Layout::Transposed}, {m.b, dt}},
          [](const In& x) { return one(tb::matmul(x[0], x[1])); }, [](const RIn& x) { return one(R::matmul(x[0], x[1])); });
    }
    // addmm: beta/alpha; beta = 0 ignores self (its gradient is zero); self broadcasts.
    for (auto [beta, alpha] : {std::pair{0.5, 2.0}, std::pair{0.0, 1.5}, std::pair{1.0, -1.0}}) {
      const std::string n = "b" + std::to_string(beta).substr(0, 3) + "_a" + std::to_string(alpha).substr(0, 4);
      row("addmm/" + d + "/" + n, {{{5}, dt}, {{3, 4}, dt, Layout::Strided}, {{4, 5}, dt}},
          [beta, alpha](const In& x) { return one(tb::addmm(x[0], x[1], x[2], beta, alpha)); },
          [beta, alpha](const RIn& x) { return one(R::addmm(x[0], x[1], x[2], beta, alpha)); });
      row("addmm/" + d + "/" + n + "_col", {{{3, 1}, dt}, {{3, 4}, dt}, {{4, 5}, dt, Layout::Transposed}},
          [beta, alpha](const In& x) { return one(tb::addmm(x[0], x[1], x[2], beta, alpha)); },
          [beta, alpha](const RIn& x) { return one(R::addmm(x[0], x[1], x[2], beta, alpha)); });
    }
    // linear: N-D input, no bias, 1-D input, a frozen weight (only x and bias need gradients).
    row("linear/" + d + "/3d", {{{2, 3, 4}, dt, Layout::Transposed}, {{5, 4}, dt}, {{5}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
    row("linear/" + d + "/4d_no_bias", {{{2, 1, 3, 4}, dt, Layout::Strided}, {{5, 4}, dt, Layout::Transposed}},
        [](const In& x) { return one(tb::linear(x[0], x[1])); }, [](const RIn& x) { return one(R::linear(x[0], x[1])); });
    row("linear/" + d + "/1d", {{{4}, dt}, {{3, 4}, dt}, {{3}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
    row("linear/" + d + "/bias_numel1", {{{4, 3}, dt}, {{5, 3}, dt}, {{1}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
    row("linear/" + d + "/empty_rows", {{{0, 3}, dt}, {{5, 3}, dt}, {{5}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
    row("linear/" + d + "/frozen_weight", {{{4, 3}, dt}, {{5, 3}, dt}, {{5}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); })
        .wrt = {0, 2};
    row("linear/" + d + "/input_only", {{{4, 3}, dt}, {{5, 3}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1])); }, [](const RIn& x) { return one(R::linear(x[0], x[1])); })
        .wrt = {0};
    // linear_relu (one node: epilogue relu, backward masks the gradient and sums the bias
    // gradient in one pass) against LibTorch's relu(linear(...)).
    auto lr = [](const In& x) { return one(tb::linear_relu(x[0], x[1], x.size() > 2 ? x[2] : tb::Tensor())); };
    auto rlr = [](const RIn& x) { return one(R::relu(R::linear(x[0], x[1], x.size() > 2 ? x[2] : ref::Tensor()))); };
    row("linear_relu/" + d + "/2d", {{{6, 3}, dt, Layout::Transposed}, {{5, 3}, dt}, {{5}, dt, Layout::Strided}}, lr, rlr);
    row("linear_relu/" + d + "/3d", {{{2, 3, 4}, dt, Layout::Transposed}, {{5, 4}, dt}, {{5}, dt}}, lr, rlr);
    row("linear_relu/" + d + "/no_bias", {{{4, 3}, dt}, {{5, 3}, dt, Layout::Transposed}}, lr, rlr);
    row("linear_relu/" + d + "/1d", {{{4}, dt}, {{3, 4}, dt}, {{3}, dt}}, lr, rlr);
    row("linear_relu/" + d + "/bias_numel1", {{{4, 3}, dt}, {{5, 3}, dt}, {{1}, dt}}, lr, rlr);
    row("linear_relu/" + d + "/empty_rows", {{{0, 3}, dt}, {{5, 3}, dt}, {{5}, dt}}, lr, rlr);
    // Zero in-features: the output is the bias (or zeros), and every gradient is defined.
    for (const Shape& xs : {Shape{4, 0}, Shape{2, 3, 0}, Shape{0}}) {
      const std::string n = "/empty_in_" + std::to_string(xs.size()) + "d";
      row("linear/" + d + n, {{xs, dt}, {{5, 0}, dt}, {{5}, dt}},
          [](const In& x) { return one(tb::linear(x[0], x[1], x[2])); },
          [](const RIn& x) { return one(R::linear(x[0], x[1], x[2])); });
      row("linear_relu/" + d + n, {{xs, dt}, {{5, 0}, dt}, {{5}, dt}}, lr, rlr);
    }
    // NaN inputs: relu keeps NaN (oneDNN's relu post-op turned it into 0); sqrt makes NaN of the
    // negative entries. No gradcheck: NaN is no point to take differences at.
    row("linear_relu/" + d + "/nan", {{{4, 3}, dt}, {{5, 3}, dt}, {{5}, dt}},
        [](const In& x) { return one(tb::linear_relu(tb::sqrt(x[0]), x[1], x[2])); },
        [](const RIn& x) { return one(R::relu(R::linear(R::sqrt(x[0]), x[1], x[2]))); })
        .gradcheck = false;
    row("linear_relu/" + d + "/frozen_weight", {{{4, 3}, dt}, {{5, 3}, dt}, {{5}, dt}}, lr, rlr).wrt = {0, 2};
    // Two layers: the second node's input gradient reaches the first alone (a fresh buffer nobody
    // else holds), so the first masks it in place. 70 rows x 500 columns: the bias-gradient sum
    // runs in several 64-row blocks and 256-column chunks, the columns split between threads
    // (70 * 500 is above kParallelGrain), and the last mask word is partial (500 = 15 * 32 + 20).
    row("linear_relu/" + d + "/two_layers", {{{70, 6}, dt}, {{500, 6}, dt}, {{500}, dt}, {{4, 500}, dt}, {{4}, dt}},
        [](const In& x) { return one(tb::linear_relu(tb::linear_relu(x[0], x[1], x[2]), x[3], x[4])); },
        [](const RIn& x) { return one(R::relu(R::linear(R::relu(R::linear(x[0], x[1], x[2])), x[3], x[4]))); });
    // 0-dim results and views before the op.
    row("dot/" + d + "/single", {{{1}, dt}, {{1}, dt}}, [](const In& x) { return one(tb::dot(x[0], x[1])); },
        [](const RIn& x) { return one(R::dot(x[0], x[1])); });
    // Attention's heads (two batch dims that do not merge: a 4-D product reads them in place).
    row("matmul/" + d + "/4d_heads_view", {{{2, 5, 3, 4}, dt}, {{2, 6, 3, 4}, dt}, {{2, 6, 3, 4}, dt}},
        [](const In& x) {
          const tb::Tensor s = tb::matmul(x[0].transpose(1, 2), x[1].transpose(1, 2).transpose(-2, -1));
          return one(tb::matmul(s, x[2].transpose(1, 2)));
        },
        [](const RIn& x) {
          const ref::Tensor s = R::matmul(R::transpose(x[0], 1, 2), R::transpose(R::transpose(x[1], 1, 2), -2, -1));
          return one(R::matmul(s, R::transpose(x[2], 1, 2)));
        });
    row("bmm/" + d + "/view_permute", {{{3, 2, 4}, dt}, {{2, 3, 4}, dt}},
        [](const In& x) { return one(tb::bmm(x[0].permute({1, 0, 2}), x[1].transpose(1, 2))); },
        [](const RIn& x) { return one(R::bmm(R::permute(x[0], {1, 0, 2}), R::transpose(x[1], 1, 2))); });
    row("matmul/" + d + "/view_select", {{{2, 3, 4}, dt}, {{4, 4}, dt}},
        [](const In& x) { return one(tb::matmul(x[0].select(0, 1), x[1].narrow(1, 1, 2))); },
        [](const RIn& x) { return one(R::matmul(R::select(x[0], 0, 1), R::narrow(x[1], 1, 1, 2))); });
    row("linear/" + d + "/view_weight_t", {{{4, 3}, dt}, {{3, 5}, dt}, {{5}, dt}},
        [](const In& x) { return one(tb::linear(x[0], x[1].t(), x[2])); },
        [](const RIn& x) { return one(R::linear(x[0], R::t(x[1]), x[2])); });
    // Chains: a two-layer linear stack, and matmul feeding a reduction.
    row("chain/" + d + "/linear_linear", {{{4, 3}, dt}, {{5, 3}, dt}, {{5}, dt}, {{2, 5}, dt}},
        [](const In& x) { return one(tb::linear(tb::linear(x[0], x[1], x[2]), x[3])); },
        [](const RIn& x) { return one(R::linear(R::linear(x[0], x[1], x[2]), x[3])); });
    row("chain/" + d + "/matmul_sum", {{{2, 3, 4}, dt}, {{4, 2}, dt, Layout::Transposed}},
        [](const In& x) { return one(tb::sum(tb::matmul(x[0], x[1]), {1})); },
        [](const RIn& x) { return one(R::sum(R::matmul(x[0], x[1]), {1})); });
    row("chain/" + d + "/einsum_mm", {{{3, 4}, dt}, {{4, 4}, dt}},
        [](const In& x) { return one(tb::mm(tb::einsum("ij,jk->ik", {x[0], x[1]}), x[1])); },
        [](const RIn& x) { return one(R::mm(R::einsum("ij,jk->ik", {x[0], x[1]}), x[1])); });
    // einsum.
    for (const EinsumRow& e : kEinsum) {
      std::vector<Input> in;
      for (const Shape& s : e.shapes) in.push_back({s, dt, s.size() >= 2 ? Layout::Transposed : Layout::Strided});
      const std::string eq = e.equation;
      row("einsum/" + d + "/" + e.name, in, [eq](const In& x) { return one(tb::einsum(eq, x)); },
          [eq](const RIn& x) { return one(R::einsum(eq, x)); });
    }
    row("einsum/" + d + "/same_operand_twice", {{{3, 4}, dt}},
        [](const In& x) { return one(tb::einsum("ij,kj->ik", {x[0], x[0]})); },
        [](const RIn& x) { return one(R::einsum("ij,kj->ik", {x[0], x[0]})); });
    row("einsum/" + d + "/expanded_operand", {{{3, 4}, dt, Layout::Expanded}, {{4, 2}, dt}},
        [](const In& x) { return one(tb::einsum("ij,jk->ik", {x[0], x[1]})); },
        [](const RIn& x) { return one(R::einsum("ij,jk->ik", {x[0], x[1]})); });
  }
  return v;
}

}  // namespace tb::suites
