// The examples' command-line parsing: cxxopts, with every error a tenax::UsageError (exit 64) that names the option.
// cxxopts 3.1 reports a value it cannot convert as "Argument 'abc' failed to parse", without the option; the value is
// found again in argv here so that the message says which option it was given to.
#pragma once

#include <cxxopts.hpp>

#include <string>
#include <string_view>

#include "tenax/error.hpp"

namespace tenax::examples {

// The option `value` was given to in argv ("--steps" for `--steps abc` or `--steps=abc`), or "" when not found.
inline std::string option_given(std::string_view value, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      if (arg.substr(eq + 1) == value) return std::string(arg.substr(0, eq));
    } else if (i + 1 < argc && value == argv[i + 1]) {
      return std::string(arg);
    }
  }
  return "";
}

// options.parse(argc, argv), and an error for an argument nothing takes: the examples have no positional arguments.
inline cxxopts::ParseResult parse_command_line(cxxopts::Options& options, int argc, char** argv) {
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    // The value sits between cxxopts' quotes, U+2018 and U+2019.
    const std::string what = e.what();
    const std::size_t open = what.find("\u2018"), close = what.rfind("\u2019");
    const std::string value = open != std::string::npos && close != std::string::npos && close > open
                                  ? what.substr(open + 3, close - open - 3)
                                  : std::string();
    const std::string option = value.empty() ? "" : option_given(value, argc, argv);
    if (option.empty()) throw UsageError(what + " (see --help)");
    throw UsageError("'" + value + "' is not a valid value for " + option + " (see --help for what it takes)");
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see --help)");
  }
  if (!parsed.unmatched().empty()) throw UsageError("unexpected argument '" + parsed.unmatched()[0] + "' (see --help)");
  return parsed;
}

}  // namespace tenax::examples
