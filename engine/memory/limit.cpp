#include "engine/memory/limit.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/env.h"
#include "engine/core/error.h"

namespace tb::memory {

namespace {

// MemTotal from /proc/meminfo in bytes, 0 if unreadable.
int64_t mem_total() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

// The first number in `path` (a cgroup limit), 0 if unreadable or "max" (no limit).
int64_t read_limit(const char* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  try {
    const long long n = std::stoll(v);
    // cgroup v1 writes a page-rounded INT64_MAX for "no limit".
    return n > 0 && n < (int64_t(1) << 62) ? int64_t(n) : 0;
  } catch (...) {
    return 0;
  }
}

bool is_percent(std::string_view v) { return !v.empty() && v.back() == '%'; }
// Digits with a decimal point and no unit: "0.25" (a byte count is whole: "1.5G" has a unit).
bool is_fraction(std::string_view v) {
  return v.find('.') != std::string_view::npos && v.find_first_not_of("0123456789.") == std::string_view::npos;
}

}  // namespace

int64_t machine_memory_bytes() {
  int64_t total = mem_total();
  for (const char* p : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t c = read_limit(p);
    if (c > 0) total = total > 0 ? std::min(total, c) : c;
  }
  TB_CHECK(total > 0, "memory limit",
           "cannot read the machine's memory (/proc/meminfo MemTotal or the cgroup's "
           "memory.max) for a fractional limit; give the limit in bytes");
  return total;
}

int64_t parse_memory_limit(std::string_view name, std::string_view value) {
  return parse_memory_limit(name, value, is_percent(value) || is_fraction(value) ? machine_memory_bytes() : 0);
}

int64_t parse_memory_limit(std::string_view name, std::string_view value, int64_t machine_bytes) {
  const std::string forms =
      "bytes (\"8G\", \"512M\", \"1073741824\"; 0 = no cap), a fraction of the machine's memory "
      "in (0, 1] (\"0.25\") or a percentage in (0, 100] (\"25%\")";
  // `number` read as a share of the machine's memory in (0, hi], then divided by hi ("25" of 100).
  auto share = [&](std::string_view number, double hi, const char* what) {
    double f = 0;
    try {
      f = core::parse_double(name, number, 0, hi);
    } catch (const core::Error&) {
    }
    TB_CHECK(f > 0, std::string(name), "'", value, "' is not ", what, "; the limit is ", forms);
    TB_CHECK(machine_bytes > 0, std::string(name), "the machine's memory is unknown, so '", value,
             "' cannot be a share of it");
    return std::max<int64_t>(1, int64_t(std::floor(f / hi * double(machine_bytes))));
  };
  if (is_percent(value)) return share(value.substr(0, value.size() - 1), 100, "a percentage in (0, 100]");
  if (is_fraction(value)) return share(value, 1, "a fraction in (0, 1]");
  try {
    return core::parse_bytes(name, value);
  } catch (const core::Error& e) {
    throw core::Error(e.op(), e.detail() + "; the limit is " + forms);
  }
}

}  // namespace tb::memory
