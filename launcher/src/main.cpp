// tenax-launch: starts a training program on every rank and keeps it going through crashes, hangs, lost nodes and
// preemptions (docs/launcher.md).
#include <unistd.h>

#include <exception>
#include <string>

#include "classify.hpp"
#include "options.hpp"
#include "output_pump.hpp"
#include "supervisor.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

int main(int argc, char** argv) {
  using namespace tenax::launch;
  try {
    ParseResult parsed = parse_options(argc, argv);
    if (!parsed.options) {
      write_all_to(STDOUT_FILENO, parsed.text);
      return tenax::kExitSuccess;
    }
    return supervise(*parsed.options);
  } catch (const tenax::UsageError& error) {
    announce(std::string("usage error: ") + error.what());
    return tenax::kExitUsage;
  } catch (const std::exception& error) {
    announce(std::string("error: ") + error.what());
    return kExitGaveUp;
  }
}
