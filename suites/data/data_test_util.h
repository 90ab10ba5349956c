// Helpers of fashion_mnist_test.cpp: the engine tests' error helpers (engine/core/tests/error_of.h).
#pragma once
#include "engine/core/tests/error_of.h"

namespace tb::data {

using tb::testing::error_of;
using tb::testing::expect_contains;

}  // namespace tb::data
