// The registry of every TENAX_* environment variable.
//
// Each variable is declared exactly once (runtime/src/core/env_registry.cpp) with its type, default and help text.
// `env::validate()` checks every TENAX_* variable present in the environment at start-up and throws UsageError naming
// the variable, the offending value and what is allowed; unknown TENAX_* names (typos) are rejected the same way, with
// the closest known name suggested. Reading a variable that is not declared is a programming error (std::logic_error).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::env {

enum class Type { String, Int, Bool, Double, Duration, Enum, Path };

struct Var {
  std::string_view name;
  Type type;
  std::string_view default_value;  // "" means unset
  std::string_view help;
  std::vector<std::string_view> choices;  // Enum only
  long long min = 0;                      // Int only (inclusive)
  long long max = 0;                      // Int only (inclusive); min == max == 0: unbounded
  double real_min = 0;                    // Double only (inclusive): every Double declares its range
  double real_max = 0;
};

// Every declared variable, in declaration order.
const std::vector<Var>& registry();

// Validates every TENAX_* variable set in the environment. Throws UsageError on the first bad one.
void validate();

// Accepted values (anything else is refused, as is an empty value):
//   Int       [-]digits, inside the declared range (no '+', white space, hex, exponent or fraction)
//   Double    [-]digits[.digits][e[+-]digits], finite, inside the declared range (no nan, inf or hex)
//   Duration  digits[.digits][ms|s|m|min|h] (no unit: seconds); 0 disables, else at least 1ms, at most 1000000h
//   Bool      1 0 true false yes no on off (any case)
//   Enum      exactly one of the declared choices

// Typed accessors. Each returns the environment value if set, else the declared default.
std::string get_string(std::string_view name);
long long get_int(std::string_view name);
bool get_bool(std::string_view name);
double get_double(std::string_view name);
std::chrono::milliseconds get_duration(std::string_view name);  // "90", "90s", "500ms", "5m", "1h"; 0 = disabled
bool is_set(std::string_view name);

// Parsers shared with command-line handling (launcher, plugin). Each throws UsageError naming `what`.
bool parse_bool(std::string_view what, std::string_view value);
long long parse_int(std::string_view what, std::string_view value, long long min = 0, long long max = 0);
std::chrono::milliseconds parse_duration(std::string_view what, std::string_view value);

// The Slurm plugin's placeholder ("%u" or "%j") still in `path`, or "" when there is none ("%%" is a literal '%').
// Only the plugin expands them, at submission; a path that still holds one was set outside it (plain mpirun, a
// local tenax-launch, a variable exported inside the batch script) and would make a folder literally named "%u".
std::string_view unexpanded_placeholder(std::string_view path);
// "<what> '<path>' holds '%u', which only the Slurm plugin expands ...; write the value itself".
std::string unexpanded_placeholder_warning(std::string_view what, std::string_view path);
// Logs that warning (once per process for each what and path) when `path` holds a placeholder.
void warn_if_unexpanded(std::string_view what, std::string_view path);

// A human-readable table of every variable (name, type, default, help) for --help-env.
std::string describe();

}  // namespace tenax::env
