#include "spank_api.hpp"

#include <vector>

#include "tenax/error.hpp"

namespace tenax::spank {

void report_error(const std::string& message) {
  slurm_error("%s%s", kMessagePrefix, message.c_str());
}
void log_info(const std::string& message) {
  slurm_info("%s%s", kMessagePrefix, message.c_str());
}
void log_debug(const std::string& message) {
  slurm_debug("%s%s", kMessagePrefix, message.c_str());
}

std::optional<std::string> job_getenv(spank_t sp, const char* name) {
  // Node lists of large jobs can be long: grow the buffer until the value fits.
  for (std::size_t size = 4096; size <= (std::size_t{1} << 24); size *= 4) {
    std::vector<char> buffer(size);
    const spank_err_t rc = spank_getenv(sp, name, buffer.data(), static_cast<int>(buffer.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buffer.data());
    if (rc == ESPANK_ENV_NOEXIST) return std::nullopt;
    if (rc != ESPANK_NOSPACE) {
      throw Error(std::string("spank_getenv(") + name + ") failed: " + spank_strerror(rc));
    }
  }
  throw Error(std::string("spank_getenv(") + name + "): value longer than 16 MiB");
}

void job_setenv(spank_t sp, const char* name, const std::string& value, bool overwrite) {
  const spank_err_t rc = spank_setenv(sp, name, value.c_str(), overwrite ? 1 : 0);
  if (rc != ESPANK_SUCCESS && !(rc == ESPANK_ENV_EXISTS && !overwrite)) {
    throw Error(std::string("spank_setenv(") + name + "=" + value + ") failed: " + spank_strerror(rc));
  }
}

std::uint32_t item_u32(spank_t sp, spank_item_t item, const char* item_name) {
  std::uint32_t value = 0;
  const spank_err_t rc = spank_get_item(sp, item, &value);
  if (rc != ESPANK_SUCCESS) throw Error(std::string("spank_get_item(") + item_name + ") failed: " + spank_strerror(rc));
  return value;
}

int item_int(spank_t sp, spank_item_t item, const char* item_name) {
  int value = 0;
  const spank_err_t rc = spank_get_item(sp, item, &value);
  if (rc != ESPANK_SUCCESS) throw Error(std::string("spank_get_item(") + item_name + ") failed: " + spank_strerror(rc));
  return value;
}

}  // namespace tenax::spank
