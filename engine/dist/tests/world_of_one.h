// A backend for in-process engine tests: a world of one rank whose collectives are the identity
// (all_gather and reduce_scatter copy, all_reduce and broadcast leave the tensor as it is), so DDP
// and FSDP run their whole bookkeeping without MPI. Shared by the dist room's tests.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "engine/dist/process_group.h"

namespace tb::testing {

class WorldOfOne final : public dist::ProcessGroup {
 public:
  explicit WorldOfOne(dist::Options o) : ProcessGroup(0, 1, std::move(o)) { start(); }
  ~WorldOfOne() override { shutdown(); }
  std::string backend() const override { return "loopback"; }

 protected:
  void run_all_reduce(Tensor&, dist::ReduceOp) override {}
  void run_broadcast(Tensor&, int) override {}
  void run_all_gather(Tensor& out, const Tensor& in) override { copy_bytes(out, in); }
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>&, dist::ReduceOp) override {
    copy_bytes(out, in);
  }
  void run_barrier() override {}
  void run_send(const Tensor&, int, int) override { throw dist::DistError("send", "a world of one has no peer"); }
  void run_recv(Tensor&, int, int) override { throw dist::DistError("recv", "a world of one has no peer"); }

 private:
  static void copy_bytes(Tensor& out, const Tensor& in) {
    std::memcpy(out.data(), in.data(), size_t(out.numel()) * out.itemsize());
  }
};

}  // namespace tb::testing
