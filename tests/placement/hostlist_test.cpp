// Slurm hostlist expansion, compression, round trips and malformed expressions.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

namespace tenax {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, ExpandsRangesListsPaddingAndSuffixes) {
  EXPECT_EQ(expand_hostlist("n[1-4,7],gpu[01-03]-ib,x"),
            (Hosts{"n1", "n2", "n3", "n4", "n7", "gpu01-ib", "gpu02-ib", "gpu03-ib", "x"}));
  EXPECT_EQ(expand_hostlist("n[08-11]"), (Hosts{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("tux[7]"), (Hosts{"tux7"}));
  EXPECT_EQ(expand_hostlist("node-1"), (Hosts{"node-1"}));
}

TEST(Hostlist, MultipleBracketGroupsExpandAsAProductFirstGroupSlowest) {
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]"), (Hosts{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("r[1,3]-n[01-02].ib"), (Hosts{"r1-n01.ib", "r1-n02.ib", "r3-n01.ib", "r3-n02.ib"}));
}

TEST(Hostlist, KeepsOrderAndDuplicatesAndAcceptsSpaces) {
  EXPECT_EQ(expand_hostlist("b2,a1,b[1-2]"), (Hosts{"b2", "a1", "b1", "b2"}));
  EXPECT_EQ(expand_hostlist("  a1 a2 , a3\t"), (Hosts{"a1", "a2", "a3"}));
  EXPECT_TRUE(expand_hostlist("").empty());
  EXPECT_TRUE(expand_hostlist("   ").empty());
}

TEST(Hostlist, CompressesRunsKeepingPaddingAndOrder) {
  EXPECT_EQ(compress_hostlist({"n1", "n2", "n3", "n4", "n7"}), "n[1-4,7]");
  EXPECT_EQ(compress_hostlist({"gpu01-ib", "gpu02-ib", "gpu03-ib"}), "gpu[01-03]-ib");
  EXPECT_EQ(compress_hostlist({"n08", "n09", "n10"}), "n[08-10]");
  EXPECT_EQ(compress_hostlist({"n9", "n10", "n11"}), "n[9-11]");
  // "09" then "10" at width 1 would lose the zero: two entries.
  EXPECT_EQ(compress_hostlist({"n1", "n2", "n09", "n10"}), "n[1-2,09-10]");
  EXPECT_EQ(compress_hostlist({"n3", "x", "n4"}), "n3,x,n4");
  EXPECT_EQ(compress_hostlist({"x"}), "x");
  EXPECT_EQ(compress_hostlist({}), "");
  EXPECT_EQ(compress_hostlist({"r1n1", "r1n2", "r2n1"}), "r1n[1-2],r2n1");
  EXPECT_EQ(compress_hostlist({"n5", "n9"}), "n5,n9");
  EXPECT_EQ(compress_hostlist({"node5", "node9", "node11"}), "node[5,9,11]");
}

TEST(Hostlist, CompressRejectsNamesAHostlistCannotHold) {
  EXPECT_THROW(compress_hostlist({"a,b"}), UsageError);
  EXPECT_THROW(compress_hostlist({"a[1]"}), UsageError);
  EXPECT_THROW(compress_hostlist({""}), UsageError);
  EXPECT_THROW(compress_hostlist({"a b"}), UsageError);
}

void expect_usage_error(const std::string& expression, const std::string& fragment) {
  try {
    expand_hostlist(expression);
    ADD_FAILURE() << "no error for \"" << expression << "\"";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    // Long expressions are quoted in part: their beginning is always there.
    EXPECT_NE(message.find(expression.substr(0, 100)), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
}

TEST(Hostlist, MalformedExpressionsNameTheProblem) {
  expect_usage_error("n[1-3", "never closed");
  expect_usage_error("n1-3]", "']' without '['");
  expect_usage_error("n[1-[2]]", "nested");
  expect_usage_error("n[]", "empty bracket group");
  expect_usage_error("n[3-1]", "backwards");
  expect_usage_error("n[a-3]", "'a' inside a bracket group");
  expect_usage_error("n[1-2-3]", "two dashes");
  expect_usage_error("n[1,,2]", "empty entry");
  expect_usage_error("n[1-]", "missing number");
  expect_usage_error("n1,,n2", "empty host name");
  expect_usage_error(",n1", "empty host name");
  expect_usage_error("n1,", "trailing comma");
  expect_usage_error("n[0-99999999]", "more than");
  expect_usage_error("a[1-3000]b[1-3000]", "more than");
  expect_usage_error("n[1234567890123456789]", "too long");
}

// Counting must not wrap: a product or a sum of group sizes that reaches 2^64 once counted as 0 or 1 host, and the
// expansion then ran until memory was exhausted.
TEST(Hostlist, HostCountsThatWouldWrapIn64BitsAreRefusedBeforeExpanding) {
  // 16 x 2^60 = 2^64: the product of the two groups.
  expect_usage_error("n[0-15]x[0-999999999999999999,0-152921504606846975]", "more than");
  // 18 x 10^18 + 446744073709551616 = 2^64, plus one: the sum of one group's ranges.
  std::string group;
  for (int i = 0; i < 18; ++i)
    group += "0-999999999999999999,";
  expect_usage_error("n[" + group + "0-446744073709551615,7]", "more than");
  // The cap counts every item of the list together.
  expect_usage_error("a[0-4000000],b[0-4000000]", "more than");
}

// The cap on hosts alone lets long names through: 100,000 names of 1,000 characters are 100 MB.
TEST(Hostlist, TotalLengthOfTheNamesIsCapped) {
  const std::string prefix(1000, 'a');
  expect_usage_error(prefix + "[0-99999]", "characters");
  EXPECT_EQ(measure_hostlist(prefix + "[0-9]").hosts, 10u);
  EXPECT_EQ(measure_hostlist(prefix + "[0-9]").chars, 10u * 1001u);
}

// measure_hostlist agrees with expand_hostlist exactly (names and characters), padding and wide numbers included.
TEST(Hostlist, MeasureCountsHostsAndCharactersWithoutExpanding) {
  for (const char* expression : {"", "n1", "n[1-4,7],gpu[01-03]-ib,x", "r[1-2]n[08-10]", "n[98-102]x[7-12,0099-0101]",
                                 "n[999999999999999998-999999999999999999]"}) {
    const auto hosts = expand_hostlist(expression);
    std::size_t chars = 0;
    for (const auto& h : hosts)
      chars += h.size();
    const HostlistSize size = measure_hostlist(expression);
    EXPECT_EQ(size.hosts, hosts.size()) << expression;
    EXPECT_EQ(size.chars, chars) << expression;
  }
}

// Many bracket groups in one item once meant one stack frame per group: 200,000 groups overflowed the stack.
TEST(Hostlist, ManyGroupsInOneItemDoNotRecurse) {
  std::string expression = "n";
  for (int i = 0; i < 200000; ++i)
    expression += "[1]";
  const auto hosts = expand_hostlist(expression);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0], "n" + std::string(200000, '1'));
}

// A message quotes a long expression only in part (it goes to terminals and daemon logs).
TEST(Hostlist, MessagesQuoteLongExpressionsInPart) {
  const std::string expression = std::string(1 << 20, 'n') + "[";
  try {
    expand_hostlist(expression);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 1000u) << message.substr(0, 300);
    EXPECT_NE(message.find("never closed"), std::string::npos) << message.substr(0, 300);
    EXPECT_NE(message.find("1048577 characters"), std::string::npos) << message.substr(0, 300);
  }
}

// Random host lists (prefixes, padded and unpadded numbers, suffixes, runs, repeats, shuffles) survive
// compress -> expand unchanged, and the compressed form is never longer than the plain comma list.
TEST(Hostlist, RandomListsRoundTrip) {
  std::mt19937 rng(20261122);
  const std::vector<std::string> prefixes = {"n", "gpu", "rack1-node", "a.b", "x"};
  const std::vector<std::string> suffixes = {"", "", "-ib", ".cluster"};
  for (int trial = 0; trial < 500; ++trial) {
    Hosts hosts;
    const int runs = 1 + static_cast<int>(rng() % 6);
    for (int run = 0; run < runs; ++run) {
      const std::string& prefix = prefixes[rng() % prefixes.size()];
      const std::string& suffix = suffixes[rng() % suffixes.size()];
      const int width = static_cast<int>(rng() % 4);  // 0: unpadded
      int value = static_cast<int>(rng() % 120);
      const int length = 1 + static_cast<int>(rng() % 12);
      for (int i = 0; i < length; ++i) {
        std::string digits = std::to_string(value);
        if (static_cast<int>(digits.size()) < width) digits.insert(0, width - digits.size(), '0');
        hosts.push_back(prefix + digits + suffix);
        value += (rng() % 5 == 0) ? 2 + static_cast<int>(rng() % 3) : 1;
      }
      if (rng() % 4 == 0) hosts.push_back(prefix + suffix);  // a name without digits
    }
    if (trial % 3 == 0) std::shuffle(hosts.begin(), hosts.end(), rng);
    const std::string compressed = compress_hostlist(hosts);
    ASSERT_EQ(expand_hostlist(compressed), hosts) << compressed;
    std::size_t plain = hosts.size() - 1;
    for (const auto& h : hosts)
      plain += h.size();
    EXPECT_LE(compressed.size(), plain) << compressed;
  }
}

}  // namespace
}  // namespace tenax
