#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/env_registry.hpp"
#include "tenax/error.hpp"

extern char** environ;

namespace tenax::env {
namespace {

const Var& lookup(std::string_view name) {
  for (const Var& v : registry())
    if (v.name == name) return v;
  throw std::logic_error("tenax: environment variable " + std::string(name) + " is not declared in the registry");
}

std::string_view type_name(Type t) {
  switch (t) {
    case Type::String:
      return "string";
    case Type::Int:
      return "integer";
    case Type::Bool:
      return "boolean";
    case Type::Double:
      return "number";
    case Type::Duration:
      return "duration";
    case Type::Enum:
      return "choice";
    case Type::Path:
      return "path";
  }
  return "?";
}

std::string join(const std::vector<std::string_view>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string raw(const Var& v) {
  const char* value = std::getenv(std::string(v.name).c_str());
  return value ? std::string(value) : std::string(v.default_value);
}

std::string allowed_text(const Var& v) {
  switch (v.type) {
    case Type::Int:
      if (v.min != 0 || v.max != 0)
        return "an integer in [" + std::to_string(v.min) + ", " + std::to_string(v.max) + "]";
      return "an integer";
    case Type::Bool:
      return "one of 1, 0, true, false, yes, no, on, off";
    case Type::Double:
      return "a number";
    case Type::Duration:
      return "a duration such as 90, 90s, 500ms, 5m or 1h (0 disables)";
    case Type::Enum:
      return "one of " + join(v.choices, ", ");
    case Type::String:
    case Type::Path:
      return "any text";
  }
  return "";
}

// Checks one value against its declaration; throws UsageError naming the variable, the value and what is allowed.
void check_value(const Var& v, const std::string& value) {
  const std::string what = std::string(v.name);
  switch (v.type) {
    case Type::Int:
      parse_int(what, value, v.min, v.max);
      return;
    case Type::Bool:
      parse_bool(what, value);
      return;
    case Type::Double: {
      char* end = nullptr;
      errno = 0;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || errno == ERANGE)
        throw UsageError(what + "='" + value + "' is not valid: expected " + allowed_text(v));
      return;
    }
    case Type::Duration:
      parse_duration(what, value);
      return;
    case Type::Enum:
      if (std::find(v.choices.begin(), v.choices.end(), value) == v.choices.end())
        throw UsageError(what + "='" + value + "' is not valid: expected " + allowed_text(v));
      return;
    case Type::Path:
      if (!value.empty() && value.find('\0') != std::string::npos)
        throw UsageError(what + " contains a NUL byte: expected a file-system path");
      return;
    case Type::String:
      return;
  }
}

}  // namespace

bool parse_bool(std::string_view what, std::string_view value) {
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw UsageError(std::string(what) + "='" + std::string(value) +
                   "' is not valid: expected one of 1, 0, true, false, yes, no, on, off");
}

long long parse_int(std::string_view what, std::string_view value, long long min, long long max) {
  const std::string text(value);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  const bool bounded = min != 0 || max != 0;
  if (text.empty() || *end != '\0' || errno == ERANGE || (bounded && (n < min || n > max))) {
    std::string allowed = bounded ? "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]"
                                  : std::string("an integer");
    throw UsageError(std::string(what) + "='" + text + "' is not valid: expected " + allowed);
  }
  return n;
}

std::chrono::milliseconds parse_duration(std::string_view what, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(text.c_str(), &end);
  const std::string unit(end ? end : "");
  double scale = -1;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m" || unit == "min")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  if (text.empty() || end == text.c_str() || errno == ERANGE || scale < 0 || number < 0 || number * scale > 1e15)
    throw UsageError(std::string(what) + "='" + text +
                     "' is not valid: expected a duration such as 90, 90s, 500ms, 5m or 1h (0 disables)");
  return std::chrono::milliseconds(static_cast<long long>(number * scale + 0.5));
}

void validate() {
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with("TENAX_")) continue;
    const std::size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const std::string value(eq == std::string_view::npos ? std::string_view() : entry.substr(eq + 1));
    const Var* declared = nullptr;
    for (const Var& v : registry())
      if (v.name == name) declared = &v;
    if (!declared) {
      // A typo in a variable name silently ignored is the worst kind of misconfiguration: refuse it.
      std::string_view best;
      std::size_t best_distance = 4;
      for (const Var& v : registry()) {
        const std::size_t d = edit_distance(name, v.name);
        if (d < best_distance) best_distance = d, best = v.name;
      }
      std::string message = "unknown environment variable " + std::string(name) + " (tenax reads no such variable";
      if (!best.empty()) message += "; did you mean " + std::string(best) + "?";
      message += "); unset it, or see `tenax-launch --help-env` for the variables tenax reads";
      throw UsageError(message);
    }
    check_value(*declared, value);
  }
}

std::string get_string(std::string_view name) {
  return raw(lookup(name));
}

long long get_int(std::string_view name) {
  const Var& v = lookup(name);
  return parse_int(v.name, raw(v), v.min, v.max);
}

bool get_bool(std::string_view name) {
  const Var& v = lookup(name);
  return parse_bool(v.name, raw(v));
}

double get_double(std::string_view name) {
  const Var& v = lookup(name);
  const std::string value = raw(v);
  check_value(v, value);
  return std::strtod(value.c_str(), nullptr);
}

std::chrono::milliseconds get_duration(std::string_view name) {
  const Var& v = lookup(name);
  return parse_duration(v.name, raw(v));
}

bool is_set(std::string_view name) {
  return std::getenv(std::string(lookup(name).name).c_str()) != nullptr;
}

std::string describe() {
  std::ostringstream out;
  for (const Var& v : registry()) {
    out << v.name << "  (" << type_name(v.type);
    if (v.type == Type::Enum) out << ": " << join(v.choices, "|");
    if (!v.default_value.empty()) out << ", default " << v.default_value;
    out << ")\n    " << v.help << "\n";
  }
  return out.str();
}

}  // namespace tenax::env
