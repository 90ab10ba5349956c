// Depth-bounded JSON for untrusted input; see untrusted_json.h.
#include "engine/checkpoint/untrusted_json.h"

#include <cmath>
#include <utility>
#include <vector>

#include "engine/core/error.h"

namespace tb::checkpoint {

void check_json_depth(std::string_view text, const std::string& op, const std::string& source) {
  if (json_depth(text) > kMaxJsonDepth)
    throw core::Error(op, "'" + source + "': JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                              " levels of arrays and objects, the limit for files read from disk; the file is "
                              "corrupt or hostile");
}

nlohmann::json parse_untrusted_json(std::string_view text, const std::string& op, const std::string& source) {
  check_json_depth(text, op, source);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw core::Error(op, "'" + source + "' is not valid JSON: " + e.what());
  }
}

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) {
  if ((v.is_array() || v.is_object()) && v.size() > max_chars / 2)
    return std::string(v.is_array() ? "an array" : "an object") + " of " + std::to_string(v.size()) + " elements";
  return text_excerpt(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_chars);
}

std::string text_excerpt(std::string_view s, size_t max_chars) {
  if (s.size() <= max_chars) return std::string(s);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string non_finite_number_path(const nlohmann::json& v, const std::string& root) {
  std::vector<std::pair<const nlohmann::json*, std::string>> todo = {{&v, root}};
  while (!todo.empty()) {
    auto [j, path] = std::move(todo.back());
    todo.pop_back();
    if (j->is_number_float()) {
      if (!std::isfinite(j->get<double>())) return path;
    } else if (j->is_object()) {
      for (auto it = j->rbegin(); it != j->rend(); ++it) todo.emplace_back(&*it, path + "." + it.key());
    } else if (j->is_array()) {
      for (size_t i = j->size(); i-- > 0;) todo.emplace_back(&(*j)[i], path + "[" + std::to_string(i) + "]");
    }
  }
  return "";
}

}  // namespace tb::checkpoint
