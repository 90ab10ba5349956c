// Harness-internal view of the registries in registry.cpp (not for suites).
#pragma once
#include <nlohmann/json.hpp>

namespace tb::harness::detail {
const nlohmann::json& extra_run_info();  // what suites passed to add_run_info
}  // namespace tb::harness::detail
