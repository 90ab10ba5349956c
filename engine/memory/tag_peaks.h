// Peaks by tag of the CPU caching allocator (cpu_allocator()): the largest bytes each tag held, and
// the largest parameters + gradients + optimizer state held at one moment (the "model state" an
// FSDP estimate predicts), since the last reset_tag_peaks(). Kept beside Stats rather than in it so
// that the allocator's header, which every tensor includes, stays as it is.
#pragma once
#include <array>
#include <cstdint>

#include "engine/memory/allocator.h"

namespace tb::memory {

struct TagPeaks {
  std::array<int64_t, kNumTags> by_tag{};  // each tag's own peak (not simultaneous)
  int64_t model_state = 0;                 // peak of parameter + gradient + optimizer_state together
};
TagPeaks tag_peaks();
// Starts the peaks over from what is held now.
void reset_tag_peaks();

}  // namespace tb::memory
