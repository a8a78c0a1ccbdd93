// SPDX-License-Identifier: Apache-2.0
// JSON output for the perf programs (not part of the installed library): values written the
// way perf/compare.py and perf/tuning read them, one object per line, members in the order added.
#pragma once

#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

namespace FusedLinearJson {

/// A JSON string: quotes and backslashes escaped, control characters as \u00XX.
inline std::string string(const std::string& s) {
  std::ostringstream os;
  os << '"';
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') {
      os << '\\' << ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      os << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(ch) << std::dec;
    } else {
      os << ch;
    }
  }
  os << '"';
  return os.str();
}

/// A number with 10 significant digits; JSON has no NaN or Inf: those become null.
inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os << std::setprecision(10) << v;
  return os.str();
}

/// `items` (each already JSON) between brackets, after `open`, separated by `separator`,
/// then `close`: "[a, b]" by default.
inline std::string array(const std::vector<std::string>& items, const std::string& separator = ", ",
                         const std::string& open = "", const std::string& close = "") {
  std::string out = "[" + open;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out + close + "]";
}

/// {"key": value, ...} on one line.
class Object {
 public:
  Object& string(const std::string& key, const std::string& v) {
    return raw(key, FusedLinearJson::string(v));
  }
  Object& number(const std::string& key, double v) { return raw(key, FusedLinearJson::number(v)); }
  template <class Int>
  Object& integer(const std::string& key, Int v) {
    return raw(key, std::to_string(v));
  }
  Object& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  /// A value already written as JSON (an array, an object).
  Object& raw(const std::string& key, const std::string& json) {
    m_body += (m_body.empty() ? "" : ", ") + FusedLinearJson::string(key) + ": " + json;
    return *this;
  }
  std::string str() const { return "{" + m_body + "}"; }

 private:
  std::string m_body;
};

}  // namespace FusedLinearJson
