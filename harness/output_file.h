// Writing a file whose path the user chose (`--json PATH`): the one place the harness decides
// between replacing a file atomically and writing into it in place.
//
// Note [Output files]: a path names what the user means to write to.
//  - A regular file, or a path that does not exist yet: written atomically (a temporary in the
//    same folder, fsync, rename), so a crash or a concurrent reader never sees half a file; an
//    existing file keeps its permission bits; missing parent folders are created.
//  - A symlink: followed; its final target is written by these rules and the link stays a link
//    (as `open()` and PyTorch's `torch.save` do).
//  - /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: this process's descriptor N, written
//    after the C++ and C streams are flushed, so the bytes land in order with the rest of the
//    output (reopening such a path would restart a redirected file at offset 0).
//  - Any other special file (character or block device, FIFO): opened for writing in place, never
//    created, truncated, renamed or removed: /dev/null stays a device, a FIFO's reader gets the
//    bytes. Replacing it with a regular file (the atomic path) would destroy it.
//  - A directory, a socket, a symlink loop: a std::runtime_error naming the path and the problem.
// reports/trainbench_reports/output.py applies the same rules to the report's files.
#pragma once
#include <filesystem>
#include <string_view>

namespace tb::harness {

// Checks, without writing, that `path` can be written by write_output_file's rules (so a run can
// refuse a bad --json before spending an hour on its cases). Throws std::runtime_error
// "<path>: <problem>" for a directory, a socket, a symlink loop or a parent that is a file.
void check_output_path(const std::filesystem::path& path);

// Writes `bytes` to `path` by the rules of Note [Output files]. Throws std::runtime_error naming
// the path and the system's reason on failure (a partial temporary is removed).
void write_output_file(const std::filesystem::path& path, std::string_view bytes);

// True when `path` (after symlinks) is a regular file or does not exist: the cases where files
// may be put beside it (e.g. the ranks/ folder next to the JSON).
bool is_plain_output_path(const std::filesystem::path& path);

}  // namespace tb::harness
