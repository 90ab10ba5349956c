// DType, the reduced-precision float types (bfloat16, float16), PyTorch's type promotion and a
// switch-based dispatch from a runtime DType to a C++ type.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/core/error.h"

namespace tb::core {

enum class DType : uint8_t { Bool, Int32, Int64, BFloat16, Float16, Float32, Float64 };
inline constexpr DType kAllDTypes[] = {DType::Bool,    DType::Int32,   DType::Int64,  DType::BFloat16,
                                       DType::Float16, DType::Float32, DType::Float64};

// bfloat16: the top 16 bits of a float32; conversion from float rounds to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like c10::BFloat16
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x0040u);  // quiet NaN
    x += 0x7FFFu + ((x >> 16) & 1u);                                            // round to nearest even
    return uint16_t(x >> 16);
  }
};

// IEEE binary16; conversion from float rounds to nearest even, subnormals and overflow to inf.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like c10::Half
  operator float() const { return to_float(bits); }
  static uint16_t from_float(float f) {
    uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = x & 0x80000000u;
    x ^= sign;
    uint32_t o;
    if (x >= (127u + 16u) << 23) {  // >= 65536, inf or NaN
      o = x > 0x7F800000u ? 0x7E00u : 0x7C00u;
    } else if (x < (113u << 23)) {  // result is subnormal or zero
      const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
      float ff = std::bit_cast<float>(x) + std::bit_cast<float>(magic);  // FPU rounds to even
      o = std::bit_cast<uint32_t>(ff) - magic;
    } else {
      const uint32_t mant_odd = (x >> 13) & 1u;
      x += (uint32_t(15 - 127) << 23) + 0xFFFu + mant_odd;  // rebias, round to nearest even
      o = x >> 13;
    }
    return uint16_t(o | (sign >> 16));
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24
      float v = float(mant) * 5.9604644775390625e-8f;
      return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

size_t itemsize(DType t);
const char* name(DType t);                    // "float32", "bfloat16", ... as torch prints them
DType dtype_from_name(const std::string& s);  // throws on an unknown name
inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}
inline bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }  // bool excluded
inline bool is_reduced_float(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

// PyTorch's promote_types: bool < int32 < int64 < {bf16, f16} < f32 < f64, bf16 with f16 -> f32.
DType promote_types(DType a, DType b);

// Category used by PyTorch's result_type: 0 bool, 1 integral, 2 floating.
inline int category(DType t) { return t == DType::Bool ? 0 : is_integral(t) ? 1 : 2; }

template <typename T>
struct dtype_of_t;
template <>
struct dtype_of_t<bool> {
  static constexpr DType value = DType::Bool;
};
template <>
struct dtype_of_t<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of_t<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of_t<BFloat16> {
  static constexpr DType value = DType::BFloat16;
};
template <>
struct dtype_of_t<Half> {
  static constexpr DType value = DType::Float16;
};
template <>
struct dtype_of_t<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of_t<double> {
  static constexpr DType value = DType::Float64;
};
template <typename T>
inline constexpr DType dtype_of = dtype_of_t<T>::value;

// The type arithmetic is done in: float for the reduced floats, the type itself otherwise.
template <typename T>
struct opmath {
  using type = T;
};
template <>
struct opmath<BFloat16> {
  using type = float;
};
template <>
struct opmath<Half> {
  using type = float;
};
template <typename T>
using opmath_t = typename opmath<T>::type;

// dispatch(dtype, op, f): calls f.template operator()<T>() with T the C++ type of dtype.
template <typename F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f.template operator()<bool>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
  }
  throw Error("dispatch", "invalid dtype");
}

// Only the floating types; any other dtype is an error naming `op`.
template <typename F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: throw Error(op, std::string("expected a floating dtype, got ") + name(t));
  }
}

// All but bool (arithmetic on numbers).
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& f) {
  if (t == DType::Bool) throw Error(op, "not supported for dtype bool");
  return dispatch(t, std::forward<F>(f));
}

}  // namespace tb::core
