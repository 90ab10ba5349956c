// Shared by the dcp suite's files: see dcp_util.h.
#include "suites/dcp/dcp_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/core/rng.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/nn/models.h"
#include "engine/tensor/factories.h"
#include "engine/train/distributed_checkpoint.h"
#include "suites/compare.h"
#include "suites/ddp/dist_check.h"

namespace tb::suites::dcp {

namespace fs = std::filesystem;
using dist::ProcessGroup;
using dist::ShardingStrategy;

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"single", 1, Kind::Single},
      {"ddp_w2", 2, Kind::DDP},
      {"full_shard_w2", 2, Kind::FSDP, ShardingStrategy::FullShard},
      {"full_shard_w4", 4, Kind::FSDP, ShardingStrategy::FullShard},
      {"shard_grad_op_w3", 3, Kind::FSDP, ShardingStrategy::ShardGradOp},
      {"hybrid_shard_2x2", 4, Kind::FSDP, ShardingStrategy::HybridShard, 2},
  };
  return all;
}

std::shared_ptr<ProcessGroup> first_ranks(ProcessGroup& all, int world) {
  return all.split(all.rank() < world ? 0 : 1);
}

namespace {

// 50 tokens and d_model 20: 20-row LayerNorms and 60-row fused attention weights over 3 ranks and
// the 50-row embedding over 4 leave ranks with unequal rows.
nn::GPTConfig config() {
  nn::GPTConfig c;
  c.vocab = 50, c.d_model = 20, c.n_layers = 2, c.n_heads = 4, c.max_seq = 8;
  c.dtype = DType::Float64;
  return c;
}

constexpr int64_t kGlobalBatch = 12;  // divides by every world size of the matrix

}  // namespace

Trained make_trained(const Layout& l, std::shared_ptr<ProcessGroup> group, uint64_t seed) {
  check(group->size() == l.world, "layout " + l.name + " needs " + std::to_string(l.world) + " ranks, the group has " +
                                      std::to_string(group->size()));
  Trained t{l, group, nullptr, nullptr, nullptr};
  core::manual_seed(seed);  // the same on every rank; DDP and FSDP take rank 0's anyway
  t.model = std::make_shared<nn::GPT>(config());
  t.forward = t.model;
  if (l.kind == Kind::DDP) {
    t.forward = std::make_shared<dist::DistributedDataParallel>(t.model, group);
  } else if (l.kind == Kind::FSDP) {
    dist::FSDPOptions o;
    o.strategy = l.strategy;
    o.shard_group_size = l.shard_group_size;
    dist::fully_shard_tree(t.model, group, dist::wrap_module_types({"TransformerBlock"}), o);
  }
  t.opt = make_engine_opt(/*adamw=*/true, t.model->parameters());
  return t;
}

std::vector<double> train(Trained& t, int64_t first, int64_t n) {
  const nn::GPTConfig c = config();
  const int P = t.group->size(), rank = t.group->rank();
  const int64_t per_rank = kGlobalBatch / P;
  std::vector<double> losses;
  for (int64_t s = first; s < first + n; ++s) {
    core::Generator gen(31000 + uint64_t(s));
    const Tensor x = randint(0, c.vocab, {kGlobalBatch, c.max_seq}, DType::Int64, &gen);
    const Tensor y = randint(0, c.vocab, {kGlobalBatch, c.max_seq}, DType::Int64, &gen);
    t.opt->zero_grad(true);
    Tensor loss = nn::GPT::loss((*t.forward)(x.narrow(0, rank * per_rank, per_rank).contiguous()),
                                y.narrow(0, rank * per_rank, per_rank).contiguous());
    loss.backward();
    t.opt->step();
    losses.push_back(global_mean(*t.group, loss.item_double()));
  }
  return losses;
}

Tensor gather_rows(ProcessGroup& g, const std::string& name, const Tensor& local, const Shape& global,
                   int64_t row_offset) {
  const int P = g.size();
  const bool scalar = global.empty();
  const int64_t rows = scalar ? 1 : global[0];
  const int64_t mine = scalar ? 1 : (local.dim() == 0 ? 0 : local.size(0));
  Tensor info = from_vector_of<int64_t>({scalar ? 0 : row_offset, mine}, {2});
  Tensor infos = zeros({2 * P}, DType::Int64);
  g.all_gather(infos, info)->wait();
  // Every rank sends a whole-sized buffer with its rows in place: an all_gather of equal sizes,
  // bytes copied (a sum would turn -0.0 into 0.0).
  Tensor buf = zeros(global, local.dtype());
  if (mine > 0) (scalar ? buf : buf.narrow(0, row_offset, mine)).copy_(local.detach());
  const int64_t numel = buf.numel();
  Tensor all = zeros({P * numel}, local.dtype());
  g.all_gather(all, buf.reshape({numel}).contiguous())->wait();
  Tensor whole = zeros(global, local.dtype());
  if (numel == 0) return whole;
  const int64_t* in = infos.data_ptr<int64_t>();
  const size_t row_bytes = size_t(numel / rows) * whole.itemsize();
  auto* dst = static_cast<char*>(whole.data());
  const auto* src = static_cast<const char*>(all.data());
  const size_t rank_bytes = size_t(numel) * whole.itemsize();
  for (int64_t r = 0; r < rows; ++r) {
    int owner = -1;
    for (int k = 0; k < P; ++k) {
      if (!(in[2 * k] <= r && r < in[2 * k] + in[2 * k + 1])) continue;
      if (owner < 0) owner = k;
      // Replicas (DDP, HYBRID_SHARD's replica groups) must hold the same bytes.
      else
        check(std::memcmp(src + size_t(k) * rank_bytes + size_t(r) * row_bytes,
                          src + size_t(owner) * rank_bytes + size_t(r) * row_bytes, row_bytes) == 0,
              name + ": row " + std::to_string(r) + " differs between its replicas on ranks " + std::to_string(owner) +
                  " and " + std::to_string(k));
    }
    check(owner >= 0, name + ": row " + std::to_string(r) + " is held by no rank");
    std::memcpy(dst + size_t(r) * row_bytes, src + size_t(owner) * rank_bytes + size_t(r) * row_bytes, row_bytes);
  }
  return whole;
}

NamedTensors whole_state(Trained& t) {
  NamedTensors out;
  const nn::StateDict sd = t.layout.kind == Kind::FSDP ? dist::full_state_dict(*t.model) : t.model->state_dict();
  for (auto& [n, v] : sd) out.emplace_back("model." + n, v.detach().clone());
  // Every replica of the model's rows checked too: the full state dict reads one of them.
  if (t.layout.kind == Kind::FSDP)
    for (auto& [n, st] : dist::sharded_state_dict(*t.model))
      gather_rows(*t.group, n, st.local, st.global_shape, st.row_offset);
  else check_replicas_identical(*t.group, sd, "the model's state");
  const checkpoint::DistributedState ds = train::distributed_state(*t.model, t.opt.get(), 0);
  for (const checkpoint::ShardedEntry& e : ds.tensors)
    if (e.name.rfind("optim.", 0) == 0)
      out.emplace_back(e.name, gather_rows(*t.group, e.name, e.local, e.global_shape, e.row_offset));
  return out;
}

NamedTensors share_from_rank0(ProcessGroup& g, const NamedTensors& mine) {
  nlohmann::json header = nlohmann::json::array();
  if (g.rank() == 0)
    for (auto& [n, t] : mine) header.push_back({n, int(t.dtype()), t.sizes()});
  std::string text = header.dump();
  Tensor len = from_vector_of<int64_t>({int64_t(text.size())}, {1});
  g.broadcast(len, 0)->wait();
  Tensor chars = zeros({len.data_ptr<int64_t>()[0]}, DType::Int64);
  for (size_t i = 0; g.rank() == 0 && i < text.size(); ++i) chars.data_ptr<int64_t>()[i] = text[i];
  g.broadcast(chars, 0)->wait();
  text.assign(size_t(chars.numel()), ' ');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char(chars.data_ptr<int64_t>()[i]);
  header = nlohmann::json::parse(text);
  NamedTensors out;
  for (size_t i = 0; i < header.size(); ++i) {
    const auto& h = header[i];
    Tensor t = g.rank() == 0 ? mine[i].second.detach().clone() : zeros(h[2].get<Shape>(), DType(h[1].get<int>()));
    if (t.numel() > 0) g.broadcast(t, 0)->wait();
    out.emplace_back(h[0].get<std::string>(), t);
  }
  return out;
}

std::string bit_diff(const NamedTensors& got, const NamedTensors& want) {
  std::map<std::string, Tensor> g;
  for (auto& [n, t] : got) g[n] = t;
  if (got.size() != want.size())
    return std::to_string(got.size()) + " tensors where " + std::to_string(want.size()) + " were saved";
  for (auto& [n, w] : want) {
    auto it = g.find(n);
    if (it == g.end()) return n + " is missing";
    const Tensor a = it->second.detach().contiguous(), b = w.detach().contiguous();
    if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return n + " has another dtype or shape";
    const size_t item = a.itemsize();
    const auto* pa = static_cast<const char*>(a.data());
    const auto* pb = static_cast<const char*>(b.data());
    for (int64_t i = 0; i < a.numel(); ++i)
      if (std::memcmp(pa + size_t(i) * item, pb + size_t(i) * item, item) != 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, " differs at flat index %lld: %.17g where %.17g was saved", (long long)i,
                      a.reshape({-1}).narrow(0, i, 1).item_double(), b.reshape({-1}).narrow(0, i, 1).item_double());
        return n + buf;
      }
  }
  return "";
}

double worst_ratio(const NamedTensors& got, const NamedTensors& want, Tolerance tol, std::string* where) {
  std::map<std::string, Tensor> g;
  for (auto& [n, t] : got) g[n] = t;
  double worst = 0;
  for (auto& [n, w] : want) {
    auto it = g.find(n);
    check(it != g.end() && it->second.sizes() == w.sizes(), n + " is missing or has another shape");
    const Diff d = compare_values(it->second, w, tol);
    if (d.nan) {
      *where = n + ": NaN on one side only";
      return INFINITY;
    }
    if (d.worst_ratio > worst) {
      worst = d.worst_ratio;
      *where = n + " [" + std::to_string(d.worst_index) + "]: " + std::to_string(d.worst_actual) + " vs " +
               std::to_string(d.worst_expected);
    }
  }
  return worst;
}

std::string scratch_dir(ProcessGroup& g, const std::string& what) {
  const std::string base = !g.options().run_dir.empty()
                               ? g.options().run_dir
                               : (fs::temp_directory_path() / ("tb_dcp_" + dist::world_from_env().job_id)).string();
  const std::string dir = base + "/dcp/" + what;
  if (g.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  g.barrier()->wait();
  return dir;
}

void remove_scratch(ProcessGroup& g, const std::string& dir) {
  std::error_code ec;  // best effort: a leftover folder in the run directory harms nothing
  if (g.rank() == 0) fs::remove_all(dir, ec);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace tb::suites::dcp
