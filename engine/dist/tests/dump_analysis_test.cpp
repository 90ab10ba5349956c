// The dump analyzer (engine/dist/dump_analysis.h) on synthetic dumps written the way the watchdog
// writes them: one test per mismatch class with the expected diagnosis written by hand, the
// per-rank progress, the directory reader, and hostile or malformed dumps as errors naming the file.
#include "engine/dist/dump_analysis.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>

#include "engine/core/error.h"

namespace {

using nlohmann::json;
using namespace tb::dist;
namespace fs = std::filesystem;

json entry(uint64_t seq, uint64_t cseq, const std::string& op, const std::string& state, json shapes = {{4}},
           const std::string& dtype = "float32", const std::string& detail = "sum", const std::string& label = "") {
  json e = {{"seq", seq},       {"collective_seq", cseq}, {"op", op},          {"detail", detail},
            {"dtype", dtype},   {"shapes", shapes},       {"state", state},    {"enqueued_us", 1.0},
            {"started_us", -1}, {"ended_us", -1},         {"duration_us", -1}, {"error", ""}};
  if (!label.empty()) e["label"] = label;
  return e;
}

// all_reduce #1..#n of 4 float32 elements, completed (seq = collective_seq).
json history(uint64_t n) {
  json list = json::array();
  for (uint64_t s = 1; s <= n; ++s) list.push_back(entry(s, s, "all_reduce", "completed"));
  return list;
}

json slot(int rank, bool joined, const std::string& state, std::optional<bool> alive, uint64_t issued, uint64_t entered,
          uint64_t completed) {
  return {{"rank", rank},
          {"joined", joined},
          {"host", joined ? "node0" : ""},
          {"pid", joined ? 4200 + rank : 0},
          {"state", state},
          {"alive", alive ? json(*alive) : json()},
          {"collective_issued", issued},
          {"collective_entered", entered},
          {"collective_entered_op", "all_reduce (float32, 4 elements, sum)"},
          {"collective_completed", completed},
          {"p2p_entered", 0},
          {"p2p_entered_op", "none"},
          {"p2p_completed", 0}};
}

json dump(int rank, int size, json entries, json slots = nullptr, const std::string& diagnosis = "") {
  json j = {{"backend", "mpi"},   {"rank", rank},    {"size", size},
            {"capacity", 2048},   {"dropped", 0},    {"wall_clock_origin_unix_us", 1},
            {"entries", entries}, {"timeout_s", 3.0}};
  if (!diagnosis.empty()) j["diagnosis"] = diagnosis;
  if (!slots.is_null()) j["progress_board"] = {{"path", "/dev/shm/progress_job_mpi_0.bin"}, {"slots", slots}};
  return j;
}

RankDump parsed(const json& j) {
  return parse_dump(j.dump(), "flight_recorder_rank" + std::to_string(j["rank"].get<int>()) + ".json");
}

Diagnosis analyze(std::initializer_list<json> dumps) {
  std::vector<RankDump> v;
  for (const json& j : dumps) v.push_back(parsed(j));
  return analyze_dumps(v);
}

json append(json list, std::initializer_list<json> more) {
  for (const json& e : more) list.push_back(e);
  return list;
}

std::string what_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const tb::core::Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A finding's class, culprits and sentence (written out in full by each test).
void expect_finding(const Finding& f, FindingKind kind, const std::vector<int>& ranks, const std::string& text) {
  EXPECT_EQ(finding_name(f.kind), std::string(finding_name(kind))) << f.text;
  EXPECT_EQ(f.ranks, ranks) << f.text;
  EXPECT_EQ(f.text, text);
}

TEST(DumpAnalysis, ConsistentDumps) {
  const Diagnosis d = analyze({dump(0, 2, history(3)), dump(1, 2, history(3))});
  EXPECT_TRUE(d.consistent());
  EXPECT_FALSE(d.diverged_at);
  EXPECT_TRUE(has(diagnosis_text(d), "consistent: every rank dumped")) << diagnosis_text(d);
  EXPECT_EQ(diagnosis_json(d)["consistent"], true);
}

TEST(DumpAnalysis, RankAbsentButJoinedPerBoard) {
  // Rank 1 called exit() after #3; rank 0 waits in #4. Only rank 0 dumped.
  const json slots = {slot(0, true, "failed", true, 4, 4, 3), slot(1, true, "exiting", false, 3, 3, 3)};
  const Diagnosis d = analyze(
      {dump(0, 2, append(history(3), {entry(4, 4, "all_reduce", "started")}), slots, "rank 0: ...")});
  ASSERT_EQ(d.findings.size(), 1u);
  expect_finding(
      d.findings[0], FindingKind::RankAbsent, {1},
      "rank 1 left no dump but joined the group (its progress-board slot): it was exiting (exit() or a return "
      "from main with the group alive); last collective #3 all_reduce (float32, 4 elements, sum), completed; "
      "it never arrived at #4 all_reduce (float32 [4], sum), which rank 0 waits in");
  EXPECT_EQ(d.diverged_at, std::optional<uint64_t>(4));
  EXPECT_EQ(d.ranks[1].presence, "absent");
  EXPECT_EQ(d.ranks[0].presence, "dumped");
}

TEST(DumpAnalysis, RankAbsentButJoinedPerCompletedCollective) {
  // No progress board (ranks on several hosts); rank 2 has no dump, but #3 completed everywhere.
  const Diagnosis d = analyze({dump(0, 3, append(history(3), {entry(4, 4, "all_reduce", "started")})),
                               dump(1, 3, append(history(3), {entry(4, 4, "all_reduce", "started")}))});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::RankAbsent);
  EXPECT_EQ(d.findings[0].text,
            "rank 2 left no dump but joined the group (collective #3 completed, which needs every rank); its "
            "progress is unknown (no progress-board entry: another host?)");
  EXPECT_EQ(d.ranks[2].joined_evidence, "collective #3 completed, which needs every rank");
}

TEST(DumpAnalysis, RankNeverJoined) {
  // Rank 1's slot was never written and no collective ever completed: it never created the group.
  const json slots = {slot(0, true, "failed", true, 1, 1, 0), slot(1, false, "active", std::nullopt, 0, 0, 0)};
  const Diagnosis d = analyze(
      {dump(0, 2, json::array({entry(1, 1, "broadcast", "started", {{4}}, "float32", "root=0")}), slots)});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::RankNeverJoined);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});
  EXPECT_TRUE(has(d.findings[0].text,
                  "rank 1 left no dump and never joined the group: its progress-board slot "
                  "was never written and no collective completed"))
      << d.findings[0].text;
  EXPECT_EQ(d.ranks[1].presence, "never joined");
}

TEST(DumpAnalysis, ManyAbsentRanksAreRangesNotLines) {
  // One dump of 55 bytes may claim a world of 100000 ranks: the text lists the ranks that left
  // nothing as ranges (it had a line per rank: 325 MB of text for a claimed million).
  const Diagnosis d = analyze({dump(0, 100000, json::array())});
  const std::string text = diagnosis_text(d);
  EXPECT_LT(text.size(), 4096u) << text.substr(0, 4096);
  EXPECT_TRUE(has(text, "ranks 1-99999: no dump; never joined")) << text;
  ASSERT_EQ(d.findings.size(), 1u);  // one finding for them all, not one each
  EXPECT_EQ(d.findings[0].kind, FindingKind::RankNeverJoined);
  EXPECT_EQ(d.findings[0].ranks.size(), 99999u);
  EXPECT_TRUE(has(d.findings[0].text,
                  "ranks 1-99999 left no dump and never joined the group: the dumps have no "
                  "progress board and no collective completed (they never started"))
      << d.findings[0].text;
}

// Note [Ranks nothing is known of]: a 55-byte dump claiming 2^20 ranks made a View and a
// RankProgress (four optional DumpEntry) per claimed rank, 1.8 GB, and --json 2.5 GB more; with a
// completed collective, a rank_absent finding each. Now the ranks without a dump or a board slot
// are one run, in the Diagnosis, the text and the JSON.
void expect_small_and_fast(const json& dump_json, const std::function<void(const Diagnosis&)>& check) {
  const auto t0 = std::chrono::steady_clock::now();
  const Diagnosis d = analyze({dump_json});
  const std::string text = diagnosis_text(d), js = diagnosis_json(d).dump(2);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(d.ranks.size(), 2u);  // rank 0, and one run for ranks 1..2^20-1
  EXPECT_EQ(d.findings.size(), 1u);
  EXPECT_LT(text.size(), 4096u) << text.substr(0, 4096);
  EXPECT_LT(js.size(), 4096u) << js.substr(0, 4096);
  EXPECT_LT(s, 1.0);
  check(d);
}

TEST(DumpAnalysis, ClaimedMillionRanksNeverJoinedAreOneRun) {
  expect_small_and_fast(dump(0, 1 << 20, json::array()), [](const Diagnosis& d) {
    ASSERT_EQ(d.ranks.size(), 2u);
    EXPECT_EQ(d.ranks[1].rank, 1);
    EXPECT_EQ(d.ranks[1].last_rank, (1 << 20) - 1);
    EXPECT_EQ(d.ranks[1].presence, "never joined");
    EXPECT_TRUE(d.ranks[1].bare());
    ASSERT_EQ(d.findings.size(), 1u);
    EXPECT_EQ(d.findings[0].kind, FindingKind::RankNeverJoined);
    EXPECT_EQ(d.findings[0].ranks.size(), std::size_t(1 << 20) - 1);
    EXPECT_EQ(d.findings[0].ranks.runs(), (std::vector<RankSet::Run>{{1, (1 << 20) - 1}}));
    EXPECT_TRUE(has(diagnosis_text(d), "  ranks 1-1048575: no dump; never joined\n")) << diagnosis_text(d);
    const json j = diagnosis_json(d);
    EXPECT_EQ(j["ranks"][1],
              (json{{"first_rank", 1}, {"last_rank", 1048575}, {"presence", "never joined"}, {"joined_evidence", ""}}));
    EXPECT_EQ(j["findings"][0]["ranks"], json::parse(R"([{"first_rank": 1, "last_rank": 1048575}])"));
  });
}

TEST(DumpAnalysis, ClaimedMillionRanksAbsentAfterACompletedCollectiveAreOneFinding) {
  expect_small_and_fast(dump(0, 1 << 20, history(1)), [](const Diagnosis& d) {
    ASSERT_EQ(d.ranks.size(), 2u);
    EXPECT_EQ(d.ranks[1].presence, "absent");
    EXPECT_EQ(d.ranks[1].last_rank, (1 << 20) - 1);
    ASSERT_EQ(d.findings.size(), 1u);
    EXPECT_EQ(d.findings[0].kind, FindingKind::RankAbsent);
    EXPECT_EQ(d.findings[0].ranks.runs(), (std::vector<RankSet::Run>{{1, (1 << 20) - 1}}));
    EXPECT_EQ(d.findings[0].text,
              "ranks 1-1048575 left no dump but joined the group (collective #1 completed, which needs every "
              "rank); their progress is unknown (no progress-board entries: other hosts?)");
    EXPECT_TRUE(has(diagnosis_text(d),
                    "  ranks 1-1048575: no dump; joined (collective #1 completed, which needs every rank)\n"))
        << diagnosis_text(d);
    const json j = diagnosis_json(d);
    EXPECT_EQ(j["ranks"][1]["first_rank"], 1);
    EXPECT_EQ(j["ranks"][1]["presence"], "absent");
    EXPECT_EQ(j["findings"][0]["ranks"], json::parse(R"([{"first_rank": 1, "last_rank": 1048575}])"));
  });
}

TEST(DumpAnalysis, RunsBetweenTheRanksWithADumpOrASlot) {
  // Ranks 0 and 5 of 8 dumped, waiting in #4; rank 3 has a board slot (gone after #3); #3
  // completed, so the others joined: ranks 1-2, 4 and 6-7 are runs, each one finding.
  const json slots = {slot(0, true, "failed", true, 4, 4, 3), slot(3, true, "active", false, 3, 3, 3),
                      slot(5, true, "failed", true, 4, 4, 3)};
  const json waiting = append(history(3), {entry(4, 4, "all_reduce", "started")});
  const Diagnosis d = analyze({dump(0, 8, waiting, slots), dump(5, 8, waiting, slots)});
  ASSERT_EQ(d.ranks.size(), 6u);
  const std::vector<std::tuple<int, int, std::string, bool>> want = {{0, 0, "dumped", false}, {1, 2, "absent", true},
                                                                     {3, 3, "absent", false}, {4, 4, "absent", true},
                                                                     {5, 5, "dumped", false}, {6, 7, "absent", true}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& [first, last, presence, bare] = want[i];
    EXPECT_EQ(d.ranks[i].rank, first) << i;
    EXPECT_EQ(d.ranks[i].last_rank, last) << i;
    EXPECT_EQ(d.ranks[i].presence, presence) << i;
    EXPECT_EQ(d.ranks[i].bare(), bare) << i;
  }
  const std::string evidence = "collective #3 completed, which needs every rank";
  EXPECT_EQ(d.ranks[1].joined_evidence, evidence);
  EXPECT_EQ(d.ranks[2].joined_evidence, "its progress-board slot");
  ASSERT_TRUE(d.ranks[2].board);
  EXPECT_EQ(d.ranks[2].board->pid, 4203);
  ASSERT_TRUE(d.ranks[4].last_started);
  EXPECT_EQ(d.ranks[4].last_started->collective_seq, 4u);
  EXPECT_EQ(d.diverged_at, std::optional<uint64_t>(4));

  ASSERT_EQ(d.findings.size(), 4u) << diagnosis_text(d);
  const std::string unknown_one = "its progress is unknown (no progress-board entry: another host?)";
  const std::string unknown_many = "their progress is unknown (no progress-board entries: other hosts?)";
  expect_finding(d.findings[0], FindingKind::RankAbsent, {1, 2},
                 "ranks 1, 2 left no dump but joined the group (" + evidence + "); " + unknown_many);
  expect_finding(d.findings[1], FindingKind::RankAbsent, {3},
                 "rank 3 left no dump but joined the group (its progress-board slot): pid 4203 is gone (killed, "
                 "crashed or _exit without destroying its group); last collective #3 all_reduce (float32, 4 "
                 "elements, sum), completed; it never arrived at #4 all_reduce (float32 [4], sum), which ranks 0, "
                 "5 wait in");
  expect_finding(d.findings[2], FindingKind::RankAbsent, {4},
                 "rank 4 left no dump but joined the group (" + evidence + "); " + unknown_one);
  expect_finding(d.findings[3], FindingKind::RankAbsent, {6, 7},
                 "ranks 6, 7 left no dump but joined the group (" + evidence + "); " + unknown_many);

  const std::string text = diagnosis_text(d);
  EXPECT_TRUE(has(text,
                  "ranks:\n"
                  "  rank 0: dump flight_recorder_rank0.json\n"
                  "    last enqueued:  #4 all_reduce (float32 [4], sum) [started]\n"
                  "    last started:   #4 all_reduce (float32 [4], sum) [started]\n"
                  "    last completed: #3 all_reduce (float32 [4], sum) [completed]\n"
                  "  ranks 1-2: no dump; joined (" +
                      evidence +
                      ")\n"
                      "  rank 3: no dump; joined (its progress-board slot)\n"
                      "    progress board: issued #3, entered #3 all_reduce (float32, 4 elements, sum), completed "
                      "#3; state active, pid 4203 gone\n"
                      "  rank 4: no dump; joined (" +
                      evidence +
                      ")\n"
                      "  rank 5: dump flight_recorder_rank5.json\n"))
      << text;
  EXPECT_TRUE(has(text, "  ranks 6-7: no dump; joined (" + evidence + ")\n")) << text;

  const json j = diagnosis_json(d);
  ASSERT_EQ(j["ranks"].size(), 6u);
  EXPECT_EQ(j["ranks"][0]["rank"], 0);
  EXPECT_EQ(j["ranks"][1],
            (json{{"first_rank", 1}, {"last_rank", 2}, {"presence", "absent"}, {"joined_evidence", evidence}}));
  EXPECT_EQ(j["ranks"][2]["rank"], 3);
  EXPECT_EQ(j["ranks"][2]["progress_board"]["pid"], 4203);
  EXPECT_EQ(j["ranks"][3],
            (json{{"first_rank", 4}, {"last_rank", 4}, {"presence", "absent"}, {"joined_evidence", evidence}}));
  EXPECT_EQ(j["ranks"][4]["rank"], 5);
  EXPECT_EQ(j["ranks"][4]["last_started"]["collective_seq"], 4);
  EXPECT_EQ(j["ranks"][5]["last_rank"], 7);
  EXPECT_EQ(j["findings"][0]["ranks"], json({1, 2}));
  EXPECT_EQ(j["findings"][3]["ranks"], json({6, 7}));
}

TEST(DumpAnalysis, RankSetIsRunsThatReadAsASortedVector) {
  const RankSet s = std::vector<int>{7, 3, 4, 5, 9, 4, 10};
  EXPECT_EQ(s.runs(), (std::vector<RankSet::Run>{{3, 5}, {7, 7}, {9, 10}}));
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(std::vector<int>(s.begin(), s.end()), (std::vector<int>{3, 4, 5, 7, 9, 10}));
  EXPECT_EQ(s, (std::vector<int>{3, 4, 5, 7, 9, 10}));
  RankSet big;
  big.add(1, 1 << 20);
  big.add((1 << 20) + 1, (1 << 20) + 1);  // adjacent: the run grows
  EXPECT_EQ(big.runs().size(), 1u);
  EXPECT_EQ(big.size(), std::size_t(1 << 20) + 1);
  EXPECT_TRUE(has(what_of([&] { big.add(5, 6); }), "not a run above the ranks held"));
  EXPECT_TRUE(RankSet().empty());
  EXPECT_EQ(RankSet().begin(), RankSet().end());
}

TEST(DumpAnalysis, OpMismatch) {
  const Diagnosis d = analyze(
      {dump(0, 2, append(history(3), {entry(4, 4, "all_reduce", "started")})),
       dump(1, 2, append(history(3), {entry(4, 4, "all_gather", "started", {{4}, {8}}, "float32", "tensor")}))});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::OpMismatch);
  EXPECT_EQ(d.findings[0].collective_seq, 4u);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});  // a tie: the side of rank 0 is taken as intended
  EXPECT_EQ(d.findings[0].text,
            "collective #4 differs between ranks: rank 0: all_reduce (float32 [4], sum); rank 1: all_gather (float32 "
            "[4], [8], tensor) (different ops)");
  ASSERT_EQ(d.findings[0].sides.size(), 2u);
  EXPECT_EQ(d.findings[0].sides[1].op, "all_gather");
  EXPECT_EQ(d.diverged_at, std::optional<uint64_t>(4));
}

TEST(DumpAnalysis, ShapeMismatchNamesTheMinority) {
  const json good = append(history(2), {entry(3, 3, "all_reduce", "started", {{64, 4}})});
  const json bad = append(history(2), {entry(3, 3, "all_reduce", "started", {{63, 4}})});
  const Diagnosis d = analyze({dump(0, 3, good), dump(1, 3, bad), dump(2, 3, good)});
  ASSERT_EQ(d.findings.size(), 1u);
  expect_finding(
      d.findings[0], FindingKind::ShapeMismatch, {1},
      "collective #3 differs between ranks: ranks 0, 2: all_reduce (float32 [64, 4], sum); rank 1: all_reduce "
      "(float32 [63, 4], sum) (different element counts)");
}

TEST(DumpAnalysis, SameCountOtherShapeIsConsistent) {
  // The backend sees element counts (Note [Call fingerprints]); [2, 2] and [4] agree, as do an
  // all_gather into one tensor and into a list.
  const Diagnosis d = analyze(
      {dump(0, 2,
            json::array({entry(1, 1, "all_reduce", "completed", {{2, 2}}),
                         entry(2, 2, "all_gather", "completed", {{2}, {4}}, "float32", "tensor")})),
       dump(1, 2,
            json::array({entry(1, 1, "all_reduce", "completed", {{4}}),
                         entry(2, 2, "all_gather", "completed", {{2}, {2}, {2}}, "float32", "list")}))});
  EXPECT_TRUE(d.consistent()) << diagnosis_text(d);
}

TEST(DumpAnalysis, DtypeMismatch) {
  const Diagnosis d = analyze(
      {dump(0, 2, append(history(1), {entry(2, 2, "all_reduce", "started", {{4}}, "float32")})),
       dump(1, 2, append(history(1), {entry(2, 2, "all_reduce", "started", {{4}}, "bfloat16")}))});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::DtypeMismatch);
  EXPECT_EQ(d.findings[0].text,
            "collective #2 differs between ranks: rank 0: all_reduce (float32 [4], sum); rank 1: all_reduce "
            "(bfloat16 [4], sum) (different dtypes)");
}

TEST(DumpAnalysis, ArgumentMismatch) {
  const Diagnosis d = analyze(
      {dump(0, 2, json::array({entry(1, 1, "broadcast", "started", {{4}}, "float32", "root=0")})),
       dump(1, 2, json::array({entry(1, 1, "broadcast", "started", {{4}}, "float32", "root=1")}))});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::ArgumentMismatch);
  EXPECT_TRUE(has(d.findings[0].text, "(a different reduction or root)")) << d.findings[0].text;
}

TEST(DumpAnalysis, ExtraCollectiveShiftsTheRest) {
  // Rank 1 issued a broadcast the others did not; its next calls are theirs, one number later.
  const json normal = append(history(3), {entry(4, 4, "all_reduce", "failed"), entry(5, 5, "all_reduce", "started")});
  const json extra = append(history(3), {entry(4, 4, "broadcast", "failed", {{4}}, "float32", "root=0"),
                                         entry(5, 5, "all_reduce", "failed"), entry(6, 6, "all_reduce", "started")});
  const Diagnosis d = analyze({dump(0, 3, normal), dump(1, 3, extra), dump(2, 3, normal)});
  ASSERT_GE(d.findings.size(), 1u);
  expect_finding(
      d.findings[0], FindingKind::ExtraCollective, {1},
      "collective #4 differs between ranks: ranks 0, 2: all_reduce (float32 [4], sum); rank 1: broadcast "
      "(float32 [4], root=0). rank 1 issued an extra collective at #4: its later collectives line up with the "
      "others' shifted by one");
  EXPECT_EQ(d.diverged_at, std::optional<uint64_t>(4));
}

TEST(DumpAnalysis, SkippedCollective) {
  // Rank 1 skipped a barrier the others issued.
  const json normal = append(history(3),
                             {entry(4, 4, "barrier", "failed", json::array(), "float32", ""),
                              entry(5, 5, "all_reduce", "completed"), entry(6, 6, "all_reduce", "started")});
  const json skipped = append(history(3), {entry(4, 4, "all_reduce", "failed"), entry(5, 5, "all_reduce", "started")});
  const Diagnosis d = analyze({dump(0, 3, normal), dump(1, 3, skipped), dump(2, 3, normal)});
  ASSERT_GE(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::SkippedCollective);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1});
  EXPECT_TRUE(has(d.findings[0].text, "rank 1 skipped collective #4 (barrier)")) << d.findings[0].text;
}

TEST(DumpAnalysis, ExtraCollectiveAtTheEnd) {
  // Rank 1 issued one all_reduce more than ranks 0 and 2, which finished and destroyed the group.
  const json slots = {slot(0, true, "left", false, 3, 3, 3), slot(1, true, "failed", true, 4, 4, 3),
                      slot(2, true, "left", false, 3, 3, 3)};
  const Diagnosis d = analyze(
      {dump(1, 3, append(history(3), {entry(4, 4, "all_reduce", "started", {{4}}, "float32", "sum", "step 7")}),
            slots)});
  ASSERT_EQ(d.findings.size(), 3u);
  expect_finding(
      d.findings[0], FindingKind::ExtraCollective, {1},
      "rank 1 issued #4 all_reduce (float32 [4], sum) at step 7, which ranks 0, 2 never issued: they finished "
      "their collectives at #3 and left the group (an extra collective on rank 1)");
  EXPECT_EQ(d.findings[1].kind, FindingKind::RankAbsent);
  EXPECT_EQ(d.findings[2].kind, FindingKind::RankAbsent);
}

TEST(DumpAnalysis, RankThatLeftEarlyIsTheCulpritInATie) {
  // Two ranks: rank 1 destroyed its group after #3 while rank 0 waits in #4. Rank 1 is named.
  const json slots = {slot(0, true, "failed", true, 4, 4, 3), slot(1, true, "left", true, 3, 3, 3)};
  const Diagnosis d = analyze({dump(0, 2, append(history(3), {entry(4, 4, "all_reduce", "started")}), slots)});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::RankAbsent);
  EXPECT_TRUE(has(d.findings[0].text, "it destroyed its process group")) << d.findings[0].text;
}

TEST(DumpAnalysis, LaggingRankWaitsInAnEarlierCollective) {
  // Rank 0 (the root) left broadcast #4 and waits in #5; rank 1 is still in #4.
  const json r0 = append(history(3), {entry(4, 4, "broadcast", "completed", {{4}}, "float32", "root=0"),
                                      entry(5, 5, "all_reduce", "started"), entry(6, 6, "all_reduce", "queued")});
  const json r1 = append(history(3), {entry(4, 4, "broadcast", "started", {{4}}, "float32", "root=0")});
  const Diagnosis d = analyze({dump(0, 2, r0), dump(1, 2, r1)});
  ASSERT_EQ(d.findings.size(), 1u);
  expect_finding(d.findings[0], FindingKind::Lagging, {1},
                 "rank 1 never arrived at #5 all_reduce (float32 [4], sum), which rank 0 waits in: it is waiting in an "
                 "earlier collective, #4 broadcast (float32 [4], root=0) (started)");
  EXPECT_EQ(d.diverged_at, std::optional<uint64_t>(5));
  // Each rank's last enqueued / started / completed call.
  const RankProgress& p = d.ranks[0];
  ASSERT_TRUE(p.last_enqueued && p.last_started && p.last_completed);
  EXPECT_EQ(p.last_enqueued->collective_seq, 6u);
  EXPECT_EQ(p.last_started->collective_seq, 5u);
  EXPECT_EQ(p.last_completed->collective_seq, 4u);
  const std::string text = diagnosis_text(d);
  EXPECT_TRUE(has(text, "    last enqueued:  #6 all_reduce (float32 [4], sum) [queued]\n")) << text;
  EXPECT_TRUE(has(text, "    last completed: #3 all_reduce (float32 [4], sum) [completed]\n")) << text;
}

TEST(DumpAnalysis, BackendStuck) {
  const json both = append(history(3), {entry(4, 4, "all_reduce", "started", {{4}}, "float32", "sum", "bucket 0")});
  const Diagnosis d = analyze({dump(0, 2, both), dump(1, 2, both)});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::BackendStuck);
  EXPECT_EQ(d.findings[0].text,
            "every rank entered #4 all_reduce (float32 [4], sum) at bucket 0 with the same call and none completed "
            "it: the program's collectives agree; the hang is in the backend or the transport (network, a frozen "
            "peer host, a GPU kernel)");
}

TEST(DumpAnalysis, HangOutsideCollectives) {
  const Diagnosis d = analyze({dump(0, 2, history(3), nullptr, "rank 0: stuck elsewhere"), dump(1, 2, history(3))});
  ASSERT_EQ(d.findings.size(), 1u);
  EXPECT_EQ(d.findings[0].kind, FindingKind::HangOutsideCollectives);
  EXPECT_TRUE(has(d.findings[0].text, "the hang is outside this group's collectives")) << d.findings[0].text;
}

TEST(DumpAnalysis, P2pWithoutAMatchingCall) {
  const json r0 = append(history(2), {entry(3, 0, "recv", "started", {{4}}, "float32", "peer=1 tag=0")});
  const json r1 = append(history(2), {entry(3, 0, "send", "completed", {{4}}, "float32", "peer=0 tag=0"),
                                      entry(4, 3, "all_reduce", "started")});
  const Diagnosis d = analyze({dump(0, 2, r0), dump(1, 2, r1)});
  bool found = false;
  for (const Finding& f : d.findings)
    if (f.kind == FindingKind::P2pHang) {
      found = true;
      EXPECT_EQ(f.ranks, std::vector<int>{0});
      EXPECT_TRUE(has(f.text, "rank 1 has no matching send in flight")) << f.text;
    }
  EXPECT_TRUE(found) << diagnosis_text(d);
}

TEST(DumpAnalysis, JsonCarriesTheDiagnosis) {
  const Diagnosis d = analyze({dump(0, 2, append(history(1), {entry(2, 2, "all_reduce", "started", {{4}}, "float32")})),
                               dump(1, 2, append(history(1), {entry(2, 2, "all_reduce", "started", {{4}}, "int64")}))});
  const json j = diagnosis_json(d);
  EXPECT_EQ(j["consistent"], false);
  EXPECT_EQ(j["diverged_at_collective"], 2);
  EXPECT_EQ(j["findings"][0]["kind"], "dtype_mismatch");
  EXPECT_EQ(j["findings"][0]["sides"][1]["dtype"], "int64");
  EXPECT_EQ(j["ranks"][1]["last_started"]["collective_seq"], 2);
  EXPECT_EQ(j["ranks"][1]["last_completed"]["collective_seq"], 1);
}

TEST(DumpAnalysis, PeerPosition) {
  EXPECT_EQ(peer_position(5, 4, true, true), PeerPosition::NotArrived);
  EXPECT_EQ(peer_position(5, 5, false, false), PeerPosition::OtherOp);
  EXPECT_EQ(peer_position(5, 5, true, false), PeerPosition::OtherArguments);
  EXPECT_EQ(peer_position(5, 5, true, true), PeerPosition::Arrived);
  EXPECT_EQ(peer_position(5, 6, true, true), PeerPosition::Past);
}

// ---- bad input ----

// Nesting was bounded with nlohmann's parser callback, which rescans the parent array at every
// closing brace of an object: 400,000 empty objects (a 1.2 MB dump) took 37 s, and a dump at the
// 64 MiB cap would have taken days. Bounded on the text first, the parse is linear (~0.1 s here).
TEST(DumpAnalysis, ManyObjectsParseInLinearTime) {
  std::string text = "{\"junk\": [";
  for (int i = 0; i < 400000; ++i) text += i ? ",{}" : "{}";
  text += "]}";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = what_of([&] { parse_dump(text, "r0.json"); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(has(e, "r0.json: size: missing")) << e;
  EXPECT_LT(s, 10.0) << "quadratic again?";
}

TEST(DumpAnalysis, MalformedDumpsNameTheFileAndField) {
  const auto err = [](const std::string& text) { return what_of([&] { parse_dump(text, "r0.json"); }); };
  EXPECT_TRUE(has(err("{\"rank\": 0,"), "r0.json: not valid JSON")) << err("{");
  EXPECT_TRUE(has(err("[1]"), "r0.json: the document: must be an object"));
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(has(err(deep), "r0.json: JSON nested deeper than 128 levels")) << err(deep);
  json j = dump(0, 2, history(2));
  j.erase("size");
  EXPECT_TRUE(has(err(j.dump()), "r0.json: size: missing")) << err(j.dump());
  j = dump(3, 2, history(2));
  EXPECT_TRUE(has(err(j.dump()), "r0.json: rank: must be at most 1 (got 3)")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][1]["seq"] = 1;
  EXPECT_TRUE(has(err(j.dump()), "entries[1].seq: not above the previous entry's (1)")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][0]["shapes"] = {{4, -1}};
  EXPECT_TRUE(has(err(j.dump()), "entries[0].shapes[0][1]: a size must not be negative")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][0]["op"] = "all_to_all";
  EXPECT_TRUE(has(err(j.dump()), "entries[0].op: unknown op 'all_to_all'")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][0]["dtype"] = "float8";
  EXPECT_TRUE(has(err(j.dump()), "entries[0].dtype: unknown dtype 'float8'")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][0]["seq"] = -4;
  EXPECT_TRUE(has(err(j.dump()), "entries[0].seq: must be a whole number >= 0")) << err(j.dump());
  j = dump(0, 2, history(2));
  j["entries"][0]["collective_seq"] = 0;
  EXPECT_TRUE(has(err(j.dump()), "entries[0].collective_seq: must be at least 1 for a collective")) << err(j.dump());
  j = dump(0, 2, history(2), {slot(0, true, "active", true, 1, 1, 1), slot(0, true, "active", true, 1, 1, 1)});
  EXPECT_TRUE(has(err(j.dump()), "progress_board.slots[1].rank: rank 0 appears twice")) << err(j.dump());
  j = dump(0, 2, history(2), {slot(0, true, "sleeping", true, 1, 1, 1)});
  EXPECT_TRUE(has(err(j.dump()), "progress_board.slots[0].state: must be active")) << err(j.dump());
  EXPECT_TRUE(has(err(std::string(kMaxDumpBytes + 1, ' ')), "r0.json: larger than 64 MiB"));
}

TEST(DumpAnalysis, DumpsOfDifferentGroupsAreRefused) {
  EXPECT_TRUE(has(what_of([] {
                    analyze({dump(0, 2, history(1)), dump(1, 3, history(1))});
                  }),
                  "are dumps of different process groups"));
  EXPECT_TRUE(has(what_of([] { analyze({dump(1, 2, history(1)), dump(1, 2, history(1))}); }), "are both rank 1"));
  EXPECT_TRUE(has(what_of([] { analyze_dumps({}); }), "no dumps to analyze"));
}

TEST(DumpAnalysis, TextIsPrintableWhateverTheDumpHolds) {
  const json e = entry(1, 1, "all_reduce", "started", {{4}}, "float32", "sum\x1b[2J\n", "bucket\x07");
  const Diagnosis d = analyze({dump(0, 2, json::array({e})), dump(1, 2, json::array({e}))});
  const std::string text = diagnosis_text(d);
  EXPECT_FALSE(has(text, "\x1b")) << text;
  EXPECT_FALSE(has(text, "\x07")) << text;
  EXPECT_TRUE(has(text, "sum?[2J?")) << text;
}

class DumpDir : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("tb_dump_analysis_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
};

TEST_F(DumpDir, ReadsEveryRankFileAndIgnoresTheRest) {
  write("flight_recorder_rank1.json", dump(1, 2, history(2)).dump(2));
  write("flight_recorder_rank0.json", dump(0, 2, history(2)).dump(2));
  write("rank0.log", "not a dump");
  write("flight_recorder_rankX.json", "not a dump either");
  const std::vector<RankDump> v = read_dump_dir(dir.string());
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].rank, 0);
  EXPECT_EQ(v[1].file, (dir / "flight_recorder_rank1.json").string());
  EXPECT_TRUE(analyze_dumps(v).consistent());
}

TEST_F(DumpDir, Errors) {
  EXPECT_TRUE(has(what_of([&] { read_dump_dir(dir.string()); }), "no flight-recorder dumps")) << dir;
  EXPECT_TRUE(has(what_of([&] { read_dump_dir((dir / "nope").string()); }), "not a directory"));
  write("flight_recorder_rank1.json", dump(0, 2, history(2)).dump());
  EXPECT_TRUE(has(what_of([&] { read_dump_dir(dir.string()); }), "flight_recorder_rank1.json: holds rank 0"));
  write("flight_recorder_rank1.json", "{\"size\": 2, \"rank\": 1, \"backend\": \"mpi\", \"entries\": [");
  EXPECT_TRUE(has(what_of([&] { read_dump_dir(dir.string()); }), "flight_recorder_rank1.json: not valid JSON"));
}

}  // namespace
