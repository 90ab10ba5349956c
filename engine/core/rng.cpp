#include "engine/core/rng.h"

namespace tb::core {

Generator& default_generator() {
  static Generator g(0x5EED);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

}  // namespace tb::core
