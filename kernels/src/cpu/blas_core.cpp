#include "tenax/kernels/blas_core.hpp"

#include <strings.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tenax/error.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

// OpenBLAS's entry points, declared weak: they resolve to null where the library lacks them (the last two in an
// OpenBLAS built for one CPU), and the choice is then left alone. gotoblas_dynamic_quit/init are what OpenBLAS runs at
// load to forget and make its choice of kernels; they read OPENBLAS_CORETYPE like the first choice does.
extern "C" {
char* openblas_get_corename() __attribute__((weak));
char* openblas_get_config() __attribute__((weak));
int openblas_get_num_threads() __attribute__((weak));
void gotoblas_dynamic_quit() __attribute__((weak));
void gotoblas_dynamic_init() __attribute__((weak));
}

namespace tenax::kernels::cpu {

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

// "family 6 model 207" (the numbers OpenBLAS decides by), or "" off x86.
std::string family_and_model() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return "";
  unsigned family = (eax >> 8) & 0xfu;
  unsigned model = (eax >> 4) & 0xfu;
  if (family == 0xfu) family += (eax >> 20) & 0xffu;
  if (family == 6 || family >= 0xfu) model |= ((eax >> 16) & 0xfu) << 4;
  return "family " + std::to_string(family) + " model " + std::to_string(model);
#else
  return "";
#endif
}

// "OpenBLAS 0.3.21" from openblas_get_config()'s "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64".
std::string openblas_version() {
  const std::string config = openblas_get_config != nullptr ? openblas_get_config() : "";
  const auto first = config.find(' ');
  if (config.rfind("OpenBLAS", 0) != 0 || first == std::string::npos) return "OpenBLAS";
  return config.substr(0, config.find(' ', first + 1));
}

// The threads of this process (/proc/self/status), 0 where it cannot be read.
int process_threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return 0;
}

BlasCoreChoice choose() {
  BlasCoreChoice choice;
  if (openblas_get_corename == nullptr) {
    choice.library = "a BLAS that does not say which kernels it runs (not OpenBLAS)";
    return choice;
  }
  choice.library = openblas_version();
  choice.detected_core = choice.core = openblas_get_corename();
  choice.set_by_user = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (choice.set_by_user) return choice;
  const std::string_view wanted = openblas_core_to_force(choice.detected_core, this_cpu_isa());
  if (wanted.empty()) return choice;
  const std::string fix = ": set OPENBLAS_CORETYPE=" + std::string(wanted) + " in the job's environment";
  // The main thread and OpenBLAS's own pool are expected; anything more is a program that loaded tenax after starting
  // threads, which choosing again could race with.
  const int expected = openblas_get_num_threads != nullptr ? openblas_get_num_threads() : 1;
  if (process_threads() > expected) {
    choice.problem = "tenax was loaded after the program started threads and leaves OpenBLAS's choice alone" + fix;
    return choice;
  }
  try {
    choice.core = rechoose_openblas_core(wanted);
  } catch (const UsageError& e) {
    choice.problem = e.what();
    return choice;
  }
  choice.corrected = same_name(choice.core, wanted);
  if (!choice.corrected)
    choice.problem =
        "OpenBLAS did not switch to its " + std::string(wanted) + " kernels (it chose " + choice.core + " again)" + fix;
  return choice;
}

// Made while the library loads: see the header for why it must be this early.
__attribute__((constructor)) void choose_when_loaded() {
  (void)blas_core_choice();
}

}  // namespace

IsaLevel this_cpu_isa() {
  IsaLevel level = IsaLevel::Sse;
#if defined(__x86_64__)
  // Called from a constructor: libgcc's CPU model data may not be set up yet. __builtin_cpu_supports also checks that
  // the kernel saves the wider registers (XGETBV), which CPUID alone does not.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx")) level = IsaLevel::Avx;
  if (level == IsaLevel::Avx && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = IsaLevel::Avx2;
  if (level == IsaLevel::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    level = IsaLevel::Avx512;
#endif
  return level;
}

IsaLevel isa_level_of_openblas_core(std::string_view core) {
  struct Entry {
    std::string_view name;
    IsaLevel level;
  };
  // OpenBLAS's x86-64 kernel families from AVX up (its corename spellings); every other name is an SSE family.
  static constexpr std::array<Entry, 10> kLevels{{{"Sandybridge", IsaLevel::Avx},
                                                  {"Bulldozer", IsaLevel::Avx},
                                                  {"Piledriver", IsaLevel::Avx},
                                                  {"Steamroller", IsaLevel::Avx},
                                                  {"Haswell", IsaLevel::Avx2},
                                                  {"Excavator", IsaLevel::Avx2},
                                                  {"Zen", IsaLevel::Avx2},
                                                  {"SkylakeX", IsaLevel::Avx512},
                                                  {"Cooperlake", IsaLevel::Avx512},
                                                  {"SapphireRapids", IsaLevel::Avx512}}};
  for (const Entry& e : kLevels)
    if (same_name(e.name, core)) return e.level;
  return IsaLevel::Sse;
}

std::string_view openblas_core_to_force(std::string_view chosen, IsaLevel cpu) {
  if (cpu == IsaLevel::Sse || isa_level_of_openblas_core(chosen) >= cpu) return "";
  switch (cpu) {
    case IsaLevel::Avx512:
      return "SkylakeX";
    case IsaLevel::Avx2:
      return "Haswell";
    case IsaLevel::Avx:
      return "Sandybridge";
    case IsaLevel::Sse:
      break;
  }
  return "";
}

std::string rechoose_openblas_core(std::string_view core) {
  if (openblas_get_corename == nullptr || gotoblas_dynamic_quit == nullptr || gotoblas_dynamic_init == nullptr)
    throw UsageError("this OpenBLAS is built for one CPU and cannot switch to its " + std::string(core) +
                     " kernels: install a build for every CPU (Debian's libopenblas0) or one for this CPU");
  ::setenv("OPENBLAS_CORETYPE", std::string(core).c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  ::unsetenv("OPENBLAS_CORETYPE");
  return openblas_get_corename();
}

const BlasCoreChoice& blas_core_choice() {
  static const BlasCoreChoice choice = choose();
  return choice;
}

std::string describe(const BlasCoreChoice& choice) {
  if (choice.core.empty()) return choice.library;
  std::string line = choice.library + ", " + choice.core + " kernels";
  if (choice.set_by_user) return line + " (set by OPENBLAS_CORETYPE)";
  const std::string cpu = family_and_model();
  if (choice.corrected)
    return line + " (chosen by tenax: OpenBLAS took this CPU" + (cpu.empty() ? "" : " (" + cpu + ")") + " for a " +
           choice.detected_core + "; set OPENBLAS_CORETYPE to choose otherwise)";
  if (!choice.problem.empty()) return line + " (slower than this CPU allows: " + choice.problem + ")";
  return line;
}

}  // namespace tenax::kernels::cpu
