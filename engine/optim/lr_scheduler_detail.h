// Internals shared by lr_scheduler.cpp and lr_scheduler_composite.cpp: Python's integer
// division, and reading/writing scheduler state dicts with errors that name the key. Not a
// public API: include it from those two files only.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace tb::optim::detail {

using nlohmann::json;
inline constexpr double kPi = std::numbers::pi;  // == math.pi

// Python's // and % on ints (floor semantics; C++ truncates toward zero).
inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// JSON has no inf/NaN: write them as strings, read both forms back.
inline json num_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

inline const json& need(const json& sd, const char* key, const char* op) {
  TB_CHECK(sd.is_object(), op, "a scheduler state dict must be a JSON object, got ", sd.type_name());
  auto it = sd.find(key);
  TB_CHECK(it != sd.end(), op, "state dict has no '", key,
           "': was it saved by a different scheduler type? Pass the state_dict() of the same scheduler");
  return *it;
}

inline double as_double(const json& v, const char* key, const char* op) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  TB_CHECK(false, op, "state dict entry '", key, "' must be a number (or \"inf\", \"-inf\", \"nan\"), got ", v.dump());
  return 0;
}

inline double get_double(const json& sd, const char* key, const char* op) {
  return as_double(need(sd, key, op), key, op);
}

inline int64_t get_int(const json& sd, const char* key, const char* op) {
  const json& v = need(sd, key, op);
  TB_CHECK(v.is_number_integer(), op, "state dict entry '", key, "' must be an integer, got ", v.dump());
  return v.get<int64_t>();
}

inline bool get_bool(const json& sd, const char* key, const char* op) {
  const json& v = need(sd, key, op);
  TB_CHECK(v.is_boolean(), op, "state dict entry '", key, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

inline std::string get_string(const json& sd, const char* key, const char* op) {
  const json& v = need(sd, key, op);
  TB_CHECK(v.is_string(), op, "state dict entry '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

inline std::vector<double> get_doubles(const json& sd, const char* key, const char* op, size_t expected) {
  const json& v = need(sd, key, op);
  TB_CHECK(v.is_array(), op, "state dict entry '", key, "' must be a list of numbers, got ", v.dump());
  TB_CHECK(v.size() == expected, op, "state dict entry '", key, "' has ", v.size(), " values but the optimizer has ",
           expected, " parameter groups; build the optimizer with the same groups before loading");
  std::vector<double> out;
  for (const json& x : v) out.push_back(as_double(x, key, op));
  return out;
}

inline json doubles_json(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(num_json(x));
  return a;
}

inline void check_int(int64_t v, int64_t min, const char* op, const char* what) {
  TB_CHECK(v >= min, op, "expected ", what, " >= ", min, ", got ", v);
}

}  // namespace tb::optim::detail
