// Slurm hostlists through libslurm, behind a check of tenax's own (see tenax/hostlist.hpp for the contract).
//
// The check parses the expression only far enough to bound it: items, bracket groups and their entries, and the exact
// number of hosts and characters the expansion will have. The names themselves always come from libslurm.
#include "tenax/hostlist.hpp"

#include <slurm/slurm.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "placement/hostlist_pieces.hpp"
#include "placement/quote.hpp"
#include "tenax/error.hpp"

namespace tenax {
namespace {

// Longer numbers are refused: libslurm reads them with strtoul, which mangles values past 2^64 (n18446744073709551616
// became n18446744073709551615) and crashes on a range that ends at 2^64 - 1.
constexpr int kMaxDigits = 18;
// Host ranges in one libslurm hostlist. slurm_hostlist_shift moves every remaining range each time the first one
// empties, so expanding R ranges costs R^2/2 moves (80,000 single names took 2.5 s): lists are handed to libslurm in
// pieces of at most this many ranges, which keeps the cost proportional to the number of hosts.
constexpr std::uint64_t kRangesPerCall = hostlist_detail::kRangesPerPiece;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
// Slurm's separators (hostlist.c: "\t, "). A newline is not one: Slurm would make it part of a name.
bool is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t';
}
bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (byte < 0x20 && c != '\t') || byte == 0x7f;
}

[[noreturn]] void fail(std::string_view expression, std::size_t pos, const std::string& problem,
                       const std::string& fix) {
  throw UsageError("hostlist " + placement_detail::quote_input(expression) + ": " + problem + " at position " +
                   std::to_string(pos) + "; " + fix);
}

// Overflow-checked 64-bit arithmetic: false when the exact result does not fit (it is then far beyond every cap).
bool add(std::uint64_t& sum, std::uint64_t value) {
  return !__builtin_add_overflow(sum, value, &sum);
}
bool multiply(std::uint64_t& product, std::uint64_t value) {
  return !__builtin_mul_overflow(product, value, &product);
}

std::string format_number(std::uint64_t value, int width) {
  std::string digits = std::to_string(value);
  if (static_cast<int>(digits.size()) < width) digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  return digits;
}

int digit_count(std::uint64_t value) {
  int digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

// One entry of a bracket group, "7" or "1-4": the numbers lo..hi, printed zero-padded to the width of lo's text.
struct Entry {
  std::size_t pos = 0;  // of its text in the expression
  std::size_t len = 0;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
  std::uint64_t size() const { return hi - lo + 1; }
};

struct Group {
  std::size_t open = 0;   // position of '['
  std::size_t close = 0;  // position of ']'
  std::vector<Entry> entries;
  std::uint64_t size = 0;         // numbers, summed over the entries
  std::uint64_t digit_chars = 0;  // their printed characters, summed
  int max_digits = 0;             // of the widest number printed
};

// One item ("n[1-4]" or "x"): its text and bracket groups.
struct Item {
  std::size_t start = 0;
  std::size_t end = 0;  // one past its last character
  std::vector<Group> groups;
  std::uint64_t literal_chars = 0;  // characters outside the groups, in every name
  std::uint64_t hosts = 0;
  std::uint64_t chars = 0;
  std::uint64_t ranges = 0;  // host ranges libslurm builds for it
};

struct ParsedHostlist {
  std::vector<Item> items;
  HostlistSize size;
};

std::uint64_t parse_number(std::string_view expression, std::size_t pos, std::string_view digits) {
  if (digits.empty()) fail(expression, pos, "missing number in bracket group", "write ranges as [1-4,7]");
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (!is_digit(digits[i]))
      fail(expression, pos + i, "'" + std::string(1, digits[i]) + "' inside a bracket group",
           "brackets hold only numbers and ranges such as [01-04,7]");
  }
  if (digits.size() > static_cast<std::size_t>(kMaxDigits))
    fail(expression, pos, "number \"" + std::string(digits.substr(0, 40)) + "\" is too long",
         "host numbers have at most 18 digits");
  std::uint64_t value = 0;
  for (char c : digits)
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  return value;
}

// Characters of lo..hi printed at the entry's width: sum of max(width, digits(v)), a closed form per digit count.
std::uint64_t entry_chars(const Entry& e) {
  std::uint64_t chars = 0;
  std::uint64_t low = 0;  // smallest number with `digits` digits (0 for one digit)
  for (int digits = 1; digits <= kMaxDigits; ++digits) {
    const std::uint64_t high = low == 0 ? 9 : low * 10 - 1;  // largest with `digits` digits
    const std::uint64_t from = std::max(e.lo, low), to = std::min(e.hi, high);
    // At most kMaxHostlistRange numbers of at most 18 characters: no overflow.
    if (from <= to) chars += (to - from + 1) * static_cast<std::uint64_t>(std::max(digits, e.width));
    low = low == 0 ? 10 : low * 10;
  }
  return chars;
}

// Parses the group whose '[' is at `open` and ']' at `close`.
Group parse_group(std::string_view expression, std::size_t open, std::size_t close) {
  Group group;
  group.open = open;
  group.close = close;
  std::size_t start = open + 1;
  while (true) {
    std::size_t comma = expression.find(',', start);
    if (comma == std::string_view::npos || comma > close) comma = close;
    const std::string_view entry = expression.substr(start, comma - start);
    if (entry.empty()) fail(expression, start, "empty entry in bracket group", "remove the extra comma");
    if (group.entries.size() == kMaxHostlistGroupEntries)
      fail(expression, open, "more than " + std::to_string(kMaxHostlistGroupEntries) + " entries in one bracket group",
           "merge neighbouring numbers into ranges (n[1-4] for n[1,2,3,4])");
    Entry e;
    e.pos = start;
    e.len = entry.size();
    const std::size_t dash = entry.find('-');
    if (dash == std::string_view::npos) {
      e.lo = e.hi = parse_number(expression, start, entry);
      e.width = static_cast<int>(entry.size());
    } else {
      const std::string_view lo = entry.substr(0, dash);
      const std::string_view hi = entry.substr(dash + 1);
      if (hi.find('-') != std::string_view::npos)
        fail(expression, start, "range \"" + std::string(entry.substr(0, 80)) + "\" has two dashes",
             "write a range as lo-hi");
      e.lo = parse_number(expression, start, lo);
      e.hi = parse_number(expression, start + dash + 1, hi);
      e.width = static_cast<int>(lo.size());
      if (e.lo > e.hi)
        fail(expression, start, "range \"" + std::string(entry) + "\" runs backwards",
             "write the smaller number first");
      if (e.hi - e.lo >= kMaxHostlistRange)
        fail(expression, start,
             "range \"" + std::string(entry) + "\" has more than the " + std::to_string(kMaxHostlistRange) +
                 " numbers Slurm takes in one range",
             "split it into several ranges in the same group (n[0-65535,65536-99999])");
    }
    group.size += e.size();  // at most 2^16 entries of at most 2^16 numbers
    group.digit_chars += entry_chars(e);
    group.max_digits = std::max({group.max_digits, e.width, digit_count(e.hi)});
    group.entries.push_back(e);
    if (comma == close) break;
    start = comma + 1;
  }
  return group;
}

// Exact hosts, characters and libslurm ranges of one item; false when a count does not fit in 64 bits.
bool size_item(Item& item) {
  std::uint64_t hosts = 1;
  for (const Group& group : item.groups) {
    if (!multiply(hosts, group.size)) return false;
  }
  // Every host carries every literal; group g's numbers each appear hosts / size_g times.
  std::uint64_t chars = hosts;
  if (!multiply(chars, item.literal_chars)) return false;
  for (const Group& group : item.groups) {
    std::uint64_t part = hosts / group.size;
    if (!multiply(part, group.digit_chars) || !add(chars, part)) return false;
  }
  // libslurm pushes one range per entry of the last group for every combination of the groups before it.
  std::uint64_t ranges = 1;
  if (!item.groups.empty()) {
    ranges = item.groups.back().entries.size();
    for (std::size_t g = 0; g + 1 < item.groups.size(); ++g)
      ranges *= item.groups[g].size;  // no overflow: never more than the hosts
  }
  item.hosts = hosts;
  item.chars = chars;
  item.ranges = ranges;
  return true;
}

// The check: everything libslurm must not see is refused here, and every count is known before it is called.
ParsedHostlist parse_hostlist(std::string_view expression) {
  const std::size_t n = expression.size();
  if (n > kMaxHostlistLength) {
    throw UsageError("hostlist " + placement_detail::quote_input(expression) + ": longer than the " +
                     std::to_string(kMaxHostlistLength) + " characters a hostlist may have; check where it came from");
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (is_control(expression[i])) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned char>(expression[i]));
      fail(expression, i, std::string("control character ") + code,
           "a hostlist holds names, brackets, commas, spaces and tabs only");
    }
  }

  ParsedHostlist parsed;
  std::uint64_t total_hosts = 0, total_chars = 0, total_ranges = 0;
  std::size_t pos = 0;
  while (pos < n && is_separator(expression[pos]) && expression[pos] != ',')
    ++pos;
  if (pos == n) return parsed;

  while (true) {
    // One item runs to the next separator outside brackets.
    Item item;
    item.start = pos;
    int digit_run = 0;  // digits in a row in the names, across groups
    while (pos < n && !is_separator(expression[pos])) {
      const char c = expression[pos];
      if (c == ']') fail(expression, pos, "']' without '['", "balance the brackets");
      if (c != '[') {
        digit_run = is_digit(c) ? digit_run + 1 : 0;
        if (digit_run > kMaxDigits)
          fail(expression, pos, "a number of more than 18 digits in a name", "host numbers have at most 18 digits");
        ++item.literal_chars;
        ++pos;
        continue;
      }
      std::size_t close = pos + 1;
      while (close < n && expression[close] != ']') {
        if (expression[close] == '[') fail(expression, close, "nested '['", "bracket groups cannot be nested");
        if (is_separator(expression[close]) && expression[close] != ',')
          fail(expression, close, "space inside a bracket group", "write ranges without spaces: n[1-4,7]");
        ++close;
      }
      if (close == n) fail(expression, pos, "'[' is never closed", "add the missing ']'");
      if (close == pos + 1) fail(expression, pos, "empty bracket group \"[]\"", "put numbers inside, e.g. n[1-4]");
      if (item.groups.size() == kMaxHostlistGroups)
        fail(expression, pos, "more than " + std::to_string(kMaxHostlistGroups) + " bracket groups in one name",
             "write the names with fewer groups");
      item.groups.push_back(parse_group(expression, pos, close));
      digit_run += item.groups.back().max_digits;
      if (digit_run > kMaxDigits)
        fail(expression, pos, "a number of more than 18 digits in a name", "host numbers have at most 18 digits");
      pos = close + 1;
    }
    item.end = pos;
    if (pos == item.start) fail(expression, pos, "empty host name", "remove the extra comma");

    const bool fits = size_item(item);
    if (!fits || !add(total_hosts, item.hosts) || total_hosts > kMaxHostlistHosts)
      fail(expression, item.start, "more than " + std::to_string(kMaxHostlistHosts) + " hosts",
           "check the ranges for a typo");
    if (!add(total_chars, item.chars) || total_chars > kMaxHostlistChars)
      fail(expression, item.start,
           "host names of more than " + std::to_string(kMaxHostlistChars) + " characters in all",
           "check the names and ranges for a typo");
    total_ranges += item.ranges;  // no overflow: each range has a host
    if (total_ranges > kMaxHostlistRanges)
      fail(expression, item.start,
           "more than " + std::to_string(kMaxHostlistRanges) + " separate runs of names for Slurm's parser",
           "merge neighbouring numbers into ranges, or write names with several bracket groups as fewer ranges");
    parsed.items.push_back(std::move(item));

    // Separators: any run of spaces and tabs with at most one comma in it.
    bool comma = false;
    while (pos < n && is_separator(expression[pos])) {
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

// --- libslurm --------------------------------------------------------------------------------------------------------

struct HostlistDeleter {
  void operator()(hostlist* hl) const { slurm_hostlist_destroy(hl); }
};
using SlurmHostlist = std::unique_ptr<hostlist, HostlistDeleter>;

using Piece = hostlist_detail::HostlistPiece;

[[noreturn]] void refused_by_slurm(std::string_view expression, const ParsedHostlist& parsed) {
  std::string hint = "check it with `scontrol show hostnames`";
  for (const Item& item : parsed.items) {
    if (!item.groups.empty() && item.end > item.groups.back().close + 1) {
      hint = "Slurm allows no text after the last bracket group of a name (" +
             placement_detail::quote_input(expression.substr(item.start, item.end - item.start)) +
             "): list such names one by one";
      break;
    }
  }
  throw UsageError("hostlist " + placement_detail::quote_input(expression) +
                   ": Slurm's hostlist parser (libslurm) refuses it; " + hint);
}

// Cuts the expression into pieces for libslurm: whole items batched while their ranges fit in one call, larger items
// split along the group that libslurm varies slowest (the one before the last; the only one when there is one),
// between its entries or inside a range, so that the names and their order are kept. `emit` gets each
// piece, in order.
template <typename Emit>
void for_each_piece(std::string_view expression, const ParsedHostlist& parsed, Emit&& emit) {
  Piece batch;
  auto flush = [&](Piece& piece) {
    if (piece.text.empty()) return;
    emit(piece);
    piece = Piece{};
  };
  auto append = [&](Piece& piece, std::string_view text, std::uint64_t hosts, std::uint64_t ranges) {
    if (!piece.text.empty() && piece.ranges + ranges > kRangesPerCall) flush(piece);
    if (!piece.text.empty()) piece.text += ',';
    piece.text += text;
    piece.hosts += hosts;
    piece.ranges += ranges;
  };

  for (const Item& item : parsed.items) {
    const std::string_view text = expression.substr(item.start, item.end - item.start);
    if (item.ranges <= kRangesPerCall) {
      append(batch, text, item.hosts, item.ranges);
      continue;
    }
    flush(batch);
    const std::size_t k = item.groups.size();
    const std::size_t split = k == 1 ? 0 : k - 2;
    const Group& group = item.groups[split];
    // Ranges per number of the split group: one per entry of the last group for every combination of the groups
    // before the split one. When the split group is the last, one per entry instead.
    std::uint64_t per_number = 1;
    if (k > 1) {
      per_number = item.groups.back().entries.size();
      for (std::size_t g = 0; g < split; ++g)
        per_number *= item.groups[g].size;
    }
    if (per_number > kRangesPerCall)
      fail(expression, group.open,
           "an item whose bracket groups combine into more than " + std::to_string(kRangesPerCall) +
               " runs of names for one number of group " + std::to_string(split + 1),
           "write it as several items (r1n[...],r2n[...]) or with fewer entries in its last group");
    const std::uint64_t hosts_per_number = item.hosts / group.size;
    const std::string_view head = expression.substr(item.start, group.open - item.start);
    const std::string_view tail = expression.substr(group.close + 1, item.end - group.close - 1);
    auto emit_piece = [&](std::string_view inside, std::uint64_t hosts, std::uint64_t ranges) {
      Piece piece;
      piece.text.reserve(head.size() + inside.size() + tail.size() + 2);
      piece.text.append(head).append("[").append(inside).append("]").append(tail);
      piece.hosts = hosts;
      piece.ranges = ranges;
      flush(piece);
    };
    // Consecutive entries first..e-1 of the split group, as one piece (their text is one slice of the expression).
    std::size_t first = 0;
    std::uint64_t hosts = 0, ranges = 0;
    auto emit_entries = [&](std::size_t e) {
      if (e > first) {
        const Entry& a = group.entries[first];
        const Entry& b = group.entries[e - 1];
        emit_piece(expression.substr(a.pos, b.pos + b.len - a.pos), hosts, ranges);
      }
      hosts = ranges = 0;
    };
    for (std::size_t e = 0; e < group.entries.size(); ++e) {
      const Entry& entry = group.entries[e];
      const std::uint64_t entry_ranges = k == 1 ? 1 : entry.size() * per_number;
      if (entry_ranges > kRangesPerCall) {
        // A range too large for one piece is cut into smaller ranges, each bound printed at the range's width (the
        // width Slurm prints every number of the range at), so the names are the same.
        emit_entries(e);
        const std::uint64_t step = kRangesPerCall / per_number;
        for (std::uint64_t from = entry.lo;; from += step) {
          const std::uint64_t to = std::min(entry.hi, from + step - 1);
          emit_piece(format_number(from, entry.width) + "-" + format_number(to, entry.width),
                     hosts_per_number * (to - from + 1), per_number * (to - from + 1));
          if (to == entry.hi) break;
        }
        first = e + 1;
        continue;
      }
      if (e > first && ranges + entry_ranges > kRangesPerCall) {
        emit_entries(e);
        first = e;
      }
      hosts += hosts_per_number * entry.size();
      ranges += entry_ranges;
    }
    emit_entries(group.entries.size());
  }
  flush(batch);
}

// Hands the expression to libslurm piece by piece; `use` gets each hostlist and the hosts counted for it.
template <typename Use>
void for_each_slurm_hostlist(std::string_view expression, const ParsedHostlist& parsed, Use&& use) {
  for_each_piece(expression, parsed, [&](const Piece& piece) {
    SlurmHostlist hl(slurm_hostlist_create(piece.text.c_str()));
    if (!hl) refused_by_slurm(expression, parsed);
    const int count = slurm_hostlist_count(hl.get());
    if (count < 0 || static_cast<std::uint64_t>(count) != piece.hosts) {
      throw Error("hostlist " + placement_detail::quote_input(piece.text) + ": libslurm counts " +
                  std::to_string(count) + " hosts where tenax's check counted " + std::to_string(piece.hosts) +
                  "; please report this with the expression");
    }
    use(hl.get(), piece.hosts);
  });
}

}  // namespace

namespace hostlist_detail {

std::vector<HostlistPiece> hostlist_pieces(std::string_view expression) {
  const ParsedHostlist parsed = parse_hostlist(expression);
  std::vector<HostlistPiece> pieces;
  for_each_piece(expression, parsed, [&](const Piece& piece) { pieces.push_back(piece); });
  return pieces;
}

}  // namespace hostlist_detail

std::vector<std::string> expand_hostlist(std::string_view expression) {
  const ParsedHostlist parsed = parse_hostlist(expression);
  std::vector<std::string> hosts;
  hosts.reserve(parsed.size.hosts);
  for_each_slurm_hostlist(expression, parsed, [&](hostlist* hl, std::uint64_t count) {
    for (std::uint64_t i = 0; i < count; ++i) {
      // malloc'ed by libslurm: released with free().
      const std::unique_ptr<char, decltype(&std::free)> host(slurm_hostlist_shift(hl), &std::free);
      if (!host) throw Error("hostlist: libslurm gave fewer hosts than it counted (out of memory?)");
      hosts.emplace_back(host.get());
    }
  });
  return hosts;
}

HostlistSize measure_hostlist(std::string_view expression) {
  const ParsedHostlist parsed = parse_hostlist(expression);
  HostlistSize size;
  size.chars = parsed.size.chars;
  for_each_slurm_hostlist(expression, parsed, [&](hostlist*, std::uint64_t count) { size.hosts += count; });
  return size;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  std::size_t plain = 0;
  for (const std::string& host : hosts) {
    if (host.empty()) throw UsageError("compress_hostlist: empty host name in the list; remove it");
    int digit_run = 0;
    for (char c : host) {
      if (c == ',' || c == '[' || c == ']' || c == ' ' || c == '\t' || is_control(c))
        throw UsageError("compress_hostlist: host name " + placement_detail::quote_input(host) +
                         " contains a ',', '[', ']', space or control character, which hostlists cannot hold; "
                         "rename or drop it");
      digit_run = is_digit(c) ? digit_run + 1 : 0;
      if (digit_run > kMaxDigits)
        throw UsageError("compress_hostlist: host name " + placement_detail::quote_input(host) +
                         " holds a number of more than 18 digits, which Slurm's hostlists would change; rename it");
    }
    plain += host.size() + 1;
  }

  SlurmHostlist hl(slurm_hostlist_create(""));
  if (!hl) throw Error("compress_hostlist: libslurm could not create a hostlist (out of memory?)");
  for (const std::string& host : hosts) {
    if (slurm_hostlist_push_host(hl.get(), host.c_str()) != 1)
      throw Error("compress_hostlist: libslurm refused host name " + placement_detail::quote_input(host));
  }
  // Slurm's form is at most a few characters per name longer than the plain list ("n5,n9" -> "n[5,9]").
  std::string out(plain + 64, '\0');
  while (true) {
    const ssize_t written = slurm_hostlist_ranged_string(hl.get(), out.size(), out.data());
    if (written >= 0 && static_cast<std::size_t>(written) < out.size()) {
      out.resize(static_cast<std::size_t>(written));
      return out;
    }
    if (out.size() > 4 * plain + 4096)
      throw Error("compress_hostlist: libslurm's compact form of " + std::to_string(hosts.size()) +
                  " names does not fit in " + std::to_string(out.size()) + " characters");
    out.resize(out.size() * 2);
  }
}

}  // namespace tenax
