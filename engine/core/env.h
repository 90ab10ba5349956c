// The one place environment variables are read and parsed. Every parse is strict: the whole
// value must be of the accepted form (no leading/trailing space, no trailing junk, no silent
// wrap-around), else a core::Error names the variable, its value and the form it accepts.
// An unset or empty variable means "use the default". See docs/env.md for the table of
// every variable the engine, harness and suites read.
//
// The parse_* functions take the variable name only for the message, so values from elsewhere
// (command-line flags, config files) can be parsed by the same rules.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tb::core {

// A decimal integer, optionally signed, within [lo, hi]: "42", "-1". No hex, no exponent.
int64_t parse_int64(std::string_view name, std::string_view value, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
// A decimal unsigned integer within [0, 2^64): for seeds.
uint64_t parse_uint64(std::string_view name, std::string_view value);
// A finite decimal number within [lo, hi]: "2", "0.5", "1e-3" (no inf, no nan, no hex floats).
double parse_double(std::string_view name, std::string_view value, double lo, double hi);
// A byte count: a non-negative integer with an optional binary suffix K, M, G, T (or KiB, MiB,
// GiB, TiB; a trailing B alone is allowed: "512B"). "1.5G" is accepted when it is a whole number
// of bytes. The result fits in int64; larger is an error, never a wrap.
int64_t parse_bytes(std::string_view name, std::string_view value);
// 1/0, true/false, yes/no, on/off (any case).
bool parse_bool(std::string_view name, std::string_view value);
// One of `choices`, exactly (case-sensitive).
std::string parse_choice(std::string_view name, std::string_view value,
                         std::initializer_list<std::string_view> choices);
// A CPU list as taskset -c and cpusets write it: "0-3,8,10-11": CPUs and ascending ranges in
// [0, max_cpu], comma-separated, no spaces, no CPU twice. Returns the CPUs in the order written.
std::vector<int> parse_cpu_list(std::string_view name, std::string_view value, int max_cpu = 1023);

// The raw value, or nullopt when the variable is unset or empty.
std::optional<std::string> env_string(const char* name);
// The raw value, or `fallback` when the variable is unset or empty.
std::string env_or(const char* name, std::string fallback = {});
int64_t env_int64(const char* name, int64_t fallback, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
uint64_t env_uint64(const char* name, uint64_t fallback);
double env_double(const char* name, double fallback, double lo, double hi);
int64_t env_bytes(const char* name, int64_t fallback);
bool env_bool(const char* name, bool fallback);
std::string env_choice(const char* name, std::string_view fallback, std::initializer_list<std::string_view> choices);

}  // namespace tb::core
