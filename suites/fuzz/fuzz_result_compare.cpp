// Fuzz target: harness::parse_result_text, the reader of result files `trainbench compare` is
// given (a pull request's artifacts: untrusted), then the comparison of each accepted file with
// itself and with a valid seed, its text and Markdown tables, and the --bounds check. All of it must
// succeed or throw core::Error. Bootstrap resamples are cut to 50 so a 1 MiB input of long series
// stays well inside the driver's per-input timeout; the statistics are the unit tests' concern.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "harness/result_compare.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

using nlohmann::json;

json bench(const char* c, json eng, json ref) {
  return {{"suite", "ops"},
          {"case", c},
          {"kind", "benchmark"},
          {"status", "pass"},
          {"rank", 0},
          {"duration_s", 1.5},
          {"message", ""},
          {"tolerances", json::object()},
          {"metrics",
           {{"engine_median_s", 1e-3},
            {"reference_median_s", 2e-3},
            {"engine_min_s", 0.9e-3},
            {"reference_min_s", 1.8e-3},
            {"speedup", 2.0}}},
          {"series", {{"engine_time_s", std::move(eng)}, {"reference_time_s", std::move(ref)}}}};
}

json result(json records) {
  return {{"schema", "trainbench.result/1"},
          {"run", {{"time", "2026-12-03T10:00:00Z"}, {"git_revision", "abc1234"}, {"host", "ci"}}},
          {"records", std::move(records)}};
}

json good() {
  return result({bench("max/float32/16M", {1e-3, 1.1e-3, 0.9e-3, 1e-3, 1.2e-3}, {2e-3, 2.1e-3, 1.9e-3, 2e-3, 2.2e-3}),
                 bench("sum/bfloat16/16M", {1e-3, "nan", 2e-3}, json::array()),
                 {{"suite", "ops"},
                  {"case", "add/float32/contiguous"},
                  {"kind", "correctness"},
                  {"status", "fail"},
                  {"rank", 1},
                  {"message", "max_abs 1 over\natol"}}});
}

const json& base() {
  static const json b = tb::harness::parse_result_text(good().dump(), "base");
  return b;
}

const tb::harness::PerfBounds& bounds() {
  static const tb::harness::PerfBounds b = tb::harness::parse_perf_bounds(
      R"({"schema":"trainbench.perf_bounds/1","suite":"ops","default_max_ratio":3,"family_max_ratio":{"max":4}})",
      "bounds");
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tb::harness::CompareOptions opt;
  opt.resamples = 50;
  try {
    const json doc = tb::harness::parse_result_text(text, "input");
    ++tb_fuzz_accepted;
    for (const bool input_first : {false, true}) {
      const tb::harness::Comparison c = input_first ? tb::harness::compare_results(doc, base(), opt)
                                                    : tb::harness::compare_results(base(), doc, opt);
      (void)tb::harness::comparison_text(c);
      (void)tb::harness::comparison_markdown(c);
    }
    (void)tb::harness::comparison_text(tb::harness::compare_results(doc, doc, opt));
    const tb::harness::BoundsCheck b = tb::harness::check_bounds(doc, bounds());
    (void)tb::harness::bounds_text(b, bounds(), true);
  } catch (const tb::core::Error&) {
  }
  // The same bytes as a bounds file.
  try {
    (void)tb::harness::parse_perf_bounds(text, "input");
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  const json g = good();
  out.push_back(g.dump(2));
  json slow = g;
  slow["records"][0]["series"]["engine_time_s"] = {5e-3, 6e-3, 5.5e-3};
  slow["records"][0]["metrics"]["engine_median_s"] = 5e-3;
  out.push_back(slow.dump());
  json extreme = g;
  extreme["records"][0]["series"]["engine_time_s"] = {1e-308, 1.7e308, 0, -1, 5e-324, "inf"};
  extreme["records"][0]["metrics"]["reference_median_s"] = 0;
  extreme["records"][1]["rank"] = 16777215;
  out.push_back(extreme.dump());
  json other = g;
  other["records"][2]["status"] = "pass";
  other["records"].push_back(other["records"][0]);  // a duplicate key
  out.push_back(other.dump());
  out.push_back(result(json::array()).dump());
  out.push_back(
      R"({"schema":"trainbench.perf_bounds/1","suite":"ops","default_max_ratio":3,"family_max_ratio":{"max":4}})");
  // Hostile: nesting past the limit, another schema, a wrong type.
  out.push_back(R"({"schema":"trainbench.result/1","run":{},"records":[)" + std::string(100000, '[') +
                std::string(100000, ']') + "]}");
  json v2 = g;
  v2["schema"] = "trainbench.result/2";
  out.push_back(v2.dump());
  json wrong = g;
  wrong["records"][0]["series"]["engine_time_s"] = "1e-3";
  out.push_back(wrong.dump());
}
