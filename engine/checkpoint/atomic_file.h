// Crash-safe file replacement: write to a temporary file in the target's directory, fsync it,
// rename it over the target, fsync the directory. A reader (or a process restarted after kill -9
// or power loss) sees either the old file or the complete new one, never a mix.
// This file is POSIX plumbing only; it knows nothing of tensors or file formats.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace tb::checkpoint {

// Writes one file atomically. Every write is checked (a full disk is an error naming the file,
// not a short file); on any error, or if destroyed without commit(), the temporary file is
// removed and the target is untouched. The temporary, .<name>.tmp-<pid>-<host>-<random>, is
// created 0644 less the umask; the constructor first removes the temporaries of the same target
// left by writers on this host whose process no longer exists (a save killed mid-way).
class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path) : AtomicWriter(std::move(path), false) {}
  // in_place: writes `path` itself (created here; it must not exist), and commit() only fsyncs and
  // closes it, leaving its directory entry to the caller: for a file in a staging directory that
  // is moved into place atomically after its files are durable (its directory is fsynced then).
  // Until commit() succeeds a failure or the destructor removes `path`.
  AtomicWriter(std::string path, bool in_place);
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Writes n bytes at byte `pos` of the file (pwrite), for a writer that fills the file out of
  // order. Several threads may call it at once (but not together with write()). An error throws
  // and marks the writer failed: commit() then refuses, and the destructor removes the temporary.
  void write_at(uint64_t pos, const void* data, size_t n);
  // A hint: start writing bytes [pos, pos + n) to the disk now (Linux sync_file_range), so that
  // commit()'s fsync, which alone makes them durable, has less left to wait for. Thread-safe.
  void start_writeback(uint64_t pos, uint64_t n) noexcept;
  // fsync the file, rename over the target, fsync the directory (in_place: fsync and close).
  void commit();
  const std::string& path() const { return path_; }

 private:
  void abandon() noexcept;
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
  bool in_place_ = false;
  std::atomic<bool> failed_{false};  // a write_at failed (set from any thread)
};

// The whole content at once.
void write_file_atomic(const std::string& path, std::string_view content);
// Opens `path` (after symlinks) read-only if it is a regular file, without blocking on the way:
// open(2) of a FIFO waits for a writer for ever and a device's data never ends, so every reader
// of checkpoint files opens them here. Returns the descriptor (O_CLOEXEC, blocking reads), or -1
// with `problem` set for the caller's message: "cannot open: <reason>" or "is a FIFO, not a
// regular file" (a directory, a character device, ...).
int open_regular_file(const std::string& path, std::string& problem);
// Reads a whole (small) regular file; throws core::Error naming the file when it cannot.
std::string read_small_file(const std::string& path, size_t max_bytes = size_t(1) << 26);
// Reads exactly n bytes at absolute offset pos of fd (retrying short reads and EINTR); throws
// core::Error naming `path` on an error or an early end of file (a file truncated under us).
void pread_exact(int fd, uint64_t pos, void* dst, size_t n, const std::string& path);
// fsync a directory, so renames and creations inside it survive a crash.
void fsync_dir(const std::string& dir);
// fsync an existing file (used to make a third-party writer's file as durable as ours).
void fsync_file(const std::string& path);
// mkdir -p; throws core::Error on failure.
void make_dirs(const std::string& dir);
// The directory part of a path ("." when it has none).
std::string parent_dir(const std::string& path);
// A description of errno for messages, with a hint for the common cases.
std::string errno_text(int err);

}  // namespace tb::checkpoint
