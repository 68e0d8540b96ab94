#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

#include "tenax/env.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

// Sets a variable for the duration of a test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

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
    if (v.type == env::Type::Enum) EXPECT_FALSE(v.choices.empty()) << v.name;
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

TEST(Env, DescribeListsEveryVariable) {
  const std::string text = env::describe();
  for (const env::Var& v : env::registry())
    EXPECT_NE(text.find(v.name), std::string::npos) << v.name;
}

}  // namespace
}  // namespace tenax
