// The Fashion-MNIST reader (engine/data/fashion_mnist.h): every pixel and label against the raw
// files decoded here with zlib's inflate (not the reader's gzread path) and, when
// the project's Python is found, against numpy; and the errors for missing, truncated and corrupt files.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/data/fashion_mnist.h"
#include "engine/tensor/factories.h"
#include "harness/project_python.h"
#include "harness/subprocess.h"
#include "suites/data/data_test_util.h"

namespace tb::data {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- Fashion-MNIST

const std::string kRoot = FashionMNIST::kDefaultRoot;

// The reference decoder: the whole file through zlib's inflate (gzip wrapper), independent of
// the reader's gzread path.
std::vector<uint8_t> inflate_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
  zs.next_in = in.data();
  zs.avail_in = unsigned(in.size());
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 20);
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = buf.data();
    zs.avail_out = unsigned(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      ADD_FAILURE() << "inflate " << path << ": " << rc;
      break;
    }
    out.insert(out.end(), buf.begin(), buf.begin() + (buf.size() - zs.avail_out));
  }
  inflateEnd(&zs);
  return out;
}

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

class FashionMNISTFiles : public ::testing::TestWithParam<bool> {};

TEST_P(FashionMNISTFiles, MatchesRawBytes) {
  const bool train = GetParam();
  const std::string prefix = kRoot + (train ? "/train" : "/t10k");
  // CPU time of this process (all its threads), not wall time: other jobs on a shared CI
  // machine stretch the wall clock, not the work.
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  FashionMNIST raw01(kRoot, train, /*normalize=*/false);
  const double cpu_s = double(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("FashionMNIST(%s) loaded in %.3f s wall, %.3f s CPU\n", train ? "train" : "test", wall_s, cpu_s);
  EXPECT_LT(cpu_s, 2.0) << "decoding should take well under a second or two";
  const int64_t n = train ? 60000 : 10000;
  EXPECT_EQ(raw01.size(), n);

  const auto img = inflate_file(prefix + "-images-idx3-ubyte.gz");
  const auto lab = inflate_file(prefix + "-labels-idx1-ubyte.gz");
  ASSERT_EQ(be32(img.data()), 0x803u);
  ASSERT_EQ(int64_t(be32(img.data() + 4)), n);
  ASSERT_EQ(img.size(), size_t(16 + n * 784));
  ASSERT_EQ(lab.size(), size_t(8 + n));

  // First image: a checksum of its bytes, and each pixel as p / 255.
  std::vector<uint8_t> first(784);
  const Tensor x0 = raw01.get(0).input;
  ASSERT_EQ(x0.sizes(), Shape({784}));
  ASSERT_EQ(x0.dtype(), DType::Float32);
  for (int i = 0; i < 784; ++i) first[size_t(i)] = uint8_t(std::lround(x0.data_ptr<float>()[i] * 255.0f));
  EXPECT_EQ(fnv1a(first.data(), 784), fnv1a(img.data() + 16, 784));
  for (int i = 0; i < 784; ++i) EXPECT_EQ(x0.data_ptr<float>()[i], float(img[size_t(16 + i)]) / 255.0f) << i;

  // All pixels and labels.
  const float* px = raw01.images().data_ptr<float>();
  int64_t pixel_mismatch = 0;
  float lo = 1e9f, hi = -1e9f;
  for (int64_t i = 0; i < n * 784; ++i) {
    pixel_mismatch += uint8_t(std::lround(px[i] * 255.0f)) != img[size_t(16 + i)];
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  EXPECT_EQ(pixel_mismatch, 0);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  std::map<int64_t, int64_t> per_class;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t y = raw01.get(i).target.item<int64_t>();
    EXPECT_EQ(y, int64_t(lab[size_t(8 + i)]));
    per_class[y]++;
  }
  ASSERT_EQ(per_class.size(), 10u);
  EXPECT_EQ(per_class.begin()->first, 0);
  EXPECT_EQ(per_class.rbegin()->first, 9);

  // Normalised: (p/255 - 0.2860) / 0.3530, range [-0.810, 2.023], training-set mean ~0, std ~1.
  FashionMNIST norm(kRoot, train);
  const float* q = norm.images().data_ptr<float>();
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n * 784; ++i) {
    sum += q[i];
    sq += double(q[i]) * q[i];
  }
  const double mean = sum / double(n * 784), sd = std::sqrt(sq / double(n * 784) - mean * mean);
  EXPECT_NEAR(mean, 0.0, train ? 2e-3 : 0.02);
  EXPECT_NEAR(sd, 1.0, train ? 2e-3 : 0.02);
  EXPECT_NEAR(*std::min_element(q, q + n * 784), -0.2860 / 0.3530, 1e-6);
  EXPECT_NEAR(*std::max_element(q, q + n * 784), (1 - 0.2860) / 0.3530, 1e-6);
  expect_contains(error_of([&] { norm.get(n); }), {"out of range"});
}

INSTANTIATE_TEST_SUITE_P(Data, FashionMNISTFiles, ::testing::Values(true, false),
                         [](const auto& info) { return std::string(info.param ? "train" : "test"); });

// numpy's reading of the first two test images, normalised in float32 as torchvision does, must
// match bit for bit. Needs the project's Python (harness/project_python.h).
TEST(FashionMNIST, MatchesNumpy) {
  const auto py = tb::harness::project_python();
  if (!py) GTEST_SKIP() << "set TRAINBENCH_VENV to the project's virtual environment to compare with numpy";
  tb::harness::SubprocessSpec spec;
  spec.argv = {py->path, "-c",
               "import gzip, numpy as np; "
               "b = gzip.open('" +
                   kRoot +
                   "/t10k-images-idx3-ubyte.gz').read(); "
                   "x = np.frombuffer(b, np.uint8, 2 * 784, 16).astype(np.float32) / np.float32(255); "
                   "y = (x - np.float32(0.2860)) / np.float32(0.3530); "
                   "print(' '.join(str(v) for v in y.view(np.uint32)))"};
  const tb::harness::SubprocessResult run = tb::harness::run_subprocess(spec);
  ASSERT_TRUE(run.ok()) << tb::harness::shell_join(spec.argv) << ": " << run.describe() << "\n" << run.err;
  std::vector<uint32_t> bits;
  std::istringstream words(run.out);
  for (unsigned long v; words >> v;) bits.push_back(uint32_t(v));
  ASSERT_EQ(bits.size(), 2u * 784);
  FashionMNIST test(kRoot, /*train=*/false);
  const float* q = test.images().data_ptr<float>();
  int64_t mismatch = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, q + i, 4);
    mismatch += u != bits[i];
  }
  EXPECT_EQ(mismatch, 0);
}

// A scratch directory of hand-made IDX files.
class FashionMNISTErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tb_data_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<uint8_t> idx(uint32_t magic, std::vector<uint32_t> dims, std::vector<uint8_t> data) {
    std::vector<uint8_t> out;
    auto put = [&](uint32_t x) {
      for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(x >> s));
    };
    put(magic);
    for (uint32_t d : dims) put(d);
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
  void write_gz(const std::string& name, const std::vector<uint8_t>& bytes) {
    gzFile f = gzopen((dir_ / name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    gzclose(f);
  }
  void write_raw(const std::string& name, const std::vector<uint8_t>& bytes) {
    std::ofstream f(dir_ / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  static std::vector<uint8_t> read_raw(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  // Three 28x28 images with pixel value (image * 50 + pixel) % 256, labels 3, 0, 9.
  std::vector<uint8_t> pixels(int count) {
    std::vector<uint8_t> px(size_t(count) * 784);
    for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(((i / 784) * 50 + i % 784) % 256);
    return px;
  }
  void write_good() {
    write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {3, 28, 28}, pixels(3)));
    write_gz("t10k-labels-idx1-ubyte.gz", idx(0x801, {3}, {3, 0, 9}));
  }
  std::string load_error() {
    return error_of([&] { FashionMNIST(dir_.string(), false); });
  }

  fs::path dir_;
};

TEST_F(FashionMNISTErrors, MissingDirectoryHintsThePackage) {
  expect_contains(error_of([&] { FashionMNIST((dir_ / "nope").string()); }),
                  {(dir_ / "nope").string(), "does not exist", "dataset-fashion-mnist", "root"});
}

TEST_F(FashionMNISTErrors, MissingFileIsNamed) {
  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {3, 28, 28}, pixels(3)));
  expect_contains(load_error(), {"t10k-labels-idx1-ubyte.gz"});
}

TEST_F(FashionMNISTErrors, SmallHandMadeSetLoads) {
  write_good();
  FashionMNIST ds(dir_.string(), false, /*normalize=*/false);
  ASSERT_EQ(ds.size(), 3);
  const auto px = pixels(3);
  for (int64_t i = 0; i < 3; ++i) {
    const Example e = ds.get(i);
    for (int64_t j = 0; j < 784; ++j) ASSERT_EQ(e.input.data_ptr<float>()[j], float(px[size_t(i * 784 + j)]) / 255.0f);
  }
  EXPECT_EQ(ds.get(2).target.item<int64_t>(), 9);
  // The uncompressed file is accepted in place of the .gz.
  fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  write_raw("t10k-labels-idx1-ubyte", idx(0x801, {3}, {3, 0, 9}));
  EXPECT_EQ(FashionMNIST(dir_.string(), false).get(0).target.item<int64_t>(), 3);
}

TEST_F(FashionMNISTErrors, BadMagicDimsCountsLabels) {
  write_good();
  write_gz("t10k-images-idx3-ubyte.gz", idx(0x804, {3, 28, 28}, pixels(3)));
  expect_contains(load_error(), {"magic number 0x804", "t10k-images-idx3-ubyte.gz"});

  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {3, 28, 27}, pixels(3)));  // 28x27 header, extra data
  expect_contains(load_error(), {"t10k-images-idx3-ubyte.gz"});

  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {2, 28, 28}, pixels(2)));
  expect_contains(load_error(), {"2 images", "3 labels"});

  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {3, 28, 28}, pixels(3)));
  write_gz("t10k-labels-idx1-ubyte.gz", idx(0x801, {3}, {3, 10, 9}));
  expect_contains(load_error(), {"label 10 at index 1"});
}

TEST_F(FashionMNISTErrors, TruncatedFile) {
  write_good();
  // The header promises 3 images, the data holds 2.
  write_gz("t10k-images-idx3-ubyte.gz", idx(0x803, {3, 28, 28}, pixels(2)));
  expect_contains(load_error(), {"truncated", "t10k-images-idx3-ubyte.gz"});
  // The real file cut in half: the gzip stream ends early.
  auto bytes = read_raw(kRoot + "/t10k-images-idx3-ubyte.gz");
  bytes.resize(bytes.size() / 2);
  write_raw("t10k-images-idx3-ubyte.gz", bytes);
  write_raw("t10k-labels-idx1-ubyte.gz", read_raw(kRoot + "/t10k-labels-idx1-ubyte.gz"));
  expect_contains(load_error(), {"truncated", "t10k-images-idx3-ubyte.gz"});
  // A file shorter than its header.
  write_gz("t10k-images-idx3-ubyte.gz", {0, 0, 8});
  expect_contains(load_error(), {"truncated"});
}

TEST_F(FashionMNISTErrors, CorruptCompressedData) {
  write_good();
  auto bytes = read_raw(dir_ / "t10k-images-idx3-ubyte.gz");
  bytes[bytes.size() - 6] ^= 0xFF;  // inside the CRC-32 trailer: the data no longer checks out
  write_raw("t10k-images-idx3-ubyte.gz", bytes);
  expect_contains(load_error(), {"corrupt", "t10k-images-idx3-ubyte.gz"});
}

// The decompressed size is bounded (a gzip bomb would otherwise exhaust memory): exactly the
// limit loads, one byte more is refused naming the file and the limit.
TEST_F(FashionMNISTErrors, DecompressedSizeIsBounded) {
  const std::vector<uint8_t> zeros(size_t(1) << 20, 0);
  write_gz("bomb.gz", zeros);
  const std::string path = (dir_ / "bomb.gz").string();
  EXPECT_EQ(FashionMNIST::read_file(path, zeros.size()), zeros);
  expect_contains(error_of([&] { FashionMNIST::read_file(path, zeros.size() - 1); }),
                  {path, "more than 1048575 bytes"});
  expect_contains(error_of([&] { FashionMNIST::read_file(path, 1000); }), {path, "more than 1000 bytes"});
  write_raw("plain", zeros);  // the same bound for an uncompressed file
  expect_contains(error_of([&] { FashionMNIST::read_file((dir_ / "plain").string(), 4096); }),
                  {"more than 4096 bytes"});
}

}  // namespace
}  // namespace tb::data
