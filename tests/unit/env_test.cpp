#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "common/scoped_env.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

using test::ScopedEnv;

std::string validate_error() {
  try {
    env::validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<valid>";
}

TEST(Env, RegistryDeclaresEachVariableOnceWithHelp) {
  std::set<std::string_view> names;
  for (const env::Var& v : env::registry()) {
    EXPECT_TRUE(v.name.starts_with("TENAX_")) << v.name;
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " declared twice";
    EXPECT_FALSE(v.help.empty()) << v.name << " has no help text";
    if (v.type == env::Type::Enum) {
      EXPECT_FALSE(v.choices.empty()) << v.name;
    }
    if (v.type == env::Type::Double) {
      EXPECT_LT(v.real_min, v.real_max) << v.name << " declares no range";
    }
  }
}

TEST(Env, DefaultsAreThemselvesValid) {
  // Every declared default must pass its own validation (a bad default would break every run).
  for (const env::Var& v : env::registry()) {
    if (v.default_value.empty()) continue;
    ScopedEnv set(std::string(v.name).c_str(), std::string(v.default_value).c_str());
    EXPECT_EQ(validate_error(), "<valid>") << v.name;
  }
}

TEST(Env, BadValueIsRejectedNamingVariableValueAndAllowed) {
  ScopedEnv set("TENAX_LOG_LEVEL", "loud");
  const std::string message = validate_error();
  EXPECT_NE(message.find("TENAX_LOG_LEVEL"), std::string::npos) << message;
  EXPECT_NE(message.find("'loud'"), std::string::npos) << message;
  EXPECT_NE(message.find("error, warn, info, debug"), std::string::npos) << message;
}

TEST(Env, BadDurationIsRejected) {
  ScopedEnv set("TENAX_COMM_TIMEOUT", "soon");
  const std::string message = validate_error();
  EXPECT_NE(message.find("TENAX_COMM_TIMEOUT='soon'"), std::string::npos) << message;
  EXPECT_NE(message.find("duration"), std::string::npos) << message;
}

TEST(Env, UnknownVariableIsRejectedWithASuggestion) {
  ScopedEnv set("TENAX_LOG_LEVL", "info");
  const std::string message = validate_error();
  EXPECT_NE(message.find("unknown environment variable TENAX_LOG_LEVL"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean TENAX_LOG_LEVEL?"), std::string::npos) << message;
}

TEST(Env, TypedAccessorsReadTheEnvironmentOrTheDefault) {
  EXPECT_EQ(env::get_string("TENAX_LOG_LEVEL"), "warn");
  EXPECT_FALSE(env::is_set("TENAX_LOG_LEVEL"));
  ScopedEnv set("TENAX_COMM_TIMEOUT", "90s");
  EXPECT_TRUE(env::is_set("TENAX_COMM_TIMEOUT"));
  EXPECT_EQ(env::get_duration("TENAX_COMM_TIMEOUT"), std::chrono::seconds(90));
  EXPECT_THROW(env::get_string("TENAX_NOT_DECLARED"), std::logic_error);
}

TEST(Env, DurationsAcceptUnits) {
  using std::chrono::milliseconds;
  EXPECT_EQ(env::parse_duration("x", "90"), milliseconds(90'000));
  EXPECT_EQ(env::parse_duration("x", "1.5s"), milliseconds(1'500));
  EXPECT_EQ(env::parse_duration("x", "250ms"), milliseconds(250));
  EXPECT_EQ(env::parse_duration("x", "5m"), milliseconds(300'000));
  EXPECT_EQ(env::parse_duration("x", "2h"), milliseconds(7'200'000));
  EXPECT_EQ(env::parse_duration("x", "0"), milliseconds(0));
  for (const char* bad : {"", "s", "-1", "5 m", "5d", "1e30h"})
    EXPECT_THROW(env::parse_duration("x", bad), UsageError) << bad;
}

TEST(Env, IntegersAndBooleans) {
  EXPECT_EQ(env::parse_int("x", "42"), 42);
  EXPECT_EQ(env::parse_int("x", "7", 1, 10), 7);
  EXPECT_THROW(env::parse_int("x", "11", 1, 10), UsageError);
  EXPECT_THROW(env::parse_int("x", "4k"), UsageError);
  EXPECT_TRUE(env::parse_bool("x", "YES"));
  EXPECT_FALSE(env::parse_bool("x", "off"));
  EXPECT_THROW(env::parse_bool("x", "maybe"), UsageError);
}

// Hostile values of every typed variable: each is refused by validate() and by the typed getter, with a message
// naming the variable, the value and what is allowed. NaN and infinity must never pass as a number: a NaN timeout
// once compared false against everything and silently disabled the communicator watchdog.
struct HostileCase {
  const char* variable;
  const char* value;
  const char* allowed;  // a piece of the "expected ..." text
};

// Names the case in gtest's output instead of dumping its bytes.
void PrintTo(const HostileCase& c, std::ostream* out) {
  *out << c.variable << "='" << c.value << "'";
}

class EnvHostileValue : public ::testing::TestWithParam<HostileCase> {};

TEST_P(EnvHostileValue, IsRefusedNamingVariableValueAndWhatIsAllowed) {
  const HostileCase c = GetParam();
  ScopedEnv set(c.variable, c.value);
  const std::string message = validate_error();
  EXPECT_NE(message.find(std::string(c.variable) + "='"), std::string::npos) << message;
  EXPECT_NE(message.find("expected"), std::string::npos) << message;
  EXPECT_NE(message.find(c.allowed), std::string::npos) << message;
  bool printable = true;
  for (const char* p = c.value; *p; ++p)
    printable = printable && *p >= 0x20 && *p < 0x7f;
  if (printable) {
    EXPECT_NE(message.find(std::string("'") + c.value + "'"), std::string::npos) << message;
  }
  // The typed getter refuses it as well (a program that skips validate() must not read garbage either).
  const env::Var* declared = nullptr;
  for (const env::Var& v : env::registry())
    if (v.name == c.variable) declared = &v;
  ASSERT_NE(declared, nullptr);
  switch (declared->type) {
    case env::Type::Duration:
      EXPECT_THROW(env::get_duration(c.variable), UsageError);
      break;
    case env::Type::Double:
      EXPECT_THROW(env::get_double(c.variable), UsageError);
      break;
    case env::Type::Int:
      EXPECT_THROW(env::get_int(c.variable), UsageError);
      break;
    case env::Type::Bool:
      EXPECT_THROW(env::get_bool(c.variable), UsageError);
      break;
    default:
      break;
  }
}

constexpr const char* kDuration = "a duration";
constexpr const char* kInteger = "an integer in [1, 1000000]";
constexpr const char* kNumber = "a finite number in [";
constexpr const char* kBool = "one of 1, 0, true, false, yes, no, on, off";
constexpr const char* kLevel = "one of error, warn, info, debug";

INSTANTIATE_TEST_SUITE_P(
    Durations, EnvHostileValue,
    ::testing::Values(
        HostileCase{"TENAX_COMM_TIMEOUT", "nan", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "NaN", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "nans", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "nan(0x1)ms", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "inf", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "infinity", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "-1", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "-0", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "+5s", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "1e3", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "0x10", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", " 5s", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "5s ", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "5s\n", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "5ss", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", ".", kDuration}, HostileCase{"TENAX_COMM_TIMEOUT", "5.s", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "", kDuration},
        // Overflow: far beyond any long long of milliseconds.
        HostileCase{"TENAX_COMM_TIMEOUT", "99999999999999999999999h", kDuration},
        HostileCase{"TENAX_COMM_TIMEOUT", "1000001h", kDuration},
        // A positive duration below one millisecond would round to 0, which means "disabled".
        HostileCase{"TENAX_COMM_TIMEOUT", "0.0001s", kDuration},
        HostileCase{"TENAX_HEARTBEAT_INTERVAL", "0.4ms", kDuration},
        HostileCase{"TENAX_NCCL_INIT_TIMEOUT", "nan", kDuration}));

INSTANTIATE_TEST_SUITE_P(
    Integers, EnvHostileValue,
    ::testing::Values(
        HostileCase{"TENAX_METRICS_EVERY", "", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "nan", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "inf", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "1.5", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "1e3", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "0x10", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", " 5", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "\t5", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "5 ", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "+5", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "-", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "0", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "-1", kInteger}, HostileCase{"TENAX_METRICS_EVERY", "1000001", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "9223372036854775808", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "-9223372036854775809", kInteger},
        HostileCase{"TENAX_METRICS_EVERY", "99999999999999999999999", kInteger}));

INSTANTIATE_TEST_SUITE_P(Numbers, EnvHostileValue,
                         ::testing::Values(HostileCase{"TENAX_STRAGGLER_THRESHOLD", "nan", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "-nan", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "inf", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "-inf", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "infinity", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "1e400", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "0x1p-3", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "-0.5", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "0", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "1000000", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", " 0.2", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "0.2 ", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "0.2x", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", ".", kNumber},
                                           HostileCase{"TENAX_STRAGGLER_THRESHOLD", "", kNumber}));

INSTANTIATE_TEST_SUITE_P(Booleans, EnvHostileValue,
                         ::testing::Values(HostileCase{"TENAX_METRICS", "", kBool},
                                           HostileCase{"TENAX_METRICS", "2", kBool},
                                           HostileCase{"TENAX_METRICS", "truee", kBool},
                                           HostileCase{"TENAX_METRICS", " true", kBool},
                                           HostileCase{"TENAX_METRICS", "nan", kBool}));

INSTANTIATE_TEST_SUITE_P(Choices, EnvHostileValue,
                         ::testing::Values(HostileCase{"TENAX_LOG_LEVEL", "", kLevel},
                                           HostileCase{"TENAX_LOG_LEVEL", " info", kLevel},
                                           HostileCase{"TENAX_LOG_LEVEL", "info\n", kLevel},
                                           HostileCase{"TENAX_PLACEMENT", "topo", "one of topology, block, none"}));

TEST(Env, ValidValuesOfEveryKindAreAccepted) {
  using std::chrono::milliseconds;
  for (const char* good : {"0", "90", "1.5s", "250ms", "1ms", "0.5ms", "5m", "2min", "2h", "1000000h", "007s"}) {
    ScopedEnv set("TENAX_COMM_TIMEOUT", good);
    EXPECT_EQ(validate_error(), "<valid>") << good;
  }
  ScopedEnv threshold("TENAX_STRAGGLER_THRESHOLD", "2.5e-1");
  EXPECT_EQ(validate_error(), "<valid>");
  EXPECT_DOUBLE_EQ(env::get_double("TENAX_STRAGGLER_THRESHOLD"), 0.25);
  ScopedEnv every("TENAX_METRICS_EVERY", "1000000");
  EXPECT_EQ(env::get_int("TENAX_METRICS_EVERY"), 1000000);
  EXPECT_EQ(env::parse_int("x", "-9223372036854775808"), std::numeric_limits<long long>::min());
  EXPECT_EQ(env::parse_duration("x", "0.5ms"), milliseconds(1)) << "a half millisecond rounds up, never to 0";
  EXPECT_EQ(env::parse_duration("x", "1000000h"), milliseconds(3'600'000'000'000));
}

TEST(Env, ValuesShownInMessagesAreEscapedAndCut) {
  {
    ScopedEnv unknown("TENAX_\x1b[2J_NOPE", "1");
    const std::string unknown_message = validate_error();
    EXPECT_NE(unknown_message.find("unknown environment variable TENAX_\\x1b[2J_NOPE"), std::string::npos)
        << unknown_message;
  }
  // A hostile value must not break the one-line error message, nor flood it.
  ScopedEnv set("TENAX_COMM_TIMEOUT", "5s\n\x1b[31mred");
  const std::string message = validate_error();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_NE(message.find("'5s\\n\\x1b[31mred'"), std::string::npos) << message;
  const std::string huge(100000, '7');
  ScopedEnv every("TENAX_METRICS_EVERY", huge.c_str());
  ScopedEnv clear("TENAX_COMM_TIMEOUT", "1s");
  const std::string long_message = validate_error();
  EXPECT_NE(long_message.find("TENAX_METRICS_EVERY='7777"), std::string::npos) << long_message;
  EXPECT_LT(long_message.size(), 400u) << long_message;
}

// The TENAX_* names a script reads ($NAME, ${NAME...}) or sets for what it starts (NAME=...), CMake's -DNAME=... left
// out (build settings, not the environment).
std::set<std::string> script_variables(const std::string& text) {
  std::set<std::string> names;
  for (std::size_t at = text.find("TENAX_"); at != std::string::npos; at = text.find("TENAX_", at + 1)) {
    std::size_t end = at;
    while (end < text.size() && (std::isupper(static_cast<unsigned char>(text[end])) ||
                                 std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    const bool read = (at >= 1 && text[at - 1] == '$') || (at >= 2 && text.compare(at - 2, 2, "${") == 0);
    const bool set = end < text.size() && text[end] == '=' && !(at >= 2 && text.compare(at - 2, 2, "-D") == 0);
    if (read || set) names.insert(text.substr(at, end - at));
  }
  return names;
}

// A setting given to a script (TENAX_SANITIZERS=0 bash scripts/run-tests.sh) reaches every tenax program the script
// starts, which refuses a TENAX_* name it does not know: each must be declared.
TEST(Env, EveryVariableTheScriptsUseIsDeclared) {
  EXPECT_EQ(script_variables("a=${TENAX_ONE:-2} $TENAX_TWO TENAX_THREE=1 -DTENAX_CMAKE=ON TENAX_MENTION"),
            (std::set<std::string>{"TENAX_ONE", "TENAX_TWO", "TENAX_THREE"}));
  std::set<std::string_view> declared;
  for (const env::Var& v : env::registry())
    declared.insert(v.name);
  std::size_t seen = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(TENAX_SCRIPTS_DIR)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    std::ostringstream text;
    text << in.rdbuf();
    for (const std::string& name : script_variables(text.str())) {
      ++seen;
      EXPECT_TRUE(declared.contains(name)) << name << " in " << entry.path().string();
    }
  }
  EXPECT_GT(seen, 4u) << "the scripts' settings were not found in " << TENAX_SCRIPTS_DIR;
}

// Only the SPANK plugin expands %u and %j; a path set outside it that still holds one is warned of.
TEST(Env, AnUnexpandedSlurmPlaceholderIsFound) {
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/%u/run"), "%u");
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/me/run-%j"), "%j");
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/100%%used"), "");  // "%%" is a literal '%'
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/%%u"), "");
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/%%%j"), "%j");
  EXPECT_EQ(env::unexpanded_placeholder("/dev/shm/tenax-%n"), "");  // the node's name: the runtime expands it
  EXPECT_EQ(env::unexpanded_placeholder("/scratch/%"), "");
  EXPECT_EQ(env::unexpanded_placeholder(""), "");
  const std::string warning = env::unexpanded_placeholder_warning("TENAX_DATA_STAGE_DIR", "/local/%u/data");
  EXPECT_NE(warning.find("TENAX_DATA_STAGE_DIR '/local/%u/data' holds '%u'"), std::string::npos) << warning;
  EXPECT_NE(warning.find("user name"), std::string::npos) << warning;
}

TEST(Env, DescribeListsEveryVariable) {
  const std::string text = env::describe();
  for (const env::Var& v : env::registry())
    EXPECT_NE(text.find(v.name), std::string::npos) << v.name;
}

}  // namespace
}  // namespace tenax
