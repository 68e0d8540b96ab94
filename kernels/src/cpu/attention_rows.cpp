// The attention core's data movement and row kernels on the CPU: head split/merge (attention.hpp's layout) and the
// causal softmax and its backward over T x T blocks.
#include <cstring>
#include <initializer_list>
#include <utility>

#include "common/attention_validate.hpp"
#include "common/causal_softmax_rows.hpp"
#include "tenax/kernels/attention.hpp"

namespace tenax::kernels::cpu {
namespace {

// Visits every D-element piece of a packed [B*T, parts*H*D] matrix (head h, part s at column (h*parts + s)*D) with its
// place in the per-head tensors [B, H, T, D]: move(packed_offset, s, head_offset). Packed rows in order, so the packed
// side is read or written sequentially.
template <class Move>
void for_each_piece(std::size_t parts, std::size_t B, std::size_t H, std::size_t T, std::size_t D, Move&& move) {
  const std::size_t row_len = parts * H * D;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t s = 0; s < parts; ++s)
          move((b * T + t) * row_len + (h * parts + s) * D, s, ((b * H + h) * T + t) * D);
}

// Checks the sizes and every pointer of a permutation; false when there is nothing to move.
bool check_permute(const char* op, std::size_t B, std::size_t H, std::size_t T, std::size_t D,
                   std::initializer_list<std::pair<const void*, const char*>> pointers) {
  const std::size_t n = detail::attention_dims(op, B, H, T, D).head_elems;
  for (auto [p, name] : pointers)
    detail::require_pointer(op, p, n, name);
  return n != 0;
}

}  // namespace

void split_heads(const float* qkv, float* q, float* k, float* v, std::size_t B, std::size_t H, std::size_t T,
                 std::size_t D) {
  if (!check_permute("split_heads", B, H, T, D, {{qkv, "qkv"}, {q, "q"}, {k, "k"}, {v, "v"}})) return;
  float* const heads[3] = {q, k, v};
  for_each_piece(3, B, H, T, D, [&](std::size_t packed, std::size_t s, std::size_t head) {
    std::memcpy(heads[s] + head, qkv + packed, D * sizeof(float));
  });
}

void split_heads_backward(const float* dq, const float* dk, const float* dv, float* dqkv, std::size_t B, std::size_t H,
                          std::size_t T, std::size_t D) {
  if (!check_permute("split_heads_backward", B, H, T, D, {{dq, "dq"}, {dk, "dk"}, {dv, "dv"}, {dqkv, "dqkv"}})) return;
  const float* const heads[3] = {dq, dk, dv};
  for_each_piece(3, B, H, T, D, [&](std::size_t packed, std::size_t s, std::size_t head) {
    std::memcpy(dqkv + packed, heads[s] + head, D * sizeof(float));
  });
}

void merge_heads(const float* o, float* y, std::size_t B, std::size_t H, std::size_t T, std::size_t D) {
  if (!check_permute("merge_heads", B, H, T, D, {{o, "o"}, {y, "y"}})) return;
  for_each_piece(1, B, H, T, D, [&](std::size_t packed, std::size_t, std::size_t head) {
    std::memcpy(y + packed, o + head, D * sizeof(float));
  });
}

void merge_heads_backward(const float* dy, float* d_o, std::size_t B, std::size_t H, std::size_t T, std::size_t D) {
  if (!check_permute("merge_heads_backward", B, H, T, D, {{dy, "dy"}, {d_o, "d_o"}})) return;
  for_each_piece(1, B, H, T, D, [&](std::size_t packed, std::size_t, std::size_t head) {
    std::memcpy(d_o + head, dy + packed, D * sizeof(float));
  });
}

void causal_softmax_forward(float* scores, std::size_t blocks, std::size_t T, float scale) {
  detail::require_finite_scale("causal_softmax_forward", scale);
  const std::size_t n = detail::attention_dims("causal_softmax_forward", blocks, 1, T, 1).score_elems;
  detail::require_pointer("causal_softmax_forward", scores, n, "scores");
  for (std::size_t blk = 0; blk < blocks; ++blk)
    for (std::size_t i = 0; i < T; ++i)
      detail::causal_softmax_row(scores + (blk * T + i) * T, i + 1, T, scale);
}

void causal_softmax_backward(const float* probs, const float* dprobs, float* dscores, std::size_t blocks, std::size_t T,
                             float scale) {
  detail::require_finite_scale("causal_softmax_backward", scale);
  const std::size_t n = detail::attention_dims("causal_softmax_backward", blocks, 1, T, 1).score_elems;
  for (auto [p, name] : {std::pair<const void*, const char*>{probs, "probs"}, {dprobs, "dprobs"}, {dscores, "dscores"}})
    detail::require_pointer("causal_softmax_backward", p, n, name);
  for (std::size_t r = 0; r < blocks * T; ++r)
    detail::causal_softmax_backward_row(probs + r * T, dprobs + r * T, dscores + r * T, r % T + 1, T, scale);
}

}  // namespace tenax::kernels::cpu
