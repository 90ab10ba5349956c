// See data_bench.h. Cases:
//   dataloader/pad_collate/decode<D>us/workers<W>: epochs of 512 sequences of 16..512 tokens,
//     batch 32, pad_collate; each example costs D microseconds of "decoding" on the thread that
//     loads it (a busy loop standing in for a tokenizer or an image decoder; 0 = the bare copy).
//   probe/gpt/decode<D>us/workers<W>: GPT steps (the training suite's config, batch 16, at most 128
//     tokens, AdamW) fed by such a DataLoader; the step's wait for data is the sum of the main
//     thread's dataloader.next events (engine/core/profiler.h) per step.
#include "suites/data/data_bench.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/autograd/functions.h"
#include "engine/core/profiler.h"
#include "engine/core/rng.h"
#include "engine/data/dataloader.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"

namespace tb::suites {
namespace {

using Clock = std::chrono::steady_clock;

// Token sequences of lengths in [min_len, max_len], made on access from the example's own
// stream (so any thread may load any example, in any order, and get the same tokens).
class SyntheticTokens : public data::Dataset {
 public:
  SyntheticTokens(int64_t n, int64_t vocab, int64_t min_len, int64_t max_len, int64_t decode_us)
      : n_(n), vocab_(vocab), min_len_(min_len), max_len_(max_len), decode_us_(decode_us) {}
  int64_t size() const override { return n_; }
  int64_t length(int64_t i) const {
    return min_len_ + int64_t((uint64_t(i) * 2654435761u) % uint64_t(max_len_ - min_len_ + 1));
  }
  data::Example get(int64_t i) const override {
    data::check_index("SyntheticTokens", i, n_);
    const auto until = Clock::now() + std::chrono::microseconds(decode_us_);
    core::Generator gen(uint64_t(i) + 1);
    Tensor seq = randint(0, vocab_, {length(i) + 1}, DType::Int64, &gen);
    while (Clock::now() < until) {
    }
    const int64_t L = seq.size(0) - 1;
    return {seq.narrow(0, 0, L).contiguous(), seq.narrow(0, 1, L).contiguous()};  // next-token targets
  }

 private:
  int64_t n_, vocab_, min_len_, max_len_, decode_us_;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

harness::Record loader_case(int64_t workers, int64_t decode_us) {
  static constexpr int64_t N = 512, B = 32, MinLen = 16, MaxLen = 512;
  auto ds = std::make_shared<SyntheticTokens>(N, 50000, MinLen, MaxLen, decode_us);
  data::DataLoader loader(ds, {.batch_size = B, .shuffle = true, .seed = 1, .num_workers = workers},
                          data::pad_collate_fn(0, -100));
  int64_t tokens = 0, padded = 0, batches = 0;
  std::vector<double> epochs;
  for (int e = 0; e < 4; ++e) {  // epoch 0 warms the allocator's cache; 1..3 are timed
    loader.set_epoch(e);
    const auto t0 = Clock::now();
    for (const data::Batch& b : loader) {
      if (e == 0) continue;
      ++batches;
      padded += b.input.numel();
      tokens += int64_t(tb::sum(b.mask, DType::Int64).item_double());
    }
    if (e > 0) epochs.push_back(seconds_since(t0));
  }
  std::sort(epochs.begin(), epochs.end());
  const double epoch_s = epochs[epochs.size() / 2];
  const double per_epoch_batches = double(batches) / double(epochs.size());
  harness::Record r;
  r.kind = "benchmark";
  r.metrics = {{"workers", workers},
               {"decode_us", decode_us},
               {"batch", B},
               {"ms_per_batch", epoch_s * 1e3 / per_epoch_batches},
               {"batches_per_s", per_epoch_batches / epoch_s},
               {"samples_per_s", double(N) / epoch_s},
               {"tokens_per_s", double(tokens) / double(epochs.size()) / epoch_s},
               {"padding_fraction", 1.0 - double(tokens) / double(padded)},
               {"epoch_ms_min", epochs.front() * 1e3},
               {"epoch_ms_max", epochs.back() * 1e3}};
  return r;
}

harness::Record probe_case(int64_t workers, int64_t decode_us) {
  static constexpr int64_t B = 16, Warmup = 2, Steps = 6;
  nn::GPTConfig c;
  c.vocab = 1024, c.d_model = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq = 128, c.dropout = 0;
  core::manual_seed(0);
  nn::GPT model(c);
  optim::AdamW::Options o;
  o.lr = 1e-3;
  optim::AdamW opt(model.parameters(), o);
  auto ds = std::make_shared<SyntheticTokens>(B * (Warmup + Steps), c.vocab, 32, c.max_seq, decode_us);
  data::DataLoader loader(ds, {.batch_size = B, .shuffle = true, .seed = 1, .num_workers = workers},
                          data::pad_collate_fn(0, -100));
  std::optional<profiler::Profile> prof;
  Clock::time_point t0;
  int64_t step = 0;
  // The wait for batch k+1 is the loop's ++ after step k (dataloader.next): recording starts
  // after the last warm-up step, so the window holds the waits for every recorded batch.
  for (const data::Batch& b : loader) {
    opt.zero_grad(true);
    nn::GPT::loss(model(b.input), b.target).backward();
    opt.step();
    if (++step == Warmup) {
      prof.emplace();
      t0 = Clock::now();
    }
  }
  const double wall = seconds_since(t0);
  const profiler::Trace t = prof->stop();
  double wait_s = 0;
  int64_t waits = 0;
  int main_tid = -1;
  for (const profiler::Thread& th : t.threads)
    if (th.name == "main") main_tid = th.tid;
  for (const profiler::Event& e : t.events)
    if (std::string_view(e.name) == "dataloader.next" && e.tid == main_tid) {
      wait_s += double(e.end_ns - e.start_ns) / 1e9;
      ++waits;
    }
  harness::Record r;
  r.kind = "benchmark";
  r.metrics = {{"workers", workers},
               {"decode_us", decode_us},
               {"batch", B},
               {"steps", Steps},
               {"step_ms", wall * 1e3 / Steps},
               {"data_wait_ms", wait_s * 1e3 / Steps},
               {"data_wait_fraction", wait_s / wall},
               {"data_loads_in_window", waits},
               {"data_load_ms_per_batch", B * decode_us / 1e3}};
  return r;
}

}  // namespace

std::vector<harness::TestCase> data_benches() {
  std::vector<harness::TestCase> out;
  for (int64_t decode : {0, 50})
    for (int64_t w : {0, 1, 2, 4})
      out.push_back({"dataloader/pad_collate/decode" + std::to_string(decode) + "us/workers" + std::to_string(w),
                     [w, decode] { return loader_case(w, decode); }});
  for (int64_t decode : {0, 2000})
    for (int64_t w : {0, 2})
      out.push_back({"probe/gpt/decode" + std::to_string(decode) + "us/workers" + std::to_string(w),
                     [w, decode] { return probe_case(w, decode); }});
  return out;
}

}  // namespace tb::suites
