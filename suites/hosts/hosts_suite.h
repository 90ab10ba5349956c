// The `hosts` suite (issue 19): the distributed suites' cases across hosts of our own (network
// namespaces, harness/hosts.h) at 2 hosts x 2 ranks, the fixture itself (names, links, clean
// tear-down, reaping a killed owner's hosts), variable forwarding to every rank on every host, a
// whole host failing mid-collective; benchmarks of intra- against inter-host links per profile.
// Every case skips with the reason where namespaces cannot be made (not root).
#pragma once
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// Registers suite "hosts" (not run by default) with its tests and timed benchmarks.
void register_hosts_suite();

std::vector<harness::TestCase> hosts_tests();
// A distributed checkpoint saved by one launch at 2 hosts x 2 ranks and loaded by separate
// launches on other host counts (hosts_dcp.cpp, Note [A checkpoint loaded on another host count]).
std::vector<harness::TestCase> hosts_dcp_tests();
// The rank cases those launches run (the suite's rank_tests; it has no world size of its own, so
// they run only where a case of this suite launches them across its hosts).
std::vector<harness::TestCase> hosts_rank_tests(int world);
// Self-timed benchmark cases (harness::register_timed_benches): comm and DDP across hosts.
std::vector<harness::TestCase> hosts_benches();

// A rank of the host-failure check: all_reduces until its group fails. Called from register_all
// when TRAINBENCH_HOSTS_DEMO is set (the backend); returns the process's exit status.
int hosts_demo_main(const std::string& backend);

}  // namespace tb::suites
