// The nn suite's row type and its checks. A LayerCase builds an engine module and its LibTorch
// twin (reference/nn_modules.h, reference/models.h), copies the engine's state dict into the
// twin BY NAME (which fails unless the names and shapes map one to one), runs both forwards on
// the same input bytes and layouts, compares the outputs, runs backward from the same random
// output gradient (or from a scalar loss output), and compares the gradient of every input that
// requires grad, of every parameter (by name), and every buffer after the forward (BatchNorm's
// running statistics).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/module.h"
#include "harness/suite.h"
#include "reference/nn_modules.h"
#include "suites/ops/op_case.h"
#include "suites/recorded.h"

namespace tb::suites {

using NnEngineForward = std::function<std::vector<tb::Tensor>(nn::Module&, const std::vector<tb::Tensor>&)>;
using NnRefForward = std::function<std::vector<ref::Tensor>(const ref::NnModule&, const std::vector<ref::Tensor>&)>;

struct LayerCase {
  std::string name;              // "<layer>/<dtype>/<variant>"
  DType dtype = DType::Float32;  // of the module (the reference is converted to it)
  std::function<nn::ModulePtr()> engine;
  std::function<ref::NnModule()> reference;  // built in float32, then .to(dtype)
  std::vector<Input> inputs;
  std::vector<size_t> wrt;   // inputs that require grad; empty: every floating one
  NnEngineForward forward;   // default: {module(in[0])}
  NnRefForward ref_forward;  // default: {reference.forward(in)}
  bool train = true;
  bool loss_output = false;                                    // backward from the last output (a scalar loss)
  std::function<void(nn::Module&, core::Generator&)> prepare;  // e.g. random running statistics
  std::optional<Tolerance> tol;                                // overrides grad_tolerance(dtype); say why
};

harness::Record run_layer_case(const LayerCase& c);  // never throws

// A module-semantics case: body throws CheckFailed (via check(), suites/recorded.h) to fail.
harness::TestCase semantic_case(const std::string& name, std::function<void(harness::Record&)> body);

// Compares two tensors (undefined = zeros) under tol; on failure fills rec and returns false.
bool compare_into(const std::string& what, tb::Tensor actual, tb::Tensor expected, Tolerance tol, harness::Record& rec);
// The engine state dict as named reference tensors (same bytes).
ref::NamedTensors to_ref_state(const nn::StateDict& s);

// The tables.
std::vector<LayerCase> layer_cases();      // linear, conv, norms, embedding, activations, dropout, sequential
std::vector<LayerCase> attention_cases();  // MultiheadAttention, TransformerBlock
std::vector<LayerCase> model_cases();      // MLP, GPT, losses inside models
std::vector<harness::TestCase> module_semantics_tests();  // state_dict, modes, zero_grad, apply, hooks, init

}  // namespace tb::suites
