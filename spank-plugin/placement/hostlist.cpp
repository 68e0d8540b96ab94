// Slurm hostlist expansion and compression (see tenax/hostlist.hpp for the grammar).
#include "tenax/hostlist.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "placement/quote.hpp"
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
  throw UsageError("hostlist " + placement_detail::quote_input(expression) + ": " + problem + " at position " +
                   std::to_string(pos) + "; " + fix);
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
    fail(expression, pos, "number \"" + std::string(digits.substr(0, 40)) + "\" is too long",
         "host numbers have at most 18 digits");
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
        fail(expression, entry_pos, "range \"" + std::string(entry.substr(0, 80)) + "\" has two dashes",
             "write a range as lo-hi");
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
  std::size_t start = 0;                         // position in the expression, for messages
  std::vector<std::string> literals;             // literals.size() == groups.size() + 1
  std::vector<std::vector<NumberRange>> groups;  // expanded as a product, first group slowest
};

// Overflow-checked 64-bit arithmetic: false when the exact result does not fit (it is then far beyond every cap).
bool add(std::uint64_t& sum, std::uint64_t value) {
  return !__builtin_add_overflow(sum, value, &sum);
}
bool multiply(std::uint64_t& product, std::uint64_t value) {
  return !__builtin_mul_overflow(product, value, &product);
}

// Characters of lo..hi printed at the range's width: sum of max(width, digits(v)), a closed form per digit count.
bool range_chars(const NumberRange& r, std::uint64_t& chars) {
  std::uint64_t low = 0;  // smallest number with `digits` digits (0 for one digit)
  for (int digits = 1; digits <= kMaxDigits; ++digits) {
    const std::uint64_t high = low == 0 ? 9 : low * 10 - 1;  // largest with `digits` digits
    const std::uint64_t from = std::max(r.lo, low), to = std::min(r.hi, high);
    if (from <= to) {
      std::uint64_t part = to - from + 1;
      if (!multiply(part, static_cast<std::uint64_t>(std::max(digits, r.width))) || !add(chars, part)) return false;
    }
    low = low == 0 ? 10 : low * 10;
  }
  return true;
}

// Exact hosts and characters of one item; false when a count does not fit in 64 bits.
bool item_size(const Item& item, std::uint64_t& hosts, std::uint64_t& chars) {
  hosts = 1;
  std::vector<std::uint64_t> sizes, digit_chars;
  for (const auto& group : item.groups) {
    std::uint64_t size = 0, group_chars = 0;
    for (const NumberRange& r : group) {
      if (!add(size, r.hi - r.lo + 1) || !range_chars(r, group_chars)) return false;
    }
    if (!multiply(hosts, size)) return false;
    sizes.push_back(size);
    digit_chars.push_back(group_chars);
  }
  // Every host carries every literal; group g's numbers each appear hosts / size_g times.
  std::uint64_t literal_chars = 0;
  for (const std::string& literal : item.literals)
    literal_chars += literal.size();
  chars = hosts;
  if (!multiply(chars, literal_chars)) return false;
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    std::uint64_t part = hosts / sizes[g];
    if (!multiply(part, digit_chars[g]) || !add(chars, part)) return false;
  }
  return true;
}

// The items of an expression and their size, checked against the caps before anything is expanded.
struct ParsedHostlist {
  std::vector<Item> items;
  HostlistSize size;
};

ParsedHostlist parse_hostlist(std::string_view expression) {
  ParsedHostlist parsed;
  std::uint64_t total_hosts = 0, total_chars = 0;
  std::size_t pos = 0;
  const std::size_t n = expression.size();
  while (pos < n && is_space(expression[pos]))
    ++pos;
  if (pos == n) return parsed;

  while (true) {
    // One item runs to the next comma or space outside brackets.
    Item item;
    item.start = pos;
    item.literals.emplace_back();
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
    if (pos == item.start) fail(expression, pos, "empty host name", "remove the extra comma");

    std::uint64_t hosts = 0, chars = 0;
    const bool fits = item_size(item, hosts, chars);
    if (!fits || !add(total_hosts, hosts) || total_hosts > kMaxHostlistHosts)
      fail(expression, item.start, "more than " + std::to_string(kMaxHostlistHosts) + " hosts",
           "check the ranges for a typo");
    if (!add(total_chars, chars) || total_chars > kMaxHostlistChars)
      fail(expression, item.start,
           "host names of more than " + std::to_string(kMaxHostlistChars) + " characters in all",
           "check the names and ranges for a typo");
    parsed.items.push_back(std::move(item));

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
  parsed.size.hosts = static_cast<std::size_t>(total_hosts);
  parsed.size.chars = static_cast<std::size_t>(total_chars);
  return parsed;
}

// Appends the item's hosts: an odometer over the groups (last group fastest), so the depth of nothing grows with the
// number of groups.
void expand_item(const Item& item, std::vector<std::string>& out) {
  const std::size_t groups = item.groups.size();
  std::vector<std::size_t> range(groups, 0);  // current range of each group
  std::vector<std::uint64_t> value(groups);   // current number of each group
  for (std::size_t g = 0; g < groups; ++g)
    value[g] = item.groups[g][0].lo;
  std::string name;
  while (true) {
    name = item.literals[0];
    for (std::size_t g = 0; g < groups; ++g) {
      name += format_number(value[g], item.groups[g][range[g]].width);
      name += item.literals[g + 1];
    }
    out.push_back(name);
    // Advance the last group; carry into the one before when it wraps.
    std::size_t g = groups;
    while (true) {
      if (g == 0) return;  // every group wrapped: done
      --g;
      const auto& ranges = item.groups[g];
      if (value[g] < ranges[range[g]].hi) {
        ++value[g];
        break;
      }
      if (range[g] + 1 < ranges.size()) {
        value[g] = ranges[++range[g]].lo;
        break;
      }
      range[g] = 0;
      value[g] = ranges[0].lo;
    }
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view expression) {
  const ParsedHostlist parsed = parse_hostlist(expression);
  std::vector<std::string> hosts;
  hosts.reserve(parsed.size.hosts);
  for (const Item& item : parsed.items)
    expand_item(item, hosts);
  return hosts;
}

HostlistSize measure_hostlist(std::string_view expression) {
  return parse_hostlist(expression).size;
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
