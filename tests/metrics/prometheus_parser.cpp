#include "prometheus_parser.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

namespace tenax::test {
namespace {

bool metric_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == ':')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  return true;
}

bool label_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  if (s.substr(0, 2) == "__") return false;  // reserved
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

bool parse_value(std::string_view s, double& out) {
  if (s == "NaN") return out = std::numeric_limits<double>::quiet_NaN(), true;
  if (s == "+Inf" || s == "Inf") return out = std::numeric_limits<double>::infinity(), true;
  if (s == "-Inf") return out = -std::numeric_limits<double>::infinity(), true;
  if (s.empty()) return false;
  const std::string copy(s);
  char* end = nullptr;
  out = std::strtod(copy.c_str(), &end);
  // strtod also takes "nan", "inf", hex floats: the format does not.
  for (char c : copy)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  return end == copy.c_str() + copy.size();
}

// The family a sample belongs to: histogram/summary samples carry suffixes.
std::string family_of(const std::string& sample, const std::map<std::string, PromFamily>& families) {
  for (const char* suffix : {"_bucket", "_count", "_sum"}) {
    const std::string_view sv(suffix);
    if (sample.size() > sv.size() && sample.compare(sample.size() - sv.size(), sv.size(), sv) == 0) {
      const std::string base = sample.substr(0, sample.size() - sv.size());
      auto it = families.find(base);
      if (it != families.end() && (it->second.type == "histogram" || it->second.type == "summary")) return base;
    }
  }
  return sample;
}

}  // namespace

double PromParse::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  auto it = families.find(name);
  if (it == families.end()) return std::numeric_limits<double>::quiet_NaN();
  const PromSample* found = nullptr;
  for (const PromSample& s : it->second.samples) {
    bool match = s.name == name;
    for (const auto& [k, v] : labels)
      match = match && s.labels.count(k) && s.labels.at(k) == v;
    if (!match) continue;
    if (found != nullptr) return std::numeric_limits<double>::quiet_NaN();
    found = &s;
  }
  return found ? found->value : std::numeric_limits<double>::quiet_NaN();
}

PromParse parse_prometheus(std::string_view text) {
  PromParse result;
  auto fail = [&](int line, const std::string& what) {
    result.ok = false;
    result.error = "line " + std::to_string(line) + ": " + what;
    return result;
  };
  if (text.empty()) return fail(0, "empty file");
  if (text.back() != '\n') return fail(0, "the last line does not end with a newline");
  std::set<std::string> finished;  // families whose samples are over (a family must be contiguous)
  std::set<std::string> series;
  std::string current;
  int number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++number;
    if (line.empty()) continue;
    if (line.find('\r') != std::string_view::npos) return fail(number, "carriage return");
    if (line[0] == '#') {
      if (line.substr(0, 7) != "# HELP " && line.substr(0, 7) != "# TYPE ") continue;  // a comment
      const std::string_view rest = line.substr(7);
      const std::size_t space = rest.find(' ');
      if (space == std::string_view::npos) return fail(number, "HELP/TYPE without a value");
      const std::string name(rest.substr(0, space));
      if (!metric_name(name)) return fail(number, "bad metric name '" + name + "'");
      if (finished.count(name) || (current == name && !result.families[name].samples.empty()))
        return fail(number, "HELP/TYPE of " + name + " after its samples");
      PromFamily& family = result.families[name];
      const std::string value(rest.substr(space + 1));
      if (line[2] == 'H') {
        if (!family.help.empty()) return fail(number, "second HELP for " + name);
        family.help = value;
      } else {
        if (!family.type.empty()) return fail(number, "second TYPE for " + name);
        if (value != "counter" && value != "gauge" && value != "histogram" && value != "summary" && value != "untyped")
          return fail(number, "unknown type '" + value + "'");
        family.type = value;
      }
      continue;
    }
    // A sample: name[{labels}] value [timestamp]
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ')
      ++i;
    PromSample sample;
    sample.name = std::string(line.substr(0, i));
    if (!metric_name(sample.name)) return fail(number, "bad metric name '" + sample.name + "'");
    if (i < line.size() && line[i] == '{') {
      ++i;
      for (;;) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        std::size_t eq = line.find('=', i);
        if (eq == std::string_view::npos) return fail(number, "label without '='");
        const std::string key(line.substr(i, eq - i));
        if (!label_name(key)) return fail(number, "bad label name '" + key + "'");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return fail(number, "label value not quoted");
        ++i;
        std::string value;
        for (;;) {
          if (i >= line.size()) return fail(number, "unterminated label value");
          const char c = line[i++];
          if (c == '"') break;
          if (c == '\\') {
            if (i >= line.size()) return fail(number, "dangling backslash");
            const char e = line[i++];
            if (e == 'n')
              value += '\n';
            else if (e == '\\' || e == '"')
              value += e;
            else
              return fail(number, std::string("bad escape \\") + e);
          } else {
            value += c;
          }
        }
        if (!sample.labels.emplace(key, value).second) return fail(number, "duplicate label " + key);
        if (i < line.size() && line[i] == ',')
          ++i;
        else if (i >= line.size() || line[i] != '}')
          return fail(number, "expected ',' or '}' after a label");
      }
    }
    if (i >= line.size() || line[i] != ' ') return fail(number, "expected a space before the value");
    const std::string_view rest = line.substr(i + 1);
    const std::size_t space = rest.find(' ');
    double value = 0;
    if (!parse_value(rest.substr(0, space), value)) return fail(number, "bad value '" + std::string(rest) + "'");
    if (space != std::string_view::npos) {
      const std::string_view ts = rest.substr(space + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string_view::npos)
        return fail(number, "bad timestamp");
    }
    sample.value = value;
    const std::string family_name = family_of(sample.name, result.families);
    if (family_name != current) {
      if (finished.count(family_name)) return fail(number, "samples of " + family_name + " are not contiguous");
      if (!current.empty()) finished.insert(current);
      current = family_name;
    }
    PromFamily& family = result.families[family_name];
    if (family.type.empty()) family.type = "untyped";
    if (family.type == "counter" && (value < 0 || std::isnan(value)))
      return fail(number, "counter " + sample.name + " is negative or NaN");
    std::string key = sample.name;
    for (const auto& [k, v] : sample.labels)
      key += "\x1f" + k + "=" + v;
    if (!series.insert(key).second) return fail(number, "duplicate series " + sample.name);
    family.samples.push_back(std::move(sample));
  }
  result.ok = true;
  return result;
}

}  // namespace tenax::test
