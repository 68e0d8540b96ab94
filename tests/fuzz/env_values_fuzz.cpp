// The TENAX_* value parsers and env::validate() (runtime/src/core/env.cpp), on hostile values.
//
// Input: one selector byte, then the value. The selector picks a declared variable (set in the environment, then
// validate() and its typed getter run), one of the shared parsers the launcher and plugin call on command-line values
// (parse_int with the bounds taken from the next bytes, parse_bool, parse_duration), or an undeclared TENAX_ name
// (validate() must refuse it with a suggestion, in time linear in the registry). Values stop at the first NUL byte,
// as environment values and command-line arguments do.
//
// Properties: every refusal is a UsageError whose message names the variable, stays on one line and is bounded in
// length whatever the value; validate() and the typed getter agree; what is accepted is inside what the type allows
// (finite, in range, durations 0 or 1 ms to 1000000 h).
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace {

namespace env = tenax::env;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "env_values_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_message(const tenax::UsageError& error, std::string_view name) {
  const std::string message = error.what();
  if (message.find(name) == std::string::npos) bug("the message does not name the variable", message);
  if (message.size() > 2048) bug("the message is not bounded", message.substr(0, 200));
  for (const char c : message)
    if (static_cast<unsigned char>(c) < 0x20) bug("the message holds a control character", message);
}

void check_duration(std::chrono::milliseconds d, const std::string& value) {
  if (d.count() < 0 || d.count() > 3'600'000'000'000LL) bug("duration out of range accepted", value);
  if (d.count() == 0 && value.find_first_of("123456789") != std::string::npos)
    bug("a non-zero duration became 0 (disabled)", value);
}

// One declared variable, set to `value`: validate() and the typed getter must agree.
void one_variable(const env::Var& v, const std::string& value) {
  const std::string name(v.name);
  setenv(name.c_str(), value.c_str(), 1);
  bool valid = true;
  try {
    env::validate();
  } catch (const tenax::UsageError& error) {
    valid = false;
    check_message(error, name);
  }
  bool got = true;
  try {
    switch (v.type) {
      case env::Type::Int: {
        const long long n = env::get_int(name);
        if ((v.min != 0 || v.max != 0) && (n < v.min || n > v.max)) bug("integer out of range accepted", value);
        break;
      }
      case env::Type::Double: {
        const double x = env::get_double(name);
        if (!std::isfinite(x) || x < v.real_min || x > v.real_max) bug("number out of range accepted", value);
        break;
      }
      case env::Type::Duration:
        check_duration(env::get_duration(name), value);
        break;
      case env::Type::Bool:
        (void)env::get_bool(name);
        break;
      default:
        (void)env::get_string(name);
        break;
    }
  } catch (const tenax::UsageError& error) {
    got = false;
    check_message(error, name);
  }
  unsetenv(name.c_str());
  if (v.type != env::Type::Enum && valid != got) bug("validate() and the getter disagree", name + "=" + value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  std::string value(reinterpret_cast<const char*>(data + 1), size - 1);
  value = value.substr(0, value.find('\0'));
  const auto& registry = env::registry();
  const std::size_t choices = registry.size() + 4;
  const std::size_t choice = selector % choices;

  if (choice < registry.size()) {
    one_variable(registry[choice], value);
    return 0;
  }
  try {
    switch (choice - registry.size()) {
      case 0: {
        // Bounds from the first bytes of the value (as a launcher option would declare them), then the rest.
        long long min = 0, max = 0;
        if (value.size() >= 2) {
          min = static_cast<signed char>(value[0]) * 1000LL;
          max = min + static_cast<unsigned char>(value[1]) * 1000LL;
          value = value.substr(2);
        }
        const long long n = env::parse_int("--option", value, min, max);
        if ((min != 0 || max != 0) && (n < min || n > max)) bug("parse_int accepted a value out of range", value);
        break;
      }
      case 1:
        (void)env::parse_bool("--option", value);
        break;
      case 2:
        check_duration(env::parse_duration("--option", value), value);
        break;
      case 3: {
        // An undeclared name: refused, however long or strange.
        const std::string name = "TENAX_" + value.substr(0, value.find('='));
        bool declared = false;
        for (const env::Var& v : registry)
          declared = declared || v.name == name;
        if (declared || name.size() > 4096 || name == "TENAX_") return 0;
        setenv(name.c_str(), "1", 1);
        bool refused = false;
        try {
          env::validate();
        } catch (const tenax::UsageError& error) {
          check_message(error, "unknown environment variable TENAX_");
          refused = true;
        }
        unsetenv(name.c_str());
        if (!refused) bug("an undeclared TENAX_ variable was not refused", name);
        break;
      }
    }
  } catch (const tenax::UsageError& error) {
    check_message(error, "--option");
  }
  return 0;
}
