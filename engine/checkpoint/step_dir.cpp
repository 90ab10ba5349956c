// Step directories: see step_dir.h.
#include "engine/checkpoint/step_dir.h"

#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28 with _GNU_SOURCE)
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <random>
#include <utility>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"

namespace tb::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStagingTag = ".staging-";

void prune(const std::string& dir, int64_t keep_last, const std::string& latest) {
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const int64_t s = parse_step_name(n);
    if (s >= 0 && e.is_directory(ec)) steps.emplace_back(s, n);
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + size_t(keep_last) < steps.size(); ++i)
    if (steps[i].second != latest) remove_tree_quietly(dir + "/" + steps[i].second);
}

}  // namespace

std::string step_name(int64_t step) { return "step-" + std::to_string(step); }

int64_t parse_step_name(const std::string& s) {
  if (s.rfind("step-", 0) != 0 || s.size() == 5 || s.size() > 5 + 18) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

std::string step_error(int64_t step) {
  if (step >= 0 && step <= kMaxStep) return "";
  return "step must be in 0.." + std::to_string(kMaxStep) + " (a step directory name holds at most 18 digits), got " +
         std::to_string(step);
}

std::string new_save_id() {
  std::random_device rd;
  const uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void remove_tree_quietly(const std::string& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

void remove_stale_staging(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if ((n.rfind(".step-", 0) == 0 && n.find(kStagingTag) != std::string::npos) || n.rfind(".latest.tmp-", 0) == 0)
      remove_tree_quietly(e.path().string());
  }
}

std::string read_latest_name(const std::string& dir) {
  std::string s = read_small_file(dir + "/latest", 4096);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  TB_CHECK(parse_step_name(s) >= 0, "checkpoint.load", "'", dir, "/latest' holds '", s,
           "', not a step directory name like 'step-100'; the file is corrupt: point it at an existing step directory");
  return s;
}

namespace {

void move_into_place(const std::string& dir, const std::string& staging, const std::string& final_dir,
                     const std::string& name) {
  if (::rename(staging.c_str(), final_dir.c_str()) == 0) return;
  const int err = errno;
  TB_CHECK(err == EEXIST || err == ENOTEMPTY, "checkpoint.save", "cannot move '", staging, "' to '", final_dir,
           "': ", errno_text(err));
  // step-<N> exists (the same step saved again): swap the two directories atomically, so a
  // `latest` naming step-<N> sees the old or the new contents, never a mix or nothing.
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    remove_tree_quietly(staging);  // now holds the old contents
    return;
  }
  const int xerr = errno;
  std::string current;
  try {
    current = read_latest_name(dir);
  } catch (const core::Error&) {
  }
  TB_CHECK(current != name, "checkpoint.save", "'", final_dir,
           "' exists, is the latest checkpoint, and this filesystem cannot ", "exchange directories atomically (",
           errno_text(xerr), "); save under a new step number");
  remove_tree_quietly(final_dir);
  TB_CHECK(::rename(staging.c_str(), final_dir.c_str()) == 0, "checkpoint.save", "cannot move '", staging, "' to '",
           final_dir, "': ", errno_text(errno));
}

}  // namespace

void install_step_dir(const std::string& dir, const std::string& staging, const std::string& final_dir,
                      const std::string& name) {
  move_into_place(dir, staging, final_dir, name);
  fsync_dir(dir);
}

std::string make_staging_dir(const std::string& dir, const std::string& name) {
  // mkdir, not mkdtemp: 0755 less the umask like every directory a program creates (mkdtemp's
  // 0700 made step directories private while their files are 0644).
  for (int attempt = 0;; ++attempt) {
    std::string staging = dir + "/." + name + kStagingTag + new_save_id();
    if (::mkdir(staging.c_str(), 0755) == 0) return staging;
    TB_CHECK(errno == EEXIST && attempt < 100, "checkpoint.save", "cannot create a staging directory in '", dir,
             "': ", errno_text(errno));
  }
}

void commit_latest(const std::string& dir, const std::string& name, int64_t keep_last) {
  write_file_atomic(dir + "/latest", name + "\n");
  if (keep_last > 0) prune(dir, keep_last, name);
}

}  // namespace tb::checkpoint
