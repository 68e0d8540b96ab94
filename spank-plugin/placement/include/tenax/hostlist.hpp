// Slurm hostlist expressions: "n[1-4,7],gpu[01-03]-ib,x" <-> {"n1","n2","n3","n4","n7","gpu01-ib",...,"x"}.
//
// Contract (shared by the runtime, the launcher and the SPANK plugin; pure functions, no I/O, no global state,
// thread-safe, only the C++ standard library):
//   - Items are separated by commas (or whitespace) outside brackets. A bracket group holds comma-separated numbers
//     or ranges "lo-hi" (lo <= hi). Zero padding is kept: the width of every number in a range is the width of "lo"
//     ("[08-10]" -> 08 09 10, "[8-10]" -> 8 9 10).
//   - Several bracket groups in one item expand as a product, the first group varying slowest:
//     "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2. Text after a group is kept: "gpu[01-02]-ib" -> gpu01-ib gpu02-ib.
//   - The order of the expression is kept and duplicates are kept (Slurm's own expansion does the same).
//   - Malformed input (unbalanced or nested brackets, empty items or groups, lo > hi, non-digits in a range, more than
//     kMaxHostlistHosts hosts, names of more than kMaxHostlistChars characters in all) throws tenax::UsageError naming
//     the expression (its first 200 characters when longer), the position and the fix. The caps are checked on exact
//     64-bit counts (overflow-checked) before anything is allocated, and expansion is iterative: no input, however
//     many bracket groups it holds, can exhaust the memory or the stack.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tenax {

// Guard against expressions such as "n[0-999999999]" exhausting memory.
inline constexpr std::size_t kMaxHostlistHosts = std::size_t{1} << 22;
// The same for long names: "<1000 characters>[0-99999]" is few hosts but 100 MB. 64 MiB holds 4 million names of 16.
inline constexpr std::size_t kMaxHostlistChars = std::size_t{1} << 26;

// Expands a hostlist expression. "" gives an empty list.
std::vector<std::string> expand_hostlist(std::string_view expression);

struct HostlistSize {
  std::size_t hosts = 0;  // names in the expansion
  std::size_t chars = 0;  // their characters, summed
};
// What expand_hostlist(expression) would produce, counted without expanding it (same errors, caps included), so that
// callers can apply a budget of their own before allocating.
HostlistSize measure_hostlist(std::string_view expression);

// A compact expression for `hosts`, keeping their order: names that differ only in their last run of digits (same
// prefix and suffix) and follow one another are merged into one bracket group when that is shorter ("n1,n2,n3,n7" ->
// "n[1-3,7]", "gpu01-ib,gpu02-ib" -> "gpu[01-02]-ib", but "n5,n9" stays). Never longer than the plain comma list, and
// expand_hostlist(compress_hostlist(h)) == h for every list of valid host names. Throws UsageError for an empty name or
// a name containing ",[] " characters.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace tenax
