// The Fashion-MNIST reader: gunzip (zlib), IDX header checks, pixel decoding. See fashion_mnist.h.
//
// IDX layout (big-endian): magic 0x00000803 (unsigned bytes, 3 dims) or 0x00000801 (1 dim), then
// one uint32 per dimension, then the data row-major: images (N, 28, 28), labels (N).
#include "engine/data/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/tensor/factories.h"

namespace tb::data {

namespace {

constexpr const char* kInstallHint =
    "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), or pass the "
    "directory holding train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
    "t10k-labels-idx1-ubyte.gz as root";

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// root/name.gz, or root/name when only the uncompressed file exists.
std::string resolve(const std::string& root, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(root) / (name + ".gz");
  const fs::path plain = fs::path(root) / name;
  std::error_code ec;
  if (fs::is_regular_file(gz, ec)) return gz.string();
  if (fs::is_regular_file(plain, ec)) return plain.string();
  throw core::Error("FashionMNIST", "missing file " + gz.string() + " (nor " + plain.string() +
                                        "); the directory exists but lacks it: " + kInstallHint);
}

struct Idx {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> bytes;  // the whole file; data starts at `data_offset`
  size_t data_offset = 0;
};

// Parses and checks an IDX file of unsigned bytes with `rank` dimensions.
Idx read_idx(const std::string& path, uint32_t rank) {
  Idx idx;
  idx.bytes = FashionMNIST::read_file(path);
  const uint32_t magic = 0x00000800u | rank;
  const size_t header = 4 + 4 * size_t(rank);
  TB_CHECK(idx.bytes.size() >= header, "FashionMNIST", path, " is truncated: ", idx.bytes.size(),
           " bytes, shorter than its ", header, "-byte IDX header; re-download it or reinstall dataset-fashion-mnist");
  TB_CHECK(be32(idx.bytes.data()) == magic, "FashionMNIST", path, " is not an IDX file of ", rank,
           "-D unsigned bytes: magic number 0x", std::hex, be32(idx.bytes.data()), ", expected 0x", magic, std::dec,
           "; the file is corrupt or not Fashion-MNIST");
  uint64_t count = 1;
  bool overflow = false;
  for (uint32_t d = 0; d < rank; ++d) {
    idx.dims.push_back(be32(idx.bytes.data() + 4 + 4 * d));
    overflow |= __builtin_mul_overflow(count, uint64_t(idx.dims.back()), &count);
  }
  // A wrapped product could equal the data's size and pass the checks below.
  TB_CHECK(!overflow, "FashionMNIST", path, " is corrupt: its dimensions' product overflows 64 bits");
  idx.data_offset = header;
  const uint64_t have = idx.bytes.size() - header;
  TB_CHECK(have >= count, "FashionMNIST", path, " is truncated: its header promises ", count, " bytes of data but ",
           have, " follow; re-download it or reinstall dataset-fashion-mnist");
  TB_CHECK(have == count, "FashionMNIST", path, " is corrupt: ", have - count,
           " bytes follow the data its header describes");
  return idx;
}

}  // namespace

std::vector<uint8_t> FashionMNIST::read_file(const std::string& path, size_t max_bytes) {
  // A gzip file ends with its uncompressed size mod 2^32 (ISIZE): a hint that spares the
  // output buffer repeated growth (47 MB for the training images). Only a hint: the loop below
  // grows the buffer whatever the file says.
  size_t hint = 0;
  {
    std::ifstream raw(path, std::ios::binary | std::ios::ate);
    TB_CHECK(raw.good(), "FashionMNIST", "cannot open ", path, " (", std::strerror(errno), ")");
    const std::streamoff size = raw.tellg();
    unsigned char head[2] = {0, 0}, tail[4] = {0, 0, 0, 0};
    if (size >= 18) {
      raw.seekg(0);
      raw.read(reinterpret_cast<char*>(head), 2);
      raw.seekg(size - 4);
      raw.read(reinterpret_cast<char*>(tail), 4);
      if (raw.good() && head[0] == 0x1f && head[1] == 0x8b)
        hint = size_t(tail[0]) | size_t(tail[1]) << 8 | size_t(tail[2]) << 16 | size_t(tail[3]) << 24;
      // Deflate expands at most ~1032:1, so a larger ISIZE is a lie (a corrupt or hostile file
      // would otherwise make an 18-byte file allocate a gigabyte up front).
      hint = std::min<size_t>(hint, size_t(size) * 1032);
    }
  }
  gzFile f = gzopen(path.c_str(), "rb");  // reads a plain file transparently too
  TB_CHECK(f != nullptr, "FashionMNIST", "cannot open ", path, " (", std::strerror(errno), ")");
  gzbuffer(f, 1 << 18);
  // One byte past max_bytes is room enough to tell that a file is too large.
  std::vector<uint8_t> out(std::min(std::clamp<size_t>(hint + 1, size_t(1) << 16, size_t(1) << 30), max_bytes + 1));
  size_t used = 0;
  std::string error;
  while (true) {
    if (used == out.size()) {
      if (used > max_bytes) {
        gzclose(f);
        throw core::Error("FashionMNIST", path + " decompresses to more than " + std::to_string(max_bytes) +
                                              " bytes: not a Fashion-MNIST file (a corrupt or hostile one)");
      }
      out.resize(std::min(out.size() * 2, max_bytes + 1));
    }
    const unsigned want = unsigned(std::min<size_t>(out.size() - used, size_t(1) << 30));
    const int got = gzread(f, out.data() + used, want);
    if (got < 0) {
      int code = 0;
      error = gzerror(f, &code);
      break;
    }
    used += size_t(got);
    if (got == 0) {
      // End of input: a gzip stream cut short reports Z_BUF_ERROR here; a CRC mismatch
      // Z_DATA_ERROR (from gzread above).
      int code = 0;
      const char* msg = gzerror(f, &code);
      if (code != Z_OK) error = msg;
      break;
    }
  }
  gzclose(f);
  TB_CHECK(error.empty(), "FashionMNIST", path, " is truncated or corrupt (zlib: ", error,
           "); re-download it or reinstall dataset-fashion-mnist");
  out.resize(used);
  return out;
}

FashionMNIST::FashionMNIST(std::string root, bool train, bool normalize) : train_(train), normalize_(normalize) {
  std::error_code ec;
  TB_CHECK(std::filesystem::is_directory(root, ec), "FashionMNIST", "dataset directory '", root, "' does not exist; ",
           kInstallHint);
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_path = resolve(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = resolve(root, prefix + "-labels-idx1-ubyte");
  const Idx im = read_idx(images_path, 3);
  const Idx lb = read_idx(labels_path, 1);
  TB_CHECK(im.dims[1] == kRows && im.dims[2] == kCols, "FashionMNIST", images_path, " holds images of ", im.dims[1],
           "x", im.dims[2], " pixels, expected 28x28: not Fashion-MNIST");
  TB_CHECK(im.dims[0] == lb.dims[0], "FashionMNIST", images_path, " holds ", im.dims[0], " images but ", labels_path,
           " holds ", lb.dims[0], " labels; the two files are from different sets");
  const int64_t n = im.dims[0];

  // torchvision's arithmetic, in float32: ToTensor (p / 255), then Normalize ((x - mean) / std).
  float lut[256];
  const float mean = float(kMean), stdev = float(kStd);
  for (int v = 0; v < 256; ++v) {
    const float x = float(v) / 255.0f;
    lut[v] = normalize ? (x - mean) / stdev : x;
  }
  images_ = empty({n, kPixels}, DType::Float32);
  float* px = images_.data_ptr<float>();
  const uint8_t* src = im.bytes.data() + im.data_offset;
  const int64_t total = n * kPixels;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < total; ++i) px[i] = lut[src[i]];

  labels_ = empty({n}, DType::Int64);
  int64_t* lab = labels_.data_ptr<int64_t>();
  const uint8_t* lsrc = lb.bytes.data() + lb.data_offset;
  for (int64_t i = 0; i < n; ++i) {
    TB_CHECK(lsrc[i] < kClasses, "FashionMNIST", labels_path, " is corrupt: label ", int(lsrc[i]), " at index ", i,
             " is outside 0..9");
    lab[i] = lsrc[i];
  }
}

Example FashionMNIST::get(int64_t index) const {
  check_index("FashionMNIST::get", index, size());
  return {images_.select(0, index), labels_.select(0, index)};
}

}  // namespace tb::data
