// Merging the ranks' flight-recorder dumps (what the watchdog writes on a hang,
// <run_dir>/flight_recorder_rank<R>.json: the recorder's ring, the watchdog's line, the stuck call
// and the progress board as this rank saw it) into one diagnosis: where the ranks diverged, what
// each side issued, which ranks are missing or behind, and each rank's last enqueued, started and
// completed call (PyTorch's flight-recorder trace analyzer, tools/flight_recorder, in spirit).
// Pure functions over parsed dumps; dumps are untrusted input (a malformed or hostile file is a
// core::Error naming it, never a crash). `trainbench analyze DUMP_DIR` prints the result.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
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

// Note [Ranks nothing is known of]: a dump claims its group's size (up to 2^20), but only the
// dumps' entries and board slots say anything of a rank. A rank with neither is known only by its
// presence (absent per a completed collective, or never joined), the same for every such rank, so
// these ranks are held, printed and written as runs (first, last): memory, time and output follow
// the dumps, not the size they claim (a 55-byte dump claiming 2^20 ranks took 1.8 GB before).

// A sorted set of ranks held as runs of consecutive ranks; it reads as the sorted
// std::vector<int> it stands for (size, iteration, == with a vector). See Note [Ranks nothing is
// known of].
class RankSet {
 public:
  struct Run {
    int first = 0, last = 0;
    bool operator==(const Run&) const = default;
  };
  RankSet() = default;
  RankSet(std::initializer_list<int> ranks) : RankSet(std::vector<int>(ranks)) {}
  RankSet(std::vector<int> ranks);  // any order; duplicates are dropped
  void add(int first, int last);    // ranks first..last, above every rank held
  const std::vector<Run>& runs() const { return runs_; }
  std::size_t size() const;
  bool empty() const { return runs_.empty(); }

  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = int;
    using difference_type = std::ptrdiff_t;
    using pointer = const int*;
    using reference = int;
    const_iterator() = default;
    int operator*() const { return rank_; }
    const_iterator& operator++();
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++*this;
      return was;
    }
    bool operator==(const const_iterator& o) const { return run_ == o.run_ && rank_ == o.rank_; }

   private:
    friend class RankSet;
    const_iterator(const std::vector<Run>* runs, std::size_t run)
        : runs_(runs), run_(run), rank_(run < runs->size() ? (*runs)[run].first : 0) {}
    const std::vector<Run>* runs_ = nullptr;
    std::size_t run_ = 0;
    int rank_ = 0;
  };
  using iterator = const_iterator;
  using value_type = int;
  const_iterator begin() const { return {&runs_, 0}; }
  const_iterator end() const { return {&runs_, runs_.size()}; }
  friend bool operator==(const RankSet&, const RankSet&) = default;

 private:
  std::vector<Run> runs_;  // ascending, not adjacent (adjacent runs are merged)
};

// One side of a mismatch: the ranks that issued the same thing at the divergent collective.
struct CallSide {
  std::vector<int> ranks;
  std::string op, dtype, detail, label;
  std::vector<std::vector<int64_t>> shapes;
};

struct Finding {
  FindingKind kind;
  uint64_t collective_seq = 0;  // the collective it is about (0: none)
  RankSet ranks;                // the culprits (missing, lagging, the minority side)
  std::string text;             // one sentence
  std::vector<CallSide> sides;  // mismatches: what each group of ranks issued
};

// What is known of one rank's progress, or of a run of ranks with no dump and no board slot
// (rank..last_rank, all with the same presence and evidence: Note [Ranks nothing is known of]).
struct RankProgress {
  int rank = 0, last_rank = 0;  // last_rank == rank but for a run
  std::string presence;         // "dumped" | "absent" (joined, no dump) | "never joined"
  std::string file;             // its dump, if any
  std::string joined_evidence;
  std::optional<DumpBoardSlot> board;  // its slot as the dumps saw it (the most advanced reading)
  std::optional<DumpEntry> last_enqueued, last_started, last_completed, in_flight;  // from its dump
  std::string watchdog_line;
  bool bare() const { return presence != "dumped" && !board; }  // nothing known but presence: a run
};

struct Diagnosis {
  int world_size = 0;
  std::string backend;
  std::vector<std::string> files;
  std::vector<RankProgress> ranks;  // every rank of the group, ascending: one each, or a run (bare())
  std::vector<Finding> findings;    // the first is the main one; empty: consistent
  std::optional<uint64_t> diverged_at;
  bool consistent() const { return findings.empty(); }
};

// Merges the dumps of one group (the same size, backend and board; distinct ranks) and
// classifies what went wrong. Throws core::Error when the dumps do not belong together.
Diagnosis analyze_dumps(const std::vector<RankDump>& dumps);

// The diagnosis as text (every string from a dump made printable and cut short) and as JSON
// (its shape: docs/distributed.md, "Analyzing hang dumps"); runs of ranks stay runs in both.
std::string diagnosis_text(const Diagnosis& d);
nlohmann::json diagnosis_json(const Diagnosis& d);

// "#7 all_reduce (float32 [1024], sum) at bucket 0": one call as diagnoses name it.
std::string describe_entry(const DumpEntry& e);

// Where a rank's collective progress stands relative to collective S that another rank is in:
// the watchdog (live board) and the analyzer (dumps) both classify peers this way.
enum class PeerPosition { NotArrived, OtherOp, OtherArguments, Arrived, Past };
PeerPosition peer_position(uint64_t S, uint64_t peer_entered, bool same_op, bool same_call);

}  // namespace tb::dist
