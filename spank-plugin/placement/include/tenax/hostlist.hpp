// Slurm hostlist expressions: "n[1-4,7],gpu[01-03],x" <-> {"n1","n2","n3","n4","n7","gpu01","gpu02","gpu03","x"}.
//
// Why libslurm: the names are Slurm's. Expansion and compression are done by libslurm's own hostlist code
// (slurm_hostlist_create/_shift/_push_host/_ranged_string), the code slurmctld, srun and `scontrol show hostnames` run,
// so tenax and Slurm cannot disagree on what a node list means. Inside Slurm's processes (the SPANK plugin) these
// symbols are resolved from the process's own libslurm; everything else links libslurm.so (see the CMakeLists.txt
// of this folder).
//
// Contract (shared by the launcher and the SPANK plugin; no I/O, no global state of tenax's own, thread-safe as far
// as libslurm's hostlists are):
//   - What an expression means is what Slurm says: items separated by commas, spaces or tabs outside brackets; a
//     bracket group holds comma-separated numbers or ranges "lo-hi", printed at the width of "lo" ("[08-10]" -> 08 09
//     10, "[8-10]" -> 8 9 10); order and duplicates are kept. Several groups in one item expand as Slurm orders
//     them: the last group varies fastest, the one before it slowest ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2;
//     "a[1-2]b[1-2]c[1-2]" -> a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 ...). Slurm 22.05 allows no text after the last
//     group of an item ("gpu[01-03]-ib" is refused).
//   - Before libslurm sees an expression, a check of tenax's own refuses what libslurm handles badly: on such input
//     it aborts or exits the process, crashes, logs to stderr, mangles the names or takes memory or time out of
//     proportion. Refused with tenax::UsageError naming the expression (its first 200 characters when longer), the
//     position and the fix: more than kMaxHostlistLength characters; control characters (other than tab); unbalanced
//     or nested brackets; empty items or groups; a group entry other than N or N-N with N <= hi; numbers of more than
//     18 digits (in or out of brackets); more than kMaxHostlistGroups groups in one item; more than
//     kMaxHostlistGroupEntries entries in one group or kMaxHostlistRange numbers in one range (libslurm's own limit);
//     more than kMaxHostlistHosts hosts, kMaxHostlistChars characters of names or kMaxHostlistRanges host ranges in
//     all (exact 64-bit counts, overflow-checked); an item whose groups combine into more than 1,024 host ranges
//     for one number of the group Slurm varies slowest ("r[1-2]n[<more than 1,024 entries>]": it could not be cut
//     into pieces, see below). What passes and libslurm still refuses is a UsageError too.
//   - libslurm's expansion is quadratic in the ranges of one hostlist, so lists reach it in pieces of at most 1,024
//     ranges, cut where the order of the names is kept: the time is proportional to the number of hosts.
//   - Stricter than Slurm: empty items (",n1", "n1,,n2", "n1,"), "n[1-]", unbalanced brackets and control characters,
//     which Slurm skips or turns into odd names, are refused rather than expanded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tenax {

// Guard against expressions such as "a[0-2047]b[0-65535]" exhausting memory.
inline constexpr std::size_t kMaxHostlistHosts = std::size_t{1} << 22;
// The same for long names: "<1000 characters>[0-99999]" is few hosts but 100 MB. 64 MiB holds 4 million names of 16.
inline constexpr std::size_t kMaxHostlistChars = std::size_t{1} << 26;
// One expression. SLURM_JOB_NODELIST can never be longer (an environment string is at most 128 KiB); libslurm's
// parser copies the text of an item once per bracket group, so this bounds its memory.
inline constexpr std::size_t kMaxHostlistLength = std::size_t{1} << 20;
// Bracket groups in one item: libslurm recurses once per group (200,000 groups exhausted its memory and aborted).
inline constexpr std::size_t kMaxHostlistGroups = 16;
// Entries in one bracket group: libslurm exits the process beyond 262,144.
inline constexpr std::size_t kMaxHostlistGroupEntries = std::size_t{1} << 16;
// Numbers in one range ("n[0-65535]"): libslurm's own limit, above which it refuses and logs to stderr.
inline constexpr std::size_t kMaxHostlistRange = std::size_t{1} << 16;
// Host ranges libslurm builds, in all: one per entry of a group, or per name without one, and one per entry of the
// last group for every combination of the groups before it. Each costs it allocated copies of the name
// ("a[0-1023]b[0-1023]c[1]" is 1,048,576 of them, 1.4 s). SLURM_JOB_NODELIST never needs more: an environment
// string holds at most 128 KiB, and each entry takes at least two characters.
inline constexpr std::size_t kMaxHostlistRanges = std::size_t{1} << 16;

// Expands a hostlist expression with libslurm. "" (or only spaces) gives an empty list.
std::vector<std::string> expand_hostlist(std::string_view expression);

struct HostlistSize {
  std::size_t hosts = 0;  // names in the expansion
  std::size_t chars = 0;  // their characters, summed
};
// What expand_hostlist(expression) would produce, counted without expanding it (same errors, caps included): the
// hosts as libslurm counts them (slurm_hostlist_count), so that callers can apply a budget of their own before
// allocating.
HostlistSize measure_hostlist(std::string_view expression);

// Slurm's compact expression for `hosts` (slurm_hostlist_ranged_string), keeping their order: consecutive names that
// differ only in a final number are merged into one bracket group ("n1,n2,n3,n7" -> "n[1-3,7]", "n5,n9" -> "n[5,9]",
// "r1n1,r1n2,r2n1" -> "r1n[1-2],r2n1"). expand_hostlist(compress_hostlist(h)) == h for every list of names it
// accepts. Throws UsageError for an empty name, a name holding ',', '[', ']', a space or a control character, or a
// number of more than 18 digits (Slurm would change it).
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace tenax
