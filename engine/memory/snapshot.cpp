#include "engine/memory/snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "engine/memory/oom.h"

namespace tb::memory {

namespace {

using nlohmann::json;

json str_or_null(const char* s) { return s ? json(s) : json(nullptr); }

void put_site(json& j, const Site& s) {
  j["op"] = str_or_null(s.op);
  j["module"] = str_or_null(s.module);
  j["label"] = str_or_null(s.label);
}

json by_tag(const std::array<int64_t, kNumTags>& a) {
  json j = json::object();
  for (int t = 0; t < kNumTags; ++t) j[tag_name(Tag(t))] = a[size_t(t)];
  return j;
}

json oom_json(const OomReport& r) {
  json j = {{"reason", r.reason},
            {"requested", r.requested},
            {"block", r.block},
            {"tag", tag_name(r.tag)},
            {"limit_bytes", r.limit},
            {"allocated_bytes", r.allocated},
            {"reserved_bytes", r.reserved},
            {"cached_free_bytes", r.cached_free},
            {"largest_free_block_bytes", r.largest_free_block},
            {"allocated_by_tag", by_tag(r.allocated_by_tag)},
            {"message", format_oom(r)}};
  put_site(j, r.site);
  json live = json::array();
  for (const auto& b : r.largest_live) {
    json e = {{"size", b.size}, {"tag", tag_name(b.tag)}};
    put_site(e, b.site);
    live.push_back(std::move(e));
  }
  j["largest_live"] = std::move(live);
  return j;
}

// This process's rank for the file name: the first set of the variables dist::world_from_env
// reads (engine/dist sits to the right of memory/, so it cannot be asked), else 0.
int64_t snapshot_rank() {
  for (const char* v : {"TRAINBENCH_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"})
    if (core::env_string(v)) return core::env_int64(v, 0, 0, int64_t(1) << 24);
  return 0;
}

}  // namespace

const char* action_name(Action a) {
  switch (a) {
    case Action::Alloc: return "alloc";
    case Action::Free: return "free";
    case Action::SegmentAlloc: return "segment_alloc";
    case Action::SegmentFree: return "segment_free";
    case Action::Oom: return "oom";
  }
  return "invalid";
}

void record_history(size_t max_entries) { record_history(cpu_allocator(), max_entries); }

Snapshot snapshot() { return snapshot(cpu_allocator()); }

std::string snapshot_json(const Snapshot& s, const std::string& reason, const OomReport* oom) {
  int64_t largest_free = 0;
  for (const auto& c : s.cached) largest_free = std::max(largest_free, c.size);
  json j = {{"format", "trainbench.memory_snapshot"},
            {"version", 1},
            {"reason", reason},
            {"rank", snapshot_rank()},
            {"pid", int64_t(::getpid())},
            {"device", "cpu"},
            {"time_us", s.time_us},
            {"limit_bytes", s.limit}};
  j["stats"] = {{"allocated_bytes", s.stats.allocated_bytes},
                {"reserved_bytes", s.stats.reserved_bytes},
                {"cached_free_bytes", s.stats.reserved_bytes - s.stats.allocated_bytes},
                {"largest_free_block_bytes", largest_free},
                {"peak_allocated_bytes", s.stats.peak_allocated_bytes},
                {"peak_reserved_bytes", s.stats.peak_reserved_bytes},
                {"num_allocs", s.stats.num_allocs},
                {"num_cache_hits", s.stats.num_cache_hits},
                {"num_system_allocs", s.stats.num_system_allocs},
                {"num_ooms", s.num_ooms},
                {"allocated_by_tag", by_tag(s.stats.allocated_by_tag)}};
  j["history"] = {{"max_entries", s.max_entries}, {"events", s.events.size()}, {"dropped", s.dropped_events}};
  json live = json::array();
  for (const auto& b : s.live) {
    json e = {{"address", b.address}, {"size", b.size}, {"requested", b.requested}, {"tag", tag_name(b.tag)}};
    put_site(e, b.site);
    e["time_us"] = b.time_us;
    live.push_back(std::move(e));
  }
  j["live"] = std::move(live);
  json cached = json::array();
  for (const auto& c : s.cached) cached.push_back({{"address", c.address}, {"size", c.size}});
  j["cached"] = std::move(cached);
  json events = json::array();
  for (const auto& ev : s.events) {
    json e = {{"time_us", ev.time_us}, {"action", action_name(ev.action)}, {"address", ev.address},
              {"size", ev.size},       {"requested", ev.requested},        {"tag", tag_name(ev.tag)}};
    put_site(e, ev.site);
    events.push_back(std::move(e));
  }
  j["events"] = std::move(events);
  if (oom) j["oom"] = oom_json(*oom);
  return j.dump();
}

std::string snapshot_file_name(int64_t rank) { return "memory_snapshot_rank" + std::to_string(rank) + ".json"; }

std::string write_snapshot(const std::string& dir, const Snapshot& s, const std::string& reason, const OomReport* oom) {
  namespace fs = std::filesystem;
  TB_CHECK(!dir.empty(), "write_snapshot", "no directory given");
  std::error_code ec;
  fs::create_directories(dir, ec);
  TB_CHECK(fs::is_directory(dir), "write_snapshot", "cannot create the snapshot directory '", dir,
           "': ", ec ? ec.message() : "not a directory");
  const std::string text = snapshot_json(s, reason, oom);
  const fs::path path = fs::path(dir) / snapshot_file_name(snapshot_rank());
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TB_CHECK(out.good(), "write_snapshot", "cannot write '", tmp.string(), "': ", std::strerror(errno));
    out << text << '\n';
    out.close();
    TB_CHECK(!out.fail(), "write_snapshot", "cannot write '", tmp.string(), "' (disk full?)");
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw core::Error("write_snapshot",
                      "cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message());
  }
  return path.string();
}

}  // namespace tb::memory
