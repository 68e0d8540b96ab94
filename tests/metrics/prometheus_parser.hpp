// A strict reader of the Prometheus text exposition format (0.0.4), written for the tests: it rejects anything
// node_exporter's textfile collector would reject or silently mangle, and returns the samples for assertions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::test {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary or untyped
  std::string help;
  std::vector<PromSample> samples;
};

struct PromParse {
  bool ok = false;
  std::string error;  // "line N: what"
  std::map<std::string, PromFamily> families;

  // The value of the one sample of `name` whose labels include `labels`; NaN when there is none or several.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
};

PromParse parse_prometheus(std::string_view text);

}  // namespace tenax::test
