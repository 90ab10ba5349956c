#include "engine/core/dtype.h"

namespace tb::core {

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  throw Error("itemsize", "invalid dtype");
}

const char* name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "invalid";
}

DType dtype_from_name(const std::string& s) {
  for (DType t : kAllDTypes)
    if (s == name(t)) return t;
  throw Error("dtype", "unknown dtype '" + s + "' (expected bool, int32, int64, bfloat16, float16, float32, float64)");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::Int32: return 1;
      case DType::Int64: return 2;
      case DType::BFloat16:
      case DType::Float16: return 3;
      case DType::Float32: return 4;
      case DType::Float64: return 5;
    }
    return -1;
  };
  if (rank(a) == 3 && rank(b) == 3) return DType::Float32;  // bf16 with f16
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace tb::core
