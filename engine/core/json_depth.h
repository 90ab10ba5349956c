// How deeply a JSON text nests, measured on the text before any parser builds a tree: every room
// that parses JSON from a file or another process bounds nesting with it (nlohmann's copy, dump
// and comparison recurse once per level, so a 150,000-deep array overflows the stack). A plain
// parse after this check is linear; nlohmann's parser callback, the other way to bound depth,
// rescans the parent array at every closing brace of an object (quadratic in the elements).
#pragma once
#include <cstddef>
#include <string_view>

namespace tb::core {

// Arrays and objects nested deeper than this are refused. Python's safetensors (serde_json)
// stops at 128 too; a safetensors header needs 3 levels, a state.json or a hang dump a handful.
inline constexpr size_t kMaxJsonDepth = 128;

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings as a
// JSON lexer does; stops scanning once `stop_above` is exceeded. Linear, no recursion. For
// malformed text it is an upper bound of what a parser builds before it fails.
size_t json_depth(std::string_view text, size_t stop_above = kMaxJsonDepth);

}  // namespace tb::core
