// See Note [Output files] in output_file.h.
#include "harness/output_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

struct Target {
  enum Kind { kCreate, kRegular, kDescriptor, kInPlace } kind;
  fs::path path;    // after following symlinks
  int fd = -1;      // kDescriptor
  mode_t mode = 0;  // kRegular: the permission bits to keep
};

// "<path>: <problem>", with where a symlink led when that differs.
std::runtime_error failure(const fs::path& asked, const fs::path& real, const std::string& what) {
  std::string where = asked.string();
  if (real != asked) where += " (-> " + real.string() + ")";
  return std::runtime_error(where + ": " + what);
}

// /dev/stdout and friends name one of this process's descriptors.
std::optional<int> own_descriptor(const fs::path& p) {
  static const std::regex re(R"(^/(?:dev/(stdin|stdout|stderr)|dev/fd/(\d{1,9})|proc/(self|\d{1,9})/fd/(\d{1,9}))$)");
  const std::string s = p.lexically_normal().string();
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  if (m[1].matched) return m[1] == "stdin" ? 0 : m[1] == "stdout" ? 1 : 2;
  if (m[2].matched) return std::stoi(m[2]);
  if (m[3] != "self" && std::stol(m[3]) != static_cast<long>(::getpid())) return std::nullopt;
  return std::stoi(m[4]);
}

Target resolve(const fs::path& asked) {
  if (asked.empty()) throw std::runtime_error("empty output path");
  fs::path p = asked;
  for (int hops = 0;; ++hops) {
    if (const auto fd = own_descriptor(p)) return {Target::kDescriptor, p, *fd};
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) return {Target::kCreate, p};
      if (err == ENOTDIR) throw failure(asked, p, "a folder on its path is a file");
      throw failure(asked, p, std::strerror(err));
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) throw failure(asked, p, "too many levels of symbolic links");
      std::error_code ec;
      const fs::path to = fs::read_symlink(p, ec);
      if (ec) throw failure(asked, p, "cannot read the symbolic link: " + ec.message());
      p = to.is_absolute() ? to : p.parent_path() / to;
      continue;
    }
    if (S_ISREG(st.st_mode)) return {Target::kRegular, p, -1, st.st_mode & 07777};
    if (S_ISDIR(st.st_mode))
      throw failure(asked, p, "is a directory; name a file, e.g. " + (asked / "result.json").string());
    if (S_ISSOCK(st.st_mode)) throw failure(asked, p, "is a socket; results go to a file, a device or a FIFO");
    return {Target::kInPlace, p};
  }
}

// The folder a new file would be created in: the nearest existing ancestor.
fs::path existing_folder(const fs::path& p) {
  fs::path d = p.parent_path();
  while (!d.empty() && !fs::exists(d)) d = d.parent_path();
  return d.empty() ? fs::path(".") : d;
}

// Writes everything, through EINTR, short writes and a non-blocking descriptor. Returns errno or 0.
int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n >= 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else if (errno != EINTR) {
      return errno;
    }
  }
  return 0;
}

void write_atomically(const fs::path& asked, const Target& t, std::string_view bytes) {
  const fs::path& path = t.path;
  if (path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (ec) throw failure(asked, path, "cannot create its folder: " + ec.message());
  }
  // Same folder as the target so rename() stays on one filesystem and is atomic.
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0 && errno == EEXIST) {  // left by a killed process that had our pid
    ::unlink(tmp.c_str());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  }
  if (fd < 0) throw failure(asked, path, "cannot create " + tmp.string() + ": " + std::strerror(errno));
  int err = 0;
  if (t.kind == Target::kRegular && ::fchmod(fd, t.mode) != 0) err = errno;
  if (!err) err = write_all(fd, bytes);
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    throw failure(asked, path, std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace

void check_output_path(const fs::path& path) {
  const Target t = resolve(path);
  if (t.kind == Target::kDescriptor) return;
  if (t.kind == Target::kInPlace) {
    if (::access(t.path.c_str(), W_OK) != 0) throw failure(path, t.path, std::strerror(errno));
    return;
  }
  // The temporary is created beside the file, so its folder (or the first that exists) must be
  // writable.
  const fs::path dir = existing_folder(t.path);
  if (!fs::is_directory(dir)) throw failure(path, t.path, dir.string() + " is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw failure(path, t.path, "cannot create files in " + dir.string() + ": " + std::strerror(errno));
}

bool is_plain_output_path(const fs::path& path) {
  try {
    const Target t = resolve(path);
    return t.kind == Target::kCreate || t.kind == Target::kRegular;
  } catch (const std::runtime_error&) {
    return false;
  }
}

void write_output_file(const fs::path& path, std::string_view bytes) {
  const Target t = resolve(path);
  switch (t.kind) {
    case Target::kDescriptor: {
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      if (const int err = write_all(t.fd, bytes))
        throw failure(path, t.path, std::string("cannot write: ") + std::strerror(err));
      return;
    }
    case Target::kInPlace: {
      // No O_CREAT or O_TRUNC: the special file is used as it is (a FIFO blocks here until a
      // reader opens it, as a shell redirection does).
      const int fd = ::open(t.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) throw failure(path, t.path, std::string("cannot open: ") + std::strerror(errno));
      struct stat st {};
      if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        // Replaced by a regular file since resolve(): that one gets the atomic treatment.
        ::close(fd);
        write_atomically(path, {Target::kRegular, t.path, -1, st.st_mode & 07777}, bytes);
        return;
      }
      int err = write_all(fd, bytes);
      if (::close(fd) != 0 && !err) err = errno;
      if (err) throw failure(path, t.path, std::string("cannot write: ") + std::strerror(err));
      return;
    }
    case Target::kCreate:
    case Target::kRegular: write_atomically(path, t, bytes); return;
  }
}

}  // namespace tb::harness
