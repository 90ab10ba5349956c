// Helpers of fashion_mnist_test.cpp.
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>

namespace tb::data {

inline void expect_contains(const std::string& msg, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

// The message of what f throws ("<no exception>" when it does not).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "<no exception>";
}

}  // namespace tb::data
