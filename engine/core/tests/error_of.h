// What the engine tests use to check error messages: every bad input must raise core::Error
// with a message that says what went wrong, so tests read the message, not just the type.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "engine/core/error.h"

namespace tb::testing {

// The message of the core::Error that f throws ("" when it throws none). Any other exception
// type escapes and fails the test: bad input must be a core::Error.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

// Every part occurs in msg.
inline void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
  EXPECT_FALSE(msg.empty()) << "expected an error, none was thrown";
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

}  // namespace tb::testing
