// Reading JSON that comes from a file or another process, which may be hostile: nesting is
// bounded before any tree is built (nlohmann's copy, dump and comparison recurse once per level,
// so a 150,000-deep array overflows the stack), and values quoted in error messages are cut
// short. Every JSON parse of untrusted bytes in checkpoint/ goes through here (dist/'s hang-dump
// analysis bounds nesting with the same core/json_depth.h).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/json_depth.h"

namespace tb::checkpoint {

// The nesting bound and its linear measure (engine/core/json_depth.h), shared with dist/.
using core::json_depth;
using core::kMaxJsonDepth;

// Throws core::Error(op, "<source>: ...") when `text` nests deeper than kMaxJsonDepth.
void check_json_depth(std::string_view text, const std::string& op, const std::string& source);

// check_json_depth, then nlohmann's parse; a syntax error is a core::Error naming `source`.
nlohmann::json parse_untrusted_json(std::string_view text, const std::string& op, const std::string& source);

// A value for an error message: its JSON cut to about max_chars (invalid UTF-8 replaced), or
// for large arrays and objects only their kind and size.
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 80);
// A string from the input for an error message, cut to about max_chars whole UTF-8 characters.
std::string text_excerpt(std::string_view s, size_t max_chars = 80);

// Where in `v` (e.g. "config.max_grad_norm", "extra.losses[3]", from `root`) the first NaN or
// infinite number sits, or "" when none does. JSON has no such numbers and nlohmann writes them
// as null, so a save that let one through would load a different state: saves refuse them.
// Iterative, so any nesting is safe.
std::string non_finite_number_path(const nlohmann::json& v, const std::string& root);

}  // namespace tb::checkpoint
