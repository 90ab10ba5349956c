// Fuzz target: tb::dist::parse_dump, the reader of the watchdog's flight-recorder dumps
// (`trainbench analyze`). Each input is parsed as rank 0's dump; an accepted one is analyzed
// alone and beside a valid dump of rank 1 from the seeds, and rendered as text and JSON. All of it
// must succeed or throw core::Error.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/dist/dump_analysis.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

using nlohmann::json;

json entry(uint64_t seq, uint64_t cseq, const char* op, const char* state, const char* detail) {
  return {{"seq", seq},         {"collective_seq", cseq}, {"op", op},       {"detail", detail},
          {"dtype", "float32"}, {"shapes", {{4, 2}}},     {"state", state}, {"enqueued_us", 1.5},
          {"started_us", 2.0},  {"ended_us", -1},         {"error", ""},    {"label", "bucket 0"}};
}

json slot(int rank, const char* state, uint64_t done) {
  return {{"rank", rank},
          {"joined", true},
          {"host", "node0"},
          {"pid", 100 + rank},
          {"state", state},
          {"alive", rank == 0},
          {"collective_issued", done},
          {"collective_entered", done},
          {"collective_entered_op", "all_reduce (float32, 8 elements, sum)"},
          {"collective_completed", done},
          {"p2p_entered", 0},
          {"p2p_entered_op", "none"},
          {"p2p_completed", 0}};
}

json dump(int rank, json entries) {
  return {{"backend", "mpi"},
          {"rank", rank},
          {"size", 2},
          {"capacity", 2048},
          {"dropped", 0},
          {"entries", std::move(entries)},
          {"diagnosis", "rank 0: all_reduce #3 did not complete"},
          {"stuck", {{"seq", 4}, {"collective_seq", 3}, {"what", "all_reduce #3"}, {"elapsed_s", 3.1}}},
          {"progress_board",
           {{"path", "/dev/shm/progress_1_mpi_0.bin"}, {"slots", {slot(0, "failed", 2), slot(1, "exiting", 2)}}}}};
}

const tb::dist::RankDump& peer() {
  static const tb::dist::RankDump p = tb::dist::parse_dump(
      dump(1, {entry(1, 1, "all_reduce", "completed", "sum"), entry(2, 2, "all_reduce", "completed", "sum")}).dump(),
      "peer");
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tb::dist::RankDump d = tb::dist::parse_dump(std::string_view(reinterpret_cast<const char*>(data), size),
                                                      "input");
    ++tb_fuzz_accepted;
    for (const std::vector<tb::dist::RankDump>& set :
         {std::vector<tb::dist::RankDump>{d}, std::vector<tb::dist::RankDump>{d, peer()}}) {
      try {
        const tb::dist::Diagnosis g = tb::dist::analyze_dumps(set);
        (void)tb::dist::diagnosis_text(g);
        (void)tb::dist::diagnosis_json(g).dump(-1, ' ', false, json::error_handler_t::replace);
      } catch (const tb::core::Error&) {
      }
    }
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  const json good =
      dump(0, {entry(1, 1, "all_reduce", "completed", "sum"), entry(2, 2, "all_reduce", "completed", "sum"),
               entry(3, 0, "send", "completed", "peer=1 tag=0"), entry(4, 3, "all_reduce", "started", "sum")});
  out.push_back(good.dump(2));
  json mismatch = good;
  mismatch["entries"][3]["op"] = "all_gather";
  mismatch["entries"][3]["shapes"] = {{4}, {8}};
  out.push_back(mismatch.dump());
  json p2p = good;
  p2p["entries"][2]["state"] = "started";
  p2p["entries"][2]["op"] = "recv";
  out.push_back(p2p.dump());
  json big = good;
  big["entries"][0]["shapes"] = {{9223372036854775807LL, 9223372036854775807LL}};
  big["entries"][1]["seq"] = 18446744073709551615ull;
  out.push_back(big.dump());
  json bare = {{"backend", "gloo"}, {"rank", 0}, {"size", 1}, {"entries", json::array()}};
  out.push_back(bare.dump());
  // Hostile: nesting past any limit, a rank out of range.
  out.push_back("{\"entries\":" + std::string(100000, '[') + std::string(100000, ']') + "}");
  json bad = good;
  bad["rank"] = 5;
  out.push_back(bad.dump());
}
