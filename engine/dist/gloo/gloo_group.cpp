// GlooGroup: the ProcessGroup primitives on Gloo's algorithms (ring all-reduce, broadcast,
// all-gather, barrier; reduce-scatter through the all-reduce, Note [Gloo reduce-scatter]) and its
// unbound buffers for send/recv.
// Rendezvous, stale files and the transport are described in gloo_group.h (Note [Gloo rendezvous]).
#include "engine/dist/gloo/gloo_group.h"
#include "engine/core/env.h"

#include "engine/dist/watchdog.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <filesystem>
#include <numeric>
#include <type_traits>

namespace tb::dist::gloo {
namespace {

using core::BFloat16;
using Millis = std::chrono::milliseconds;

// The folder of the FileStore (Note [Gloo rendezvous]); created if missing. Every rank creates
// it, so "already exists" is the common case, not an error.
std::string store_dir(const Options& o) {
  std::string dir;
  if (!o.run_dir.empty()) {
    dir = o.run_dir + "/gloo-store";
  } else if (std::string d = core::env_or("TRAINBENCH_DIST_DIR"); !d.empty()) {
    dir = d + "/gloo-store";
  } else if (std::string s = core::env_or("TRAINBENCH_GLOO_STORE"); !s.empty()) {
    dir = s;
  } else {
    dir = "gloo-store";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    throw DistError("gloo",
                    "cannot create the rendezvous folder " + dir + (ec ? " (" + ec.message() + ")" : std::string()));
  return dir;
}

// True unless the launcher reports ranks on other hosts (dist::world_from_env).
bool all_ranks_local(int size) {
  const WorldInfo w = world_from_env();
  if (w.local_size > 0) return w.local_size >= size;
  if (w.nodes > 0) return w.nodes <= 1;
  return true;
}

// Gloo's TCP device dereferences a failed lookup (a host name that does not resolve crashed the
// rank inside CreateDevice), so the name or interface is checked here first. A name or interface
// the user set (TRAINBENCH_GLOO_HOSTNAME / _IFACE) that is wrong is a configuration error
// (core::Error), not a backend that cannot start here (DistError, which suites report as a skip):
// a typo must fail the run, not skip every Gloo case and pass.
void check_hostname(const std::string& host, const char* from, bool user_set) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (res) ::freeaddrinfo(res);
  if (rc == 0) return;
  const std::string what = "host name '" + host + "' (" + from +
                           ") does not resolve (getaddrinfo: " + ::gai_strerror(rc) +
                           "): add it to /etc/hosts, or set TRAINBENCH_GLOO_IFACE to the network interface the "
                           "ranks share, or TRAINBENCH_GLOO_HOSTNAME to this host's address";
  if (user_set) throw core::Error("gloo", what);
  throw DistError("gloo", what);
}

void check_interface(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0)
    throw DistError("gloo", std::string("getifaddrs failed: ") + std::strerror(errno) +
                                "; set TRAINBENCH_GLOO_HOSTNAME instead of TRAINBENCH_GLOO_IFACE");
  bool found = false;
  std::vector<std::string> names;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6)) continue;
    if (iface == a->ifa_name) found = true;
    if (std::find(names.begin(), names.end(), a->ifa_name) == names.end()) names.emplace_back(a->ifa_name);
  }
  ::freeifaddrs(list);
  if (found) return;
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  throw core::Error("gloo", "TRAINBENCH_GLOO_IFACE=" + iface +
                                ": no network interface of that name with an IPv4 or IPv6 address on this host "
                                "(interfaces with one: " +
                                known + ")");
}

::gloo::transport::tcp::attr transport_attr(int size) {
  ::gloo::transport::tcp::attr attr;
  if (std::string iface = core::env_or("TRAINBENCH_GLOO_IFACE"); !iface.empty()) {
    check_interface(iface);
    attr.iface = iface;
  } else if (std::string host = core::env_or("TRAINBENCH_GLOO_HOSTNAME"); !host.empty()) {
    check_hostname(host, "TRAINBENCH_GLOO_HOSTNAME", true);
    attr.hostname = host;
  } else if (all_ranks_local(size)) {
    attr.hostname = "127.0.0.1";
  } else {
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0)
      throw DistError("gloo", "gethostname failed; set TRAINBENCH_GLOO_IFACE or TRAINBENCH_GLOO_HOSTNAME");
    check_hostname(buf, "this host's name, as the ranks run on several hosts", false);
    attr.hostname = buf;
  }
  return attr;
}

std::string transport_name(const ::gloo::transport::tcp::attr& a) {
  return a.iface.empty() ? "host " + a.hostname : "interface " + a.iface;
}

// Gloo's connectFullMesh reads the peers' hostname keys with Store::get, which in FileStore waits
// a fixed 30 s (Store::kDefaultTimeout) whatever the context's timeout: ranks that start more than
// 30 s apart (a loaded machine, a slow data load before the group) would fail. This wrapper makes
// every wait, get's included, use the group's timeout.
class TimeoutStore final : public ::gloo::rendezvous::Store {
 public:
  TimeoutStore(::gloo::rendezvous::Store& inner, Millis timeout) : inner_(inner), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { inner_.set(key, data); }
  std::vector<char> get(const std::string& key) override {
    inner_.wait({key}, timeout_);
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { inner_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Millis& timeout) override { inner_.wait(keys, timeout); }

 private:
  ::gloo::rendezvous::Store& inner_;
  Millis timeout_;
};

void remove_files(const std::vector<std::string>& paths) {
  for (const auto& p : paths) std::remove(p.c_str());
}

// ---- reductions ----
// Gloo's element functions for float, double and int64; bfloat16 gets its own, computing in
// float and rounding once per pairwise step (what PyTorch's Gloo backend does with c10::BFloat16).
struct AddF {
  template <typename T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct MulF {
  template <typename T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct MaxF {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};  // std::max's order, as gloo::max
struct MinF {
  template <typename T>
  T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

template <typename F>
void bf16_reduce3(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<BFloat16*>(c);
  const auto* x = static_cast<const BFloat16*>(a);
  const auto* y = static_cast<const BFloat16*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = BFloat16(F{}(float(x[i]), float(y[i])));
}

using Reduce3 = void (*)(void*, const void*, const void*, size_t);

// The all-reduce function for T and op (Avg never arrives: the base class sums and divides).
template <typename T>
Reduce3 allreduce_fn(ReduceOp op) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    switch (op) {
      case ReduceOp::Sum: return &bf16_reduce3<AddF>;
      case ReduceOp::Product: return &bf16_reduce3<MulF>;
      case ReduceOp::Max: return &bf16_reduce3<MaxF>;
      case ReduceOp::Min: return &bf16_reduce3<MinF>;
      default: break;
    }
  } else {
    switch (op) {
      case ReduceOp::Sum: return static_cast<Reduce3>(&::gloo::sum<T>);
      case ReduceOp::Product: return static_cast<Reduce3>(&::gloo::product<T>);
      case ReduceOp::Max: return static_cast<Reduce3>(&::gloo::max<T>);
      case ReduceOp::Min: return static_cast<Reduce3>(&::gloo::min<T>);
      default: break;
    }
  }
  throw DistError("gloo", std::string("reduce op ") + reduce_op_name(op) + " does not reach the backend");
}

// f.template operator()<T>() for the C++ type of a supported dtype.
template <typename F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::Float32: f.template operator()<float>(); return;
    case DType::Float64: f.template operator()<double>(); return;
    case DType::BFloat16: f.template operator()<BFloat16>(); return;
    case DType::Int64: f.template operator()<int64_t>(); return;
    default: throw DistError("gloo", std::string("unsupported dtype ") + core::name(t));
  }
}

// Point-to-point slots: a prefix of our own above Gloo's collective prefixes (0x01..0x08) and
// far from the small slot numbers its class-style algorithms count up from (the rendezvous uses
// some), so a user's tags can never meet a collective's messages.
constexpr uint8_t kP2PSlotPrefix = 0x7e;
constexpr uint8_t kP2PHeaderPrefix = 0x7d;  // Note [Gloo send/recv header]

// Note [Gloo timeouts]
// Gloo's own timeout is the backstop; the watchdog (process_group.h) is the diagnosis. When
// the watchdog runs, Gloo waits a little longer than it, so a hang ends in the watchdog's dump
// naming the rank that never arrived rather than in a bare "Timed out waiting" from Gloo on
// whichever rank noticed first. Without the watchdog, Gloo's timeout is the group's timeout.
Millis gloo_timeout(const Options& o) {
  if (!o.watchdog) return o.timeout;
  return o.timeout + std::max<Millis>(std::chrono::seconds(2), o.timeout / 10);
}

// "rank 1 never joined; rank 3 never joined" from Gloo's "Wait timeout for key(s): <prefix>/1,
// <prefix>/3" (connectFullMesh's keys are the ranks, "rank_<R>" in other Gloo versions): the
// wording of Note [MPI rendezvous], so a rank that never came is told apart from one that came and
// stopped.
std::string never_joined(const std::string& what, const std::string& prefix) {
  std::string out;
  for (std::size_t at = what.find(prefix + "/"); at != std::string::npos; at = what.find(prefix + "/", at + 1)) {
    std::size_t d = at + prefix.size() + 1;
    if (what.compare(d, 5, "rank_") == 0) d += 5;
    const std::size_t end = what.find_first_not_of("0123456789", d);
    if (end == d) continue;
    out += (out.empty() ? "rank " : "; rank ") + what.substr(d, end == std::string::npos ? end : end - d) +
           " never joined";
  }
  return out.empty() ? "a rank never joined" : out;
}

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(const WorldInfo& w, Options o) : ProcessGroup(w.rank, w.size, std::move(o)) {
    timeout_ = gloo_timeout(options());
    const std::string dir = store_dir(options());
    // One count per process: every rank creates its groups in the same order, so the n-th
    // group has the same prefix everywhere.
    static std::atomic<uint64_t> groups_created{0};
    const std::string prefix = "tb/" + launch_id_from_env("TRAINBENCH_GLOO_RUN_ID") + "/" +
                               std::to_string(groups_created++);
    const auto attr = transport_attr(size());
    ::gloo::rendezvous::FileStore file_store(dir);
    try {
      ::gloo::rendezvous::PrefixStore prefixed(prefix, file_store);
      TimeoutStore store(prefixed, timeout_);
      auto device = ::gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<::gloo::rendezvous::Context>(rank(), size());
      ctx->setTimeout(timeout_);
      ctx->connectFullMesh(store, device);
      ctx_ = ctx;
      // Every rank has read every key once all have connected: our key files can go.
      barrier_now();
    } catch (const std::exception& e) {
      remove_files(file_store.getAllKeyFilePaths());
      std::string what = e.what();
      std::string hint;
      if (what.find("File already exists") != std::string::npos)
        // FileStore lists the key it refused among ours, so remove_files took the stale file away.
        hint = "; an earlier run with the same launch id left its rendezvous file in " + dir +
               " (now removed): give each launch a fresh TRAINBENCH_DIST_DIR (the launcher does) or its own "
               "TRAINBENCH_GLOO_RUN_ID";
      else if (what.find("address.cc") != std::string::npos)
        hint = "; a rendezvous file in " + dir +
               " is not from this run (left by an earlier run with the same "
               "launch id?): give each launch a fresh TRAINBENCH_DIST_DIR";
      else if (what.find("Wait timeout") != std::string::npos)
        hint = "; " + never_joined(what, prefix) + " (no address published within " + std::to_string(timeout_.count()) +
               " ms: not started, stuck before creating the group, or not sharing this folder: several hosts need a "
               "shared filesystem)";
      else if (attr.iface.empty() && attr.hostname == "127.0.0.1" && size() > 1)
        hint = "; if the ranks run on several hosts, set TRAINBENCH_GLOO_IFACE or TRAINBENCH_GLOO_HOSTNAME";
      throw DistError("gloo", "rendezvous of rank " + std::to_string(rank()) + " of " + std::to_string(size()) +
                                  " through " + dir + " on " + transport_name(attr) + " failed: " + what + hint);
    }
    remove_files(file_store.getAllKeyFilePaths());
    start();
  }

  ~GlooGroup() override { shutdown(); }

  std::string backend() const override { return "gloo"; }

 protected:
  void run_all_reduce(Tensor& t, ReduceOp op) override {
    if (t.numel() == 0) return;  // Gloo refuses zero elements; every rank skips alike
    guarded("all_reduce", [&] {
      with_type(t.dtype(), [&]<typename T>() {
        ::gloo::AllreduceOptions opts(ctx_);
        opts.setOutput(static_cast<T*>(t.data()), size_t(t.numel()));
        opts.setReduceFunction(allreduce_fn<T>(op));
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::allreduce(opts);
      });
    });
  }

  void run_broadcast(Tensor& t, int root) override {
    if (t.numel() == 0) return;
    guarded("broadcast", [&] {
      with_type(t.dtype(), [&]<typename T>() {
        ::gloo::BroadcastOptions opts(ctx_);
        opts.setOutput(static_cast<T*>(t.data()), size_t(t.numel()));
        opts.setRoot(root);
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::broadcast(opts);
      });
    });
  }

  void run_all_gather(Tensor& out, const Tensor& in) override {
    if (in.numel() == 0) return;
    guarded("all_gather", [&] {
      with_type(in.dtype(), [&]<typename T>() {
        ::gloo::AllgatherOptions opts(ctx_);
        opts.setInput(static_cast<T*>(in.data()), size_t(in.numel()));
        opts.setOutput(static_cast<T*>(out.data()), size_t(out.numel()));
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::allgather(opts);
      });
    });
  }

  // Note [Gloo reduce-scatter]
  // An all-reduce of a copy of the input, keeping this rank's chunk: what PyTorch's Gloo backend
  // does, at twice the traffic of a true reduce-scatter. Gloo's own ReduceScatterHalvingDoubling
  // (per-rank counts, so uneven chunks would need no padding) was tried and dropped: with the
  // Debian build (2022-05) and 3 ranks it intermittently returned wrong values for tiny inputs
  // (counts 1,1,0: a min below every rank's input), so it cannot be trusted with sizes that do
  // not divide by the world size, which is the point of the uneven form.
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>& counts, ReduceOp op) override {
    const int64_t total = in.numel();
    if (total == 0) return;
    guarded("reduce_scatter", [&] {
      with_type(in.dtype(), [&]<typename T>() {
        const T* src = static_cast<const T*>(in.data());
        std::vector<T> work(src, src + total);
        ::gloo::AllreduceOptions opts(ctx_);
        opts.setOutput(work.data(), size_t(total));
        opts.setReduceFunction(allreduce_fn<T>(op));
        opts.setTag(next_tag());
        opts.setTimeout(timeout_);
        ::gloo::allreduce(opts);
        const int64_t offset = std::accumulate(counts.begin(), counts.begin() + rank(), int64_t(0));
        const int64_t mine = counts[size_t(rank())];
        if (mine > 0) std::memcpy(out.data(), work.data() + offset, size_t(mine) * sizeof(T));
      });
    });
  }

  void run_barrier() override {
    guarded("barrier", [&] { barrier_now(); });
  }

  // Note [Gloo send/recv header]
  // A recv posted with another size than the message that arrives makes Gloo's transport thread
  // throw, which aborts the process. So every send is preceded by a 16-byte header (dtype, element
  // count) on a slot of its own; the receiver reads it first and posts the data recv only when it
  // matches. Otherwise it drains the message into a scratch buffer of the sender's size (so the
  // pair holds nothing stale) and throws a DistError naming both sides; the sender completes.
  void run_send(const Tensor& t, int dst, int tag) override {
    guarded("send", [&] {
      int64_t header[2] = {int64_t(t.dtype()), t.numel()};
      auto head = ctx_->createUnboundBuffer(header, sizeof(header));
      head->send(dst, ::gloo::Slot::build(kP2PHeaderPrefix, uint32_t(tag)));
      auto buf = ctx_->createUnboundBuffer(t.numel() ? t.data() : nullptr, size_t(t.numel()) * t.itemsize());
      buf->send(dst, ::gloo::Slot::build(kP2PSlotPrefix, uint32_t(tag)));
      if (!head->waitSend(timeout_) || !buf->waitSend(timeout_)) throw DistError("gloo send", "aborted");
    });
  }

  void run_recv(Tensor& t, int src, int tag) override {
    guarded("recv", [&] {
      int64_t header[2] = {0, 0};
      auto head = ctx_->createUnboundBuffer(header, sizeof(header));
      head->recv(src, ::gloo::Slot::build(kP2PHeaderPrefix, uint32_t(tag)));
      if (!head->waitRecv(timeout_)) throw DistError("gloo recv", "aborted");
      const auto slot = ::gloo::Slot::build(kP2PSlotPrefix, uint32_t(tag));
      if (header[0] == int64_t(t.dtype()) && header[1] == t.numel()) {
        auto buf = ctx_->createUnboundBuffer(t.numel() ? t.data() : nullptr, size_t(t.numel()) * t.itemsize());
        buf->recv(src, slot);
        if (!buf->waitRecv(timeout_)) throw DistError("gloo recv", "aborted");
        return;
      }
      const bool known = header[0] >= 0 && header[0] <= int64_t(DType::Float64) && header[1] >= 0 &&
                         header[1] < (int64_t(1) << 40);
      const std::string theirs = known ? describe_call(
                                             {pack_call(OpCode::Send, DType(header[0]), rank(), 0), header[1], 0})
                                       : "an unreadable header";
      if (known) {
        std::vector<char> scratch(size_t(header[1]) * core::itemsize(DType(header[0])));
        auto buf = ctx_->createUnboundBuffer(scratch.empty() ? nullptr : scratch.data(), scratch.size());
        buf->recv(src, slot);
        buf->waitRecv(timeout_);
      }
      throw DistError("recv", "rank " + std::to_string(rank()) + "'s " +
                                  describe_call({pack_call(OpCode::Recv, t.dtype(), src, 0), t.numel(), 0}) + " tag " +
                                  std::to_string(tag) + " does not match rank " + std::to_string(src) + "'s " + theirs +
                                  "; nothing was written: send and recv must agree on dtype and element count");
    });
  }

 private:
  std::shared_ptr<::gloo::Context> ctx_;
  Millis timeout_{0};
  // Collectives run one at a time, in the same order on every rank (the worker thread), so a
  // counter gives each its own tag on all ranks, as PyTorch's Gloo backend does.
  uint32_t tag_ = 0;

  uint32_t next_tag() { return tag_++; }

  void barrier_now() {
    ::gloo::BarrierOptions opts(ctx_);
    opts.setTag(next_tag());
    opts.setTimeout(timeout_);
    ::gloo::barrier(opts);
  }

  // Gloo reports failures as gloo::Exception (runtime_error) or EnforceNotMet (std::exception);
  // both become DistError naming the op and the rank.
  template <typename F>
  void guarded(const char* op, F&& f) {
    try {
      f();
    } catch (const core::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw DistError(std::string("gloo ") + op, "rank " + std::to_string(rank()) + ": " + e.what());
    }
  }
};

}  // namespace

std::shared_ptr<ProcessGroup> make_group(const WorldInfo& w, Options o) {
  if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
    throw DistError("gloo", "invalid world: rank " + std::to_string(w.rank) + " of " + std::to_string(w.size) +
                                " (from " + (w.source.empty() ? std::string("defaults") : w.source) + ")");
  // Gloo's TCP transport writes to a peer's socket without MSG_NOSIGNAL: when that peer died, the
  // default SIGPIPE would end this rank silently instead of letting the collective fail with an
  // error naming the peer (seen in suites/dcp's kill -9 trials). Ignored only if nobody chose a
  // handler.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  return std::make_shared<GlooGroup>(w, std::move(o));
}

}  // namespace tb::dist::gloo
