// Element types tenax moves and computes with. Header-only (the kernels library uses it without linking the runtime).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tenax {

enum class DType : std::uint8_t { F32, F64, BF16, F16, I32, I64, U8 };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                                       DType::I32, DType::I64, DType::U8};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::U8:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::U8:
      return "u8";
  }
  return "?";
}

constexpr bool dtype_is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}

constexpr std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == s) return t;
  if (s == "fp32" || s == "float32") return DType::F32;
  if (s == "fp64" || s == "float64") return DType::F64;
  if (s == "fp16" || s == "float16") return DType::F16;
  if (s == "bfloat16") return DType::BF16;
  return std::nullopt;
}

}  // namespace tenax
