// A scratch directory for fuzz targets whose parser reads files: fresh, in /dev/shm when writable
// (else $TMPDIR or /tmp), named by `prefix` and the pid, and removed when the process exits.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tb::fuzz {

inline std::string scratch_dir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp && *tmp ? tmp : "/tmp");
  const std::string dir = base + "/" + prefix + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  // atexit handlers run after the destructors of statics built before them: keep the path alive.
  static std::string* const keep = new std::string(dir);
  std::atexit([] {
    std::error_code e;
    std::filesystem::remove_all(*keep, e);
  });
  return dir;
}

}  // namespace tb::fuzz
