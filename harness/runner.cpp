// Running correctness cases into Records, the progress line and the pass/fail tally.
#include <chrono>
#include <exception>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "harness/runner.h"

namespace tb::harness {

void Progress::start(const std::string& suite, const std::string& name) {
  ++done_;
  if (!out_) return;
  // Printed before the case runs so a case that hangs or crashes is visible in the log.
  *out_ << '[' << done_ << '/' << total_ << "] " << suite << ' ' << name << " ... " << std::flush;
}

void Progress::finish(const Record& r) {
  if (!out_) return;
  *out_ << r.status;
  if (r.kind == "benchmark" && r.status == Status::Pass && r.metrics.contains("speedup")) {
    const auto& m = r.metrics;
    std::ostringstream os;
    os << std::setprecision(3) << " (engine " << m.value("engine_median_s", 0.0) * 1e3 << " ms, libtorch "
       << m.value("reference_median_s", 0.0) * 1e3 << " ms, speedup " << m.value("speedup", 0.0) << "x)";
    *out_ << os.str();
  }
  if ((r.status == Status::Fail || r.status == Status::Error) && !r.message.empty()) {
    // First line only: the full message is in the JSON.
    *out_ << " (" << r.message.substr(0, r.message.find('\n')) << ')';
  }
  *out_ << std::endl;
}

std::vector<Record> run_tests(const std::vector<PlannedTest>& tests, Progress* progress) {
  std::vector<Record> out;
  out.reserve(tests.size());
  for (const PlannedTest& p : tests) {
    if (progress) progress->start(p.suite, p.test.name);
    const auto t0 = std::chrono::steady_clock::now();
    Record r;
    // The contract says run() never throws; a case that does must not take the run down.
    try {
      if (!p.test.run) throw std::runtime_error("test case has no run function");
      r = p.test.run();
    } catch (const std::exception& e) {
      r = Record{};
      r.status = Status::Error;
      r.message = std::string("exception: ") + e.what();
    } catch (...) {
      r = Record{};
      r.status = Status::Error;
      r.message = "exception of unknown type";
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.suite.empty()) r.suite = p.suite;
    if (r.case_name.empty()) r.case_name = p.test.name;
    if (r.duration_s == 0) r.duration_s = dt;
    if (progress) progress->finish(r);
    out.push_back(std::move(r));
  }
  return out;
}

Counts count(const std::vector<Record>& records) {
  Counts c;
  for (const Record& r : records) {
    switch (r.status) {
      case Status::Pass: ++c.passed; break;
      case Status::Skip: ++c.skipped; break;
      case Status::Error: ++c.errors; break;
      case Status::Fail: ++c.failed; break;
    }
  }
  return c;
}

}  // namespace tb::harness
