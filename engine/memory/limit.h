// The memory cap's forms: bytes ("8G", "512M", "1073741824"), a fraction of the machine's memory
// ("0.25") or a percentage ("25%"). The machine's memory is /proc/meminfo's MemTotal, or the
// cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) when that is lower.
#pragma once
#include <cstdint>
#include <string_view>

namespace tb::memory {

// The memory this process may use: min(MemTotal, cgroup limit); a core::Error if neither can
// be read.
int64_t machine_memory_bytes();
// Parses a cap (0 = no cap) by the rules above; `name` is for the message only. A fraction must
// lie in (0, 1], a percentage in (0, 100]; anything else is a core::Error naming the forms.
int64_t parse_memory_limit(std::string_view name, std::string_view value);
// Same, with the machine's memory given (for tests).
int64_t parse_memory_limit(std::string_view name, std::string_view value, int64_t machine_bytes);

}  // namespace tb::memory
