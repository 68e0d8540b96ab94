// The lines that make a benchmark's figure reproducible, shared by every benchmark that prints them: the CPU and how
// busy the machine was while it ran.
#pragma once

#include <fstream>
#include <string>
#include <thread>

namespace tenax::bench {

// "CPU <model>, <n> CPUs" from /proc/cpuinfo (the first "model name"; "unknown CPU" where there is none).
inline std::string cpu_description() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) model = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " CPUs";
}

// The 1, 5 and 15 minute load averages ("?" where /proc/loadavg cannot be read): a figure taken on a busy machine
// says so.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "?";
  return one + " " + five + " " + fifteen;
}

// One comment line for the top of a benchmark's output.
inline std::string machine_line() {
  return "# machine: " + cpu_description() + "; load average " + load_average();
}

}  // namespace tenax::bench
