// `trainbench estimate`. See estimate_cmd.h; the formulas are in docs/distributed.md,
// "FSDP memory estimator".
#include "harness/estimate_cmd.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/dist/fsdp/estimate.h"
#include "harness/output_file.h"
#include "harness/runner.h"

namespace tb::harness {
namespace {

using dist::MemoryBytes;
using dist::MemoryEstimate;
using dist::Strategy;

// "7000000000", "7e9", "1.5B", "125M", "350k": a whole, positive count, exactly. The forms:
// decimal digits, an optional fraction (".5"), then either an exponent ("e9", "E+9", "e-1") or a
// suffix (k/K 1e3, M 1e6, B/G 1e9, T 1e12), nothing else (no sign, blank, hex, inf). The value is
// worked out in integers (a double loses digits past 2^53), and must be whole and at most
// INT64_MAX.
int64_t parse_count(const std::string& text) {
  const std::string bad = "--params: expected a positive whole number such as 7e9, 1.5B or 125M (got '" + text + "')";
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0;
  std::string digits;  // the integer part and the fraction, without the point
  int64_t exp10 = 0;   // value = digits x 10^exp10
  while (i < text.size() && digit(text[i])) digits += text[i++];
  if (digits.empty()) throw UsageError(bad);
  if (i < text.size() && text[i] == '.') {
    const std::size_t from = ++i;
    while (i < text.size() && digit(text[i])) digits += text[i++];
    if (i == from) throw UsageError(bad);
    exp10 -= int64_t(i - from);
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    const std::size_t from = i;
    int64_t e = 0;
    for (; i < text.size() && digit(text[i]); ++i) e = std::min<int64_t>(e * 10 + (text[i] - '0'), 100000);
    if (i == from) throw UsageError(bad);
    exp10 += negative ? -e : e;
  } else if (i + 1 == text.size()) {
    switch (text[i++]) {
      case 'k':
      case 'K': exp10 += 3; break;
      case 'M': exp10 += 6; break;
      case 'B':
      case 'G': exp10 += 9; break;
      case 'T': exp10 += 12; break;
      default: throw UsageError(bad);
    }
  }
  if (i != text.size()) throw UsageError(bad);
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));  // "0" -> "": zero
  // Whole: the digits a negative exponent drops must be zeros.
  for (; exp10 < 0 && !digits.empty(); ++exp10) {
    if (digits.back() != '0') throw UsageError(bad);
    digits.pop_back();
  }
  if (digits.empty()) throw UsageError(bad);  // zero
  if (exp10 > 18) throw UsageError(bad);      // at least 10^19: past INT64_MAX
  digits.append(std::size_t(exp10), '0');
  int64_t v = 0;
  for (char c : digits)
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) throw UsageError(bad);
  return v;
}

DType parse_dtype(const std::string& flag, const std::string& s) {
  if (s == "fp32" || s == "float32") return DType::Float32;
  if (s == "bf16" || s == "bfloat16") return DType::BFloat16;
  if (s == "fp16" || s == "float16") return DType::Float16;
  throw UsageError(flag + ": unknown dtype '" + s + "'; valid: fp32, bf16, fp16");
}

const char* short_name(DType t) {
  return t == DType::BFloat16 ? "bf16" : t == DType::Float16 ? "fp16" : t == DType::Float32 ? "fp32" : core::name(t);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// 1234567 -> "1,234,567"
// (Built forwards: GCC 12 warns, wrongly, of an overlapping copy in string::insert here.)
std::string grouped(int64_t v) {
  const std::string digits = std::to_string(v);
  const std::size_t sign = digits[0] == '-' ? 1 : 0;
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string pad(const std::string& s, std::size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

// "optimizer_step" -> "optimizer step"
std::string phase_label(std::string s) {
  for (char& c : s)
    if (c == '_') c = ' ';
  return s;
}

void byte_row(std::ostream& os, const std::string& label, int64_t bytes) {
  os << "  " << pad(label, 44, true) << pad(grouped(bytes), 20) << pad(fixed(double(bytes) / 1e9, 3), 12)
     << pad(fixed(double(bytes) / double(int64_t(1) << 30), 3), 12) << '\n';
}

struct Described {
  dist::MemoryEstimateInput input;
  std::string model_label;  // "gpt", "mlp", "params7000000000"
  std::string model_text;   // for the heading
};

Described describe(const CLI::App& sub, const EstimateOptions& o) {
  Described d;
  const bool by_params = !o.params.empty();
  if (by_params == !o.model.empty())
    throw UsageError("estimate: give either --params N or --model gpt|mlp (trainbench estimate --help)");
  auto given = [&](const char* name) { return sub.count(name) > 0; };
  auto refuse = [&](std::initializer_list<const char*> names, const std::string& why) {
    for (const char* n : names)
      if (given(n)) throw UsageError(std::string(n) + " " + why);
  };
  auto positive = [](const char* name, int64_t v) {
    if (v < 1) throw UsageError(std::string(name) + ": must be positive (got " + std::to_string(v) + ")");
  };
  for (auto [name, v] : {std::pair<const char*, int64_t>{"--layers", o.layers},
                         {"--hidden", o.hidden},
                         {"--heads", o.heads},
                         {"--vocab", o.vocab},
                         {"--seq", o.seq},
                         {"--mlp-in", o.mlp_in},
                         {"--mlp-out", o.mlp_out}})
    if (given(name)) positive(name, v);
  if (o.batch < 0) throw UsageError("--batch: must not be negative (got " + std::to_string(o.batch) + ")");
  if (o.units < 0) throw UsageError("--units: must not be negative (got " + std::to_string(o.units) + ")");
  // Each unit, and each GPT block, is objects in the model's spec: bounded (dist::kMaxUnits and
  // kMaxLayers, far above any real model) so that a mistyped count is an error, not minutes and
  // all the memory.
  if (o.units > dist::kMaxUnits)
    throw UsageError("--units: at most " + std::to_string(dist::kMaxUnits) + " (got " + std::to_string(o.units) + ")");
  if (given("--layers") && o.layers > dist::kMaxLayers)
    throw UsageError("--layers: at most " + std::to_string(dist::kMaxLayers) + " (got " + std::to_string(o.layers) +
                     ")");
  if (o.activation_bytes < 0)
    throw UsageError("--activation-bytes: must not be negative (got " + std::to_string(o.activation_bytes) + ")");

  d.input.param_dtype = parse_dtype("--param-dtype", o.param_dtype);
  d.input.reduce_dtype = o.reduce_dtype.empty() ? d.input.param_dtype : parse_dtype("--reduce-dtype", o.reduce_dtype);
  const DType act = d.input.param_dtype;
  std::ostringstream text;
  if (by_params) {
    refuse({"--layers", "--hidden", "--heads", "--vocab", "--seq", "--mlp-in", "--mlp-out"},
           "describes a --model; with --params give --units and --activation-bytes");
    refuse({"--batch"}, "needs --model (activations come from its config); with --params give --activation-bytes");
    const int64_t n = parse_count(o.params);
    if (o.units > n) throw UsageError("--units: at most the parameter count " + std::to_string(n));
    d.input.model = dist::model_from_parameter_count(n, o.units, o.activation_bytes);
    d.model_label = "params" + std::to_string(n);
    text << grouped(n) << " parameters ("
         << (o.units == 0 ? std::string("one unit") : std::to_string(o.units) + " equal units") << ")";
  } else if (o.model == "gpt") {
    refuse({"--mlp-in", "--mlp-out", "--units", "--activation-bytes"}, "does not apply to --model gpt");
    nn::GPTConfig c;
    if (given("--layers")) c.n_layers = o.layers;
    if (given("--hidden")) c.d_model = o.hidden;
    if (given("--heads")) c.n_heads = o.heads;
    if (given("--vocab")) c.vocab = o.vocab;
    if (given("--seq")) c.max_seq = o.seq;
    if (c.d_model % c.n_heads != 0)
      throw UsageError("--hidden " + std::to_string(c.d_model) + " is not divisible by --heads " +
                       std::to_string(c.n_heads));
    d.input.model = dist::gpt_model(c, o.batch, o.batch > 0 ? c.max_seq : 0, act);
    d.model_label = "gpt";
    text << "gpt (vocab " << c.vocab << ", hidden " << c.d_model << ", " << c.n_layers << " layers, " << c.n_heads
         << " heads, seq " << c.max_seq << "; each block a unit, the rest in the root), "
         << grouped(d.input.model.numel()) << " parameters";
  } else if (o.model == "mlp") {
    refuse({"--layers", "--heads", "--vocab", "--seq", "--units", "--activation-bytes"},
           "does not apply to --model mlp");
    const int64_t in = given("--mlp-in") ? o.mlp_in : 784, hidden = given("--hidden") ? o.hidden : 1024,
                  out = given("--mlp-out") ? o.mlp_out : 10;
    d.input.model = dist::mlp_model(in, hidden, out, o.batch, act);
    d.model_label = "mlp";
    text << "mlp (" << in << "-" << hidden << "-" << hidden << "-" << out << "; each Linear a unit), "
         << grouped(d.input.model.numel()) << " parameters";
  } else {
    throw UsageError("--model: unknown model '" + o.model + "'; valid: gpt, mlp");
  }
  d.model_text = text.str();

  if (o.world < 1) throw UsageError("--world: must be at least 1 (got " + std::to_string(o.world) + ")");
  d.input.world = o.world;
  try {
    d.input.strategy = dist::strategy_from_name(o.strategy);
    d.input.optimizer = dist::optimizer_from_name(o.optimizer);
  } catch (const core::Error& e) {
    throw UsageError(e.what());
  }
  if (d.input.strategy == Strategy::HybridShard) {
    if (!given("--shard-group")) throw UsageError("--strategy hybrid_shard needs --shard-group S (S divides --world)");
    if (o.shard_group < 1 || o.world % o.shard_group != 0 || o.shard_group > o.world)
      throw UsageError("--shard-group " + std::to_string(o.shard_group) + " does not divide --world " +
                       std::to_string(o.world));
    d.input.shard_group = o.shard_group;
  } else if (given("--shard-group")) {
    throw UsageError("--shard-group is only for --strategy hybrid_shard");
  }
  if (d.input.strategy == Strategy::Ddp && given("--reduce-dtype"))
    throw UsageError("--reduce-dtype is for the FSDP strategies (DDP reduces in the parameters' dtype)");
  if (d.input.strategy != Strategy::Ddp && o.bucket_view)
    throw UsageError("--gradient-as-bucket-view is for --strategy ddp");
  d.input.prefetch = !o.no_prefetch;
  d.input.gradient_as_bucket_view = o.bucket_view;
  d.input.allocator_blocks = o.allocator_blocks;
  return d;
}

void print(std::ostream& os, const Described& d, const MemoryEstimate& e) {
  const dist::MemoryEstimateInput& in = d.input;
  const bool ddp = in.strategy == Strategy::Ddp;
  const std::string master = ddp ? short_name(in.param_dtype) : "fp32";
  os << "model: " << d.model_text << '\n';
  os << "strategy: " << dist::strategy_name(in.strategy) << ", world " << in.world;
  if (in.strategy == Strategy::HybridShard)
    os << " (" << in.shard_group << " ranks per shard group x " << in.world / in.shard_group << " replicas)";
  if (e.shard_world == 1) os << "; every rank holds every parameter\n";
  else os << "; each parameter split " << e.shard_world << " ways (dim 0 padded to a multiple)\n";
  os << "dtypes: "
     << (ddp ? "parameters, gradients and optimizer state " + master
             : std::string("compute ") + short_name(in.param_dtype) + ", reduce " + short_name(in.reduce_dtype) +
                   ", master shards and optimizer state fp32");
  os << "; optimizer " << dist::optimizer_name(in.optimizer);
  if (!ddp) os << "; prefetch " << (in.prefetch ? "on" : "off");
  if (in.allocator_blocks) os << "; at allocator block sizes";
  os << "\n\n";

  os << "  " << pad("per rank", 44, true) << pad("bytes", 20) << pad("GB", 12) << pad("GiB", 12) << '\n';
  os << "  held between steps\n";
  byte_row(os, "parameters (" + master + (ddp || e.shard_world == 1 ? ")" : " shards)"), e.parameter_bytes);
  byte_row(os,
           "gradients (" + master + (ddp || e.shard_world == 1 ? ")" : " shards)") +
               (ddp && in.gradient_as_bucket_view ? ": the buckets" : ""),
           e.gradient_bytes);
  byte_row(os, std::string("optimizer state (") + dist::optimizer_name(in.optimizer) + ")", e.optimizer_state_bytes);
  byte_row(os, "model state (the three above)", e.model_state_bytes());
  if (ddp) byte_row(os, "gradient buckets (communication)", e.persistent_communication_bytes);
  os << "  transient, at their largest\n";
  if (!ddp) {
    byte_row(os, std::string("gathered parameters (") + short_name(in.param_dtype) + ")", e.gathered_parameter_bytes);
    byte_row(os, std::string("unsharded gradients (") + short_name(in.param_dtype) + ")", e.unsharded_gradient_bytes);
  }
  byte_row(os, "activations (an estimate)", e.activation_bytes);
  os << '\n';

  // Phases in one unit, chosen by the peak, so the columns compare.
  const double peak = double(e.peak.total());
  const auto [unit, div] = peak >= 1e9   ? std::pair<const char*, double>{"GB", 1e9}
                           : peak >= 1e6 ? std::pair<const char*, double>{"MB", 1e6}
                           : peak >= 1e3 ? std::pair<const char*, double>{"kB", 1e3}
                                         : std::pair<const char*, double>{"B", 1};
  const int digits = div == 1 ? 0 : 3;
  os << "  " << pad(std::string("peak per phase (") + unit + ")", 20, true) << pad("parameters", 12)
     << pad("gradients", 12) << pad("optimizer", 12) << pad("activations", 13) << pad("communication", 15)
     << pad("total", 12) << '\n';
  auto phase = [&](const char* name, const MemoryBytes& b) {
    os << "  " << pad(name, 20, true);
    for (int64_t v : {b.parameters, b.gradients, b.optimizer_state}) os << pad(fixed(double(v) / div, digits), 12);
    os << pad(fixed(double(b.activations) / div, digits), 13) << pad(fixed(double(b.communication) / div, digits), 15)
       << pad(fixed(double(b.total()) / div, digits), 12) << '\n';
  };
  phase("after init", e.after_init);
  phase("forward", e.forward);
  phase("backward", e.backward);
  phase("optimizer step", e.optimizer_step);
  os << "\npeak: " << fixed(double(e.peak.total()) / 1e9, 3) << " GB (" << fixed(double(e.peak.total()) / (1 << 30), 3)
     << " GiB) per rank, in the " << phase_label(e.peak_phase) << "; parameters + gradients + optimizer state at most "
     << fixed(double(e.peak_model_state_bytes) / 1e9, 3) << " GB\n";
}

nlohmann::json metrics(const Described& d, const MemoryEstimate& e) {
  const dist::MemoryEstimateInput& in = d.input;
  nlohmann::json m = {
      {"parameters", e.numel},
      {"world", in.world},
      {"shard_world", e.shard_world},
      {"strategy", dist::strategy_name(in.strategy)},
      {"param_dtype", core::name(in.param_dtype)},
      {"reduce_dtype", core::name(in.reduce_dtype)},
      {"optimizer", dist::optimizer_name(in.optimizer)},
      {"prefetch", in.prefetch ? "on" : "off"},
      {"parameter_bytes", e.parameter_bytes},
      {"gradient_bytes", e.gradient_bytes},
      {"optimizer_state_bytes", e.optimizer_state_bytes},
      {"model_state_bytes", e.model_state_bytes()},
      {"bucket_bytes", e.persistent_communication_bytes},
      {"gathered_parameter_bytes", e.gathered_parameter_bytes},
      {"unsharded_gradient_bytes", e.unsharded_gradient_bytes},
      {"activation_bytes", e.activation_bytes},
      {"peak_bytes", e.peak.total()},
      {"peak_phase", e.peak_phase},
      {"peak_model_state_bytes", e.peak_model_state_bytes},
  };
  if (in.strategy == Strategy::HybridShard) m["shard_group"] = in.shard_group;
  for (auto [name, b] : {std::pair<const char*, const MemoryBytes*>{"after_init", &e.after_init},
                         {"forward", &e.forward},
                         {"backward", &e.backward},
                         {"optimizer_step", &e.optimizer_step}}) {
    const std::string p = std::string(name) + "_";
    m[p + "parameter_bytes"] = b->parameters;
    m[p + "gradient_bytes"] = b->gradients;
    m[p + "optimizer_state_bytes"] = b->optimizer_state;
    m[p + "activation_bytes"] = b->activations;
    m[p + "communication_bytes"] = b->communication;
    m[p + "total_bytes"] = b->total();
  }
  return m;
}

}  // namespace

CLI::App* add_estimate_command(CLI::App& app, EstimateOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "estimate",
      "Per-rank memory (parameters, gradients, optimizer state, activations, communication; per phase) of a model "
      "under DDP or an FSDP strategy, from the analytic estimator");
  sub->add_option("--params", o.params,
                  "Parameter count, exactly: e.g. 7000000000, 7e9, 1.5B, 125M (instead of --model)")
      ->type_name("N");
  sub->add_option("--model", o.model, "Reference model: gpt (nn::GPT) or mlp (nn::MLP)")->type_name("NAME");
  sub->add_option("--layers", o.layers, "gpt: transformer blocks (default 2, at most 100000)")->type_name("N");
  sub->add_option("--hidden", o.hidden, "gpt: d_model (default 32); mlp: hidden width (default 1024)")->type_name("N");
  sub->add_option("--heads", o.heads, "gpt: attention heads (default 4)")->type_name("N");
  sub->add_option("--vocab", o.vocab, "gpt: vocabulary (default 64)")->type_name("N");
  sub->add_option("--seq", o.seq, "gpt: max_seq, and the sequence length of --batch (default 16)")->type_name("N");
  sub->add_option("--mlp-in", o.mlp_in, "mlp: input features (default 784)")->type_name("N");
  sub->add_option("--mlp-out", o.mlp_out, "mlp: classes (default 10)")->type_name("N");
  sub->add_option("--units", o.units, "--params: split into N equal FSDP units (default: one; at most 1000000)")
      ->type_name("N");
  sub->add_option("--batch", o.batch, "--model: per-rank batch for the activation estimate (default 0: none)")
      ->type_name("B");
  sub->add_option("--activation-bytes", o.activation_bytes, "--params: activation bytes per rank (default 0)")
      ->type_name("BYTES");
  sub->add_option("--world", o.world, "Ranks")->capture_default_str()->type_name("N");
  sub->add_option("--strategy", o.strategy, "ddp, full_shard, shard_grad_op, no_shard or hybrid_shard")
      ->capture_default_str()
      ->type_name("NAME");
  sub->add_option("--shard-group", o.shard_group, "hybrid_shard: ranks per shard group (divides --world)")
      ->type_name("S");
  sub->add_option("--param-dtype", o.param_dtype, "fp32, bf16 or fp16: FSDP's compute copies; DDP's parameters")
      ->capture_default_str()
      ->type_name("DTYPE");
  sub->add_option("--reduce-dtype", o.reduce_dtype, "FSDP: the reduce-scatter dtype (default: --param-dtype)")
      ->type_name("DTYPE");
  sub->add_option("--optimizer", o.optimizer, "adamw, adam, sgd or sgd-momentum")
      ->capture_default_str()
      ->type_name("NAME");
  sub->add_flag("--no-prefetch", o.no_prefetch, "FSDP: one unit gathered and reducing at a time");
  sub->add_flag("--gradient-as-bucket-view", o.bucket_view, "ddp: .grad is a view of the buckets");
  sub->add_flag("--allocator-blocks", o.allocator_blocks,
                "Count tensors at the allocator's block sizes, as its statistics do");
  sub->add_option("--json", o.json, "Also write a result file with one `estimate` record")->type_name("PATH");
  return sub;
}

int run_estimate(const CLI::App& sub, const EstimateOptions& o, const std::string& command) {
  // The model builders refuse what the flags' checks let through (a size whose bytes pass int64).
  const Described d = [&] {
    try {
      return describe(sub, o);
    } catch (const core::Error& err) {
      throw UsageError(err.what());
    }
  }();
  if (!o.json.empty()) {
    try {
      check_output_path(o.json);
    } catch (const std::runtime_error& e) {
      throw UsageError(std::string("--json ") + e.what());
    }
  }
  MemoryEstimate e;
  try {
    e = dist::estimate_memory(d.input);
  } catch (const core::Error& err) {
    throw UsageError(err.what());
  }
  print(std::cout, d, e);
  if (!o.json.empty()) {
    Record r;
    r.suite = "estimate";
    r.case_name = d.model_label + "/" + dist::strategy_name(d.input.strategy) + "/w" + std::to_string(d.input.world);
    r.kind = "estimate";
    r.metrics = metrics(d, e);
    write_result(o.json, make_result(RunInfo{command, 1}, {r}));
    std::cout << "results: " << o.json << std::endl;
  }
  return 0;
}

}  // namespace tb::harness
