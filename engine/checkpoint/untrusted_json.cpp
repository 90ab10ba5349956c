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
  // Every value visited, with its parent and its key (objects) or index (arrays): the path is
  // spelled only for the value found, not for every value on the way.
  struct Visit {
    const nlohmann::json* value;
    size_t parent;
    const std::string* key;  // null: an array element, `index`
    size_t index;
  };
  std::vector<Visit> seen = {{&v, 0, nullptr, 0}};
  std::vector<size_t> todo = {0};
  while (!todo.empty()) {
    const size_t at = todo.back();
    todo.pop_back();
    const nlohmann::json& j = *seen[at].value;
    if (j.is_number_float() && !std::isfinite(j.get<double>())) {
      std::vector<size_t> chain;
      for (size_t k = at; k != 0; k = seen[k].parent) chain.push_back(k);
      std::string path = root;
      for (auto k = chain.rbegin(); k != chain.rend(); ++k) {
        if (seen[*k].key) {
          path += '.';
          path += *seen[*k].key;
        } else {
          path += '[';
          path += std::to_string(seen[*k].index);
          path += ']';
        }
      }
      return path;
    }
    // Pushed last to first, so values are visited in document order (the first one is found).
    if (j.is_object()) {
      for (auto it = j.rbegin(); it != j.rend(); ++it) {
        seen.push_back({&*it, at, &it.key(), 0});
        todo.push_back(seen.size() - 1);
      }
    } else if (j.is_array()) {
      for (size_t i = j.size(); i-- > 0;) {
        seen.push_back({&j[i], at, nullptr, i});
        todo.push_back(seen.size() - 1);
      }
    }
  }
  return "";
}

}  // namespace tb::checkpoint
