// Atomic file replacement with POSIX calls (open O_EXCL, write, fsync, rename). See atomic_file.h.
#include "engine/checkpoint/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/core/error.h"

namespace tb::checkpoint {

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) s += " (the disk is full: free space or save elsewhere)";
  if (err == EACCES || err == EPERM || err == EROFS) s += " (check the permissions of the directory)";
  if (err == ENOENT) s += " (check that the path exists)";
  return s;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

namespace {

// 8 hex digits naming this host (FNV-1a of its name): a pid is only meaningful on its own host,
// and a directory may be shared (NFS) between hosts.
const std::string& host_tag() {
  static const std::string tag = [] {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    uint32_t h = 2166136261u;
    for (const char* p = name; *p; ++p) h = (h ^ uint8_t(*p)) * 16777619u;
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", h);
    return std::string(buf);
  }();
  return tag;
}

std::string random_suffix() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(8, 'x');
  for (char& c : s) c = chars[gen() % 36];
  return s;
}

// Temporaries of `target_base` whose writer died (killed mid-save): named
// .<base>.tmp-<pid>-<host>-<random>, removed when <host> is this host and no process <pid> exists.
// Anything else (another host's, a live writer's, other naming) is left alone.
void remove_dead_writers_temporaries(const std::string& dir, const std::string& target_base) {
  const std::string prefix = "." + target_base + ".tmp-";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = n.substr(prefix.size());  // <pid>-<host>-<random>
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || dash > 10) continue;
    if (rest.compare(dash + 1, host_tag().size() + 1, host_tag() + "-") != 0) continue;
    long pid = 0;
    bool digits = true;
    for (size_t i = 0; i < dash; ++i) {
      digits &= rest[i] >= '0' && rest[i] <= '9';
      pid = pid * 10 + (rest[i] - '0');
    }
    if (!digits || pid <= 0 || pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) ::unlinkat(::dirfd(d), n.c_str(), 0);
  }
  ::closedir(d);
}

}  // namespace

AtomicWriter::AtomicWriter(std::string path, bool in_place) : path_(std::move(path)), in_place_(in_place) {
  TB_CHECK(!path_.empty() && path_.back() != '/', "checkpoint.write", "'", path_, "' is not a file path");
  if (in_place_) {
    tmp_ = path_;  // what abandon() removes
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      const int err = errno;
      tmp_.clear();  // not ours: never remove a file this writer did not create
      throw core::Error("checkpoint.write", "cannot create '" + path_ + "': " + errno_text(err));
    }
    return;
  }
  const size_t slash = path_.find_last_of('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  const std::string dir = parent_dir(path_);
  remove_dead_writers_temporaries(dir, base);
  // Same directory as the target: rename() is atomic only within one filesystem. The writer's
  // pid and host in the name let a later save prove the temporary stale if this one is killed.
  const std::string stem = dir + "/." + base + ".tmp-" + std::to_string(::getpid()) + "-" + host_tag() + "-";
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = stem + random_suffix();
    // 0644 less the umask, like any file a program creates (directories get 0755 less the umask).
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    TB_CHECK(fd_ >= 0 || (errno == EEXIST && attempt < 100), "checkpoint.write", "cannot create a temporary file in '",
             dir, "' for '", path_, "': ", errno_text(errno));
  }
}

AtomicWriter::~AtomicWriter() {
  if (!committed_) abandon();
}

void AtomicWriter::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

void AtomicWriter::write(const void* data, size_t n) {
  TB_CHECK(fd_ >= 0, "checkpoint.write", "'", path_, "' is already committed or abandoned");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB per call; loop on short writes and EINTR.
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      abandon();
      throw core::Error("checkpoint.write", "writing '" + path_ + "' failed: " + errno_text(err) +
                                                "; the previous file (if any) is untouched");
    }
    p += w;
    n -= size_t(w);
  }
}

void AtomicWriter::write_at(uint64_t pos, const void* data, size_t n) {
  TB_CHECK(fd_ >= 0, "checkpoint.write", "'", path_, "' is already committed or abandoned");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, std::min<size_t>(n, size_t(1) << 30), off_t(pos));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      // Not abandon(): other threads may still be writing to fd_; the owner's destructor
      // removes the temporary once they are done.
      const int err = w < 0 ? errno : ENOSPC;
      failed_ = true;
      throw core::Error("checkpoint.write", "writing '" + path_ + "' failed: " + errno_text(err) +
                                                "; the previous file (if any) is untouched");
    }
    p += w;
    pos += uint64_t(w);
    n -= size_t(w);
  }
}

void AtomicWriter::start_writeback(uint64_t pos, uint64_t n) noexcept {
#ifdef __linux__
  if (fd_ >= 0 && n > 0) ::sync_file_range(fd_, off_t(pos), off_t(n), SYNC_FILE_RANGE_WRITE);
#else
  (void)pos, (void)n;
#endif
}

void AtomicWriter::commit() {
  TB_CHECK(fd_ >= 0, "checkpoint.write", "'", path_, "' is already committed or abandoned");
  TB_CHECK(!failed_, "checkpoint.write", "'", path_, "' cannot be committed: a write to it failed");
  // fsync before rename: otherwise a crash can leave the new name pointing at unwritten blocks.
  if (::fsync(fd_) != 0) {
    const int err = errno;
    abandon();
    throw core::Error("checkpoint.write", "fsync of '" + path_ + "' failed: " + errno_text(err));
  }
  if (::close(fd_) != 0) {
    const int err = errno;
    fd_ = -1;
    abandon();
    throw core::Error("checkpoint.write", "closing '" + path_ + "' failed: " + errno_text(err));
  }
  fd_ = -1;
  if (in_place_) {  // durable; its directory entry is the caller's to make durable
    committed_ = true;
    tmp_.clear();
    return;
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    abandon();
    throw core::Error("checkpoint.write",
                      "renaming the temporary file over '" + path_ + "' failed: " + errno_text(err));
  }
  committed_ = true;
  tmp_.clear();
  fsync_dir(parent_dir(path_));  // makes the rename itself durable
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicWriter w(path);
  w.write(content);
  w.commit();
}

int open_regular_file(const std::string& path, std::string& problem) {
  // O_NONBLOCK: open(2) of a FIFO returns at once instead of waiting for a writer; fstat then
  // refuses it. O_NOCTTY: a terminal named here does not become ours.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    problem = "cannot open: " + errno_text(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    problem = "cannot stat: " + errno_text(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "something else";
    problem = std::string("is ") + kind + ", not a regular file";
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // a no-op for regular files on Linux
  return fd;
}

std::string read_small_file(const std::string& path, size_t max_bytes) {
  std::string problem;
  const int fd = open_regular_file(path, problem);
  TB_CHECK(fd >= 0, "checkpoint.read", "'", path, "': ", problem);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw core::Error("checkpoint.read", "reading '" + path + "' failed: " + errno_text(err));
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
    if (out.size() > max_bytes) {
      ::close(fd);
      throw core::Error("checkpoint.read", "'" + path + "' is larger than " + std::to_string(max_bytes) +
                                               " bytes; it is not the small file expected here");
    }
  }
  ::close(fd);
  return out;
}

void pread_exact(int fd, uint64_t pos, void* dst, size_t n, const std::string& path) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t(1) << 30), off_t(pos));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw core::Error("checkpoint.load", "'" + path + "': read failed: " + errno_text(errno));
    if (r == 0)
      throw core::Error("checkpoint.load",
                        "'" + path + "': unexpected end of file (was it truncated while being read?)");
    p += r;
    pos += uint64_t(r);
    n -= size_t(r);
  }
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TB_CHECK(fd >= 0, "checkpoint.write", "cannot open directory '", dir, "' to fsync it: ", errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on directories (EINVAL); their renames are then as durable as
  // they can be made.
  TB_CHECK(rc == 0 || err == EINVAL, "checkpoint.write", "fsync of directory '", dir, "' failed: ", errno_text(err));
}

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TB_CHECK(fd >= 0, "checkpoint.write", "cannot open '", path, "': ", errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  TB_CHECK(rc == 0, "checkpoint.write", "fsync of '", path, "' failed: ", errno_text(err));
}

void make_dirs(const std::string& dir) {
  TB_CHECK(!dir.empty(), "checkpoint.mkdir", "empty directory path");
  std::string cur;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos) next = dir.size();
    cur = dir.substr(0, next);
    pos = next + 1;
    if (cur.empty()) continue;  // leading '/'
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      throw core::Error("checkpoint.mkdir", "cannot create directory '" + cur + "': " + errno_text(errno));
  }
  struct stat st {};
  TB_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "checkpoint.mkdir", "'", dir,
           "' exists and is not a directory");
}

}  // namespace tb::checkpoint
