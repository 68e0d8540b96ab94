#include "checkpoint/names.hpp"

#include <string_view>

namespace tenax::ckpt {
namespace {

bool valid_tensor_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == ':' || c == '/';
}

constexpr std::size_t kMaxNameLength = 1024;

}  // namespace

std::optional<std::string> tensor_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameLength) return "is longer than 1024 characters";
  for (char c : name)
    if (!valid_tensor_char(c)) return "contains '" + std::string(1, c) + "'";
  if (name.front() == '/' || name.back() == '/' || name.find("//") != std::string::npos)
    return "has an empty component";
  std::string_view rest = name;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part == "." || part == "..") return "has a '.' or '..' component";
    rest.remove_prefix(slash == std::string_view::npos ? rest.size() : slash + 1);
  }
  return std::nullopt;
}

std::optional<std::string> blob_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameLength) return "is longer than 1024 characters";
  for (char c : name) {
    if (c == '/') return "contains '/'";
    if (c == ' ') return "contains a space";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "contains a control character";
  }
  return std::nullopt;
}

}  // namespace tenax::ckpt
