// Slurm hostlist expansion, compression, round trips and malformed expressions. The expected names are Slurm's
// (`scontrol show hostnames` gives the same for every expression here); some are also checked against libslurm called
// directly, with the expression in one piece.
#include <gtest/gtest.h>
#include <slurm/slurm.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "placement/hostlist_pieces.hpp"
#include "tenax/error.hpp"
#include "tenax/hostlist.hpp"

namespace tenax {
namespace {

using Hosts = std::vector<std::string>;

void expect_usage_error(const std::string& expression, const std::string& fragment);

// libslurm's expansion of the whole expression in one hostlist, as `scontrol show hostnames` does it.
Hosts slurm_expansion(const std::string& expression) {
  Hosts hosts;
  hostlist_t hl = slurm_hostlist_create(expression.c_str());
  if (hl == nullptr) return hosts;
  while (char* host = slurm_hostlist_shift(hl)) {
    hosts.emplace_back(host);
    std::free(host);
  }
  slurm_hostlist_destroy(hl);
  return hosts;
}

TEST(Hostlist, ExpandsRangesListsAndPadding) {
  EXPECT_EQ(expand_hostlist("n[1-4,7],gpu[01-03],x"),
            (Hosts{"n1", "n2", "n3", "n4", "n7", "gpu01", "gpu02", "gpu03", "x"}));
  EXPECT_EQ(expand_hostlist("n[08-11]"), (Hosts{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("n[1-03]"), (Hosts{"n1", "n2", "n3"}));  // the width is lo's
  EXPECT_EQ(expand_hostlist("tux[7]"), (Hosts{"tux7"}));
  EXPECT_EQ(expand_hostlist("node-1"), (Hosts{"node-1"}));
}

// Slurm allows no text after the last bracket group of a name; gpu01-ib,gpu02-ib must be listed one by one.
TEST(Hostlist, TextAfterTheLastGroupIsRefusedAsSlurmDoes) {
  for (const char* expression : {"gpu[01-03]-ib", "n[1-4,7],gpu[01-03]-ib,x", "r[1,3]-n[01-02].ib"}) {
    EXPECT_TRUE(slurm_expansion(expression).empty()) << expression;
    try {
      expand_hostlist(expression);
      ADD_FAILURE() << "no error for " << expression;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("Slurm's hostlist parser (libslurm) refuses it"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("no text after the last bracket group"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(expand_hostlist("gpu01-ib,gpu02-ib"), (Hosts{"gpu01-ib", "gpu02-ib"}));
}

// Slurm's order: the last group varies fastest and the one before it slowest; with three or more groups the first
// group therefore varies faster than the second ("a1b1c1 a1b1c2 a2b1c1 ...", not "a1b1c1 a1b1c2 a1b2c1 ...").
TEST(Hostlist, MultipleBracketGroupsExpandInSlurmsOrder) {
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]"), (Hosts{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("r[1,3]-n[01-02]"), (Hosts{"r1-n01", "r1-n02", "r3-n01", "r3-n02"}));
  EXPECT_EQ(expand_hostlist("a[1-2]b[1-2]c[1-2]"),
            (Hosts{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"}));
}

// Large lists reach libslurm in pieces (its shift is quadratic in the ranges of one hostlist): the pieces give the
// very names, in the very order, of libslurm's expansion of the whole expression.
TEST(Hostlist, ListsHandedOverInPiecesExpandAsOneHostlist) {
  std::string odd = "n[";
  for (int i = 1; i < 6000; i += 2)
    odd += std::to_string(i) + (i + 2 < 6000 ? "," : "]");
  std::string names;
  for (int i = 0; i < 3000; ++i)
    names += "h" + std::to_string(i) + "z,";
  names += "last";
  std::string c300 = "c[";
  for (int i = 1; i < 600; i += 2)
    c300 += std::to_string(i) + (i + 2 < 600 ? "," : "]");
  for (const std::string& expression : std::vector<std::string>{
           odd, names, "a[1-3]b[1,2]" + c300, "a[1-60]b[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38]c[1-2]",
           "x[1-2]y[1-300]z[1,3]w[1-2]", "r[1-2000]n[1-2]", "r[0998-3000]n[1],x", "r[8-2100]n[1-2]"}) {
    const Hosts expected = slurm_expansion(expression);
    ASSERT_FALSE(expected.empty()) << expression.substr(0, 80);
    EXPECT_EQ(expand_hostlist(expression), expected) << expression.substr(0, 80);
    EXPECT_EQ(measure_hostlist(expression).hosts, expected.size()) << expression.substr(0, 80);
  }
}

// An item that would need more than 1024 separate runs for one number of its slowest group cannot be cut into pieces.
TEST(Hostlist, ItemsThatCannotBeCutIntoPiecesAreRefused) {
  std::string expression = "r[1-2]n[";
  for (int i = 1; i < 3000; i += 2)
    expression += std::to_string(i) + (i + 2 < 3000 ? "," : "]");
  expect_usage_error(expression, "more than 1024 runs of names for one number of group 1");
  EXPECT_EQ(expand_hostlist(expression.substr(6)).size(), 1500u);  // n[1,3,...] alone
}

// One libslurm hostlist of R ranges costs R^2/2 to expand (80,000 single names took 2.5 s in one piece): no piece
// holds more than kRangesPerPiece, whatever the shape of the list, and the pieces together are the whole list.
TEST(Hostlist, NoPieceHoldsMoreThanItsShareOfRanges) {
  using hostlist_detail::hostlist_pieces;
  using hostlist_detail::kRangesPerPiece;
  std::string singles = "a";
  for (std::size_t i = 1; i < kMaxHostlistRanges; ++i)
    singles += ",a";
  std::string odd = "n[";
  for (int i = 1; i < 6000; i += 2)
    odd += std::to_string(i) + (i + 2 < 6000 ? "," : "]");
  for (const std::string& expression : std::vector<std::string>{
           singles, odd, "r[1-2000]n[1-2]", "a[1-60]b[0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38]c[1-2]",
           "x[1-2]y[1-300]z[1,3]w[1-2]", "a[0-1023]b[0-63]", "n[1-3],m[1-2]x[1-2]"}) {
    const auto pieces = hostlist_pieces(expression);
    std::uint64_t hosts = 0;
    Hosts names;
    for (const auto& piece : pieces) {
      EXPECT_LE(piece.ranges, kRangesPerPiece) << piece.text.substr(0, 80);
      hosts += piece.hosts;
      const Hosts part = slurm_expansion(piece.text);
      EXPECT_EQ(part.size(), piece.hosts) << piece.text.substr(0, 80);
      names.insert(names.end(), part.begin(), part.end());
    }
    EXPECT_EQ(hosts, measure_hostlist(expression).hosts) << expression.substr(0, 80);
    EXPECT_EQ(names, slurm_expansion(expression)) << expression.substr(0, 80);
  }
  EXPECT_EQ(hostlist_pieces(singles).size(), kMaxHostlistRanges / kRangesPerPiece);
  EXPECT_EQ(hostlist_pieces("n[1-3],m[1-2]x[1-2]").size(), 1u);  // small lists go in one piece
  EXPECT_EQ(expand_hostlist(singles), Hosts(kMaxHostlistRanges, "a"));
  expect_usage_error(singles + ",a", "more than 65536 separate runs of names");
  // Products count per combination: 1,048,576 ranges in 22 characters.
  expect_usage_error("a[0-1023]b[0-1023]c[1]", "more than 65536 separate runs of names");
  EXPECT_EQ(expand_hostlist("a[0-255]b[0-1023]").size(), 262144u);  // 256 ranges of 1,024 names
}

TEST(Hostlist, KeepsOrderAndDuplicatesAndAcceptsSpaces) {
  EXPECT_EQ(expand_hostlist("b2,a1,b[1-2]"), (Hosts{"b2", "a1", "b1", "b2"}));
  EXPECT_EQ(expand_hostlist("  a1 a2 , a3\t"), (Hosts{"a1", "a2", "a3"}));
  EXPECT_EQ(expand_hostlist("n1,n2,n2,n3"), (Hosts{"n1", "n2", "n2", "n3"}));
  EXPECT_TRUE(expand_hostlist("").empty());
  EXPECT_TRUE(expand_hostlist("   ").empty());
}

TEST(Hostlist, CompressesRunsKeepingPaddingAndOrder) {
  EXPECT_EQ(compress_hostlist({"n1", "n2", "n3", "n4", "n7"}), "n[1-4,7]");
  // Slurm brackets only a final number: these names stay a list.
  EXPECT_EQ(compress_hostlist({"gpu01-ib", "gpu02-ib", "gpu03-ib"}), "gpu01-ib,gpu02-ib,gpu03-ib");
  EXPECT_EQ(compress_hostlist({"n08", "n09", "n10"}), "n[08-10]");
  EXPECT_EQ(compress_hostlist({"n9", "n10", "n11"}), "n[9-11]");
  // "09" then "10" at width 1 would lose the zero: two entries.
  EXPECT_EQ(compress_hostlist({"n1", "n2", "n09", "n10"}), "n[1-2,09-10]");
  EXPECT_EQ(compress_hostlist({"n3", "x", "n4"}), "n3,x,n4");
  EXPECT_EQ(compress_hostlist({"x"}), "x");
  EXPECT_EQ(compress_hostlist({}), "");
  EXPECT_EQ(compress_hostlist({"r1n1", "r1n2", "r2n1"}), "r1n[1-2],r2n1");
  EXPECT_EQ(compress_hostlist({"n5", "n9"}), "n[5,9]");  // Slurm brackets even where that is longer
  EXPECT_EQ(compress_hostlist({"n10", "n9", "n8"}), "n[10,9,8]");
  EXPECT_EQ(compress_hostlist({"node5", "node9", "node11"}), "node[5,9,11]");
}

TEST(Hostlist, CompressRejectsNamesAHostlistCannotHold) {
  EXPECT_THROW(compress_hostlist({"a,b"}), UsageError);
  EXPECT_THROW(compress_hostlist({"a[1]"}), UsageError);
  EXPECT_THROW(compress_hostlist({""}), UsageError);
  EXPECT_THROW(compress_hostlist({"a b"}), UsageError);
  EXPECT_THROW(compress_hostlist({"a\nb"}), UsageError);
  // Slurm reads the number with strtoul: it would print n18446744073709551615.
  EXPECT_THROW(compress_hostlist({"n18446744073709551616"}), UsageError);
}

void expect_usage_error(const std::string& expression, const std::string& fragment) {
  try {
    expand_hostlist(expression);
    ADD_FAILURE() << "no error for \"" << expression << "\"";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    // Long expressions are quoted in part: their beginning is always there, control characters as \xNN.
    std::string shown;
    for (const char c : expression.substr(0, 100)) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      shown += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? std::string(escaped) : std::string(1, c);
    }
    EXPECT_NE(message.find(shown), std::string::npos) << message;
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
  expect_usage_error("n[1, 2]", "space inside a bracket group");
  expect_usage_error("a1\na2", "control character 0x0a");  // Slurm would make one name "a1\na2"
}

// Inputs on which libslurm aborts, exits, crashes, logs or mangles names never reach it.
TEST(Hostlist, WhatLibslurmHandlesBadlyIsRefusedFirst) {
  // Beyond 262,144 entries in one group libslurm calls exit(1).
  std::string entries = "n[";
  for (std::size_t i = 0; i <= kMaxHostlistGroupEntries; ++i)
    entries += (i > 0 ? ",1" : "1");
  expect_usage_error(entries + "]", "entries in one bracket group");
  // One recursion per group, copying the item each time: 100,000 groups made it abort for want of memory.
  std::string groups = "n";
  for (std::size_t i = 0; i <= kMaxHostlistGroups; ++i)
    groups += "[1]";
  expect_usage_error(groups, "bracket groups in one name");
  // It refuses these itself, but writes "error: _parse_single_range: Too many hosts in range" to stderr.
  expect_usage_error("n[0-65536]", "numbers Slurm takes in one range");
  EXPECT_EQ(expand_hostlist("n[0-65535]").size(), 65536u);
  EXPECT_EQ(expand_hostlist("n[0-65535,65536-99999]").size(), 100000u);
  // A range ending at 2^64 - 1 crashed it; past 2^64 it printed 18446744073709551615.
  expect_usage_error("n[18446744073709551614-18446744073709551615]", "too long");
  expect_usage_error("n18446744073709551616", "more than 18 digits");
  expect_usage_error("n12345[123456789012345]", "more than 18 digits");
  expect_usage_error(std::string(kMaxHostlistLength + 1, 'n'), "longer than the 1048576 characters");
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
  // 2^16 x 2^16 x 2^16 x 2^16 = 2^64, which wraps to 0 unchecked.
  expect_usage_error("n[0-65535]a[0-65535]b[0-65535]c[0-65535]", "more than");
  // The cap counts every item of the list together.
  expect_usage_error("a[0-4000000],b[0-4000000]", "more than");
  expect_usage_error("a[0-2047]b[0-1023],c[0-2047]b[0-1024]", "more than 4194304 hosts");
}

// The cap on hosts alone lets long names through: 100,000 names of 1,000 characters are 100 MB.
TEST(Hostlist, TotalLengthOfTheNamesIsCapped) {
  expect_usage_error(std::string(2000, 'a') + "[0-65535]", "characters");
  const std::string prefix(1000, 'a');
  EXPECT_EQ(measure_hostlist(prefix + "[0-9]").hosts, 10u);
  EXPECT_EQ(measure_hostlist(prefix + "[0-9]").chars, 10u * 1001u);
}

// measure_hostlist agrees with expand_hostlist exactly (names and characters), padding and wide numbers included.
TEST(Hostlist, MeasureCountsHostsAndCharactersWithoutExpanding) {
  for (const char* expression : {"", "n1", "n[1-4,7],gpu[01-03],x", "r[1-2]n[08-10]", "n[98-102]x[7-12,0099-0101]",
                                 "n[999999999999999998-999999999999999999]", "a[1-2]b[9-11]c[01-02]"}) {
    const auto hosts = expand_hostlist(expression);
    std::size_t chars = 0;
    for (const auto& h : hosts)
      chars += h.size();
    const HostlistSize size = measure_hostlist(expression);
    EXPECT_EQ(size.hosts, hosts.size()) << expression;
    EXPECT_EQ(size.chars, chars) << expression;
  }
}

// Many bracket groups in one item once meant one stack frame per group: 200,000 groups overflowed the stack. libslurm
// recurses per group too, so they are refused before it sees them; the largest number allowed still expands.
TEST(Hostlist, ManyGroupsInOneItemAreRefusedBeforeLibslurm) {
  std::string expression = "n";
  for (int i = 0; i < 200000; ++i)
    expression += "[1]";
  expect_usage_error(expression, "more than 16 bracket groups in one name");
  std::string allowed = "n";
  for (std::size_t i = 0; i < kMaxHostlistGroups; ++i)
    allowed += "-[1]";
  std::string name = "n";
  for (std::size_t i = 0; i < kMaxHostlistGroups; ++i)
    name += "-1";
  EXPECT_EQ(expand_hostlist(allowed), (Hosts{name}));
}

// A message quotes a long expression only in part (it goes to terminals and daemon logs).
TEST(Hostlist, MessagesQuoteLongExpressionsInPart) {
  const std::string expression = std::string(1 << 19, 'n') + "[";
  try {
    expand_hostlist(expression);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 1000u) << message.substr(0, 300);
    EXPECT_NE(message.find("never closed"), std::string::npos) << message.substr(0, 300);
    EXPECT_NE(message.find("524289 characters"), std::string::npos) << message.substr(0, 300);
  }
}

// Random host lists (prefixes, padded and unpadded numbers, suffixes, runs, repeats, shuffles) survive
// compress -> expand unchanged; the compressed form is at most two characters per name (a bracket pair) longer than
// the plain comma list.
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
    EXPECT_LE(compressed.size(), plain + 2 * hosts.size()) << compressed;
  }
}

}  // namespace
}  // namespace tenax
