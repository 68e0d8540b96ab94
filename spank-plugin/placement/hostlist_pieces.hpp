// How hostlist.cpp hands an expression to libslurm: in pieces, so that no libslurm hostlist holds more than
// kRangesPerPiece host ranges (slurm_hostlist_shift is quadratic in them). Internal; exposed for the unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::hostlist_detail {

inline constexpr std::uint64_t kRangesPerPiece = 1024;

struct HostlistPiece {
  std::string text;          // an expression for slurm_hostlist_create
  std::uint64_t hosts = 0;   // the names it stands for, as counted by tenax's check
  std::uint64_t ranges = 0;  // the host ranges libslurm builds for it, at most kRangesPerPiece
};

// The pieces of `expression`, in order: their expansions, one after the other, are the expansion of the expression.
// Throws UsageError as expand_hostlist does (before libslurm is called).
std::vector<HostlistPiece> hostlist_pieces(std::string_view expression);

}  // namespace tenax::hostlist_detail
