// The profiler's buffers, the session guard, the statistics and the trace writer (profiler.h).
//
// Note [Profiler buffers]
// Each thread appends to a buffer of its own, found through a thread_local pointer and registered
// once in a global list; a session number tells a buffer that its events belong to an earlier
// Profile (cleared at its next event). stop() turns recording off, then takes each buffer's lock to
// copy its events, so a scope that closes during stop() either made it or is left out, never half
// written. A thread that exits leaves its buffer in the list (its events may still be wanted); the
// next Profile drops the buffers of exited threads.
#include "engine/core/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include "engine/core/error.h"

namespace tb::profiler {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

std::atomic<int64_t (*)()> g_test_clock{nullptr};

int64_t now_ns() {
  if (int64_t(*c)() = g_test_clock.load(std::memory_order_relaxed)) return c();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Buffer {
  std::mutex mu;
  uint64_t session = 0;
  int tid = 0;
  std::string name;
  bool alive = true;
  int64_t last_closed = -1;  // the event end() closed last (annotate_last_op)
  std::vector<Event> events;
  std::vector<int64_t> open;  // indices of the open events, innermost last (Note [Nesting and self time])
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::atomic<uint64_t> session{0};  // the running (or last) Profile's number; 0: none yet
  bool running = false;
  int next_tid = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

thread_local std::string t_thread_name;

// Keeps the calling thread's buffer; marks it exited when the thread ends.
struct Holder {
  std::shared_ptr<Buffer> buf;
  ~Holder() {
    if (buf) {
      std::lock_guard lock(buf->mu);
      buf->alive = false;
    }
  }
};
thread_local Holder t_holder;

Buffer& my_buffer() {
  if (!t_holder.buf) {
    auto b = std::make_shared<Buffer>();
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    b->tid = r.next_tid++;
    b->name = t_thread_name;
    r.buffers.push_back(b);
    t_holder.buf = std::move(b);
  }
  return *t_holder.buf;
}

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out += u;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Microseconds with nanosecond digits, as trace viewers read fractional ts/dur.
void append_us(std::string& out, int64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  out += b;
}

}  // namespace

const char* category_name(Category c) {
  switch (c) {
    case Category::Op: return "op";
    case Category::Backward: return "backward";
    case Category::Optimizer: return "optimizer";
    case Category::Collective: return "collective";
    case Category::Data: return "data";
    case Category::User: return "user";
    case Category::Step: return "step";
  }
  return "?";
}

namespace detail {

Slot begin(const char* name, Category cat, bool unless_same_op) {
  Buffer& b = my_buffer();
  const uint64_t session = registry().session.load(std::memory_order_relaxed);
  std::lock_guard lock(b.mu);
  if (b.session != session) {
    b.events.clear();
    b.open.clear();
    b.session = session;
    b.last_closed = -1;
  }
  if (unless_same_op && !b.open.empty()) {
    const Event& parent = b.events[size_t(b.open.back())];
    if (parent.cat == Category::Op && std::strcmp(parent.name, name) == 0) return {};
  }
  Event e;
  e.name = name;
  e.cat = cat;
  e.tid = b.tid;
  e.start_ns = now_ns();
  b.events.push_back(std::move(e));
  b.open.push_back(int64_t(b.events.size()) - 1);
  return {int64_t(b.events.size()) - 1, session};
}

void end(Slot s) {
  const int64_t t = now_ns();
  Buffer& b = my_buffer();
  std::lock_guard lock(b.mu);
  if (b.session != s.session || s.idx >= int64_t(b.events.size())) return;  // stop() took the events
  Event& e = b.events[size_t(s.idx)];
  e.end_ns = t;
  b.last_closed = s.idx;
  // Scopes close in reverse order of opening (RAII), so s.idx is the top of the stack.
  while (!b.open.empty() && b.open.back() >= s.idx) b.open.pop_back();
  if (!b.open.empty()) b.events[size_t(b.open.back())].child_ns += t - e.start_ns;
}

void add_members(Slot s, std::string_view members) {
  Buffer& b = my_buffer();
  std::lock_guard lock(b.mu);
  if (b.session != s.session || s.idx >= int64_t(b.events.size())) return;
  std::string& a = b.events[size_t(s.idx)].args;
  if (!a.empty()) a += ',';
  a += members;
}

void add_arg(Slot s, const char* key, std::string_view value, bool quote) {
  std::string m;
  append_json_string(m, key);
  m += ':';
  if (quote) append_json_string(m, value);
  else m += value;
  add_members(s, m);
}

void set_label(Slot s, std::string_view label) {
  Buffer& b = my_buffer();
  std::lock_guard lock(b.mu);
  if (b.session == s.session && s.idx < int64_t(b.events.size())) b.events[size_t(s.idx)].label.assign(label);
}

}  // namespace detail

void set_clock_for_testing(int64_t (*clock)()) { g_test_clock.store(clock, std::memory_order_relaxed); }

std::string input_args(const std::vector<OpScope::Input>& inputs) {
  std::string args = "\"input_shapes\":[", dtypes;
  for (const OpScope::Input& in : inputs) {
    if (!dtypes.empty()) args += ',', dtypes += ',';
    args += in.sizes ? core::to_string(*in.sizes) : std::string("[]");
    dtypes += '"';
    dtypes += in.sizes ? core::name(in.dtype) : "undefined";
    dtypes += '"';
  }
  args += "],\"input_dtypes\":[";
  args += dtypes;
  args += ']';
  return args;
}

void OpScope::set_inputs(const std::vector<Input>& inputs) {
  if (active()) detail::add_members(slot_, input_args(inputs));
}

void annotate_last_op(std::string_view members) {
  Buffer& b = my_buffer();
  std::lock_guard lock(b.mu);
  if (b.session != registry().session.load(std::memory_order_relaxed) || b.last_closed < 0) return;
  Event& e = b.events[size_t(b.last_closed)];
  if (e.cat == Category::Op && e.args.empty()) e.args.assign(members);
}

RecordFunction::RecordFunction(std::string_view name, Category cat) {
  if (enabled()) slot_ = detail::begin(intern(name), cat);
}

const char* intern(std::string_view s) {
  static std::mutex mu;
  static auto* names = new std::unordered_set<std::string>;  // never freed: events point into it
  std::lock_guard lock(mu);
  return names->emplace(s).first->c_str();
}

void set_thread_name(std::string_view name) {
  t_thread_name.assign(name);
  if (t_holder.buf) {
    std::lock_guard lock(t_holder.buf->mu);
    t_holder.buf->name = t_thread_name;
  }
}

Profile::Profile(Options o) : options_(o) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mu);
    TB_CHECK(!r.running, "profiler::Profile", "a profile is already running in this process (one at a time)");
    r.running = true;
    std::erase_if(r.buffers, [](const std::shared_ptr<Buffer>& b) {
      std::lock_guard bl(b->mu);
      return !b->alive;
    });
    session_ = r.session.fetch_add(1) + 1;
  }
  if (t_thread_name.empty()) set_thread_name("main");
  start_ns_ = now_ns();
  detail::g_enabled.store(true, std::memory_order_release);
}

Profile::~Profile() {
  if (!stopped_) stop();
}

Trace Profile::stop() {
  TB_CHECK(!stopped_, "profiler::Profile::stop", "the profile was already stopped");
  stopped_ = true;
  detail::g_enabled.store(false, std::memory_order_release);
  Trace t;
  t.rank = options_.rank;
  t.start_ns = start_ns_;
  t.end_ns = now_ns();
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const std::shared_ptr<Buffer>& b : r.buffers) {
    std::lock_guard bl(b->mu);
    if (b->session != session_) continue;
    const std::size_t lo = t.events.size();
    for (Event& e : b->events)
      if (e.end_ns != 0) t.events.push_back(std::move(e));
    b->events.clear();
    b->open.clear();
    if (t.events.size() == lo) continue;
    t.threads.push_back({b->tid, b->name.empty() ? "thread " + std::to_string(b->tid) : b->name});
    for (std::size_t i = lo; i < t.events.size(); ++i) {
      Event& e = t.events[i];
      e.self_ns = e.end_ns - e.start_ns - e.child_ns;
    }
    // Recording order is opening order, parents before children: keep it for equal start times.
    std::stable_sort(t.events.begin() + std::ptrdiff_t(lo), t.events.end(),
                     [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; });
  }
  r.running = false;
  return t;
}

std::vector<OpStat> key_averages(const std::vector<Event>& events) {
  std::map<std::tuple<std::string_view, Category, std::string_view>, OpStat> by;
  for (const Event& e : events) {
    OpStat& s = by[{e.name, e.cat, e.label}];
    if (s.calls == 0) {
      s.name = e.name;
      s.cat = e.cat;
      s.label = e.label;
    }
    ++s.calls;
    s.total_ns += e.end_ns - e.start_ns;
    s.self_ns += e.self_ns;
  }
  std::vector<OpStat> out;
  out.reserve(by.size());
  for (auto& [k, s] : by) out.push_back(std::move(s));
  return out;
}

std::string table(const std::vector<OpStat>& stats, SortBy sort, std::size_t limit) {
  std::vector<OpStat> rows = stats;
  std::stable_sort(rows.begin(), rows.end(), [sort](const OpStat& a, const OpStat& b) {
    switch (sort) {
      case SortBy::SelfTime: return a.self_ns > b.self_ns;
      case SortBy::TotalTime: return a.total_ns > b.total_ns;
      case SortBy::Calls: return a.calls > b.calls;
    }
    return false;
  });
  int64_t self_sum = 0;
  for (const OpStat& s : stats) self_sum += s.self_ns;
  const auto shown = [](const OpStat& s) { return s.label.empty() ? s.name : s.name + " [" + s.label + "]"; };
  std::size_t width = 4;
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) width = std::max(width, shown(rows[i]).size());
  width = std::min<std::size_t>(width, 60);
  std::ostringstream os;
  os << std::fixed;
  const auto line = [&] { os << std::string(width + 80, '-') << '\n'; };
  line();
  os << std::left << std::setw(int(width)) << "Name" << std::right << std::setw(12) << "Category" << std::setw(9)
     << "Calls" << std::setw(14) << "Self (ms)" << std::setw(9) << "Self %" << std::setw(14) << "Total (ms)"
     << std::setw(14) << "Avg (us)" << '\n';
  line();
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) {
    const OpStat& s = rows[i];
    std::string name = shown(s);
    if (name.size() > width) name = name.substr(0, width - 3) + "...";
    os << std::left << std::setw(int(width)) << name << std::right << std::setw(12) << category_name(s.cat)
       << std::setw(9) << s.calls << std::setw(14) << std::setprecision(3) << double(s.self_ns) / 1e6 << std::setw(8)
       << std::setprecision(1) << (self_sum > 0 ? 100.0 * double(s.self_ns) / double(self_sum) : 0.0) << '%'
       << std::setw(14) << std::setprecision(3) << double(s.total_ns) / 1e6 << std::setw(14) << std::setprecision(1)
       << (s.calls ? double(s.total_ns) / double(s.calls) / 1e3 : 0.0) << '\n';
  }
  line();
  os << "Self time total: " << std::setprecision(3) << double(self_sum) / 1e6 << " ms (" << stats.size() << " names, "
     << std::min(limit, rows.size()) << " shown)\n";
  return os.str();
}

std::string chrome_trace_json(const std::vector<Trace>& traces) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  const auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const Trace& t : traces) {
    const std::string pid = std::to_string(t.rank);
    sep();
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":0,\"args\":{\"name\":\"rank " + pid +
           "\"}}";
    sep();
    out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
           ",\"tid\":0,\"args\":{\"sort_index\":" + pid + "}}";
    for (const Thread& th : t.threads) {
      sep();
      out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(th.tid) +
             ",\"args\":{\"name\":";
      append_json_string(out, th.name);
      out += "}}";
    }
    for (const Event& e : t.events) {
      sep();
      out += "{\"ph\":\"X\",\"name\":";
      append_json_string(out, e.name);
      out += ",\"cat\":\"";
      out += category_name(e.cat);
      out += "\",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.tid) + ",\"ts\":";
      append_us(out, e.start_ns);
      out += ",\"dur\":";
      append_us(out, e.end_ns - e.start_ns);
      out += ",\"args\":{" + e.args;
      if (!e.label.empty()) {
        if (!e.args.empty()) out += ',';
        out += "\"label\":";
        append_json_string(out, e.label);
      }
      out += "}}";
    }
  }
  out += "]}\n";
  return out;
}

}  // namespace tb::profiler
