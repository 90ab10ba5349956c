// Merging the ranks' flight-recorder dumps (what the watchdog writes on a hang,
// <run_dir>/flight_recorder_rank<R>.json: the recorder's ring, the watchdog's line, the stuck call
// and the progress board as this rank saw it) into one diagnosis: where the ranks diverged, what
// each side issued, which ranks are missing or behind, and each rank's last enqueued, started and
// completed call (PyTorch's flight-recorder trace analyzer, tools/flight_recorder, in spirit).
// Pure functions over parsed dumps; dumps are untrusted input (a malformed or hostile file is a
// core::Error naming it, never a crash). `trainbench analyze DUMP_DIR` prints the result.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::dist {

// One call of a dump's "entries".
struct DumpEntry {
  uint64_t seq = 0, collective_seq = 0;  // collective_seq 0: send/recv
  std::string op, detail, dtype, state, error;
  std::string label;  // the call site ("label"), where the dump has one
  std::vector<std::vector<int64_t>> shapes;
  bool started() const { return state == "started" || ended(); }
  bool ended() const { return state == "completed" || state == "failed"; }
};

// One slot of a dump's "progress_board" (Note [Progress board] in watchdog.h).
struct DumpBoardSlot {
  int rank = 0;
  bool joined = false;
  std::string host, state;  // state: active | left | exiting | failed
  int64_t pid = 0;
  std::optional<bool> alive;  // null in the dump: another host
  uint64_t collective_issued = 0, collective_entered = 0, collective_completed = 0;
  std::string collective_entered_op;
  uint64_t p2p_entered = 0, p2p_completed = 0;
  std::string p2p_entered_op;
};

struct RankDump {
  std::string file;  // where it was read (for messages)
  int rank = 0, size = 0;
  std::string backend;
  uint64_t dropped = 0;            // calls that left the ring before the dump
  std::vector<DumpEntry> entries;  // ascending seq
  std::string diagnosis;           // the watchdog's line ("" if none)
  std::optional<uint64_t> stuck_seq, stuck_collective_seq;
  std::string stuck_what;
  std::string board_path;
  std::vector<DumpBoardSlot> board;  // empty: no board in the dump
};

// A dump file's bytes are limited to this (a full 2048-entry ring is ~1 MB).
inline constexpr std::size_t kMaxDumpBytes = std::size_t(64) << 20;

// Parses one dump; `source` names it in errors ("<source>: entries[3].seq: ..."). Throws
// core::Error for anything that is not a well-formed dump (depth past 128, a wrong type, a count
// out of range, duplicate seqs).
RankDump parse_dump(std::string_view text, const std::string& source);

// Reads every flight_recorder_rank<R>.json in `dir` (other files are ignored); throws
// core::Error when there are none, a file is unreadable or too large, or its "rank" is not R.
std::vector<RankDump> read_dump_dir(const std::string& dir);

enum class FindingKind {
  RankAbsent,              // joined the group (its board slot, or a collective completed) but left no dump
  RankNeverJoined,         // no dump and no sign that it ever joined
  OpMismatch,              // different ops at the same collective sequence number
  DtypeMismatch,           // same op, different dtypes
  ShapeMismatch,           // same op and dtype, different element counts
  ArgumentMismatch,        // same op, dtype and counts; another reduction or root
  ExtraCollective,         // some ranks issued a collective the others never issue
  SkippedCollective,       // some ranks skipped a collective the others issued
  Lagging,                 // a live rank never arrived at the collective the others wait in
  BackendStuck,            // every rank entered the same collective and none completed it
  P2pHang,                 // a send/recv in flight whose peer has no matching call in flight
  HangOutsideCollectives,  // a dump was written, but every collective matches and completed
};
const char* finding_name(FindingKind k);  // "op_mismatch", ...

// One side of a mismatch: the ranks that issued the same thing at the divergent collective.
struct CallSide {
  std::vector<int> ranks;
  std::string op, dtype, detail, label;
  std::vector<std::vector<int64_t>> shapes;
};

struct Finding {
  FindingKind kind;
  uint64_t collective_seq = 0;  // the collective it is about (0: none)
  std::vector<int> ranks;       // the culprits (missing, lagging, the minority side)
  std::string text;             // one sentence
  std::vector<CallSide> sides;  // mismatches: what each group of ranks issued
};

// What is known of one rank's progress.
struct RankProgress {
  int rank = 0;
  std::string presence;  // "dumped" | "absent" (joined, no dump) | "never joined"
  std::string file;      // its dump, if any
  std::string joined_evidence;
  std::optional<DumpBoardSlot> board;  // its slot as the dumps saw it (the most advanced reading)
  std::optional<DumpEntry> last_enqueued, last_started, last_completed, in_flight;  // from its dump
  std::string watchdog_line;
};

struct Diagnosis {
  int world_size = 0;
  std::string backend;
  std::vector<std::string> files;
  std::vector<RankProgress> ranks;  // one per rank of the group
  std::vector<Finding> findings;    // the first is the main one; empty: consistent
  std::optional<uint64_t> diverged_at;
  bool consistent() const { return findings.empty(); }
};

// Merges the dumps of one group (the same size, backend and board; distinct ranks) and
// classifies what went wrong. Throws core::Error when the dumps do not belong together.
Diagnosis analyze_dumps(const std::vector<RankDump>& dumps);

// The diagnosis as text (every string from a dump made printable and cut short) and as JSON.
std::string diagnosis_text(const Diagnosis& d);
nlohmann::json diagnosis_json(const Diagnosis& d);

// "#7 all_reduce (float32 [1024], sum) at bucket 0": one call as diagnoses name it.
std::string describe_entry(const DumpEntry& e);

// Where a rank's collective progress stands relative to collective S that another rank is in:
// the watchdog (live board) and the analyzer (dumps) both classify peers this way.
enum class PeerPosition { NotArrived, OtherOp, OtherArguments, Arrived, Past };
PeerPosition peer_position(uint64_t S, uint64_t peer_entered, bool same_op, bool same_call);

}  // namespace tb::dist
