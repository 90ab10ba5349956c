#include "engine/core/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/core/error.h"

namespace tb::core {

namespace {

// The value as it appears in a message: quoted, at most 64 characters, control bytes escaped
// (a fuzzer or a hostile environment can put anything there).
std::string quote(std::string_view v) {
  std::string out = "'";
  for (size_t i = 0; i < v.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (v.size() > 64) out += "...";
  return out + "'";
}

[[noreturn]] void bad(std::string_view name, std::string_view value, const std::string& expected) {
  throw Error(std::string(name), quote(value) + " is not " + expected);
}

}  // namespace

int64_t parse_int64(std::string_view name, std::string_view value, int64_t lo, int64_t hi) {
  auto form = [&] {
    return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (decimal digits, e.g. " +
           std::to_string(std::max<int64_t>(lo, std::min<int64_t>(hi, 4))) + ")";
  };
  int64_t v = 0;
  const char* b = value.data();
  const char* e = b + value.size();
  auto [p, ec] = std::from_chars(b, e, v, 10);
  if (value.empty() || ec != std::errc() || p != e || v < lo || v > hi) bad(name, value, form());
  return v;
}

uint64_t parse_uint64(std::string_view name, std::string_view value) {
  uint64_t v = 0;
  const char* b = value.data();
  const char* e = b + value.size();
  auto [p, ec] = std::from_chars(b, e, v, 10);
  if (value.empty() || ec != std::errc() || p != e)
    bad(name, value, "an unsigned integer below 2^64 (decimal digits, e.g. 1234)");
  return v;
}

double parse_double(std::string_view name, std::string_view value, double lo, double hi) {
  double v = 0;
  const char* b = value.data();
  const char* e = b + value.size();
  auto [p, ec] = std::from_chars(b, e, v, std::chars_format::general);
  if (value.empty() || ec != std::errc() || p != e || !std::isfinite(v) || v < lo || v > hi) {
    std::ostringstream os;
    os << "a finite number in [" << lo << ", " << hi << "] (e.g. 2.5)";
    bad(name, value, os.str());
  }
  return v;
}

int64_t parse_bytes(std::string_view name, std::string_view value) {
  const std::string form =
      "a byte count: a whole number of bytes up to 2^63-1, optionally with a suffix K, M, G or T (powers of "
      "1024; KiB.. and a final B are accepted), e.g. 1048576, 512M or 1.5G";
  using u128 = unsigned __int128;
  size_t i = 0;
  u128 whole = 0;
  const size_t n = value.size();
  const size_t digits_start = i;
  for (; i < n && value[i] >= '0' && value[i] <= '9'; ++i) {
    whole = whole * 10 + u128(value[i] - '0');
    if (whole > u128(INT64_MAX)) bad(name, value, form);
  }
  if (i == digits_start) bad(name, value, form);
  u128 frac = 0, frac_den = 1;
  if (i < n && value[i] == '.') {
    ++i;
    const size_t frac_start = i;
    for (; i < n && value[i] >= '0' && value[i] <= '9'; ++i) {
      if (i - frac_start >= 18) bad(name, value, form);  // finer than 1e-18 is never a whole byte count
      frac = frac * 10 + u128(value[i] - '0');
      frac_den *= 10;
    }
    if (i == frac_start) bad(name, value, form);
  }
  std::string_view suffix = value.substr(i);
  int shift = 0;
  if (!suffix.empty()) {
    const char u = char(suffix[0] & ~0x20);  // upper case for letters
    std::string_view rest = suffix.substr(1);
    if (u == 'K') shift = 10;
    else if (u == 'M') shift = 20;
    else if (u == 'G') shift = 30;
    else if (u == 'T') shift = 40;
    else if (suffix == "B") rest = {};
    else bad(name, value, form);
    if (!rest.empty() && rest != "iB" && rest != "B") bad(name, value, form);
  }
  const u128 mult = u128(1) << shift;
  const u128 frac_bytes = frac * mult;
  if (frac_bytes % frac_den != 0) bad(name, value, form);
  const u128 total = whole * mult + frac_bytes / frac_den;
  if (total > u128(INT64_MAX)) bad(name, value, form);
  return int64_t(total);
}

bool parse_bool(std::string_view name, std::string_view value) {
  std::string v(value);
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  bad(name, value, "a boolean (1/0, true/false, yes/no, on/off)");
}

std::string parse_choice(std::string_view name, std::string_view value,
                         std::initializer_list<std::string_view> choices) {
  std::string list;
  for (std::string_view c : choices) {
    if (c == value) return std::string(value);
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  bad(name, value, "one of: " + list);
}

std::vector<int> parse_cpu_list(std::string_view name, std::string_view value, int max_cpu) {
  const std::string form = "a CPU list: CPUs and ranges in [0, " + std::to_string(max_cpu) +
                           "], comma-separated, each CPU once (e.g. 0-3,8)";
  auto cpu = [&](std::string_view digits) {
    int v = -1;
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, 10);
    // from_chars takes a sign: a CPU is digits only.
    if (digits.empty() || digits[0] == '-' || digits[0] == '+' || ec != std::errc() ||
        p != digits.data() + digits.size() || v < 0 || v > max_cpu)
      bad(name, value, form);
    return v;
  };
  std::vector<int> out;
  std::vector<bool> seen(size_t(std::max(0, max_cpu)) + 1, false);
  if (value.empty()) bad(name, value, form);
  for (size_t at = 0; at <= value.size();) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string_view piece = value.substr(at, comma - at);
    const size_t dash = piece.find('-');
    const int lo = cpu(piece.substr(0, dash));
    const int hi = dash == std::string_view::npos ? lo : cpu(piece.substr(dash + 1));
    if (hi < lo) bad(name, value, form);
    for (int c = lo; c <= hi; ++c) {
      if (seen[size_t(c)]) bad(name, value, form);
      seen[size_t(c)] = true;
      out.push_back(c);
    }
    at = comma + 1;
  }
  return out;
}

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::string env_or(const char* name, std::string fallback) { return env_string(name).value_or(std::move(fallback)); }

int64_t env_int64(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const auto v = env_string(name);
  return v ? parse_int64(name, *v, lo, hi) : fallback;
}

uint64_t env_uint64(const char* name, uint64_t fallback) {
  const auto v = env_string(name);
  return v ? parse_uint64(name, *v) : fallback;
}

double env_double(const char* name, double fallback, double lo, double hi) {
  const auto v = env_string(name);
  return v ? parse_double(name, *v, lo, hi) : fallback;
}

int64_t env_bytes(const char* name, int64_t fallback) {
  const auto v = env_string(name);
  return v ? parse_bytes(name, *v) : fallback;
}

bool env_bool(const char* name, bool fallback) {
  const auto v = env_string(name);
  return v ? parse_bool(name, *v) : fallback;
}

std::string env_choice(const char* name, std::string_view fallback, std::initializer_list<std::string_view> choices) {
  const auto v = env_string(name);
  return v ? parse_choice(name, *v, choices) : std::string(fallback);
}

}  // namespace tb::core
