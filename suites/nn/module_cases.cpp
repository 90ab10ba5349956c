// nn suite cases for Module itself: state_dict names and order, load_state_dict (round trip,
// strict errors, shape mismatch), train/eval recursion, to(dtype), zero_grad, apply, forward and
// full backward hooks (against LibTorch's gradients), BatchNorm statistics over several steps,
// dropout statistics, and the default initialisation of every layer with random init.
#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/engine.h"
#include "engine/nn/conv.h"
#include "engine/nn/init.h"
#include "engine/nn/models.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"
#include "reference/autograd.h"
#include "reference/models.h"
#include "suites/nn/nn_case.h"

namespace tb::suites {

namespace {

std::vector<double> values(const tb::Tensor& t) {
  tb::Tensor c = t.detach().to(DType::Float64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

bool same_values(const tb::Tensor& a, const tb::Tensor& b) { return a.sizes() == b.sizes() && values(a) == values(b); }

std::string keys_of(const std::vector<std::string>& k) {
  std::string s;
  for (const auto& x : k) s += (s.empty() ? "" : ",") + x;
  return s;
}

// Sample mean and standard deviation within five standard errors of the distribution's.
void check_distribution(const std::string& what, const tb::Tensor& t, double mean, double std, harness::Record& rec) {
  const std::vector<double> v = values(t);
  const double n = double(v.size());
  double m = 0, s2 = 0;
  for (double x : v) m += x;
  m /= n;
  for (double x : v) s2 += (x - m) * (x - m);
  const double s = std::sqrt(s2 / (n - 1));
  rec.metrics[what + "_mean"] = m;
  rec.metrics[what + "_std"] = s;
  check(std::abs(m - mean) < 5 * std / std::sqrt(n),
        what + ": sample mean " + std::to_string(m) + ", expected " + std::to_string(mean));
  // The standard error of a sample std is about std / sqrt(2n) for a normal (less for a uniform).
  check(std::abs(s - std) < 5 * std / std::sqrt(2 * n),
        what + ": sample std " + std::to_string(s) + ", expected " + std::to_string(std));
}

void check_bound(const std::string& what, const tb::Tensor& t, double bound) {
  for (double x : values(t))
    check(std::abs(x) <= bound, what + ": value " + std::to_string(x) + " outside +-" + std::to_string(bound));
}

std::shared_ptr<nn::Sequential> small_net() {
  return std::make_shared<nn::Sequential>(
      std::initializer_list<nn::ModulePtr>{std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6),
                                           std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(6, 2, false)});
}

void state_dict_cases(std::vector<harness::TestCase>& v) {
  v.push_back(semantic_case("module/state_dict/names_and_order", [](harness::Record&) {
    auto net = small_net();
    const std::vector<std::string> expected = {
        "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked",
        "3.weight"};
    const std::vector<std::string> got = net->state_dict().keys();
    check(got == expected, "state_dict keys " + keys_of(got) + ", expected " + keys_of(expected));
    tb::Tensor nbt = net->state_dict().at("1.num_batches_tracked");
    check(nbt.dtype() == DType::Int64 && nbt.dim() == 0, "num_batches_tracked must be a 0-dim int64 buffer");
    std::vector<std::string> params;
    for (auto& [n, p] : net->named_parameters()) params.push_back(n);
    check(params == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight"},
          "named_parameters " + keys_of(params));
    // GPT: every engine name exists in LibTorch's twin with the same shape, and vice versa.
    nn::GPT gpt(nn::GPTConfig{});
    ref::NnModule r = ref::nn_gpt(64, 32, 2, 4, 16, 0.0, "tanh");
    r.load_by_name(to_ref_state(gpt.state_dict()));
    std::vector<std::string> mods;
    for (auto& [n, m] : gpt.named_modules()) mods.push_back(n);
    check(mods.size() == 25 && mods[0].empty() && mods[1] == "tok_emb" && mods[8] == "blocks.0.attn.out_proj",
          "named_modules " + keys_of(mods));
  }));

  v.push_back(semantic_case("module/load_state_dict/round_trip_keeps_identity", [](harness::Record&) {
    auto a = small_net(), b = small_net();
    {
      autograd::NoGradGuard ng;
      for (auto& [n, t] : a->named_buffers())
        if (core::is_floating(t.dtype())) t.copy_(randn(t.sizes()));
    }
    const std::vector<tb::Tensor> before = b->parameters();
    nn::LoadResult r = b->load_state_dict(a->state_dict());
    check(r.missing_keys.empty() && r.unexpected_keys.empty(), "strict load reported keys");
    const std::vector<tb::Tensor> after = b->parameters();
    for (size_t i = 0; i < before.size(); ++i) check(before[i].is_same(after[i]), "parameter identity changed");
    for (auto& [n, t] : a->state_dict())
      check(same_values(t, b->state_dict().at(n)), n + " differs after the round trip");
    check(b->parameters()[0].requires_grad() && b->parameters()[0].is_leaf(), "loaded parameter is no longer a leaf");
    // A copy, not an alias.
    {
      autograd::NoGradGuard ng;
      tb::Tensor w = a->parameters()[0];
      fill_(w, 7);
    }
    check(!same_values(a->parameters()[0], b->parameters()[0]), "load_state_dict aliased the source tensors");
  }));

  v.push_back(semantic_case("module/load_state_dict/strict_missing_unexpected", [](harness::Record&) {
    auto net = small_net();
    nn::StateDict partial;
    for (auto& [n, t] : net->state_dict())
      if (n != "0.bias") partial.insert(n, t.clone());
    partial.insert("9.weight", zeros({2}));
    bool threw = false;
    try {
      net->load_state_dict(partial, true);
    } catch (const core::Error& e) {
      threw = true;
      const std::string msg = e.what();
      check(msg.find("Missing key(s)") != std::string::npos && msg.find("\"0.bias\"") != std::string::npos &&
                msg.find("Unexpected key(s)") != std::string::npos && msg.find("\"9.weight\"") != std::string::npos,
            "strict error does not list the keys: " + msg);
    }
    check(threw, "strict load with missing and unexpected keys did not throw");
    nn::LoadResult r = net->load_state_dict(partial, false);
    check(r.missing_keys == std::vector<std::string>{"0.bias"}, "missing_keys " + keys_of(r.missing_keys));
    check(r.unexpected_keys == std::vector<std::string>{"9.weight"}, "unexpected_keys " + keys_of(r.unexpected_keys));
  }));

  v.push_back(semantic_case("module/load_state_dict/shape_mismatch", [](harness::Record&) {
    auto net = small_net();
    nn::StateDict s = net->state_dict();
    s.insert("0.weight", zeros({6, 5}));
    bool threw = false;
    try {
      net->load_state_dict(s, false);
    } catch (const core::Error& e) {
      threw = true;
      const std::string msg = e.what();
      check(msg.find("0.weight") != std::string::npos && msg.find("[6, 5]") != std::string::npos &&
                msg.find("[6, 4]") != std::string::npos,
            "shape mismatch error must name the key and both shapes: " + msg);
    }
    check(threw, "a shape mismatch did not throw");
  }));

  v.push_back(semantic_case("module/to_dtype_keeps_identity", [](harness::Record&) {
    auto net = small_net();
    const std::vector<tb::Tensor> before = net->parameters();
    const std::vector<double> w = values(before[0]);
    net->to(DType::Float64);
    for (size_t i = 0; i < before.size(); ++i) {
      check(before[i].is_same(net->parameters()[i]), "to() replaced a parameter");
      check(before[i].dtype() == DType::Float64, "to() left a parameter in float32");
    }
    check(values(before[0]) == w, "to() changed the values");
    check(net->state_dict().at("1.num_batches_tracked").dtype() == DType::Int64, "to() converted an int64 buffer");
    tb::Tensor y = (*net)(randn({3, 4}, DType::Float64));
    check(y.dtype() == DType::Float64, "forward after to(float64) is not float64");
  }));
}

void mode_cases(std::vector<harness::TestCase>& v) {
  v.push_back(semantic_case("module/train_eval_recursive", [](harness::Record&) {
    nn::GPT gpt(nn::GPTConfig{});
    check(gpt.is_training(), "modules start in training mode");
    gpt.eval();
    for (auto& [n, m] : gpt.named_modules()) check(!m->is_training(), "eval() missed " + n);
    gpt.blocks->train();
    check(!gpt.is_training() && gpt.blocks->at<nn::TransformerBlock>(1)->attn->is_training(),
          "train() on a child must reach its descendants only");
    gpt.train();
    for (auto& [n, m] : gpt.named_modules()) check(m->is_training(), "train() missed " + n);
  }));

  v.push_back(semantic_case("module/zero_grad", [](harness::Record&) {
    auto net = small_net();
    tb::sum((*net)(randn({5, 4}))).backward();
    for (auto& [n, p] : net->named_parameters()) check(p.grad().defined(), n + " has no grad after backward");
    const tb::Tensor g0 = net->parameters()[0].grad();
    net->zero_grad(false);
    for (auto& [n, p] : net->named_parameters()) {
      check(p.grad().defined(), "zero_grad(false) removed the grad of " + n);
      for (double x : values(p.grad())) check(x == 0, "zero_grad(false) left a non-zero in " + n);
    }
    check(net->parameters()[0].grad().is_same(g0), "zero_grad(false) must zero in place");
    net->zero_grad();
    for (auto& [n, p] : net->named_parameters()) check(!p.grad().defined(), "zero_grad() left the grad of " + n);
  }));

  v.push_back(semantic_case("module/apply", [](harness::Record&) {
    auto net = small_net();
    std::vector<std::string> order;
    net->apply([&](nn::Module& m) {
      order.push_back(m.type_name());
      if (auto* lin = dynamic_cast<nn::Linear*>(&m)) nn::init::zeros_(lin->weight);
    });
    const std::vector<std::string> expected = {"Linear", "BatchNorm1d", "ReLU", "Linear", "Sequential"};
    check(order == expected, "apply order " + keys_of(order));
    for (auto& [n, p] : net->named_parameters())
      if (n.ends_with("weight") && n != "1.weight")
        for (double x : values(p)) check(x == 0, "apply did not reach " + n);
  }));
}

void hook_cases(std::vector<harness::TestCase>& v) {
  // Sequential fuses Linear + ReLU only while neither is hooked: a hook on the ReLU must see the
  // Linear's output and its replacement must reach the next layer.
  v.push_back(semantic_case("module/hooks/sequential_linear_relu_unfused_when_hooked", [](harness::Record&) {
    auto lin = std::make_shared<nn::Linear>(3, 4);
    auto relu = std::make_shared<nn::ReLU>();
    nn::Sequential seq({lin, relu});
    const tb::Tensor x = randn({5, 3});
    const tb::Tensor fused = seq(x);
    check(same_values(fused, tb::relu(lin->forward(x))), "fused Linear + ReLU differs from the two modules");
    int calls = 0;
    auto h = relu->register_forward_hook([&](nn::Module&, const nn::TensorList& in, const tb::Tensor& out) {
      ++calls;
      check(same_values(in[0], lin->forward(x)), "the ReLU's hook must see the Linear's output");
      return std::optional<tb::Tensor>(tb::mul(out, 2));
    });
    check(same_values(seq(x), tb::mul(fused, 2)), "the hook's replacement output was not used");
    check(calls == 1, "the ReLU's forward hook did not run once");
    h.remove();
    check(same_values(seq(x), fused), "after removing the hook the output changed");
    check(calls == 1, "a removed hook ran");
  }));
  v.push_back(semantic_case("module/hooks/forward_pre_and_forward", [](harness::Record&) {
    nn::Linear lin(3, 2);
    const tb::Tensor x = randn({4, 3});
    const tb::Tensor plain = lin(x);
    std::vector<std::string> calls;
    auto pre = lin.register_forward_pre_hook(
        [&](nn::Module&, const nn::TensorList& in) -> std::optional<nn::TensorList> {
          calls.push_back("pre");
          return nn::TensorList{tb::mul(in[0], 2)};
        });
    auto post = lin.register_forward_hook([&](nn::Module&, const nn::TensorList& in, const tb::Tensor& out) {
      calls.push_back("post");
      check(same_values(in[0], tb::mul(x, 2)), "the forward hook must see the pre-hook's inputs");
      return std::optional<tb::Tensor>(tb::mul(out, 3));
    });
    const tb::Tensor hooked = lin(x);
    check((calls == std::vector<std::string>{"pre", "post"}), "hook order");
    check(compare_values(hooked, tb::mul(lin.forward(tb::mul(x, 2)), 3), {1e-6, 1e-6}).mismatches == 0,
          "hooks did not replace input and output");
    pre.remove();
    post.remove();
    check(same_values(lin(x), plain), "removed hooks still run");
    check(calls.size() == 2, "removed hooks were called");
  }));

  v.push_back(semantic_case("module/hooks/full_backward_vs_libtorch", [](harness::Record& rec) {
    // grad_output must be the gradient arriving at the module's output, grad_input the gradient of
    // its input: what PyTorch's register_full_backward_hook receives, here LibTorch's x.grad.
    core::Generator gen(123);
    auto net = small_net();
    net->train();
    ref::NnModule r = ref::nn_sequential({ref::nn_linear(4, 6), ref::nn_batch_norm1d(6, 1e-5, 0.1, true, true),
                                          ref::nn_relu(), ref::nn_linear(6, 2, false)});
    r.load_by_name(to_ref_state(net->state_dict()));
    tb::Tensor x = randn({5, 4}, DType::Float32, &gen);
    tb::Tensor g = randn({5, 2}, DType::Float32, &gen);
    ref::Tensor rx = ref::to_ref(x);
    ref::requires_grad_(rx);
    x.requires_grad_();
    nn::TensorList seen_in, seen_out;
    int calls = 0;
    net->register_full_backward_hook([&](nn::Module&, const nn::TensorList& gi, const nn::TensorList& go) {
      ++calls;
      seen_in = gi;
      seen_out = go;
      return std::optional<nn::TensorList>();
    });
    // A hook on an inner module (ReLU): its grad_output is what flows into the last Linear's input.
    nn::TensorList relu_out;
    (*net)[2]->register_full_backward_hook([&](nn::Module&, const nn::TensorList&, const nn::TensorList& go) {
      relu_out = go;
      return std::optional<nn::TensorList>();
    });
    (*net)(x).backward(g);
    ref::backward(r.forward(rx), ref::to_ref(g));
    check(calls == 1, "the backward hook ran " + std::to_string(calls) + " times");
    check(seen_in.size() == 1 && seen_out.size() == 1, "one grad_input and one grad_output expected");
    const Tolerance tol = grad_tolerance(DType::Float32);
    check(compare_into("grad_output", seen_out[0], g, tol, rec), rec.message);
    check(compare_into("grad_input", seen_in[0], ref::from_ref(ref::grad_of(rx)), tol, rec), rec.message);
    check(compare_into("x.grad", x.grad(), seen_in[0], tol, rec), rec.message);
    check(relu_out.size() == 1 && relu_out[0].defined(), "the inner hook did not run");
  }));

  v.push_back(semantic_case("module/hooks/full_backward_replaces_grad_input", [](harness::Record& rec) {
    nn::Linear lin(3, 2);
    tb::Tensor x = randn({4, 3});
    x.requires_grad_();
    tb::Tensor g = randn({4, 2});
    tb::Tensor expected = autograd::grad({lin(x)}, {x}, {g})[0];
    auto h = lin.register_full_backward_hook([](nn::Module&, const nn::TensorList& gi, const nn::TensorList&) {
      return std::optional<nn::TensorList>(nn::TensorList{tb::mul(gi[0], 2)});
    });
    lin(x).backward(g);
    check(compare_into("x.grad", x.grad(), tb::mul(expected, 2), grad_tolerance(DType::Float32), rec), rec.message);
    h.remove();
    x.set_grad(tb::Tensor());
    lin(x).backward(g);
    check(compare_into("x.grad after remove", x.grad(), expected, grad_tolerance(DType::Float32), rec), rec.message);
    // An input that needs no gradient: the hook still runs, with an undefined grad_input.
    int calls = 0;
    lin.register_full_backward_hook([&](nn::Module&, const nn::TensorList& gi, const nn::TensorList& go) {
      ++calls;
      check(gi.size() == 1 && !gi[0].defined() && go.size() == 1 && go[0].defined(), "grad_input must be undefined");
      return std::optional<nn::TensorList>();
    });
    lin(randn({4, 3})).backward(g);
    check(calls == 1, "the hook did not run for an input without grad");
  }));

  v.push_back(semantic_case("module/hooks/multihead_attention_three_inputs", [](harness::Record&) {
    nn::MultiheadAttention m(8, 2, 0.0, true, true);
    tb::Tensor q = randn({2, 3, 8}), k = randn({2, 5, 8}), v = randn({2, 5, 8});
    q.requires_grad_();
    v.requires_grad_();
    nn::TensorList gi;
    m.register_full_backward_hook([&](nn::Module&, const nn::TensorList& in, const nn::TensorList&) {
      gi = in;
      return std::optional<nn::TensorList>();
    });
    tb::sum(m(q, k, v)).backward();
    check(gi.size() == 3 && gi[0].defined() && !gi[1].defined() && gi[2].defined(),
          "grad_input must hold query and value gradients and none for key");
    check(same_values(gi[0], q.grad()) && same_values(gi[2], v.grad()), "grad_input differs from the inputs' grads");
  }));

  v.push_back(semantic_case("module/hooks/full_backward_output_inplace_refused", [](harness::Record&) {
    // PyTorch refuses an in-place op on a hooked module's output (a view made by the hook's
    // custom Function, CreationMeta::IN_CUSTOM_FUNCTION; LibTorch's C++ modules have no such
    // hooks, so its Python message is the reference). Refused here too, and the hook still gets
    // its one grad_output.
    nn::Linear lin(3, 2);
    nn::TensorList seen_out;
    int calls = 0;
    lin.register_full_backward_hook([&](nn::Module&, const nn::TensorList&, const nn::TensorList& go) {
      ++calls;
      seen_out = go;
      return std::optional<nn::TensorList>();
    });
    tb::Tensor x = randn({4, 3});
    x.requires_grad_();
    tb::Tensor y = lin(x);
    std::string msg;
    try {
      tb::mul_(y, 2.0);
    } catch (const core::Error& e) {
      msg = e.what();
    }
    check(msg.find("Output 0 of BackwardHookFunctionBackward is a view and is being modified inplace. This view "
                   "was created inside a custom Function") != std::string::npos,
          "an in-place op on a hooked output must be refused as PyTorch does, got: '" + msg + "'");
    const tb::Tensor g = randn({4, 2});
    y.backward(g);
    check(calls == 1 && seen_out.size() == 1 && seen_out[0].defined() && same_values(seen_out[0], g),
          "the hook must get grad_output = the output's gradient");
  }));
}

void batch_norm_steps(std::vector<harness::TestCase>& v) {
  for (bool cumulative : {false, true})
    v.push_back(semantic_case(
        std::string("module/batch_norm2d/three_train_steps") + (cumulative ? "_cumulative" : ""),
        [cumulative](harness::Record& rec) {
          std::optional<double> momentum = cumulative ? std::nullopt : std::optional<double>(0.1);
          auto bn = std::make_shared<nn::BatchNorm2d>(nn::BatchNormOptions{3, 1e-5, momentum, true, true});
          ref::NnModule r = ref::nn_batch_norm2d(3, 1e-5, momentum, true, true);
          r.load_by_name(to_ref_state(bn->state_dict()));
          core::Generator gen(9);
          for (int step = 0; step < 3; ++step) {
            tb::Tensor x = tb::add(randn({4, 3, 2, 5}, DType::Float32, &gen), double(step));
            (*bn)(x);
            r.forward(ref::to_ref(x));
          }
          bn->eval();
          r.train(false);
          tb::Tensor x = randn({2, 3, 2, 2}, DType::Float32, &gen);
          check(compare_into("eval output", (*bn)(x), ref::from_ref(r.forward(ref::to_ref(x))),
                             default_tolerance(DType::Float32), rec),
                rec.message);
          for (const auto& [name, rb] : r.named_buffers())
            check(compare_into(name, bn->find_tensor(name), ref::from_ref(rb), default_tolerance(DType::Float32), rec),
                  rec.message);
        }));
}

void init_cases(std::vector<harness::TestCase>& v) {
  v.push_back(semantic_case("init/linear", [](harness::Record& rec) {
    nn::Linear lin(256, 300);
    const double bound = 1 / std::sqrt(256.0);  // kaiming_uniform_(a = sqrt(5)) over fan_in 256
    check_bound("weight", lin.weight, bound);
    check_bound("bias", lin.bias, bound);
    check_distribution("weight", lin.weight, 0, bound / std::sqrt(3.0), rec);
    check_distribution("bias", lin.bias, 0, bound / std::sqrt(3.0), rec);
  }));
  v.push_back(semantic_case("init/conv2d", [](harness::Record& rec) {
    nn::Conv2d conv(nn::Conv2dOptions{16, 64, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 2, true});
    const double bound = 1 / std::sqrt(8.0 * 9);  // fan_in = Cin / groups * kH * kW
    check_bound("weight", conv.weight, bound);
    check_bound("bias", conv.bias, bound);
    check_distribution("weight", conv.weight, 0, bound / std::sqrt(3.0), rec);
  }));
  v.push_back(semantic_case("init/embedding", [](harness::Record& rec) {
    nn::Embedding emb(500, 64, 3);
    for (double x : values(emb.weight.select(0, 3))) check(x == 0, "padding row is not zero");
    check_distribution("weight", emb.weight.narrow(0, 4, 496), 0, 1, rec);
  }));
  v.push_back(semantic_case("init/multihead_attention", [](harness::Record& rec) {
    nn::MultiheadAttention m(64, 4);
    const double a = std::sqrt(6.0 / (64 + 192));  // xavier_uniform_ over (3E, E)
    check_bound("in_proj_weight", m.in_proj_weight, a);
    check_distribution("in_proj_weight", m.in_proj_weight, 0, a / std::sqrt(3.0), rec);
    for (double x : values(m.in_proj_bias)) check(x == 0, "in_proj_bias is not zero");
    for (double x : values(m.out_proj->bias)) check(x == 0, "out_proj.bias is not zero");
    check_bound("out_proj.weight", m.out_proj->weight, 1 / std::sqrt(64.0));
    check_distribution("out_proj.weight", m.out_proj->weight, 0, 1 / std::sqrt(64.0) / std::sqrt(3.0), rec);
  }));
  v.push_back(semantic_case("init/norms", [](harness::Record&) {
    nn::BatchNorm2d bn(4);
    nn::LayerNorm ln(Shape{5});
    nn::GroupNorm gn(2, 4);
    for (auto* m : std::vector<nn::Module*>{&bn, &ln, &gn})
      for (auto& [n, t] : m->state_dict()) {
        const double want = (n == "weight" || n == "running_var") ? 1 : 0;
        for (double x : values(t)) check(x == want, m->type_name() + "." + n + " starts at " + std::to_string(x));
      }
  }));
  v.push_back(semantic_case("init/functions", [](harness::Record& rec) {
    check(std::abs(nn::init::calculate_gain("relu") - std::sqrt(2.0)) < 1e-12, "relu gain");
    check(std::abs(nn::init::calculate_gain("tanh") - 5.0 / 3) < 1e-12, "tanh gain");
    check(std::abs(nn::init::calculate_gain("leaky_relu", 0.2) - std::sqrt(2 / 1.04)) < 1e-12, "leaky_relu gain");
    tb::Tensor w = empty({200, 50, 2, 2});
    auto [in, out] = nn::init::fan_in_and_fan_out(w);
    check(in == 200 && out == 800, "fans of (200, 50, 2, 2)");
    nn::init::kaiming_normal_(w, 0, "fan_out", "relu");
    check_distribution("kaiming_normal_fan_out", w, 0, std::sqrt(2.0 / 800), rec);
    nn::init::xavier_normal_(w, 2);
    check_distribution("xavier_normal", w, 0, 2 * std::sqrt(2.0 / 1000), rec);
    nn::init::uniform_(w, -3, 1);
    check_bound("uniform", tb::add(w, 1), 2);
    check_distribution("uniform", w, -1, 4 / std::sqrt(12.0), rec);
  }));
}

void dropout_cases(std::vector<harness::TestCase>& v) {
  v.push_back(semantic_case("module/dropout/statistics", [](harness::Record& rec) {
    core::Generator gen(5);
    nn::Dropout d(0.3, &gen);
    const tb::Tensor x = ones({20000});
    const std::vector<double> y = values(d(x));
    double zeros_ = 0;
    for (double e : y) {
      check(e == 0 || std::abs(e - 1 / 0.7) < 1e-6, "kept values must be scaled by 1 / (1 - p)");
      zeros_ += e == 0;
    }
    const double frac = zeros_ / double(y.size());
    rec.metrics["zero_fraction"] = frac;
    check(std::abs(frac - 0.3) < 5 * std::sqrt(0.3 * 0.7 / double(y.size())), "zero fraction " + std::to_string(frac));
    d.eval();
    check(same_values(d(x), x), "eval dropout is not the identity");
  }));
}

}  // namespace

std::vector<harness::TestCase> module_semantics_tests() {
  std::vector<harness::TestCase> v;
  state_dict_cases(v);
  mode_cases(v);
  hook_cases(v);
  batch_norm_steps(v);
  init_cases(v);
  dropout_cases(v);
  return v;
}

}  // namespace tb::suites
