// The goodput ledger (ledger.hpp) is read back by every later invocation of the same run directory, and a damaged one
// must be reported: any bytes must end in a history and a summary or an IoError naming the line, never a crash, a
// sanitizer report or another exception. And any bytes, made ledger text (ledger_text), must be written as a JSON
// string that the strict reader reads back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "core/json.hpp"
#include "ledger.hpp"
#include "tenax/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::istringstream history_in(text);
    (void)tenax::launch::read_ledger_history(history_in, "fuzz");
  } catch (const tenax::IoError&) {
    // refused, with a message
  }
  try {
    std::istringstream summary_in(text);
    (void)tenax::launch::format_summary(tenax::launch::summarize_ledger(summary_in, "fuzz"));
  } catch (const tenax::IoError&) {
  }

  const std::string kept = tenax::launch::ledger_text(text);
  const std::string line = tenax::json::ObjectWriter().add("s", kept).str();
  if (tenax::json::Value::parse(line).at("s").string() != kept) std::abort();  // throws, or differs: a bug
  if (tenax::launch::ledger_text(kept) != kept) std::abort();
  return 0;
}
