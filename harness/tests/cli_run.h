// Runs `trainbench args...` through the CLI's main (harness/cli.h) in this process, with stdout
// and stderr captured through temporary files: for the tests of subcommands.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli.h"

namespace tb::harness::testing {

// What `fn` wrote to file descriptor `fd` (1 or 2), through C++ streams, stdio or a child process.
template <class Fn>
std::string capture_fd(int fd, Fn&& fn) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  char name[] = "/tmp/tb_cli_capture_XXXXXX";
  const int tmp = ::mkstemp(name);
  const int saved = ::dup(fd);
  ::dup2(tmp, fd);
  fn();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::dup2(saved, fd);
  ::close(saved);
  ::close(tmp);
  std::ifstream in(name);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(name);
  return text.str();
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

// Runs `trainbench args...` with stdout and stderr captured through temporary files.
inline CliRun run(std::vector<std::string> args) {
  args.insert(args.begin(), "trainbench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CliRun r;
  r.err = capture_fd(2, [&] {
    r.out = capture_fd(1, [&] { r.code = tb::harness::main(int(argv.size()), argv.data()); });
  });
  return r;
}

}  // namespace tb::harness::testing
