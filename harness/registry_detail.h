// Harness-internal view of the registries in registry.cpp (not for suites).
#pragma once
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace tb::harness::detail {
const nlohmann::json& extra_run_info();  // what suites passed to add_run_info
// --filter as a regex; throws UsageError (runner.h) on a bad one.
// `pattern` as an ECMAScript regex, or a UsageError "invalid <what> regex ..." (a syntax error,
// or a pattern past the length and nesting bounds, which would overflow libstdc++'s stack).
std::regex compile_regex(const std::string& pattern, const std::string& what);
std::regex compile_filter(const std::string& filter);
}  // namespace tb::harness::detail
