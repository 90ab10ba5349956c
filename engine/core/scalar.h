// A Python-style number argument (c10::Scalar): remembers whether it was a bool, an integer or
// a float, because type promotion (int_tensor + 2 -> int, int_tensor + 2.0 -> float) and the
// factories' dtype inference (arange(0, 1, 0.1) is float32, arange(5) int64) depend on it.
#pragma once
#include <cstdint>
#include <type_traits>

#include "engine/core/dtype.h"

namespace tb::core {

struct Scalar {
  enum class Kind : uint8_t { Bool, Int, Float };
  Kind kind = Kind::Int;
  int64_t i = 0;  // the value for Bool and Int
  double d = 0;   // the value for every kind

  template <typename T>
  requires std::is_arithmetic_v<T> Scalar(T v) {  // NOLINT: implicit like c10::Scalar, so add(a, b, 2) reads naturally
    if constexpr (std::is_same_v<T, bool>) {
      kind = Kind::Bool, i = v, d = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind = Kind::Int, i = int64_t(v), d = double(v);
    } else {
      kind = Kind::Float, d = double(v);
    }
  }
  bool is_float() const { return kind == Kind::Float; }
  bool is_bool() const { return kind == Kind::Bool; }
  // The dtype a 0-dim tensor holding this value would have (bool, int64, float32 as in torch).
  DType dtype() const { return is_bool() ? DType::Bool : is_float() ? DType::Float32 : DType::Int64; }
};

}  // namespace tb::core
