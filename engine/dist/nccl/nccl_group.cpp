// NcclGroup: the ProcessGroup primitives on NCCL, staged through device memory (the engine's
// tensors are CPU tensors). Bootstrap, device choice and tags: nccl_group.h.
#include "engine/dist/nccl/nccl_group.h"
#include "engine/core/env.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

namespace tb::dist::nccl {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

std::string run_dir(const Options& o) {
  std::string dir = !o.run_dir.empty() ? o.run_dir : core::env_or("TRAINBENCH_DIST_DIR");
  if (dir.empty()) return ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // every rank tries; "exists" is fine
  return dir;
}

void check_cuda(const std::string& op, cudaError_t e) {
  if (e != cudaSuccess) throw DistError("nccl " + op, std::string("CUDA error: ") + cudaGetErrorString(e));
}

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int64: return ncclInt64;
    default: throw DistError("nccl", std::string("unsupported dtype ") + core::name(t));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
    default: break;
  }
  throw DistError("nccl", std::string("reduce op ") + reduce_op_name(op) + " does not reach the backend");
}

// As for Gloo (Note [Gloo timeouts] in gloo/gloo_group.cpp): with the watchdog running, NCCL's
// own deadline comes a little after the watchdog's, so the diagnosis comes from the watchdog.
Millis nccl_timeout(const Options& o) {
  if (!o.watchdog) return o.timeout;
  return o.timeout + std::max<Millis>(std::chrono::seconds(2), o.timeout / 10);
}

// Short waits poll hot (an all-reduce of a few KiB is done in microseconds); long ones sleep.
void backoff(Clock::time_point started) {
  if (Clock::now() - started < std::chrono::milliseconds(2)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Note [NCCL bootstrap]: rank 0 publishes the id, the others wait for it.
ncclUniqueId exchange_id(int rank, int size, const std::string& path, Millis timeout) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw DistError("nccl bootstrap", std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
    if (size == 1) return id;
    const std::string tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(&id), sizeof(id));
      f.close();
      if (!f) throw DistError("nccl bootstrap", "cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      throw DistError("nccl bootstrap", "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
    }
    return id;
  }
  const auto start = Clock::now();
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      f.read(reinterpret_cast<char*>(&id), sizeof(id));
      if (f.gcount() == std::streamsize(sizeof(id))) return id;
    }
    if (Clock::now() - start > timeout)
      throw DistError("nccl bootstrap",
                      "rank " + std::to_string(rank) + " waited " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                          " s for rank 0's ncclUniqueId in " + path +
                          " (on several hosts the run dir must be on a shared filesystem)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Note [NCCL staging]
// One device buffer per group, grown on demand and reused; every primitive copies its input in
// on the group's stream, runs the NCCL call in place in that buffer, waits for the stream, then
// copies out and waits again. Waiting between the collective and the copy-out matters: a
// copy into pageable host memory blocks the calling thread inside CUDA, where no deadline can be
// checked, whereas the wait polls the stream and the communicator's async error against the
// group's timeout and aborts the communicator when it passes (so a hang becomes an error, and
// the watchdog still sees the call as unfinished until then). Collectives that need input and
// output apart use NCCL's in-place forms: all_gather sends from out + rank*n, reduce_scatter
// receives into in + rank*chunk.
class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(const WorldInfo& w, Options o, int device) : ProcessGroup(w.rank, w.size, std::move(o)), device_(device) {
    timeout_ = nccl_timeout(options());
    try {
      set_device("init");
      check_cuda("init", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      static std::atomic<uint64_t> groups_created{0};
      const std::string path = run_dir(options()) + "/nccl-" + launch_id_from_env("TRAINBENCH_NCCL_RUN_ID") + "-" +
                               std::to_string(groups_created++) + ".id";
      ncclUniqueId id = exchange_id(rank(), size(), path, timeout_);
      // Non-blocking: init returns at once and we poll with a deadline, so a rank that never
      // joins is an error after the timeout instead of a hang.
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t r = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
      if (r != ncclSuccess && r != ncclInProgress) {
        if (comm_) ncclCommAbort(comm_);  // a half-made communicator is only good for abort
        comm_ = nullptr;
        fail("init", r);
      }
      wait_comm("init");
      if (rank() == 0 && size() > 1) std::remove(path.c_str());
    } catch (...) {
      release();
      throw;
    }
    start();
  }

  ~NcclGroup() override {
    shutdown();
    release();
  }

  std::string backend() const override { return "nccl"; }

 protected:
  void run_all_reduce(Tensor& t, ReduceOp op) override {
    const size_t bytes = nbytes(t);
    if (bytes == 0) return;
    set_device("all_reduce");
    void* d = buffer(bytes);
    to_device(d, t.data(), bytes, "all_reduce");
    check("all_reduce", ncclAllReduce(d, d, size_t(t.numel()), nccl_dtype(t.dtype()), nccl_op(op), comm_, stream_));
    wait_stream("all_reduce");
    to_host(t.data(), d, bytes, "all_reduce");
  }

  void run_broadcast(Tensor& t, int root) override {
    const size_t bytes = nbytes(t);
    if (bytes == 0) return;
    set_device("broadcast");
    void* d = buffer(bytes);
    if (rank() == root) to_device(d, t.data(), bytes, "broadcast");
    check("broadcast", ncclBroadcast(d, d, size_t(t.numel()), nccl_dtype(t.dtype()), root, comm_, stream_));
    wait_stream("broadcast");
    if (rank() != root) to_host(t.data(), d, bytes, "broadcast");
  }

  void run_all_gather(Tensor& out, const Tensor& in) override {
    const size_t in_bytes = nbytes(in);
    if (in_bytes == 0) return;
    set_device("all_gather");
    auto* d = static_cast<char*>(buffer(nbytes(out)));
    char* mine = d + size_t(rank()) * in_bytes;
    to_device(mine, in.data(), in_bytes, "all_gather");
    check("all_gather", ncclAllGather(mine, d, size_t(in.numel()), nccl_dtype(in.dtype()), comm_, stream_));
    wait_stream("all_gather");
    to_host(out.data(), d, nbytes(out), "all_gather");
  }

  // ncclReduceScatter takes one count for every rank: uneven chunks are padded to the largest,
  // each chunk copied to its own slot (what lies past a chunk's end is reduced and dropped).
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>& counts, ReduceOp op) override {
    const int64_t chunk = *std::max_element(counts.begin(), counts.end());
    if (chunk == 0) return;
    set_device("reduce_scatter");
    const size_t isz = in.itemsize();
    const size_t slot_bytes = size_t(chunk) * isz;
    auto* d = static_cast<char*>(buffer(slot_bytes * size_t(size())));
    const bool even = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == chunk; });
    if (even) {
      to_device(d, in.data(), nbytes(in), "reduce_scatter");
    } else {
      const auto* src = static_cast<const char*>(in.data());
      for (size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] > 0) to_device(d + r * slot_bytes, src, size_t(counts[r]) * isz, "reduce_scatter");
        src += size_t(counts[r]) * isz;
      }
    }
    char* mine = d + size_t(rank()) * slot_bytes;
    check("reduce_scatter",
          ncclReduceScatter(d, mine, size_t(chunk), nccl_dtype(in.dtype()), nccl_op(op), comm_, stream_));
    wait_stream("reduce_scatter");
    if (nbytes(out) > 0) to_host(out.data(), mine, nbytes(out), "reduce_scatter");
  }

  // A one-element all-reduce: returns on every rank only once all have entered it.
  void run_barrier() override {
    set_device("barrier");
    void* d = buffer(sizeof(float));
    check_cuda("barrier", cudaMemsetAsync(d, 0, sizeof(float), stream_));
    check("barrier", ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, comm_, stream_));
    wait_stream("barrier");
  }

  void run_send(const Tensor& t, int dst, int /*tag: see nccl_group.h*/) override {
    const size_t bytes = nbytes(t);
    if (bytes == 0) return;
    set_device("send");
    void* d = buffer(bytes);
    to_device(d, t.data(), bytes, "send");
    check("send", ncclSend(d, size_t(t.numel()), nccl_dtype(t.dtype()), dst, comm_, stream_));
    wait_stream("send");
  }

  void run_recv(Tensor& t, int src, int /*tag*/) override {
    const size_t bytes = nbytes(t);
    if (bytes == 0) return;
    set_device("recv");
    void* d = buffer(bytes);
    check("recv", ncclRecv(d, size_t(t.numel()), nccl_dtype(t.dtype()), src, comm_, stream_));
    wait_stream("recv");
    to_host(t.data(), d, bytes, "recv");
  }

 private:
  int device_;
  Millis timeout_{0};
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  void* dev_buf_ = nullptr;
  size_t dev_cap_ = 0;

  static size_t nbytes(const Tensor& t) { return size_t(t.numel()) * t.itemsize(); }

  // The current device is per thread: the constructor's thread and the worker both set it.
  void set_device(const char* op) { check_cuda(op, cudaSetDevice(device_)); }

  void* buffer(size_t bytes) {
    if (bytes > dev_cap_) {
      // Every primitive ends with its stream drained, so the old buffer is idle here.
      const size_t cap = std::max(bytes, 2 * dev_cap_);
      if (dev_buf_) check_cuda("staging buffer", cudaFree(dev_buf_));
      dev_buf_ = nullptr;
      dev_cap_ = 0;
      check_cuda("staging buffer of " + std::to_string(cap) + " bytes", cudaMalloc(&dev_buf_, cap));
      dev_cap_ = cap;
    }
    return dev_buf_;
  }

  void to_device(void* d, const void* h, size_t bytes, const char* op) {
    check_cuda(op, cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void to_host(void* h, const void* d, size_t bytes, const char* op) {
    check_cuda(op, cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, stream_));
    wait_stream(op);
  }

  [[noreturn]] void fail(const std::string& op, ncclResult_t r) {
    std::string detail = std::string(ncclGetErrorString(r));
    const char* last = ncclGetLastError(comm_);  // comm may be null: NCCL's last error overall
    if (last && *last) detail += " (" + std::string(last) + ")";
    throw DistError("nccl " + op, "rank " + std::to_string(rank()) + ": " + detail);
  }

  // Gives up on the communicator: it cannot be used after a timeout or an async error.
  [[noreturn]] void abort_and_throw(const std::string& op, const std::string& why) {
    if (comm_ && !aborted_) {
      ncclCommAbort(comm_);
      aborted_ = true;
      comm_ = nullptr;
    }
    throw DistError("nccl " + op, "rank " + std::to_string(rank()) + ": " + why + "; communicator aborted");
  }

  void check(const char* op, ncclResult_t r) {
    if (aborted_) throw DistError(std::string("nccl ") + op, "the communicator was aborted by an earlier failure");
    if (r == ncclInProgress) {
      wait_comm(op);
    } else if (r != ncclSuccess) {
      fail(op, r);
    }
  }

  // A non-blocking communicator reports ncclInProgress until the last call has been enqueued
  // (and, after init or finalize, until that finished).
  void wait_comm(const char* op) {
    const auto start = Clock::now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
      if (r != ncclSuccess) fail(op, r);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) abort_and_throw(op, std::string("async error: ") + ncclGetErrorString(state));
      if (Clock::now() - start > timeout_)
        abort_and_throw(op, "not finished after " + std::to_string(timeout_.count()) + " ms");
      backoff(start);
    }
  }

  void wait_stream(const char* op) {
    const auto start = Clock::now();
    for (;;) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check_cuda(op, e);
      if (comm_) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
          abort_and_throw(op, std::string("async error: ") + ncclGetErrorString(state));
      }
      if (Clock::now() - start > timeout_)
        abort_and_throw(op, "not finished after " + std::to_string(timeout_.count()) + " ms");
      backoff(start);
    }
  }

  // Frees everything; never throws (runs in the destructor and on a failed construction).
  void release() noexcept {
    if (comm_ && !aborted_) {
      // Finalize flushes outstanding work; if it does not finish in time, abort instead.
      bool finalized = false;
      ncclResult_t r = ncclCommFinalize(comm_);
      if (r == ncclSuccess || r == ncclInProgress) {
        const auto start = Clock::now();
        for (;;) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
          if (state == ncclSuccess) {
            finalized = true;
            break;
          }
          if (state != ncclInProgress || Clock::now() - start > timeout_) break;
          backoff(start);
        }
      }
      if (finalized) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    if (dev_buf_) cudaFree(dev_buf_);
    dev_buf_ = nullptr;
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
};

}  // namespace

std::shared_ptr<ProcessGroup> make_group(const WorldInfo& w, Options o) {
  if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
    throw DistError("nccl", "invalid world: rank " + std::to_string(w.rank) + " of " + std::to_string(w.size) +
                                " (from " + (w.source.empty() ? std::string("defaults") : w.source) + ")");
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it, so later CUDA calls in this process do not report it
    throw DistError("nccl", std::string("no GPU (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")");
  }
  if (count == 0) throw DistError("nccl", "no GPU (cudaGetDeviceCount found 0 devices)");
  return std::make_shared<NcclGroup>(w, std::move(o), w.local_rank % count);
}

}  // namespace tb::dist::nccl
