// The result JSON: records as JSON, the run header, and writing it (docs/results.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "harness/output_file.h"
#include "harness/registry_detail.h"
#include "harness/runner.h"

// Defined by harness/CMakeLists.txt; the fallbacks keep the file compilable on its own.
#ifndef TB_GIT_REVISION
#define TB_GIT_REVISION "unknown"
#endif
#ifndef TB_BUILD_TYPE
#define TB_BUILD_TYPE "unknown"
#endif
#ifndef TB_COMPILER
#define TB_COMPILER "unknown"
#endif
#ifndef TB_VERSION
#define TB_VERSION "unknown"
#endif

namespace tb::harness {
namespace {

nlohmann::json safe_value(const nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    return v;
  }
  if (v.is_number() || v.is_string()) return v;
  return v.dump();
}

nlohmann::json safe_object(const nlohmann::json& obj) {
  nlohmann::json out = nlohmann::json::object();
  if (!obj.is_object()) {
    if (!obj.is_null()) out["value"] = safe_value(obj);
    return out;
  }
  for (auto it = obj.begin(); it != obj.end(); ++it) out[it.key()] = safe_value(it.value());
  return out;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// The widest x86 vector ISA the CPU reports: avx512 (avx512f), avx2, else the architecture.
// These VMs report the model only as "AMD EPYC"; the ISA is what separates the machine kinds
// whose figures differ (Zen 4 with AVX-512, Zen 3 with AVX2).
std::string cpu_isa() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const std::string flags = line + " ";
    if (flags.find(" avx512f ") != std::string::npos) return "avx512";
    if (flags.find(" avx2 ") != std::string::npos) return "avx2";
    return "x86-64";
  }
  return "unknown";
}

// Benchmarks on a busy machine (a parallel build, another run) are noise; the load average lets
// a reader of the result see that.
nlohmann::json load_average() {
  double l[3] = {0, 0, 0};
  std::ifstream in("/proc/loadavg");
  if (!(in >> l[0] >> l[1] >> l[2])) return nullptr;
  return nlohmann::json::array({l[0], l[1], l[2]});
}

}  // namespace

nlohmann::json record_to_json(const Record& r) {
  nlohmann::json j = {
      {"suite", r.suite},
      {"case", r.case_name},
      {"kind", r.kind},
      {"status", r.status},
      {"rank", r.rank},
      {"metrics", safe_object(r.metrics)},
      {"tolerances", safe_object(r.tolerances)},
      {"duration_s", std::isfinite(r.duration_s) && r.duration_s > 0 ? r.duration_s : 0.0},
      {"message", r.message},
  };
  if (r.series.is_object() && !r.series.empty()) {
    nlohmann::json series = nlohmann::json::object();
    for (auto it = r.series.begin(); it != r.series.end(); ++it) {
      nlohmann::json values = nlohmann::json::array();
      if (it.value().is_array())
        for (const auto& v : it.value()) values.push_back(safe_value(v));
      series[it.key()] = values;
    }
    j["series"] = series;
  }
  return j;
}

Record record_from_json(const nlohmann::json& j, const std::string& default_kind) {
  Record r;
  r.suite = j.value("suite", "");
  r.case_name = j.value("case", "");
  r.kind = j.value("kind", default_kind);
  const std::string status = j.value("status", "error");
  r.status = status_from_string(status).value_or(Status::Error);
  r.rank = j.value("rank", 0);
  r.metrics = j.value("metrics", nlohmann::json::object());
  r.tolerances = j.value("tolerances", nlohmann::json::object());
  r.duration_s = j.value("duration_s", 0.0);
  r.message = j.value("message", "");
  if (!status_from_string(status))  // another program's record, not one of ours
    r.message = "status '" + status + "' is not pass, skip, fail or error" +
                (r.message.empty() ? "" : ": " + r.message);
  r.series = j.value("series", nlohmann::json::object());
  return r;
}

nlohmann::json make_result(const RunInfo& info, const std::vector<Record>& records) {
  // Suites' extras first, so the harness's own facts win on a clash.
  nlohmann::json run = detail::extra_run_info();
  run["time"] = utc_now_iso8601();
  run["git_revision"] = TB_GIT_REVISION;
  run["trainbench_version"] = TB_VERSION;
  run["host"] = host_name();
  run["cpu"] = cpu_model();
  run["cpu_isa"] = cpu_isa();
  run["logical_cores"] = std::max(1u, std::thread::hardware_concurrency());
  if (nlohmann::json la = load_average(); !la.is_null()) run["load_average"] = la;
  run["build_type"] = TB_BUILD_TYPE;
  run["compiler"] = TB_COMPILER;
  run["backends"] = nlohmann::json::array({"cpu"});
  run["world_size"] = 1;
  run["command"] = info.command;
  run["threads"] = info.threads;

  nlohmann::json recs = nlohmann::json::array();
  for (const Record& r : records) recs.push_back(record_to_json(r));
  return {{"schema", kSchemaId}, {"run", std::move(run)}, {"records", std::move(recs)}};
}

void write_result(const std::filesystem::path& path, const nlohmann::json& result) {
  // A message quoting raw bytes (a corrupt tensor name, a C string from a library) must not cost
  // the whole result: invalid UTF-8 is replaced by U+FFFD rather than thrown on.
  write_output_file(path, result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace tb::harness
