// Fuzz target: the strict value parsers of engine/core/env.h (byte counts, integers, seeds,
// numbers, booleans, choices, CPU lists) and the shape arithmetic a file's dims reach (empty,
// as_strided).
// Input layout: byte 0 picks the mode; the rest is the value text (parsers) or little-endian
// int64 words (shapes). Every outcome is a value satisfying the parser's contract or a
// core::Error; a shape either makes a consistent tensor under a 64 MiB cap or throws.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "engine/core/shape.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool digits_only(std::string_view v, size_t from = 0) {
  if (v.size() <= from) return false;
  for (size_t i = from; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

void fuzz_parsers(uint8_t mode, std::string_view v) {
  switch (mode % 7) {
    case 0: {
      const int64_t b = tb::core::parse_bytes("FUZZ_BYTES", v);
      check(b >= 0);
      // An accepted value starts with a digit and has no space anywhere.
      check(!v.empty() && v[0] >= '0' && v[0] <= '9' && v.find(' ') == std::string_view::npos);
      break;
    }
    case 1: {
      const int64_t x = tb::core::parse_int64("FUZZ_INT", v, -1000, 1000);
      check(x >= -1000 && x <= 1000);
      check(digits_only(v, v[0] == '-' ? 1 : 0));
      break;
    }
    case 2: {
      const uint64_t x = tb::core::parse_uint64("FUZZ_SEED", v);
      check(digits_only(v));
      (void)x;
      break;
    }
    case 3: {
      const double x = tb::core::parse_double("FUZZ_DOUBLE", v, -1e6, 1e6);
      check(x >= -1e6 && x <= 1e6);
      break;
    }
    case 4:
      (void)tb::core::parse_bool("FUZZ_BOOL", v);
      check(v.size() <= 5);
      break;
    case 6: {
      // Accepted: distinct CPUs in range, only digits, '-' and ',' in the text.
      const std::vector<int> cpus = tb::core::parse_cpu_list("FUZZ_CPUS", v, 63);
      check(!cpus.empty() && cpus.size() <= 64);
      uint64_t seen = 0;
      for (int c : cpus) {
        check(c >= 0 && c <= 63 && !(seen >> c & 1));
        seen |= uint64_t(1) << c;
      }
      for (char ch : v) check((ch >= '0' && ch <= '9') || ch == '-' || ch == ',');
      break;
    }
    default: check(tb::core::parse_choice("FUZZ_CHOICE", v, {"always", "at_end", "auto"}) == v); break;
  }
}

std::vector<int64_t> words(const uint8_t* p, size_t n) {
  std::vector<int64_t> out;
  for (size_t i = 0; i + 8 <= n && out.size() < 9; i += 8) {
    int64_t w;
    std::memcpy(&w, p + i, 8);
    out.push_back(w);
  }
  return out;
}

void fuzz_shapes(uint8_t mode, const uint8_t* p, size_t n) {
  static const bool capped = [] {
    tb::memory::cpu_allocator().set_limit(int64_t(64) << 20);
    return true;
  }();
  (void)capped;
  std::vector<int64_t> w = words(p, n);
  if (mode % 2 == 0) {
    const tb::Shape s(w.begin(), w.begin() + std::min<size_t>(w.size(), 6));
    tb::Tensor t = tb::empty(s, mode % 4 == 0 ? tb::DType::Float32 : tb::DType::Float64);
    check(t.numel() == tb::core::checked_numel(s, "fuzz"));
    check(t.storage()->nbytes() == size_t(t.numel()) * t.itemsize());
  } else {
    // sizes, strides (k each) and an offset over a 16-element storage.
    const size_t k = w.size() / 2;
    const tb::Shape sz(w.begin(), w.begin() + k), st(w.begin() + k, w.begin() + 2 * k);
    const int64_t off = w.size() % 2 ? w.back() : 0;
    tb::Tensor base = tb::empty({16});
    tb::Tensor v = base.as_strided(sz, st, off);
    // Accepted: every reachable element lies inside the storage.
    if (v.numel() > 0) {
      int64_t hi = off;
      for (size_t d = 0; d < k; ++d) hi += (sz[d] - 1) * st[d];
      check(hi >= 0 && hi < 16);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  try {
    if (mode < 128) fuzz_parsers(mode, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    else fuzz_shapes(mode, data + 1, size - 1);
    ++tb_fuzz_accepted;
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  for (char m = 0; m < 7; ++m)
    for (const char* v : {"512", "64M", "1.5G", "3T", "1e30", "inf", "-1", "99999999999G", "0x10", "", " 5", "5 ",
                          "9223372036854775808", "18446744073709551615", "true", "off", "auto", "-1000", "0.25"})
      out.push_back(std::string(1, m) + v);
  for (const char* v : {"0-3,8", "3-1", "0,0", "63", "64", "0-63", "1,,2", "0-"}) out.push_back(std::string(1, 6) + v);
  auto shape = [&](uint8_t mode, std::vector<int64_t> dims) {
    std::string s(1, char(mode));
    s.append(reinterpret_cast<const char*>(dims.data()), dims.size() * 8);
    out.push_back(s);
  };
  const int64_t P62 = int64_t(1) << 62;
  shape(128, {0, P62, P62});
  shape(128, {P62, P62, 0});
  shape(130, {0, int64_t(1) << 61, 3});
  shape(128, {1024, 1024});
  shape(128, {-1, 2});
  shape(129, {2, 5, P62, P62});
  shape(129, {4, 4, 4, 1});
  shape(129, {2, INT64_MAX, 1});
  shape(131, {0, 5, P62, P62, INT64_MAX});
  shape(129, {INT64_MAX, 2, 0, 1, 1, 1});  // numel of [2^63-1, 2, 0] once overflowed (UBSan)
}
