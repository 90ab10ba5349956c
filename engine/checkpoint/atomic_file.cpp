// Atomic file replacement with POSIX calls (mkstemp, write, fsync, rename). See atomic_file.h.
#include "engine/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)) {
  TB_CHECK(!path_.empty() && path_.back() != '/', "checkpoint.write", "'", path_, "' is not a file path");
  const size_t slash = path_.find_last_of('/');
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  // Same directory as the target: rename() is atomic only within one filesystem.
  tmp_ = parent_dir(path_) + "/." + base + ".tmp-XXXXXX";
  std::vector<char> buf(tmp_.begin(), tmp_.end());
  buf.push_back('\0');
  fd_ = ::mkstemp(buf.data());
  TB_CHECK(fd_ >= 0, "checkpoint.write", "cannot create a temporary file in '", parent_dir(path_), "' for '", path_,
           "': ", errno_text(errno));
  tmp_.assign(buf.data());
  ::fchmod(fd_, 0644);  // mkstemp makes 0600; a checkpoint is an ordinary file
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

void AtomicWriter::commit() {
  TB_CHECK(fd_ >= 0, "checkpoint.write", "'", path_, "' is already committed or abandoned");
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
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    abandon();
    throw core::Error("checkpoint.write", "renaming the temporary file over '" + path_ + "' failed: " +
                                              errno_text(err));
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

std::string read_small_file(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TB_CHECK(fd >= 0, "checkpoint.read", "cannot open '", path, "': ", errno_text(errno));
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

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  TB_CHECK(fd >= 0, "checkpoint.write", "cannot open directory '", dir, "' to fsync it: ", errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on directories (EINVAL); their renames are then as durable as
  // they can be made.
  TB_CHECK(rc == 0 || err == EINVAL, "checkpoint.write", "fsync of directory '", dir, "' failed: ",
           errno_text(err));
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
  struct stat st{};
  TB_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "checkpoint.mkdir", "'", dir,
           "' exists and is not a directory");
}

}  // namespace tb::checkpoint
