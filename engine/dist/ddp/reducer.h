// The Reducer: DDP's gradient all-reduce, after PyTorch's c10d::Reducer. Parameters are grouped
// into buckets (reverse registration order, the first bucket capped at first_bucket_cap_mb, the
// rest at bucket_cap_mb, one dtype per bucket), each with one flat buffer allocated once. A hook
// on every parameter's AccumulateGrad divides its fresh .grad by the world size into its bucket
// slot; when a bucket's last gradient arrives the bucket's all_reduce (Sum) is launched on the
// group's worker while backward goes on (where the host has no core to spare for the worker: at
// the end of backward instead); a callback at the end of backward waits for all buckets and
// copies the averages back into .grad (or, with gradient_as_bucket_view, makes .grad a view of
// the slot). See Note [Bucket launch order], Note [Unused parameters], Note [Divide before the
// sum], Note [Gradients as bucket views] and Note [Overlap needs a spare core].
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/node.h"
#include "engine/dist/ddp/ddp.h"

namespace tb::dist {

// dst = src / world elementwise in one pass (a power-of-two world multiplies by the exact
// reciprocal); dst contiguous, src of dst's shape (or dst itself); float32, float64, bfloat16
// (divided in float). Gradients are averaged this way before they are summed across ranks, by DDP
// and FSDP alike (Note [Divide before the sum] in reducer.cpp); `op` names the caller in errors.
void divide_into(Tensor& dst, const Tensor& src, int world, const char* op);

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // params: the module's named parameters (requires_grad ones take part; others are ignored).
  Reducer(std::vector<std::pair<std::string, Tensor>> params, std::shared_ptr<ProcessGroup> group,
          const DDPOptions& options);
  // Hooks capture a weak pointer to the reducer, so they are installed after construction.
  void install_hooks();
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Arms the hooks for the next backward; with find_unused_parameters, walks the graph from
  // `outputs` to find the parameters it does not reach.
  void prepare_for_backward(const TensorList& outputs);
  // The next backward accumulates locally (no_sync, no grad mode, eval-only forward).
  void disarm() {
    expect_hooks_ = false;
    offer_slots(false);
  }
  // Before a forward: a synced backward that started reducing but never finished (it raised, or
  // parameters got no gradient) is an error here; in-flight collectives are waited for first.
  void ensure_prior_reduction_finished();

  // Join (join.h): a rank out of inputs issues what the others' synced backward issues -- every
  // bucket's all_reduce in bucket order with zeros, then the used-parameter map (zeros) -- and
  // waits for them. Its own gradients are left as they are.
  void shadow_backward();

  const DDPStats& stats() const { return stats_; }
  std::vector<std::vector<int64_t>> bucket_indices() const;

 private:
  struct Bucket {
    DType dtype = DType::Float32;
    std::vector<int64_t> params;   // parameter indices, in slot order
    std::vector<int64_t> offsets;  // element offset of each slot in `flat`
    int64_t numel = 0;
    Tensor flat;          // the bucket's one buffer (communication tag)
    int64_t pending = 0;  // gradients still to arrive in this backward
    std::string label;    // call-site label of its all_reduce: "ddp/bucket 3 (12 params, 4.0 MiB)"
    WorkPtr work;         // the in-flight all_reduce
  };
  struct Param {
    std::string name;
    int64_t index = 0;  // in the module's parameters() (frozen ones are not reduced)
    Tensor tensor;
    std::shared_ptr<autograd::Node> accumulator;  // held, so every graph reuses it (and its hook)
    int64_t bucket = 0, slot = 0;
    bool ready = false;   // its gradient is in its bucket slot (this backward)
    bool unused = false;  // not reached from the forward outputs (find_unused_parameters)
    bool used = false;    // received a gradient since the last synced backward
    Tensor kept_grad;     // an unused parameter's .grad that is its own slot (Note [Gradients as bucket views])
  };

  void on_grad_ready(int64_t i);
  void mark_ready(int64_t i);
  void launch_ready_buckets();
  void finalize();
  // Waits for every launched collective and resets the iteration (after an error).
  void abort_iteration();
  void reset_iteration();
  // Offers each contiguous parameter's bucket slot to its gradient accumulator (or withdraws
  // the offers): Note [Gradients as bucket views].
  void offer_slots(bool on);
  Tensor slot_view(const Param& p) const;
  std::string unready_parameters() const;

  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::shared_ptr<ProcessGroup> group_;
  DDPOptions options_;
  bool expect_hooks_ = false;        // prepare_for_backward armed the next backward
  bool started_ = false;             // a hook of the armed backward fired (the reduction began)
  bool overlap_ = true;              // issue buckets during backward (Note [Overlap needs a spare core])
  int local_ranks_ = 0, cores_ = 0;  // ranks on this host (0: unknown), cores this process may use
  size_t next_bucket_ = 0;           // buckets [0, next_bucket_) are launched
  Tensor used_map_;                  // int64 per parameter: used anywhere (find_unused_parameters)
  WorkPtr used_map_work_;
  DDPStats stats_;
};

}  // namespace tb::dist
