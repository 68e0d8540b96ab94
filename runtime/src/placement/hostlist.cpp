// Slurm hostlist expansion and compression (see tenax/hostlist.hpp for the grammar).
#include "tenax/hostlist.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/error.hpp"

namespace tenax {
namespace {

// Numbers above this are refused: they cannot be host indices and would overflow the arithmetic below.
constexpr int kMaxDigits = 18;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

[[noreturn]] void fail(std::string_view expression, std::size_t pos, const std::string& problem,
                       const std::string& fix) {
  throw UsageError("hostlist \"" + std::string(expression) + "\": " + problem + " at position " + std::to_string(pos) +
                   "; " + fix);
}

// One entry of a bracket group: the numbers lo..hi, each printed zero-padded to `width` digits.
struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
};

std::string format_number(std::uint64_t value, int width) {
  std::string digits = std::to_string(value);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  return digits;
}

std::uint64_t parse_number(std::string_view expression, std::size_t pos, std::string_view digits) {
  if (digits.empty()) fail(expression, pos, "missing number in bracket group", "write ranges as [1-4,7]");
  if (digits.size() > static_cast<std::size_t>(kMaxDigits))
    fail(expression, pos, "number \"" + std::string(digits) + "\" is too long", "host numbers have at most 18 digits");
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (!is_digit(digits[i]))
      fail(expression, pos + i, "'" + std::string(1, digits[i]) + "' inside a bracket group",
           "brackets hold only numbers and ranges such as [01-04,7]");
    value = value * 10 + static_cast<std::uint64_t>(digits[i] - '0');
  }
  return value;
}

// Parses the inside of one bracket group, "1-4,7" (text starts at `offset` in the whole expression).
std::vector<NumberRange> parse_group(std::string_view expression, std::size_t offset, std::string_view text) {
  std::vector<NumberRange> ranges;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string_view entry =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::size_t entry_pos = offset + start;
    if (entry.empty()) fail(expression, entry_pos, "empty entry in bracket group", "remove the extra comma");
    std::size_t dash = entry.find('-');
    NumberRange range;
    if (dash == std::string_view::npos) {
      range.lo = range.hi = parse_number(expression, entry_pos, entry);
      range.width = static_cast<int>(entry.size());
    } else {
      std::string_view lo = entry.substr(0, dash);
      std::string_view hi = entry.substr(dash + 1);
      if (hi.find('-') != std::string_view::npos)
        fail(expression, entry_pos, "range \"" + std::string(entry) + "\" has two dashes", "write a range as lo-hi");
      range.lo = parse_number(expression, entry_pos, lo);
      range.hi = parse_number(expression, entry_pos + dash + 1, hi);
      range.width = static_cast<int>(lo.size());
      if (range.lo > range.hi)
        fail(expression, entry_pos, "range \"" + std::string(entry) + "\" runs backwards",
             "write the smaller number first");
    }
    ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ranges;
}

// One item ("gpu[01-03]-ib"): literal text pieces interleaved with bracket groups.
struct Item {
  std::vector<std::string> literals;             // literals.size() == groups.size() + 1
  std::vector<std::vector<NumberRange>> groups;  // expanded as a product, first group slowest
};

std::uint64_t group_size(const std::vector<NumberRange>& group) {
  std::uint64_t n = 0;
  for (const NumberRange& r : group)
    n += r.hi - r.lo + 1;
  return n;
}

void expand_item(const Item& item, std::size_t group_index, std::string& prefix, std::vector<std::string>& out) {
  const std::size_t before = prefix.size();
  prefix += item.literals[group_index];
  if (group_index == item.groups.size()) {
    out.push_back(prefix);
    prefix.resize(before);
    return;
  }
  const std::size_t keep = prefix.size();
  for (const NumberRange& r : item.groups[group_index]) {
    for (std::uint64_t v = r.lo;; ++v) {
      prefix.resize(keep);
      prefix += format_number(v, r.width);
      expand_item(item, group_index + 1, prefix, out);
      if (v == r.hi) break;
    }
  }
  prefix.resize(before);
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  std::vector<std::string> hosts;
  std::uint64_t total = 0;
  std::size_t pos = 0;
  const std::size_t n = expression.size();
  while (pos < n && is_space(expression[pos]))
    ++pos;
  if (pos == n) return hosts;

  while (true) {
    // One item runs to the next comma or space outside brackets.
    Item item;
    item.literals.emplace_back();
    const std::size_t item_start = pos;
    while (pos < n && expression[pos] != ',' && !is_space(expression[pos])) {
      char c = expression[pos];
      if (c == ']') fail(expression, pos, "']' without '['", "balance the brackets");
      if (c != '[') {
        item.literals.back() += c;
        ++pos;
        continue;
      }
      std::size_t close = pos + 1;
      while (close < n && expression[close] != ']') {
        if (expression[close] == '[') fail(expression, close, "nested '['", "bracket groups cannot be nested");
        ++close;
      }
      if (close == n) fail(expression, pos, "'[' is never closed", "add the missing ']'");
      if (close == pos + 1) fail(expression, pos, "empty bracket group \"[]\"", "put numbers inside, e.g. n[1-4]");
      item.groups.push_back(parse_group(expression, pos + 1, expression.substr(pos + 1, close - pos - 1)));
      item.literals.emplace_back();
      pos = close + 1;
    }
    if (pos == item_start) fail(expression, pos, "empty host name", "remove the extra comma");

    std::uint64_t count = 1;
    for (const auto& group : item.groups) {
      count *= group_size(group);
      if (count > kMaxHostlistHosts) break;
    }
    total += count;
    if (total > kMaxHostlistHosts)
      fail(expression, item_start, "more than " + std::to_string(kMaxHostlistHosts) + " hosts",
           "check the ranges for a typo");
    std::string prefix;
    expand_item(item, 0, prefix, hosts);

    // Separators: any run of spaces with at most one comma in it.
    bool comma = false;
    while (pos < n && (expression[pos] == ',' || is_space(expression[pos]))) {
      if (expression[pos] == ',') {
        if (comma) fail(expression, pos, "empty host name", "remove the extra comma");
        comma = true;
      }
      ++pos;
    }
    if (pos == n) {
      if (comma) fail(expression, n, "trailing comma", "remove it");
      break;
    }
  }
  return hosts;
}

namespace {

// A host name split around its last run of digits: "gpu01-ib" -> ("gpu", "01", "-ib").
struct SplitName {
  std::string_view prefix;
  std::string_view digits;  // empty when the name has no usable number
  std::string_view suffix;
  std::uint64_t value = 0;
};

SplitName split_name(std::string_view name) {
  SplitName s{name, {}, {}, 0};
  std::size_t end = name.size();
  while (end > 0 && !is_digit(name[end - 1]))
    --end;
  if (end == 0) return s;
  std::size_t begin = end;
  while (begin > 0 && is_digit(name[begin - 1]))
    --begin;
  if (end - begin > static_cast<std::size_t>(kMaxDigits)) return s;  // kept literal
  s.prefix = name.substr(0, begin);
  s.digits = name.substr(begin, end - begin);
  s.suffix = name.substr(end);
  for (char c : s.digits)
    s.value = s.value * 10 + static_cast<std::uint64_t>(c - '0');
  return s;
}

}  // namespace

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  std::vector<SplitName> names;
  names.reserve(hosts.size());
  for (const std::string& host : hosts) {
    if (host.empty()) throw UsageError("compress_hostlist: empty host name in the list; remove it");
    for (char c : host) {
      if (c == ',' || c == '[' || c == ']' || is_space(c))
        throw UsageError("compress_hostlist: host name \"" + host +
                         "\" contains a ',', '[', ']' or space, which hostlists cannot hold; rename or drop it");
    }
    names.push_back(split_name(host));
  }

  std::string out;
  std::size_t i = 0;
  while (i < names.size()) {
    if (!out.empty()) out += ',';
    const SplitName& first = names[i];
    if (first.digits.empty()) {
      out += hosts[i];
      ++i;
      continue;
    }
    // The bracket group: following names with the same prefix and suffix.
    std::size_t group_end = i + 1;
    while (group_end < names.size() && !names[group_end].digits.empty() && names[group_end].prefix == first.prefix &&
           names[group_end].suffix == first.suffix)
      ++group_end;
    if (group_end == i + 1) {
      out += hosts[i];
      ++i;
      continue;
    }
    std::string bracket(first.prefix);
    bracket += '[';
    std::size_t j = i;
    while (j < group_end) {
      // A range lo-hi prints every number at the width of lo: extend it while that reproduces the next name exactly.
      const int width = static_cast<int>(names[j].digits.size());
      std::size_t k = j + 1;
      while (k < group_end && names[k].value == names[k - 1].value + 1 &&
             format_number(names[k].value, width) == names[k].digits)
        ++k;
      if (j > i) bracket += ',';
      bracket += names[j].digits;
      if (k - j > 1) {
        bracket += '-';
        bracket += names[k - 1].digits;
      }
      j = k;
    }
    bracket += ']';
    bracket += first.suffix;
    // Scattered numbers ("n5,n7") are shorter written out than bracketed ("n[5,7]").
    std::string plain;
    for (std::size_t h = i; h < group_end; ++h) {
      if (h > i) plain += ',';
      plain += hosts[h];
    }
    out += bracket.size() < plain.size() ? bracket : plain;
    i = group_end;
  }
  return out;
}

}  // namespace tenax
