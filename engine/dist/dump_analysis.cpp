#include "engine/dist/dump_analysis.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/json_depth.h"

namespace tb::dist {

using nlohmann::json;

namespace {

constexpr const char* kOp = "analyze";
constexpr uint64_t kMaxWorld = uint64_t(1) << 20;
constexpr std::size_t kMaxShapes = std::size_t(1) << 16, kMaxDims = 64;
const std::set<std::string> kCollectives = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
const std::set<std::string> kStates = {"queued", "started", "completed", "failed"};
const std::set<std::string> kBoardStates = {"active", "left", "exiting", "failed"};

// Nesting is bounded on the text first (core/json_depth.h), then a plain parse: linear, where
// bounding it with nlohmann's parser callback was quadratic in an array's objects (a 1.2 MB dump
// of 400,000 empty objects took 37 s).
json parse_bounded(std::string_view text, const std::string& source) {
  if (core::json_depth(text) > core::kMaxJsonDepth)
    throw core::Error(kOp, source + ": JSON nested deeper than " + std::to_string(core::kMaxJsonDepth) + " levels");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw core::Error(kOp, source + ": not valid JSON (" + e.what() + ")");
  }
}

// Typed, range-checked access to an untrusted document; errors name the file and the field.
struct Reader {
  const std::string& source;
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw core::Error(kOp, source + ": " + where + ": " + what);
  }
  const json* find(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& need(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    if (!v) fail(where.empty() ? key : where + "." + key, "missing");
    return *v;
  }
  uint64_t u64(const json& v, const std::string& where, uint64_t max = UINT64_MAX) const {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail(where, "must be a whole number >= 0");
    const uint64_t x = v.get<uint64_t>();
    if (x > max) fail(where, "must be at most " + std::to_string(max) + " (got " + std::to_string(x) + ")");
    return x;
  }
  int64_t i64(const json& v, const std::string& where) const {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(where, "must be a whole number");
    return v.get<int64_t>();
  }
  std::string str(const json& v, const std::string& where) const {
    if (!v.is_string()) fail(where, "must be a string");
    return v.get<std::string>();
  }
  std::string opt_str(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    return v && !v->is_null() ? str(*v, where + "." + key) : std::string();
  }
  bool boolean(const json& v, const std::string& where) const {
    if (!v.is_boolean()) fail(where, "must be true or false");
    return v.get<bool>();
  }
  const json& object(const json& v, const std::string& where) const {
    if (!v.is_object()) fail(where, "must be an object");
    return v;
  }
  const json& array(const json& v, const std::string& where) const {
    if (!v.is_array()) fail(where, "must be an array");
    return v;
  }
};

DumpEntry parse_entry(const Reader& r, const json& v, const std::string& at) {
  r.object(v, at);
  DumpEntry e;
  e.seq = r.u64(r.need(v, "seq", at), at + ".seq");
  if (e.seq == 0) r.fail(at + ".seq", "must be at least 1");
  e.collective_seq = r.u64(r.need(v, "collective_seq", at), at + ".collective_seq");
  e.op = r.str(r.need(v, "op", at), at + ".op");
  const bool p2p = e.op == "send" || e.op == "recv";
  if (!p2p && !kCollectives.count(e.op))
    r.fail(at + ".op", "unknown op '" + e.op.substr(0, 40) +
                           "' (all_reduce, broadcast, all_gather, reduce_scatter, barrier, send or recv)");
  if (p2p != (e.collective_seq == 0))
    r.fail(at + ".collective_seq", p2p ? "must be 0 for a send/recv" : "must be at least 1 for a collective");
  e.detail = r.opt_str(v, "detail", at);
  e.dtype = r.str(r.need(v, "dtype", at), at + ".dtype");
  try {
    (void)core::dtype_from_name(e.dtype);
  } catch (const core::Error&) {
    r.fail(at + ".dtype", "unknown dtype '" + e.dtype.substr(0, 40) + "'");
  }
  e.state = r.str(r.need(v, "state", at), at + ".state");
  if (!kStates.count(e.state)) r.fail(at + ".state", "must be queued, started, completed or failed");
  e.error = r.opt_str(v, "error", at);
  e.label = r.opt_str(v, "label", at);
  const json& shapes = r.array(r.need(v, "shapes", at), at + ".shapes");
  if (shapes.size() > kMaxShapes) r.fail(at + ".shapes", "more than " + std::to_string(kMaxShapes) + " shapes");
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::string si = at + ".shapes[" + std::to_string(i) + "]";
    const json& s = r.array(shapes[i], si);
    if (s.size() > kMaxDims) r.fail(si, "more than " + std::to_string(kMaxDims) + " dimensions");
    std::vector<int64_t> dims;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const int64_t d = r.i64(s[k], si + "[" + std::to_string(k) + "]");
      if (d < 0) r.fail(si + "[" + std::to_string(k) + "]", "a size must not be negative");
      dims.push_back(d);
    }
    e.shapes.push_back(std::move(dims));
  }
  return e;
}

DumpBoardSlot parse_slot(const Reader& r, const json& v, const std::string& at, int size) {
  r.object(v, at);
  DumpBoardSlot s;
  s.rank = int(r.u64(r.need(v, "rank", at), at + ".rank", uint64_t(size - 1)));
  s.joined = r.boolean(r.need(v, "joined", at), at + ".joined");
  s.host = r.opt_str(v, "host", at);
  s.pid = r.i64(r.need(v, "pid", at), at + ".pid");
  s.state = r.str(r.need(v, "state", at), at + ".state");
  if (!kBoardStates.count(s.state)) r.fail(at + ".state", "must be active, left, exiting or failed");
  if (const json* a = r.find(v, "alive"); a && !a->is_null()) s.alive = r.boolean(*a, at + ".alive");
  s.collective_issued = r.u64(r.need(v, "collective_issued", at), at + ".collective_issued");
  s.collective_entered = r.u64(r.need(v, "collective_entered", at), at + ".collective_entered");
  s.collective_completed = r.u64(r.need(v, "collective_completed", at), at + ".collective_completed");
  s.collective_entered_op = r.opt_str(v, "collective_entered_op", at);
  s.p2p_entered = r.u64(r.need(v, "p2p_entered", at), at + ".p2p_entered");
  s.p2p_completed = r.u64(r.need(v, "p2p_completed", at), at + ".p2p_completed");
  s.p2p_entered_op = r.opt_str(v, "p2p_entered_op", at);
  return s;
}

// ---- text helpers ----

// A string from a dump for a terminal: control bytes replaced, cut at a UTF-8 boundary.
std::string printable(const std::string& s, std::size_t max = 160) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max && (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    out += c < 0x20 || c == 0x7F ? '?' : s[i];
  }
  return out;
}

// "rank 3", "ranks 1, 4", "ranks 0-2, 5, 9-1048575": runs of three or more as ranges, so a dump
// claiming a million ranks with one present does not list the others one by one.
std::string join_ranks(const RankSet& rs) {
  std::ostringstream os;
  os << (rs.size() == 1 ? "rank " : "ranks ");
  const char* sep = "";
  for (const RankSet::Run& r : rs.runs()) {
    os << sep;
    sep = ", ";
    if (r.last - r.first >= 2) os << r.first << '-' << r.last;
    else
      for (int q = r.first; q <= r.last; ++q) os << (q > r.first ? ", " : "") << q;
  }
  return os.str();
}

std::string shapes_text(const std::vector<std::vector<int64_t>>& shapes) {
  std::ostringstream os;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i == 8) {
      os << ", ... (" << shapes.size() << " tensors)";
      break;
    }
    os << (i ? ", " : "") << "[";
    for (std::size_t k = 0; k < shapes[i].size(); ++k) os << (k ? ", " : "") << shapes[i][k];
    os << "]";
  }
  return os.str();
}

std::string call_text(const std::string& op, const std::string& dtype, const std::vector<std::vector<int64_t>>& shapes,
                      const std::string& detail, const std::string& label) {
  std::string s = printable(op, 40);
  if (op != "barrier") {
    s += " (" + printable(dtype, 20);
    if (!shapes.empty()) s += " " + shapes_text(shapes);
    if (!detail.empty()) s += ", " + printable(detail, 60);
    s += ")";
  }
  if (!label.empty()) s += " at " + printable(label, 80);
  return s;
}

// ---- comparison ----

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;
  return n;
}

int64_t total(const std::vector<std::vector<int64_t>>& shapes, std::size_t from, std::size_t to) {
  int64_t n = 0;
  for (std::size_t i = from; i < to && i < shapes.size(); ++i)
    if (__builtin_add_overflow(n, count(shapes[i]), &n)) return INT64_MAX;
  return n;
}

// What ranks must agree on (Note [Call fingerprints] in watchdog.h): op, dtype, reduction or root,
// element counts. all_gather records [input, output] or [input, output per rank...], reduce_scatter
// [input or inputs per rank..., output]: counts are compared as input total and output total, so a
// list and a flat tensor of the same size agree, as they do in the backend.
struct Key {
  std::string op, dtype, arg;
  std::vector<int64_t> counts;
  bool operator==(const Key&) const = default;
};

Key key_of(const DumpEntry& e) {
  Key k{e.op, e.dtype, "", {}};
  const auto& s = e.shapes;
  if (e.op == "all_reduce" || e.op == "reduce_scatter") k.arg = e.detail.substr(0, e.detail.find(' '));
  if (e.op == "broadcast") k.arg = e.detail;
  if (e.op == "all_gather") k.counts = {total(s, 0, 1), total(s, 1, s.size())};
  else if (e.op == "reduce_scatter")
    k.counts = {total(s, 0, s.empty() ? 0 : s.size() - 1), total(s, s.size() - 1, s.size())};
  else if (e.op != "barrier") k.counts = {total(s, 0, s.size())};
  return k;
}

FindingKind kind_of(const Key& a, const Key& b) {
  if (a.op != b.op) return FindingKind::OpMismatch;
  if (a.dtype != b.dtype) return FindingKind::DtypeMismatch;
  if (a.counts != b.counts) return FindingKind::ShapeMismatch;
  return FindingKind::ArgumentMismatch;
}

// One rank's view: its collectives by number (from its dump) and its slot on the board.
struct View {
  std::string presence;
  const RankDump* dump = nullptr;
  std::map<uint64_t, const DumpEntry*> coll;
  std::optional<DumpBoardSlot> slot;
  uint64_t issued = 0, entered = 0, completed = 0;  // highest collective numbers known
  const DumpEntry* in_flight = nullptr;             // its oldest unfinished collective
};

std::string slot_state_text(const DumpBoardSlot& s) {
  std::ostringstream os;
  if (s.state == "left") os << "it destroyed its process group";
  else if (s.state == "exiting") os << "it was exiting (exit() or a return from main with the group alive)";
  else if (s.state == "failed") os << "its own watchdog ended it (its dump was not found here: another run dir?)";
  else if (s.alive == std::optional<bool>(false))
    os << "pid " << s.pid << " is gone (killed, crashed or _exit without destroying its group)";
  else if (s.alive == std::optional<bool>(true))
    os << "pid " << s.pid << " was alive and active: frozen (SIGSTOP, a stuck host) or busy outside collectives";
  else os << "on host " << printable(s.host, 64) << " (not checked)";
  return os.str();
}

std::string slot_last_text(const DumpBoardSlot& s) {
  if (s.collective_entered == 0) return "no collective entered";
  std::ostringstream os;
  os << "last collective #" << s.collective_entered << " " << printable(s.collective_entered_op, 80)
     << (s.collective_completed >= s.collective_entered ? ", completed" : ", in flight");
  return os.str();
}

}  // namespace

// ---- RankSet ----

RankSet::RankSet(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (i == 0 || ranks[i] != ranks[i - 1]) add(ranks[i], ranks[i]);
}

void RankSet::add(int first, int last) {
  TB_CHECK(first <= last && (runs_.empty() || first > runs_.back().last), kOp, "RankSet::add(", first, ", ", last,
           "): not a run above the ranks held");
  if (!runs_.empty() && first == runs_.back().last + 1) runs_.back().last = last;
  else runs_.push_back({first, last});
}

std::size_t RankSet::size() const {
  std::size_t n = 0;
  for (const Run& r : runs_) n += std::size_t(r.last - r.first) + 1;
  return n;
}

RankSet::const_iterator& RankSet::const_iterator::operator++() {
  if (rank_ < (*runs_)[run_].last) ++rank_;
  else rank_ = ++run_ < runs_->size() ? (*runs_)[run_].first : 0;
  return *this;
}

// ---- parsing ----

RankDump parse_dump(std::string_view text, const std::string& source) {
  if (text.size() > kMaxDumpBytes)
    throw core::Error(kOp, source + ": larger than " + std::to_string(kMaxDumpBytes >> 20) + " MiB");
  const json j = parse_bounded(text, source);
  const Reader r{source};
  r.object(j, "the document");
  RankDump d;
  d.file = source;
  d.size = int(r.u64(r.need(j, "size", ""), "size", kMaxWorld));
  if (d.size < 1) r.fail("size", "must be at least 1");
  d.rank = int(r.u64(r.need(j, "rank", ""), "rank", uint64_t(d.size - 1)));
  d.backend = r.str(r.need(j, "backend", ""), "backend");
  if (const json* v = r.find(j, "dropped")) d.dropped = r.u64(*v, "dropped");
  const json& entries = r.array(r.need(j, "entries", ""), "entries");
  uint64_t last_seq = 0, last_cseq = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string at = "entries[" + std::to_string(i) + "]";
    DumpEntry e = parse_entry(r, entries[i], at);
    if (e.seq <= last_seq) r.fail(at + ".seq", "not above the previous entry's (" + std::to_string(last_seq) + ")");
    if (e.collective_seq) {
      if (e.collective_seq <= last_cseq)
        r.fail(at + ".collective_seq", "not above the previous collective's (" + std::to_string(last_cseq) + ")");
      last_cseq = e.collective_seq;
    }
    last_seq = e.seq;
    d.entries.push_back(std::move(e));
  }
  d.diagnosis = r.opt_str(j, "diagnosis", "");
  if (const json* s = r.find(j, "stuck"); s && !s->is_null()) {
    r.object(*s, "stuck");
    d.stuck_seq = r.u64(r.need(*s, "seq", "stuck"), "stuck.seq");
    d.stuck_collective_seq = r.u64(r.need(*s, "collective_seq", "stuck"), "stuck.collective_seq");
    d.stuck_what = r.opt_str(*s, "what", "stuck");
  }
  if (const json* b = r.find(j, "progress_board"); b && !b->is_null()) {
    r.object(*b, "progress_board");
    d.board_path = r.opt_str(*b, "path", "progress_board");
    const json& slots = r.array(r.need(*b, "slots", "progress_board"), "progress_board.slots");
    if (slots.size() > std::size_t(d.size))
      r.fail("progress_board.slots",
             "more slots (" + std::to_string(slots.size()) + ") than ranks (" + std::to_string(d.size) + ")");
    std::set<int> seen;  // not a flag per rank: "size" is claimed, the slots are there
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const std::string at = "progress_board.slots[" + std::to_string(i) + "]";
      DumpBoardSlot s = parse_slot(r, slots[i], at, d.size);
      if (!seen.insert(s.rank).second) r.fail(at + ".rank", "rank " + std::to_string(s.rank) + " appears twice");
      d.board.push_back(std::move(s));
    }
  }
  return d;
}

std::vector<RankDump> read_dump_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw core::Error(kOp, dir + ": not a directory");
  const std::string prefix = "flight_recorder_rank", suffix = ".json";
  std::vector<RankDump> out;
  fs::directory_iterator it(dir, ec);
  if (ec) throw core::Error(kOp, dir + ": cannot list it (" + ec.message() + ")");
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw core::Error(kOp, dir + ": cannot list it (" + ec.message() + ")");
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 7 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const std::string path = it->path().string();
    if (!fs::is_regular_file(it->path(), ec)) throw core::Error(kOp, path + ": not a regular file");
    const auto bytes = fs::file_size(it->path(), ec);
    if (ec) throw core::Error(kOp, path + ": cannot read it (" + ec.message() + ")");
    if (bytes > kMaxDumpBytes)
      throw core::Error(kOp, path + ": larger than " + std::to_string(kMaxDumpBytes >> 20) + " MiB");
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) throw core::Error(kOp, path + ": cannot read it");
    RankDump d = parse_dump(text, path);
    if (int64_t(d.rank) != std::stoll(digits))
      throw core::Error(kOp, path + ": holds rank " + std::to_string(d.rank) + ", not the rank its name says");
    out.push_back(std::move(d));
  }
  if (out.empty()) throw core::Error(kOp, dir + ": no flight-recorder dumps (flight_recorder_rank<R>.json) in it");
  std::sort(out.begin(), out.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return out;
}

// ---- analysis ----

const char* finding_name(FindingKind k) {
  switch (k) {
    case FindingKind::RankAbsent: return "rank_absent";
    case FindingKind::RankNeverJoined: return "rank_never_joined";
    case FindingKind::OpMismatch: return "op_mismatch";
    case FindingKind::DtypeMismatch: return "dtype_mismatch";
    case FindingKind::ShapeMismatch: return "shape_mismatch";
    case FindingKind::ArgumentMismatch: return "argument_mismatch";
    case FindingKind::ExtraCollective: return "extra_collective";
    case FindingKind::SkippedCollective: return "skipped_collective";
    case FindingKind::Lagging: return "lagging";
    case FindingKind::BackendStuck: return "backend_stuck";
    case FindingKind::P2pHang: return "p2p_hang";
    case FindingKind::HangOutsideCollectives: return "hang_outside_collectives";
  }
  return "?";
}

PeerPosition peer_position(uint64_t S, uint64_t peer_entered, bool same_op, bool same_call) {
  if (peer_entered < S) return PeerPosition::NotArrived;
  if (peer_entered > S) return PeerPosition::Past;
  return !same_op ? PeerPosition::OtherOp : !same_call ? PeerPosition::OtherArguments : PeerPosition::Arrived;
}

std::string describe_entry(const DumpEntry& e) {
  const std::string call = call_text(e.op, e.dtype, e.shapes, e.detail, e.label);
  return e.collective_seq ? "#" + std::to_string(e.collective_seq) + " " + call
                          : call + " (call " + std::to_string(e.seq) + ")";
}

Diagnosis analyze_dumps(const std::vector<RankDump>& dumps) {
  TB_CHECK(!dumps.empty(), kOp, "no dumps to analyze");
  Diagnosis d;
  const RankDump& first = dumps.front();
  d.world_size = first.size;
  d.backend = first.backend;
  const int N = first.size;
  // Only the ranks with a dump or a board slot have a view; the others are runs (Note [Ranks
  // nothing is known of] in the header).
  std::map<int, View> views;
  for (const RankDump& x : dumps) {
    if (x.size != N || x.backend != first.backend || x.board_path != first.board_path)
      throw core::Error(kOp, x.file + " and " + first.file + " are dumps of different process groups (" +
                                 printable(x.backend, 20) + " of " + std::to_string(x.size) + " ranks vs " +
                                 printable(first.backend, 20) + " of " + std::to_string(N) + ", board '" +
                                 printable(x.board_path) + "' vs '" + printable(first.board_path) + "')");
    View& v = views[x.rank];
    if (v.dump) throw core::Error(kOp, x.file + " and " + v.dump->file + " are both rank " + std::to_string(x.rank));
    v.dump = &x;
    d.files.push_back(x.file);
  }
  // Every rank's slot as the dumps saw it: the board is shared, read at different moments; the
  // most advanced reading is the latest (counters and states only move forward).
  const auto advanced = [](const DumpBoardSlot& a, const DumpBoardSlot& b) {
    const auto t = [](const DumpBoardSlot& s) {
      return std::tuple(s.joined, s.collective_completed, s.collective_entered, s.collective_issued,
                        s.p2p_completed + s.p2p_entered, s.state != "active", s.alive == std::optional<bool>(false));
    };
    return t(a) > t(b);
  };
  for (const RankDump& x : dumps)
    for (const DumpBoardSlot& s : x.board) {
      auto& slot = views[s.rank].slot;
      if (!slot || advanced(s, *slot)) slot = s;
    }
  uint64_t any_completed = 0;  // a completed collective needs every rank: they all joined
  for (auto& [q, v] : views) {
    if (v.slot && v.slot->joined) {
      v.issued = v.slot->collective_issued;
      v.entered = v.slot->collective_entered;
      v.completed = v.slot->collective_completed;
    }
    if (v.dump)
      for (const DumpEntry& e : v.dump->entries) {
        if (!e.collective_seq) continue;
        v.coll[e.collective_seq] = &e;
        v.issued = std::max(v.issued, e.collective_seq);
        if (e.started()) v.entered = std::max(v.entered, e.collective_seq);
        if (e.state == "completed") v.completed = std::max(v.completed, e.collective_seq);
        if (!e.ended() && !v.in_flight) v.in_flight = &e;
      }
    any_completed = std::max(any_completed, v.completed);
  }

  // Presence and each rank's last calls; the ranks between two views are one run.
  const bool all_joined = N > 1 && any_completed > 0;
  const std::string completed_evidence = "collective #" + std::to_string(any_completed) +
                                         " completed, which needs every rank";
  const auto add_run = [&](int first_rank, int last_rank) {
    if (first_rank > last_rank) return;
    RankProgress p;
    p.rank = first_rank;
    p.last_rank = last_rank;
    p.presence = all_joined ? "absent" : "never joined";
    if (all_joined) p.joined_evidence = completed_evidence;
    d.ranks.push_back(std::move(p));
  };
  int next = 0;  // the lowest rank not placed yet
  for (auto& [q, v] : views) {
    add_run(next, q - 1);
    next = q + 1;
    RankProgress p;
    p.rank = p.last_rank = q;
    p.board = v.slot;
    if (v.dump) {
      p.presence = "dumped";
      p.file = v.dump->file;
      p.joined_evidence = "its dump";
      p.watchdog_line = v.dump->diagnosis;
      for (const DumpEntry& e : v.dump->entries) {
        p.last_enqueued = e;
        if (e.started()) p.last_started = e;
        if (e.state == "completed") p.last_completed = e;
        if (!e.ended() && !p.in_flight) p.in_flight = e;
      }
    } else if (v.slot && v.slot->joined) {
      p.presence = "absent";
      p.joined_evidence = "its progress-board slot";
    } else if (all_joined) {
      p.presence = "absent";
      p.joined_evidence = completed_evidence;
    } else {
      p.presence = "never joined";
    }
    v.presence = p.presence;
    d.ranks.push_back(std::move(p));
  }
  add_run(next, N - 1);

  // 1. The first collective whose calls differ between dumped ranks, over the numbers every
  //    dumped rank still holds.
  std::vector<int> dumped;
  for (const auto& [q, v] : views)
    if (v.dump && !v.coll.empty()) dumped.push_back(q);
  if (dumped.size() >= 2) {
    uint64_t lo = 0, hi = UINT64_MAX;
    for (int q : dumped) {
      lo = std::max(lo, views.at(q).coll.begin()->first);
      hi = std::min(hi, views.at(q).coll.rbegin()->first);
    }
    const auto& base = views.at(dumped[0]).coll;
    for (auto it = base.lower_bound(lo); it != base.end() && it->first <= hi && d.findings.empty(); ++it) {
      const uint64_t S = it->first;
      std::vector<std::pair<Key, std::vector<int>>> groups;
      std::vector<const DumpEntry*> rep;
      for (int q : dumped) {
        const auto e = views.at(q).coll.find(S);
        if (e == views.at(q).coll.end()) continue;  // not held (a gap in a hostile dump)
        const Key k = key_of(*e->second);
        auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == k; });
        if (g == groups.end()) {
          groups.push_back({k, {q}});
          rep.push_back(e->second);
        } else {
          g->second.push_back(q);
        }
      }
      if (groups.size() < 2) continue;
      // The majority (ties: the side of the lowest rank) is taken as the program's intent.
      std::size_t maj = 0;
      for (std::size_t g = 1; g < groups.size(); ++g)
        if (groups[g].second.size() > groups[maj].second.size()) maj = g;
      Finding f;
      f.collective_seq = S;
      f.kind = FindingKind::OpMismatch;
      std::vector<int> minority;
      for (std::size_t g = 0; g < groups.size(); ++g) {
        if (g == maj) continue;
        f.kind = kind_of(groups[maj].first, groups[g].first);
        minority.insert(minority.end(), groups[g].second.begin(), groups[g].second.end());
      }
      f.ranks = RankSet(minority);
      for (std::size_t g = 0; g < groups.size(); ++g)
        f.sides.push_back({groups[g].second, rep[g]->op, rep[g]->dtype, rep[g]->detail, rep[g]->label, rep[g]->shapes});
      // A shift by one collective: the minority's S+1.. lines up with the majority's S.. (an extra
      // collective), or the majority's S+1.. with the minority's S.. (a skipped one).
      const auto shifted = [&](int a, int b) {  // a's S+1+k == b's S+k for every k both hold, at least one
        const auto& ca = views.at(a).coll;
        const auto& cb = views.at(b).coll;
        int matched = 0;
        for (uint64_t k = 0;; ++k) {
          const auto ea = ca.find(S + 1 + k), eb = cb.find(S + k);
          if (ea == ca.end() || eb == cb.end()) break;
          if (!(key_of(*ea->second) == key_of(*eb->second))) return false;
          ++matched;
        }
        return matched > 0;
      };
      const int m = groups[maj].second[0];
      const bool extra = std::all_of(f.ranks.begin(), f.ranks.end(), [&](int q) { return shifted(q, m); });
      const bool skipped = !extra && std::all_of(f.ranks.begin(), f.ranks.end(), [&](int q) { return shifted(m, q); });
      std::ostringstream os;
      os << "collective #" << S << " differs between ranks: ";
      for (std::size_t g = 0; g < groups.size(); ++g)
        os << (g ? "; " : "") << join_ranks(groups[g].second) << ": "
           << call_text(rep[g]->op, rep[g]->dtype, rep[g]->shapes, rep[g]->detail, rep[g]->label);
      if (extra) {
        f.kind = FindingKind::ExtraCollective;
        os << ". " << join_ranks(f.ranks) << " issued an extra collective at #" << S
           << ": its later collectives line up with the others' shifted by one";
      } else if (skipped) {
        f.kind = FindingKind::SkippedCollective;
        os << ". " << join_ranks(f.ranks) << " skipped collective #" << S << " ("
           << call_text(rep[maj]->op, rep[maj]->dtype, rep[maj]->shapes, rep[maj]->detail, rep[maj]->label)
           << "): the others' later collectives line up with its own shifted by one";
      } else {
        const char* what = f.kind == FindingKind::OpMismatch      ? "different ops"
                           : f.kind == FindingKind::DtypeMismatch ? "different dtypes"
                           : f.kind == FindingKind::ShapeMismatch ? "different element counts"
                                                                  : "a different reduction or root";
        os << " (" << what << ")";
      }
      f.text = os.str();
      d.diverged_at = S;
      d.findings.push_back(std::move(f));
    }
  }

  // 2. Progress: the furthest collective a dumped rank waits in, and who never arrived there.
  uint64_t S = 0;
  for (const auto& [q, v] : views)
    if (v.in_flight) S = std::max(S, v.in_flight->collective_seq);
  std::vector<int> at, behind, finished;
  if (S > 0)
    for (const auto& [q, v] : views) {
      if (v.presence == "never joined") continue;
      const bool known = v.dump || (v.slot && v.slot->joined);
      if (!known) continue;  // joined, but no progress to compare
      // Op comparison needs calls on both sides; the board gives numbers, so same_op stands in.
      const PeerPosition pos = peer_position(S, std::max(v.entered, v.issued), true, true);
      if (pos == PeerPosition::NotArrived) {
        behind.push_back(q);
        const bool done = v.slot && (v.slot->state == "left" || v.slot->state == "exiting") && v.completed == v.issued;
        if (done) finished.push_back(q);
      } else {
        at.push_back(q);
      }
    }
  if (!behind.empty() && !d.diverged_at) d.diverged_at = S;
  const DumpEntry* waited = nullptr;  // the collective the ranks at S wait in
  for (int q : at)
    if (const View& v = views.at(q); v.in_flight && v.in_flight->collective_seq == S) waited = v.in_flight;
  const std::string waited_text = waited ? describe_entry(*waited) : "#" + std::to_string(S);
  const bool extra_end = !behind.empty() && finished.size() == behind.size() && at.size() < behind.size() &&
                         d.findings.empty();
  if (extra_end) {
    Finding f{FindingKind::ExtraCollective, S, at, "", {}};
    f.text = join_ranks(at) + " issued " + waited_text + ", which " + join_ranks(behind) +
             " never issued: they finished their collectives at #" + std::to_string(S - 1) +
             " and left the group (an extra collective on " + join_ranks(at) + ")";
    if (waited) f.sides.push_back({at, waited->op, waited->dtype, waited->detail, waited->label, waited->shapes});
    d.findings.push_back(std::move(f));
  }

  // 3. Ranks without a dump. Those that never joined are one finding (a dump may claim a million
  // ranks: a finding each was 27 MB of text), placed where the first of them is; so is each run of
  // absent ranks with no board slot.
  RankSet never;
  for (const RankProgress& p : d.ranks)
    if (p.presence == "never joined") never.add(p.rank, p.last_rank);
  for (const RankProgress& p : d.ranks) {
    if (p.presence == "never joined") {
      if (p.rank != *never.begin()) continue;
      bool board_seen = false;
      for (const RankDump& x : dumps) board_seen |= !x.board.empty();
      const bool one = never.size() == 1;
      d.findings.push_back({FindingKind::RankNeverJoined,
                            0,
                            never,
                            join_ranks(never) + " left no dump and never joined the group: " +
                                (board_seen ? (one ? "its progress-board slot was never written"
                                                   : "their progress-board slots were never written")
                                            : "the dumps have no progress board") +
                                " and no collective completed (" + (one ? "it" : "they") +
                                " never started, or failed before creating the group: see " +
                                (one ? "its log" : "their logs") +
                                "; a rank on another host without a shared run dir looks the same)",
                            {}});
      continue;
    }
    if (p.presence != "absent") continue;
    std::ostringstream os;
    if (p.bare()) {  // joined per a completed collective; nothing else is known of them
      RankSet run;
      run.add(p.rank, p.last_rank);
      os << join_ranks(run) << " left no dump but joined the group (" << p.joined_evidence << "); "
         << (run.size() == 1 ? "its progress is unknown (no progress-board entry: another host?)"
                             : "their progress is unknown (no progress-board entries: other hosts?)");
      if (extra_end) os << " (see the extra collective above)";
      d.findings.push_back({FindingKind::RankAbsent, S, run, os.str(), {}});
      continue;
    }
    const int q = p.rank;
    const View& v = views.at(q);
    os << "rank " << q << " left no dump but joined the group (" << p.joined_evidence << ")";
    if (v.slot && v.slot->joined) os << ": " << slot_state_text(*v.slot) << "; " << slot_last_text(*v.slot);
    else os << "; its progress is unknown (no progress-board entry: another host?)";
    if (S > 0 && std::find(behind.begin(), behind.end(), q) != behind.end())
      os << "; it never arrived at " << waited_text << ", which " << join_ranks(at)
         << (at.size() == 1 ? " waits in" : " wait in");
    if (extra_end) os << " (see the extra collective above)";
    d.findings.push_back({FindingKind::RankAbsent, S, {q}, os.str(), {}});
  }

  // 4. Dumped ranks behind the others: waiting in an earlier collective, or not in one at all.
  if (!extra_end)
    for (int q : behind) {
      const View& v = views.at(q);
      if (!v.dump) continue;
      std::ostringstream os;
      os << "rank " << q << " never arrived at " << waited_text << ", which " << join_ranks(at)
         << (at.size() == 1 ? " waits in: " : " wait in: ");
      if (v.in_flight)
        os << "it is waiting in an earlier collective, " << describe_entry(*v.in_flight) << " (" << v.in_flight->state
           << ")";
      else if (!v.coll.empty())
        os << "its last collective " << describe_entry(*v.coll.rbegin()->second) << " "
           << v.coll.rbegin()->second->state << "; it is busy outside collectives (computing, a data loader, "
           << "send/recv or another group)";
      else os << "it holds no collective";
      d.findings.push_back({FindingKind::Lagging, S, {q}, os.str(), {}});
    }

  // 5. Everyone at the same collective, same call, none through it: the backend or the transport.
  if (S > 0 && behind.empty() && d.findings.empty()) {
    bool none_completed = true;
    for (int q : at) none_completed &= views.at(q).completed < S;
    if (none_completed) {
      Finding f{FindingKind::BackendStuck, S, {}, "", {}};
      f.text = "every rank entered " + waited_text +
               " with the same call and none completed it: the program's collectives agree; the hang is in the "
               "backend or the transport (network, a frozen peer host, a GPU kernel)";
      d.findings.push_back(std::move(f));
    }
  }

  // 6. Send/recv in flight with nothing matching on the peer.
  for (const auto& [q, v] : views) {
    if (!v.dump) continue;
    for (const DumpEntry& e : v.dump->entries) {
      if (e.collective_seq || e.ended()) continue;
      const auto p = e.detail.find("peer=");
      int peer = -1;
      if (p != std::string::npos) {
        const std::string digits = e.detail.substr(p + 5, 7);
        if (!digits.empty() && digits[0] >= '0' && digits[0] <= '9') peer = std::stoi(digits);
      }
      std::ostringstream os;
      os << "rank " << v.dump->rank << "'s " << describe_entry(e) << " did not complete";
      bool matched = false;
      if (const auto pit = views.find(peer); pit != views.end()) {  // else nothing is known of the peer
        const View& pv = pit->second;
        const std::string want = e.op == "send" ? "recv" : "send";
        if (pv.dump) {
          const DumpEntry* last = nullptr;
          for (const DumpEntry& x : pv.dump->entries)
            if (!x.collective_seq) {
              last = &x;
              matched |= x.op == want && !x.ended() &&
                         x.detail.rfind("peer=" + std::to_string(v.dump->rank) + " ", 0) == 0;
            }
          os << ": rank " << peer << " has no matching " << want << " in flight (its last send/recv: "
             << (last ? describe_entry(*last) + " " + last->state : std::string("none")) << ")";
        } else if (pv.slot && pv.slot->joined) {
          os << ": rank " << peer << " left no dump (its last send/recv: "
             << (pv.slot->p2p_entered ? printable(pv.slot->p2p_entered_op, 80) : std::string("none")) << ")";
        }
      }
      if (!matched) d.findings.push_back({FindingKind::P2pHang, 0, {v.dump->rank}, os.str(), {}});
      break;  // the oldest unfinished send/recv only
    }
  }

  // 7. A dump was written (a watchdog fired) yet nothing above explains it.
  if (d.findings.empty()) {
    for (const RankDump& x : dumps)
      if (!x.diagnosis.empty() || x.stuck_seq) {
        d.findings.push_back({FindingKind::HangOutsideCollectives,
                              0,
                              {x.rank},
                              "every rank dumped, every collective matches and completed, and no call is in flight, "
                              "yet rank " +
                                  std::to_string(x.rank) + "'s watchdog fired (" +
                                  printable(x.diagnosis.empty() ? x.stuck_what : x.diagnosis) +
                                  "): the hang is outside this group's collectives",
                              {}});
        break;
      }
  }
  return d;
}

// ---- output ----

std::string diagnosis_text(const Diagnosis& d) {
  std::ostringstream os;
  int dumped = 0;
  for (const RankProgress& p : d.ranks) dumped += p.presence == "dumped";
  os << "flight-recorder dumps: " << dumped << " of " << d.world_size << " ranks (backend " << printable(d.backend, 20)
     << ")\n";
  if (d.findings.empty()) {
    os << "consistent: every rank dumped, every collective matches, none is in flight\n";
  } else {
    os << "diagnosis: " << finding_name(d.findings[0].kind) << ": " << printable(d.findings[0].text, 2000) << "\n";
    for (std::size_t i = 1; i < d.findings.size(); ++i)
      os << "  also " << finding_name(d.findings[i].kind) << ": " << printable(d.findings[i].text, 2000) << "\n";
  }
  if (d.diverged_at) os << "diverged at collective #" << *d.diverged_at << "\n";
  os << "ranks:\n";
  // A rank that never joined and left nothing to show: consecutive ones (runs among them) are one
  // line, as is a run of absent ranks.
  const auto never_bare = [](const RankProgress& p) {
    return p.presence == "never joined" && !p.last_enqueued && !p.last_started && !p.last_completed &&
           !(p.board && p.board->joined) && p.watchdog_line.empty();
  };
  for (std::size_t i = 0; i < d.ranks.size(); ++i) {
    const RankProgress& p = d.ranks[i];
    int last = p.last_rank;
    if (never_bare(p))
      while (i + 1 < d.ranks.size() && never_bare(d.ranks[i + 1]) && d.ranks[i + 1].rank == last + 1)
        last = d.ranks[++i].last_rank;
    if (last > p.rank) {
      os << "  ranks " << p.rank << "-" << last << ": "
         << (p.presence == "absent" ? "no dump; joined (" + p.joined_evidence + ")" : "no dump; never joined") << "\n";
      continue;
    }
    os << "  rank " << p.rank << ": ";
    if (p.presence == "dumped") os << "dump " << printable(p.file, 200) << "\n";
    else
      os << (p.presence == "absent" ? "no dump; joined (" + p.joined_evidence + ")" : "no dump; never joined") << "\n";
    const auto line = [&](const char* what, const std::optional<DumpEntry>& e) {
      if (e) os << "    " << what << describe_entry(*e) << " [" << e->state << "]\n";
    };
    line("last enqueued:  ", p.last_enqueued);
    line("last started:   ", p.last_started);
    line("last completed: ", p.last_completed);
    if (p.presence != "dumped" && p.board && p.board->joined)
      os << "    progress board: issued #" << p.board->collective_issued << ", entered #" << p.board->collective_entered
         << " " << printable(p.board->collective_entered_op, 80) << ", completed #" << p.board->collective_completed
         << "; state " << p.board->state << ", pid " << p.board->pid
         << (p.board->alive ? (*p.board->alive ? " alive" : " gone") : "") << "\n";
    if (!p.watchdog_line.empty()) os << "    watchdog: " << printable(p.watchdog_line, 400) << "\n";
  }
  return os.str();
}

namespace {

// A finding's ranks: each rank, but a run of three or more as {"first_rank", "last_rank"}, as the
// text writes "ranks 0-2, 5" (a finding may name 2^20 ranks that never joined).
json ranks_json(const RankSet& rs) {
  json out = json::array();
  for (const RankSet::Run& r : rs.runs()) {
    if (r.last - r.first >= 2) out.push_back({{"first_rank", r.first}, {"last_rank", r.last}});
    else
      for (int q = r.first; q <= r.last; ++q) out.push_back(q);
  }
  return out;
}

}  // namespace

nlohmann::json diagnosis_json(const Diagnosis& d) {
  const auto entry = [](const std::optional<DumpEntry>& e) -> json {
    if (!e) return nullptr;
    json j = {{"seq", e->seq},       {"collective_seq", e->collective_seq},
              {"op", e->op},         {"dtype", e->dtype},
              {"shapes", e->shapes}, {"detail", e->detail},
              {"state", e->state}};
    if (!e->label.empty()) j["label"] = e->label;
    if (!e->error.empty()) j["error"] = e->error;
    return j;
  };
  json findings = json::array();
  for (const Finding& f : d.findings) {
    json sides = json::array();
    for (const CallSide& s : f.sides) {
      json j = {{"ranks", s.ranks}, {"op", s.op}, {"dtype", s.dtype}, {"shapes", s.shapes}, {"detail", s.detail}};
      if (!s.label.empty()) j["label"] = s.label;
      sides.push_back(std::move(j));
    }
    findings.push_back({{"kind", finding_name(f.kind)},
                        {"collective_seq", f.collective_seq ? json(f.collective_seq) : json()},
                        {"ranks", ranks_json(f.ranks)},
                        {"text", f.text},
                        {"sides", std::move(sides)}});
  }
  json ranks = json::array();
  for (const RankProgress& p : d.ranks) {
    if (p.bare()) {  // a run: Note [Ranks nothing is known of]
      ranks.push_back({{"first_rank", p.rank},
                       {"last_rank", p.last_rank},
                       {"presence", p.presence},
                       {"joined_evidence", p.joined_evidence}});
      continue;
    }
    json j = {{"rank", p.rank},
              {"presence", p.presence},
              {"dump", p.file.empty() ? json() : json(p.file)},
              {"joined_evidence", p.joined_evidence},
              {"last_enqueued", entry(p.last_enqueued)},
              {"last_started", entry(p.last_started)},
              {"last_completed", entry(p.last_completed)},
              {"in_flight", entry(p.in_flight)},
              {"watchdog", p.watchdog_line}};
    if (p.board)
      j["progress_board"] = {{"joined", p.board->joined},
                             {"host", p.board->host},
                             {"pid", p.board->pid},
                             {"state", p.board->state},
                             {"alive", p.board->alive ? json(*p.board->alive) : json()},
                             {"collective_issued", p.board->collective_issued},
                             {"collective_entered", p.board->collective_entered},
                             {"collective_entered_op", p.board->collective_entered_op},
                             {"collective_completed", p.board->collective_completed}};
    ranks.push_back(std::move(j));
  }
  return {{"consistent", d.consistent()},
          {"world_size", d.world_size},
          {"backend", d.backend},
          {"dumps", d.files},
          {"diverged_at_collective", d.diverged_at ? json(*d.diverged_at) : json()},
          {"diagnosis", d.findings.empty() ? json() : json(d.findings[0].text)},
          {"findings", std::move(findings)},
          {"ranks", std::move(ranks)}};
}

}  // namespace tb::dist
