#include "engine/memory/oom.h"

#include <sstream>

namespace tb::memory {

namespace {
// " by OP in MODULE (label LABEL)", omitting what is unknown.
void put_site(std::ostream& os, const Site& s, const char* by) {
  if (s.op) os << " " << by << " " << s.op;
  if (s.module) os << " in " << s.module;
  if (s.label) os << " (label " << s.label << ")";
}
}  // namespace

std::string format_oom(const OomReport& r) {
  std::ostringstream os;
  os << "out of memory: tried to allocate ";
  if (r.reason == "too_large") {
    os << r.requested << " bytes";
    put_site(os, r.site, "for");
    os << ", more than any allocation can hold (2^63 - 2 MiB); the size was computed wrongly or the tensor is "
          "far too large";
    return os.str();
  }
  os << format_bytes(int64_t(r.requested)) << " (" << r.requested << " bytes, tag " << tag_name(r.tag) << ")";
  put_site(os, r.site, "for");
  if (r.reason == "limit") os << " under a limit of " << format_bytes(r.limit) << " (TRAINBENCH_MEMORY_LIMIT)";
  else if (r.reason == "fail_at") os << ": refused by fault injection (TRAINBENCH_MEMORY_FAIL_AT or set_fail_at)";
  else os << ": the system refused a block of " << format_bytes(r.block);
  os << ". Held: " << format_bytes(r.allocated) << " by live tensors, " << format_bytes(r.cached_free)
     << " cached but free (largest free block " << format_bytes(r.largest_free_block) << "), "
     << format_bytes(r.reserved) << " reserved. Held by tag:";
  bool any = false;
  for (int t = 0; t < kNumTags; ++t)
    if (r.allocated_by_tag[size_t(t)] > 0) {
      os << " " << tag_name(Tag(t)) << "=" << format_bytes(r.allocated_by_tag[size_t(t)]);
      any = true;
    }
  if (!any) os << " none";
  if (!r.largest_live.empty()) {
    os << ". Largest live blocks:";
    for (size_t i = 0; i < r.largest_live.size(); ++i) {
      const auto& b = r.largest_live[i];
      os << (i ? ";" : "") << " " << format_bytes(b.size) << " (" << tag_name(b.tag) << ")";
      put_site(os, b.site, "made by");
    }
  }
  if (!r.snapshot_path.empty()) os << ". Snapshot: " << r.snapshot_path;
  if (r.reason == "limit") os << ". Reduce the batch size or raise the limit.";
  else os << ".";
  return os.str();
}

}  // namespace tb::memory
