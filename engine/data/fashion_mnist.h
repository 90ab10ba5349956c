// The Fashion-MNIST dataset read from its four gzip'd IDX files (as distributed by Zalando and
// installed by the Debian package dataset-fashion-mnist). Everything is decoded once, in the
// constructor, and shared read-only by every get(). Not a downloader: it never touches the
// network.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"

namespace tb::data {

class FashionMNIST : public Dataset {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  // Fashion-MNIST's per-pixel statistics on the training set (after scaling to [0, 1]).
  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;
  static constexpr int64_t kRows = 28, kCols = 28, kPixels = kRows * kCols, kClasses = 10;

  // root holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (an uncompressed file without
  // .gz is accepted too). normalize: pixels are (p / 255 - kMean) / kStd in float32, computed
  // as torchvision's ToTensor + Normalize do; otherwise p / 255 in [0, 1].
  // Throws core::Error naming the file for a missing, truncated or corrupt file (bad magic,
  // dimensions, counts, labels outside 0..9, gzip CRC), and for a missing root a hint to
  // install the package or pass the directory.
  explicit FashionMNIST(std::string root = kDefaultRoot, bool train = true, bool normalize = true);

  int64_t size() const override { return images_.size(0); }
  // input: (784) float32, a view of images(); target: 0-dim int64 in 0..9.
  Example get(int64_t index) const override;

  const Tensor& images() const { return images_; }  // (N, 784) float32
  const Tensor& labels() const { return labels_; }  // (N) int64
  bool train() const { return train_; }
  bool normalized() const { return normalize_; }

  // The decompressed bytes of a gzip (or plain) file; errors name the file. Used by the reader,
  // public for tools and tests that want the raw IDX bytes. More than max_bytes decompressed is
  // an error (a 1 MB gzip file can expand to 1 GB; the real training images are 47 MB).
  static constexpr size_t kMaxFileBytes = size_t(1) << 30;
  static std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes = kMaxFileBytes);

 private:
  Tensor images_;
  Tensor labels_;
  bool train_;
  bool normalize_;
};

}  // namespace tb::data
