// See json_depth.h.
#include "engine/core/json_depth.h"

namespace tb::core {

size_t json_depth(std::string_view text, size_t stop_above) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > stop_above) return deepest;
    } else if (c == ']' || c == '}') {
      // An unmatched close is a syntax error: a parser stops there, so nothing deeper is built.
      if (depth == 0) return deepest;
      --depth;
    }
  }
  return deepest;
}

}  // namespace tb::core
