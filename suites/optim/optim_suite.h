// The optim suite: optimizer trajectories against torch::optim, LR schedules, clipping and the
// GradScaler against LibTorch or against golden values from the pinned Python torch.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::TestCase> optim_tests();
}  // namespace tb::suites
