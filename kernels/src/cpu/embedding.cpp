#include "tenax/kernels/embedding.hpp"

#include <cstring>
#include <string>

#include "common/validate.hpp"

namespace tenax::kernels::cpu {

void embedding_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows, std::size_t features,
                       std::size_t vocab) {
  detail::require_pointer("embedding_forward", tokens, rows, "tokens");
  detail::require_pointer("embedding_forward", table, rows ? vocab * features : 0, "table");
  detail::require_pointer("embedding_forward", y, rows * features, "y");
  for (std::size_t r = 0; r < rows; ++r) {
    if (tokens[r] < 0 || static_cast<std::size_t>(tokens[r]) >= vocab)
      detail::usage_error("embedding_forward", "token " + std::to_string(tokens[r]) + " at row " + std::to_string(r) +
                                                   " is outside the vocabulary [0, " + std::to_string(vocab) +
                                                   "); check the data");
    std::memcpy(y + r * features, table + static_cast<std::size_t>(tokens[r]) * features, features * sizeof(float));
  }
}

void embedding_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                        std::size_t features) {
  detail::require_pointer("embedding_backward", tokens, rows, "tokens");
  detail::require_pointer("embedding_backward", dy, rows * features, "dy");
  detail::require_pointer("embedding_backward", table_grad, rows ? features : 0, "table_grad");
  for (std::size_t r = 0; r < rows; ++r) {
    float* g = table_grad + static_cast<std::size_t>(tokens[r]) * features;
    for (std::size_t c = 0; c < features; ++c)
      g[c] += dy[r * features + c];
  }
}

void embedding_slice_forward(const std::int32_t* tokens, const float* table, float* y, std::size_t rows,
                             std::size_t features, std::size_t vocab, std::size_t vocab_begin,
                             std::size_t vocab_local) {
  detail::require_pointer("embedding_slice_forward", tokens, rows, "tokens");
  detail::require_pointer("embedding_slice_forward", table, rows ? vocab_local * features : 0, "table");
  detail::require_pointer("embedding_slice_forward", y, rows * features, "y");
  if (vocab_begin > vocab || vocab_local > vocab - vocab_begin)
    detail::usage_error("embedding_slice_forward",
                        "the slice [" + std::to_string(vocab_begin) + ", " + std::to_string(vocab_begin) + " + " +
                            std::to_string(vocab_local) + ") is not inside the vocabulary [0, " +
                            std::to_string(vocab) + ")");
  for (std::size_t r = 0; r < rows; ++r) {
    if (tokens[r] < 0 || static_cast<std::size_t>(tokens[r]) >= vocab)
      detail::usage_error("embedding_slice_forward", "token " + std::to_string(tokens[r]) + " at row " +
                                                         std::to_string(r) + " is outside the vocabulary [0, " +
                                                         std::to_string(vocab) + "); check the data");
    const std::size_t t = static_cast<std::size_t>(tokens[r]);
    float* out = y + r * features;
    if (t >= vocab_begin && t - vocab_begin < vocab_local)
      std::memcpy(out, table + (t - vocab_begin) * features, features * sizeof(float));
    else
      std::memset(out, 0, features * sizeof(float));
  }
}

void embedding_slice_backward(const std::int32_t* tokens, const float* dy, float* table_grad, std::size_t rows,
                              std::size_t features, std::size_t vocab_begin, std::size_t vocab_local) {
  detail::require_pointer("embedding_slice_backward", tokens, rows, "tokens");
  detail::require_pointer("embedding_slice_backward", dy, rows * features, "dy");
  detail::require_pointer("embedding_slice_backward", table_grad, rows ? vocab_local * features : 0, "table_grad");
  for (std::size_t r = 0; r < rows; ++r) {
    if (tokens[r] < 0) continue;
    const std::size_t t = static_cast<std::size_t>(tokens[r]);
    if (t < vocab_begin || t - vocab_begin >= vocab_local) continue;
    float* g = table_grad + (t - vocab_begin) * features;
    for (std::size_t c = 0; c < features; ++c)
      g[c] += dy[r * features + c];
  }
}

}  // namespace tenax::kernels::cpu
