// Argument checks shared by the CPU and CUDA entry points, so both reject the same bad input with the same message
// before touching any memory.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "tenax/dtype.hpp"
#include "tenax/error.hpp"
#include "tenax/kernels/optimizer.hpp"

namespace tenax::kernels::detail {

[[noreturn]] inline void usage_error(const char* op, const std::string& what) {
  throw UsageError(std::string("tenax::kernels::") + op + ": " + what);
}

// The element types kernels read and write as "low precision" (F32 is allowed: the copy is then exact).
inline bool is_lowp_type(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

inline void require_lowp_type(const char* op, DType t, const char* argument) {
  if (!is_lowp_type(t))
    usage_error(op, std::string(argument) + " is " + std::string(dtype_name(t)) + "; use f32, bf16 or f16");
}

inline void require_pointer(const char* op, const void* p, std::size_t n, const char* argument) {
  if (n != 0 && p == nullptr) usage_error(op, std::string(argument) + " is null but n = " + std::to_string(n));
}

// The row stride of a [rows x cols] matrix given as ld (0: cols, the rows packed); a stride below cols would make rows
// overlap.
inline std::size_t row_stride(const char* op, std::size_t cols, std::size_t ld) {
  if (ld == 0) return cols;
  if (ld < cols)
    usage_error(op, "the row stride ld = " + std::to_string(ld) + " is below the row length " + std::to_string(cols));
  return ld;
}

inline std::size_t checked_mul(const char* op, std::size_t a, std::size_t b, const char* what) {
  std::size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    usage_error(op, std::string(what) + " = " + std::to_string(a) + " * " + std::to_string(b) +
                        " does not fit in 64 bits; use smaller sizes");
  return r;
}

inline std::size_t checked_add(const char* op, std::size_t a, std::size_t b, const char* what) {
  std::size_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    usage_error(op, std::string(what) + " = " + std::to_string(a) + " + " + std::to_string(b) +
                        " does not fit in 64 bits; use smaller sizes");
  return r;
}

// Elements from the first to the last element of a stored row-major matrix: whole strides for every row but the last,
// which ends at its last column. 0 for an empty matrix.
inline std::size_t matrix_span(const char* op, std::size_t rows, std::size_t cols, std::size_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return checked_add(op, checked_mul(op, rows - 1, ld, "matrix rows * stride"), cols, "matrix span");
}

// Row-major gemm operands: each stored matrix's row stride must cover its row (cuBLAS and cblas check this too, but
// report it through an error handler that prints and returns instead of throwing).
inline void require_gemm_stride(const char* what, std::size_t ld, std::size_t row_length, const char* shape) {
  const std::size_t needed = row_length > 0 ? row_length : 1;
  if (ld < needed)
    usage_error("gemm", std::string(what) + " = " + std::to_string(ld) + " but the stored matrix is " + shape +
                            " with rows of " + std::to_string(row_length) + " elements; use " + what +
                            " >= " + std::to_string(needed));
}

// BLAS libraries take 32-bit ints: refuse sizes they would silently truncate.
inline int blas_int(const char* what, std::size_t v) {
  if (v > 0x7FFFFFFFu)
    usage_error("gemm", std::string(what) + " = " + std::to_string(v) +
                            " exceeds the BLAS integer range; split the product into smaller blocks");
  return static_cast<int>(v);
}

// Checks every size and stride of C = op(A) op(B) (row-major; A is m x k or k x m when transposed, B is k x n or
// n x k, C is m x n).
inline void validate_gemm(bool a_t, bool b_t, std::size_t m, std::size_t n, std::size_t k, const void* a,
                          std::size_t lda, const void* b, std::size_t ldb, const void* c, std::size_t ldc) {
  require_gemm_stride("lda", lda, a_t ? m : k, a_t ? "k x m (transposed)" : "m x k");
  require_gemm_stride("ldb", ldb, b_t ? k : n, b_t ? "n x k (transposed)" : "k x n");
  require_gemm_stride("ldc", ldc, n, "m x n");
  for (auto [v, name] : {std::pair{m, "m"}, {n, "n"}, {k, "k"}, {lda, "lda"}, {ldb, "ldb"}, {ldc, "ldc"}})
    blas_int(name, v);
  if (m == 0 || n == 0) return;
  require_pointer("gemm", c, m * n, "c");
  require_pointer("gemm", a, m * k, "a");
  require_pointer("gemm", b, k * n, "b");
}

inline void validate_adamw(const AdamWParams& p, const void* lowp_out, DType lowp_type) {
  if (p.step < 1)
    usage_error("adamw_step", "step is " + std::to_string(p.step) + "; it counts from 1 (bias correction needs it)");
  if (!(p.beta1 >= 0.0f && p.beta1 < 1.0f) || !(p.beta2 >= 0.0f && p.beta2 < 1.0f))
    usage_error("adamw_step", "beta1 = " + std::to_string(p.beta1) + " and beta2 = " + std::to_string(p.beta2) +
                                  " must both lie in [0, 1)");
  if (!(p.eps > 0.0f)) usage_error("adamw_step", "eps is " + std::to_string(p.eps) + "; it must be > 0");
  if (lowp_out != nullptr) require_lowp_type("adamw_step", lowp_type, "lowp_type");
}

inline void validate_sgd(const SgdParams& p, const void* velocity, std::size_t n, const void* lowp_out,
                         DType lowp_type) {
  if (!(p.momentum >= 0.0f))
    usage_error("sgd_momentum_step", "momentum is " + std::to_string(p.momentum) + "; use >= 0");
  if (p.nesterov && p.momentum == 0.0f)
    usage_error("sgd_momentum_step", "nesterov needs momentum > 0 (set momentum or turn nesterov off)");
  if (p.momentum != 0.0f) require_pointer("sgd_momentum_step", velocity, n, "velocity (needed when momentum > 0)");
  if (lowp_out != nullptr) require_lowp_type("sgd_momentum_step", lowp_type, "lowp_type");
}

}  // namespace tenax::kernels::detail
