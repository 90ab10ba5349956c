// The nn suite: every layer and loss of engine/nn against the LibTorch module holding the same
// state dict, forward and backward, in train and eval mode; and the GPT-style model end to end.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::TestCase> nn_tests();
}  // namespace tb::suites
