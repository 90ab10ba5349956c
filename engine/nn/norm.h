// Normalisation layers, as torch.nn's: BatchNorm1d/2d (running statistics, momentum or a
// cumulative average when momentum is unset, affine, track_running_stats; eval uses the running
// statistics), LayerNorm over trailing dims, GroupNorm over groups of channels. Weights start at
// one, biases and running means at zero, running variances at one.
#pragma once
#include <optional>

#include "engine/nn/module.h"

namespace tb::nn {

struct BatchNormOptions {
  int64_t num_features = 0;
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // nullopt: cumulative moving average
  bool affine = true;
  bool track_running_stats = true;
  DType dtype = DType::Float32;
};

class BatchNormBase : public Module {
 public:
  BatchNormBase(const char* type_name, const BatchNormOptions& o);
  Tensor forward(const Tensor& x) override;
  void reset_running_stats();
  void reset_parameters();

  BatchNormOptions options;
  Tensor weight, bias;                                    // (C), undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;  // undefined without tracking

 protected:
  virtual void check_input_dim(const Tensor& x) const = 0;
};

class BatchNorm1d : public BatchNormBase {
 public:
  explicit BatchNorm1d(const BatchNormOptions& o) : BatchNormBase("BatchNorm1d", o) {}
  explicit BatchNorm1d(int64_t num_features, DType dtype = DType::Float32)
      : BatchNorm1d(BatchNormOptions{num_features, 1e-5, 0.1, true, true, dtype}) {}

 protected:
  void check_input_dim(const Tensor& x) const override;  // (N, C) or (N, C, L)
};

class BatchNorm2d : public BatchNormBase {
 public:
  explicit BatchNorm2d(const BatchNormOptions& o) : BatchNormBase("BatchNorm2d", o) {}
  explicit BatchNorm2d(int64_t num_features, DType dtype = DType::Float32)
      : BatchNorm2d(BatchNormOptions{num_features, 1e-5, 0.1, true, true, dtype}) {}

 protected:
  void check_input_dim(const Tensor& x) const override;  // (N, C, H, W)
};

class LayerNorm : public Module {
 public:
  LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
            DType dtype = DType::Float32);
  // x: (*, *normalized_shape)
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;
};

class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            DType dtype = DType::Float32);
  // x: (N, C, *)
  Tensor forward(const Tensor& x) override;
  void reset_parameters();

  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;
};

}  // namespace tb::nn
