// Helpers shared by the hosts suite's tests and benchmarks.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/hosts.h"
#include "harness/suite.h"

namespace tb::suites {

// True (and the record set to skip with the reason) when hosts cannot be made here.
bool skip_without_hosts(harness::Record& rec);

double seconds_since(std::chrono::steady_clock::time_point t0);

// Runs argv (20 s limit) and returns its stdout and stderr; throws std::runtime_error if it fails.
std::string run_capture(const std::vector<std::string>& argv);

// A fresh, empty folder under the temporary directory for one launch.
std::filesystem::path fresh_run_dir(const std::string& tag);

// The rank cases (or, with `benches`, rank benchmarks) of distributed suite `suite` whose names
// match `filter`, launched once at world hosts x ranks-per-host across the fixture's hosts.
// `world` 0: every slot of the fixture. `env` is exported to every rank beside the fixture's.
std::vector<harness::Record> run_suite_on_hosts(const harness::HostsFixture& f, const std::string& suite,
                                                const std::string& filter, bool benches, int world = 0,
                                                const std::map<std::string, std::string>& env = {});

// Fills `rec` from the records of a suite run across hosts: pass when every one passed or
// skipped and at least one passed; metrics cases/passed/failed/skipped; failures in the message.
void summarize_inner(harness::Record& rec, const std::vector<harness::Record>& inner);

}  // namespace tb::suites
