// The step profiler's recording core (torch.profiler, in spirit): while a Profile is alive, every
// Scope the engine opens becomes a complete event (name, category, start, end, thread, args);
// stop() returns them, key_averages() folds them into per-name totals (self and total time),
// table() prints those as PyTorch's prof.key_averages().table() does, and chrome_trace_json()
// writes the trace-event JSON that Perfetto and chrome://tracing open. docs/profiling.md.
//
// It lives in core, the leftmost room, so that every room can open scopes: autograd::kernel (each
// differentiable op's forward), Tensor's copying methods (OpScope), the backward engine (each
// node), the optimizers' step, the process group's collectives (with their call-site label), the
// DataLoader. Names are static strings (literals, or intern()ed).
//
// Note [Profiler cost when off]
// A Scope made while no Profile runs costs one relaxed atomic load and a branch (plus the check
// of its index in the destructor): no clock read, no lock, no allocation. While one runs, a scope
// takes its thread's buffer lock twice (uncontended: only stop() takes it from another thread)
// and reads the clock twice.
//
// Note [Nesting and self time]
// Each thread keeps the stack of its open events. A closing event adds its duration to the
// event below it on the stack (its parent), so self time = duration - direct children's
// durations is exact whatever the clock's resolution (two events with equal timestamps are still
// parent and child, not siblings). Ops reach the profiler two ways: autograd::kernel (every
// differentiable tb:: op) and OpScope (a Tensor method's copy, a bare kernel's call site); an
// OpScope directly inside an Op event of the same name records nothing, so an op whose kernel()
// runs the bare kernel of its own name (tb::linear_relu -> ops::linear_relu, once that kernel opens
// an OpScope) is one call, not two; a different name nests (matmul -> copy_), as in PyTorch.
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"

namespace tb::profiler {

// What an event is, for the step breakdown (harness's `trainbench profile`) and the trace's "cat".
enum class Category : uint8_t { Op, Backward, Optimizer, Collective, Data, User, Step };
const char* category_name(Category c);  // "op", "backward", "optimizer", "collective", "data", "user", "step"

namespace detail {
extern std::atomic<bool> g_enabled;
// The event's slot in the calling thread's buffer (idx, session), or idx -1 when none is running.
struct Slot {
  int64_t idx = -1;
  uint64_t session = 0;
};
// unless_same_op: record nothing when the thread's innermost open event is an Op named `name`.
Slot begin(const char* name, Category cat, bool unless_same_op = false);
void end(Slot s);
void add_arg(Slot s, const char* key, std::string_view value, bool quote);
void add_members(Slot s, std::string_view members);  // "\"k\":v,..." appended to the event's args
void set_label(Slot s, std::string_view label);
}  // namespace detail

// Tests only: the clock events are stamped with (nanoseconds), nullptr for steady_clock. Read only
// while a Profile runs; set it before one starts.
void set_clock_for_testing(int64_t (*clock)());

// Sets the args (JSON object members, "\"k\":v,...") of the event the calling thread closed last,
// if it is an op's and has none yet: autograd's record() gives the kernel's event, just closed,
// its input shapes and dtypes (the kernel itself does not see its inputs). Only when enabled().
void annotate_last_op(std::string_view members);

// True while a Profile runs (relaxed: a scope opened just as one starts or stops may be missed).
inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }

// One event for the scope's lifetime, on the calling thread's lane, when a Profile runs.
class Scope {
 public:
  Scope(const char* name, Category cat) {
    if (enabled()) slot_ = detail::begin(name, cat);
  }
  ~Scope() {
    if (slot_.idx >= 0) detail::end(slot_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  bool active() const { return slot_.idx >= 0; }
  // Args shown in the trace (a JSON string, or a number's text as is); ignored when not active.
  void arg(const char* key, std::string_view text) {
    if (active()) detail::add_arg(slot_, key, text, true);
  }
  void arg(const char* key, int64_t n) {
    if (active()) detail::add_arg(slot_, key, std::to_string(n), false);
  }
  // The call site ("ddp/bucket 0 (...)", a CallSite's text): key_averages keeps events of one name
  // but different labels apart, and the trace shows it as the arg "label". Ignored when empty.
  void label(std::string_view text) {
    if (active() && !text.empty()) detail::set_label(slot_, text);
  }

 protected:
  Scope() = default;
  detail::Slot slot_;
};

// A user's label for a region (torch.profiler.record_function): RecordFunction r("my_label").
// The name is interned (a lock) only while a Profile runs.
class RecordFunction : public Scope {
 public:
  explicit RecordFunction(std::string_view name, Category cat = Category::User);
};

// An op's event for a call that does not pass through autograd::kernel: a Tensor method that
// copies (reshape of a non-viewable layout, contiguous, clone, to, copy_) or a bare tb::ops::
// kernel's call site. Its args are the inputs' shapes and dtypes, as record() gives a kernel's
// event. Directly inside an Op event of the same name it records nothing (Note [Nesting and self
// time]). Off: one relaxed load, as Scope.
class OpScope : public Scope {
 public:
  struct Input {
    const core::Shape* sizes;  // nullptr: an undefined tensor
    core::DType dtype;
  };
  explicit OpScope(const char* name) {
    if (enabled()) slot_ = detail::begin(name, Category::Op, /*unless_same_op=*/true);
  }
  OpScope(const char* name, std::initializer_list<Input> inputs) : OpScope(name) {
    if (active()) set_inputs(std::vector<Input>(inputs));
  }
  // The event's input shapes and dtypes, for callers that know them only after construction
  // (call only when active(): building `inputs` is the cost to avoid while off).
  void set_inputs(const std::vector<Input>& inputs);
};

// "\"input_shapes\":[[2, 3], ...],\"input_dtypes\":[\"float32\", ...]" (undefined inputs: [] and
// "undefined"): the args of an op's event.
std::string input_args(const std::vector<OpScope::Input>& inputs);

// A process-lifetime copy of `s` (equal strings give the same pointer), for event names made at
// run time. Takes a lock.
const char* intern(std::string_view s);

// Names the calling thread's lane in traces ("collectives", "dataloader worker"); cheap (a
// thread-local string), may be called before any Profile.
void set_thread_name(std::string_view name);

struct Event {
  const char* name = "";
  Category cat = Category::Op;
  int64_t start_ns = 0, end_ns = 0;  // steady_clock nanoseconds (one clock for every process of a host)
  int tid = 0;                       // the thread's lane: 1, 2, ... in the order threads first recorded
  std::string args;                  // JSON object members, "\"k\":v,..." (empty: none)
  std::string label;                 // the call site (Scope::label), "" when none
  int64_t self_ns = 0;               // end - start minus the direct children's time (set by stop())
  int64_t child_ns = 0;              // the direct children's time (Note [Nesting and self time])
};

struct Thread {
  int tid = 0;
  std::string name;  // set_thread_name's, else "main" for the thread that started the Profile, else "thread <tid>"
};

struct Trace {
  int rank = 0;  // the process lane (Options::rank)
  std::vector<Thread> threads;
  std::vector<Event> events;  // closed events only, by thread, then start time
  int64_t start_ns = 0, end_ns = 0;
};

// Profiling on for its lifetime (one at a time per process: a second throws core::Error).
class Profile {
 public:
  struct Options {
    int rank = 0;  // the trace's process lane
  };
  Profile() : Profile(Options{}) {}
  explicit Profile(Options o);
  ~Profile();  // stops if stop() was not called
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Stops recording and returns the events (scopes still open are left out). Once.
  Trace stop();

 private:
  Options options_;
  uint64_t session_;
  int64_t start_ns_;
  bool stopped_ = false;
};

// Per name, category and label (collectives: op and call site), as torch.profiler's
// key_averages(): calls, total time (sum of the events' durations), self time (total minus the
// time of events nested directly inside).
struct OpStat {
  std::string name;
  Category cat = Category::Op;
  int64_t calls = 0, total_ns = 0, self_ns = 0;
  std::string label;  // "" for events without one; the table shows "name [label]"
};
std::vector<OpStat> key_averages(const std::vector<Event>& events);

enum class SortBy { SelfTime, TotalTime, Calls };
// A fixed-width table: Name, Category, Calls, Self time (ms), Self %, Total time (ms), Avg (us),
// sorted, the first `limit` rows, and a last line with the sum of self times (the time the
// profiled threads spent inside any scope).
std::string table(const std::vector<OpStat>& stats, SortBy sort, std::size_t limit = 20);

// {"traceEvents":[...], "displayTimeUnit":"ms"}: per trace, process_name / thread_name metadata
// events and one "ph":"X" event per Event (pid = rank, tid, ts/dur in microseconds, cat, args; a
// label is the arg "label").
std::string chrome_trace_json(const std::vector<Trace>& traces);

}  // namespace tb::profiler
