// Fuzz target: the Fashion-MNIST reader (gzip or plain IDX headers, dimensions, counts, labels).
// Input layout: a 4-byte little-endian length L, then L bytes of the images file, then the
// labels file. Both are written into a directory that FashionMNIST reads; it must load or throw
// core::Error, and a loaded set must have one label in 0..9 per 28x28 image.
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/fashion_mnist.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

namespace fs = std::filesystem;

const std::string& data_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp && *tmp ? tmp : "/tmp");
    const std::string d = base + "/tb_fuzz_idx_" + std::to_string(::getpid());
    fs::create_directories(d);
    static std::string* const keep = new std::string(d);  // atexit runs after the statics' destructors
    std::atexit([] {
      std::error_code e;
      fs::remove_all(*keep, e);
    });
    return d;
  }();
  return dir;
}

void write(const std::string& path, const uint8_t* p, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (n) std::fwrite(p, 1, n, f);
  std::fclose(f);
}

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

std::string idx(uint32_t n, bool images, uint8_t fill) {
  std::string s = be32(images ? 0x803 : 0x801) + be32(n);
  if (images) s += be32(28) + be32(28);
  for (uint32_t i = 0; i < n * (images ? 784u : 1u); ++i) s += char(images ? (i * 7 + fill) & 0xff : (i + fill) % 10);
  return s;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);  // 31: gzip wrapper
  std::string out(deflateBound(&z, uLong(in.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string pack(const std::string& images, const std::string& labels) {
  const uint32_t n = uint32_t(images.size());
  return std::string{char(n), char(n >> 8), char(n >> 16), char(n >> 24)} + images + labels;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t n = uint32_t(data[0]) | uint32_t(data[1]) << 8 | uint32_t(data[2]) << 16 | uint32_t(data[3]) << 24;
  const size_t split = std::min<size_t>(n, size - 4);
  const std::string& dir = data_dir();
  write(dir + "/train-images-idx3-ubyte", data + 4, split);
  write(dir + "/train-labels-idx1-ubyte", data + 4 + split, size - 4 - split);
  try {
    const tb::data::FashionMNIST ds(dir, /*train=*/true, /*normalize=*/size % 2 == 0);
    if (ds.images().size(0) != ds.labels().size(0) || ds.images().size(1) != 784) __builtin_trap();
    const int64_t* lab = ds.labels().data_ptr<int64_t>();
    for (int64_t i = 0; i < ds.size(); ++i)
      if (lab[i] < 0 || lab[i] > 9) __builtin_trap();
    ++tb_fuzz_accepted;
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  out.push_back(pack(idx(2, true, 1), idx(2, false, 3)));
  out.push_back(pack(idx(1, true, 9), idx(1, false, 0)));
  out.push_back(pack(idx(0, true, 0), idx(0, false, 0)));
  out.push_back(pack(gzip(idx(3, true, 5)), gzip(idx(3, false, 7))));
  out.push_back(pack(gzip(idx(2, true, 5)), idx(2, false, 1)));
  // Hostile: counts that disagree, absurd dimensions, a truncated gzip stream, labels past 9.
  out.push_back(pack(idx(2, true, 1), idx(3, false, 3)));
  std::string huge = idx(1, true, 0);
  huge.replace(4, 12, be32(0xffffffffu) + be32(0xffffffffu) + be32(0xffffffffu));
  out.push_back(pack(huge, idx(1, false, 0)));
  const std::string gz = gzip(idx(2, true, 2));
  out.push_back(pack(gz.substr(0, gz.size() / 2), idx(2, false, 0)));
  std::string bad_label = idx(2, false, 0);
  bad_label.back() = char(10);
  out.push_back(pack(idx(2, true, 0), bad_label));
}
