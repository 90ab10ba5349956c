// stack_collate and pad_collate. See collate.h for the shapes and the mask convention.
#include "engine/data/collate.h"

#include <algorithm>

#include "engine/core/shape.h"
#include "engine/ops/index.h"
#include "engine/tensor/factories.h"

namespace tb::data {

namespace {

// Checks that examples[i].<field> all share shape and dtype (or are all undefined) and stacks them.
Tensor stack_field(const std::vector<Example>& examples, Tensor Example::*field, const char* name) {
  const Tensor& first = examples[0].*field;
  std::vector<Tensor> parts;
  parts.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const Tensor& t = examples[i].*field;
    TB_CHECK(t.defined() == first.defined(), "stack_collate", "example ", i, " has ", t.defined() ? "a" : "no", " ",
             name, " but example 0 has ", first.defined() ? "one" : "none", "; every example must have one, or none");
    if (!t.defined()) continue;
    TB_CHECK(t.sizes() == first.sizes(), "stack_collate", "example ", i, " has ", name, " shape ",
             core::to_string(t.sizes()), " but example 0 has ", core::to_string(first.sizes()),
             "; stacking needs equal shapes (use pad_collate for variable-length sequences)");
    TB_CHECK(t.dtype() == first.dtype(), "stack_collate", "example ", i, " has ", name, " dtype ",
             core::name(t.dtype()), " but example 0 has ", core::name(first.dtype()));
    parts.push_back(t);
  }
  if (!first.defined()) return {};
  return ops::stack(parts, 0);
}

}  // namespace

Example stack_collate(const std::vector<Example>& examples) {
  TB_CHECK(!examples.empty(), "stack_collate", "cannot collate an empty list of examples");
  return {stack_field(examples, &Example::input, "input"), stack_field(examples, &Example::target, "target")};
}

PaddedBatch pad_collate(const std::vector<Example>& examples, double pad_value, int64_t target_pad) {
  TB_CHECK(!examples.empty(), "pad_collate", "cannot collate an empty list of examples");
  const int64_t B = int64_t(examples.size());
  const Example& e0 = examples[0];
  int64_t tmax = 0;
  for (int64_t b = 0; b < B; ++b) {
    const Example& e = examples[size_t(b)];
    TB_CHECK(e.input.defined() && e.input.dim() == 1, "pad_collate", "example ", b,
             " input must be a 1-D sequence, got ",
             e.input.defined() ? core::to_string(e.input.sizes()) : std::string("an undefined tensor"));
    TB_CHECK(e.input.dtype() == e0.input.dtype(), "pad_collate", "example ", b, " input dtype ",
             core::name(e.input.dtype()), " differs from example 0's ", core::name(e0.input.dtype()));
    TB_CHECK(e.target.defined() == e0.target.defined(), "pad_collate", "example ", b,
             e.target.defined() ? " has" : " has no", " target but example 0",
             e0.target.defined() ? " has" : " has none");
    if (e.target.defined()) {
      TB_CHECK(e.target.dim() == e0.target.dim() && e.target.dtype() == e0.target.dtype(), "pad_collate", "example ", b,
               " target ", core::to_string(e.target.sizes()), " ", core::name(e.target.dtype()),
               " does not match example 0's ", core::to_string(e0.target.sizes()), " ", core::name(e0.target.dtype()));
      TB_CHECK(e.target.dim() == 0 || (e.target.dim() == 1 && e.target.size(0) == e.input.size(0)), "pad_collate",
               "example ", b, " target shape ", core::to_string(e.target.sizes()),
               " must be a scalar label or a 1-D sequence of the input's length ", e.input.size(0));
    }
    tmax = std::max(tmax, e.input.size(0));
  }

  PaddedBatch out;
  out.input = full({B, tmax}, pad_value, e0.input.dtype());
  out.mask = zeros({B, tmax}, DType::Bool);
  const bool seq_target = e0.target.defined() && e0.target.dim() == 1;
  if (seq_target) out.target = full({B, tmax}, double(target_pad), e0.target.dtype());
  bool* mask = out.mask.data_ptr<bool>();
  for (int64_t b = 0; b < B; ++b) {
    const Example& e = examples[size_t(b)];
    const int64_t len = e.input.size(0);
    if (len == 0) continue;
    out.input.select(0, b).narrow(0, 0, len).copy_(e.input);
    if (seq_target) out.target.select(0, b).narrow(0, 0, len).copy_(e.target);
    std::fill(mask + b * tmax, mask + b * tmax + len, true);
  }
  if (e0.target.defined() && !seq_target) {
    std::vector<Tensor> labels;
    for (const Example& e : examples) labels.push_back(e.target);
    out.target = ops::stack(labels, 0);
  }
  return out;
}

Collate stack_collate_fn() {
  return [](const std::vector<Example>& examples) {
    Example e = stack_collate(examples);
    return Batch{std::move(e.input), std::move(e.target), Tensor()};
  };
}

Collate pad_collate_fn(double pad_value, int64_t target_pad) {
  return [pad_value, target_pad](const std::vector<Example>& examples) {
    return pad_collate(examples, pad_value, target_pad);
  };
}

}  // namespace tb::data
