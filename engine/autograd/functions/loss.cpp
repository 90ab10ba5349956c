#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"

namespace tb::autograd {}  // namespace tb::autograd
