// A fresh temporary directory for one test, removed with everything in it when the object goes
// out of scope: an ASSERT_* that fails returns from the test body, and a remove_all at the body's
// end would never run. mkdtemp makes the name unique, so two runs of the same test (a rerun, two
// processes at once) never share or delete each other's directory.
#pragma once
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace tb::testing {

class ScratchDir {
 public:
  // <temp dir>/<prefix>XXXXXX, created empty (mode 0700).
  explicit ScratchDir(const std::string& prefix) {
    std::string name = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(name.data()) == nullptr)
      throw std::runtime_error("ScratchDir: mkdtemp " + name + ": " + std::strerror(errno));
    path_ = name;
  }
  // Never throws: a destructor may run while a failed test unwinds.
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  operator const std::filesystem::path&() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& p) const { return path_ / p; }

 private:
  std::filesystem::path path_;
};

}  // namespace tb::testing
