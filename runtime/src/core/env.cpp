#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/env_registry.hpp"
#include "tenax/error.hpp"
#include "tenax/log.hpp"

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

// Bounds of durations: 0 (disabled), or 1 ms up to a million hours. Far above any real timeout, and small enough
// that every later conversion (to nanoseconds of a steady clock, added to now()) stays inside 64 bits.
constexpr double kMaxDurationMs = 1'000'000.0 * 3'600'000.0;
constexpr std::string_view kDurationAllowed =
    "a duration such as 90, 90s, 1.5s, 500ms, 5m or 1h (digits with an optional fraction, then an optional unit "
    "ms, s, m, min or h; at least 1ms, at most 1000000h; 0 disables)";
constexpr std::string_view kBoolAllowed = "one of 1, 0, true, false, yes, no, on, off";

// The value as it appears in a message: printable ASCII as is, anything else escaped (a newline or an escape sequence
// in a hostile value must not break the one-line message), cut after 64 characters (nor flood it).
std::string shown(std::string_view value) {
  constexpr std::size_t kShown = 64;
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < value.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > kShown) out += "... (" + std::to_string(value.size()) + " characters)";
  return out;
}

[[noreturn]] void refuse(std::string_view what, std::string_view value, std::string_view allowed,
                         std::string_view why = {}) {
  std::string message = std::string(what) + "='" + shown(value) + "' is not valid";
  if (!why.empty()) message += " (" + std::string(why) + ")";
  message += ": expected " + std::string(allowed);
  throw UsageError(message);
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The decimal number grammar tenax accepts: [-]digits[.digits][(e|E)[+|-]digits]. No "nan", "inf", hex floats,
// leading '+' or white space, which strtod would all take.
bool is_decimal_number(std::string_view text) {
  std::size_t i = 0;
  if (i < text.size() && text[i] == '-') ++i;
  const std::size_t digits = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9')
    ++i;
  if (i == digits) return false;
  if (i < text.size() && text[i] == '.') {
    const std::size_t fraction = ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      ++i;
    if (i == fraction) return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!all_digits(text.substr(i))) return false;
    i = text.size();
  }
  return i == text.size();
}

std::string real_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

std::string int_allowed(long long min, long long max) {
  if (min != 0 || max != 0) return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return "an integer";
}

std::string real_allowed(const Var& v) {
  return "a finite number in [" + real_text(v.real_min) + ", " + real_text(v.real_max) + "] (e.g. " +
         std::string(v.default_value.empty() ? "1" : v.default_value) + ")";
}

// A finite decimal number inside the variable's bounds.
double parse_real(const Var& v, std::string_view value) {
  const std::string allowed = real_allowed(v);
  if (value.empty()) refuse(v.name, value, allowed, "empty");
  if (!is_decimal_number(value)) refuse(v.name, value, allowed);
  double x = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (error != std::errc() || end != value.data() + value.size() || !std::isfinite(x))
    refuse(v.name, value, allowed, "out of range");
  if (x < v.real_min || x > v.real_max) refuse(v.name, value, allowed, "out of range");
  return x;
}

std::string allowed_text(const Var& v) {
  switch (v.type) {
    case Type::Int:
      return int_allowed(v.min, v.max);
    case Type::Bool:
      return std::string(kBoolAllowed);
    case Type::Double:
      return real_allowed(v);
    case Type::Duration:
      return std::string(kDurationAllowed);
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
  switch (v.type) {
    case Type::Int:
      parse_int(v.name, value, v.min, v.max);
      return;
    case Type::Bool:
      parse_bool(v.name, value);
      return;
    case Type::Double:
      parse_real(v, value);
      return;
    case Type::Duration:
      parse_duration(v.name, value);
      return;
    case Type::Enum:
      if (std::find(v.choices.begin(), v.choices.end(), value) == v.choices.end())
        refuse(v.name, value, allowed_text(v), value.empty() ? "empty" : "");
      return;
    case Type::Path:
      if (value.find('\0') != std::string::npos) refuse(v.name, value, "a file-system path (no NUL byte)");
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
  refuse(what, value, kBoolAllowed, value.empty() ? "empty" : "");
}

long long parse_int(std::string_view what, std::string_view value, long long min, long long max) {
  const std::string allowed = int_allowed(min, max);
  if (value.empty()) refuse(what, value, allowed, "empty");
  // Decimal digits with an optional '-': strtoll would also skip white space and take a '+'.
  const std::string_view digits = value.starts_with('-') ? value.substr(1) : value;
  if (!all_digits(digits)) refuse(what, value, allowed);
  long long n = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (error != std::errc() || end != value.data() + value.size()) refuse(what, value, allowed, "out of range");
  if ((min != 0 || max != 0) && (n < min || n > max)) refuse(what, value, allowed, "out of range");
  return n;
}

std::chrono::milliseconds parse_duration(std::string_view what, std::string_view value) {
  if (value.empty()) refuse(what, value, kDurationAllowed, "empty");
  // digits[.digits] then the unit. No sign, exponent, "nan" or "inf": strtod would take them all, and a NaN
  // compares false against every bound (it once turned the communicator watchdog off).
  std::size_t number_end = 0;
  while (number_end < value.size() &&
         ((value[number_end] >= '0' && value[number_end] <= '9') || value[number_end] == '.'))
    ++number_end;
  const std::string_view number_text = value.substr(0, number_end);
  const std::string_view unit = value.substr(number_end);
  const std::size_t point = number_text.find('.');
  const bool well_formed = point == std::string_view::npos
                               ? all_digits(number_text)
                               : all_digits(number_text.substr(0, point)) && all_digits(number_text.substr(point + 1));
  double scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m" || unit == "min")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  if (!well_formed || scale == 0) refuse(what, value, kDurationAllowed);
  double number = 0;
  const auto [end, error] = std::from_chars(number_text.data(), number_text.data() + number_text.size(), number);
  if (error != std::errc() || end != number_text.data() + number_text.size())
    refuse(what, value, kDurationAllowed, "out of range");
  const double ms = std::round(number * scale);
  if (!(ms <= kMaxDurationMs)) refuse(what, value, kDurationAllowed, "too long");
  // A positive value that rounds to 0 ms would silently mean "disabled".
  if (number > 0 && ms < 1) refuse(what, value, kDurationAllowed, "shorter than 1ms");
  return std::chrono::milliseconds(static_cast<long long>(ms));
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
      std::string message = "unknown environment variable " + shown(name) + " (tenax reads no such variable";
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
  return parse_real(v, raw(v));
}

std::chrono::milliseconds get_duration(std::string_view name) {
  const Var& v = lookup(name);
  return parse_duration(v.name, raw(v));
}

bool is_set(std::string_view name) {
  return std::getenv(std::string(lookup(name).name).c_str()) != nullptr;
}

std::string_view unexpanded_placeholder(std::string_view path) {
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] != '%') continue;
    if (path[i + 1] == 'u') return "%u";
    if (path[i + 1] == 'j') return "%j";
    ++i;  // "%%" and any other pair: skip the second character
  }
  return {};
}

std::string unexpanded_placeholder_warning(std::string_view what, std::string_view path) {
  const std::string_view placeholder = unexpanded_placeholder(path);
  return std::string(what) + " '" + std::string(path) + "' holds '" + std::string(placeholder) +
         "', which only the Slurm plugin expands (given at submission: its --tenax-... options or the variables "
         "exported before sbatch/srun); here it is used literally: write the " +
         (placeholder == "%u" ? "user name itself (e.g. $USER)" : "job id itself (e.g. $SLURM_JOB_ID)") + " (a '" +
         std::string(placeholder) + "' meant literally, given to the plugin as '%" + std::string(placeholder) +
         "', is as it should be)";
}

void warn_if_unexpanded(std::string_view what, std::string_view path) {
  if (unexpanded_placeholder(path).empty()) return;
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::string message = unexpanded_placeholder_warning(what, path);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(message).second) return;
  }
  TENAX_LOG(Warn, "env") << message;
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
