// The choice of OpenBLAS kernels: the rule (which kernels replace which, on which CPU) and, in this process, that the
// kernels in use are at the level of this CPU, or exactly the ones OPENBLAS_CORETYPE names when it is set (ctest runs
// this binary's BlasCore.TheKernelsInUse... case a second time with OPENBLAS_CORETYPE=Prescott).
#include <gtest/gtest.h>

#include <strings.h>

#include <cstdlib>
#include <string>

#include "tenax/kernels/blas_core.hpp"
#include "tenax/kernels/gemm.hpp"

namespace tenax::kernels::cpu {
namespace {

TEST(BlasCore, KnowsTheLevelOfEveryOpenblasKernelFamilyWithoutRegardToCase) {
  EXPECT_EQ(isa_level_of_openblas_core("Prescott"), IsaLevel::Sse);
  EXPECT_EQ(isa_level_of_openblas_core("Nehalem"), IsaLevel::Sse);
  EXPECT_EQ(isa_level_of_openblas_core("Unknown"), IsaLevel::Sse);
  EXPECT_EQ(isa_level_of_openblas_core(""), IsaLevel::Sse);
  EXPECT_EQ(isa_level_of_openblas_core("Sandybridge"), IsaLevel::Avx);
  EXPECT_EQ(isa_level_of_openblas_core("Haswell"), IsaLevel::Avx2);
  EXPECT_EQ(isa_level_of_openblas_core("zen"), IsaLevel::Avx2);
  EXPECT_EQ(isa_level_of_openblas_core("SKYLAKEX"), IsaLevel::Avx512);
  EXPECT_EQ(isa_level_of_openblas_core("Cooperlake"), IsaLevel::Avx512);
  EXPECT_EQ(isa_level_of_openblas_core("SapphireRapids"), IsaLevel::Avx512);
  EXPECT_EQ(isa_level_of_openblas_core("SkylakeXX"), IsaLevel::Sse);
}

TEST(BlasCore, ReplacesOnlyKernelsBelowTheCpusLevelWithTheBestItCanRun) {
  // The fallback of a CPU newer than the library (an Emerald Rapids Xeon under OpenBLAS 0.3.21).
  EXPECT_EQ(openblas_core_to_force("Prescott", IsaLevel::Avx512), "SkylakeX");
  EXPECT_EQ(openblas_core_to_force("Haswell", IsaLevel::Avx512), "SkylakeX");  // an AVX-512 AMD CPU taken for a Zen 3
  EXPECT_EQ(openblas_core_to_force("Zen", IsaLevel::Avx512), "SkylakeX");
  EXPECT_EQ(openblas_core_to_force("Prescott", IsaLevel::Avx2), "Haswell");
  EXPECT_EQ(openblas_core_to_force("Sandybridge", IsaLevel::Avx2), "Haswell");
  EXPECT_EQ(openblas_core_to_force("Nehalem", IsaLevel::Avx), "Sandybridge");
  // At or above the CPU's level: OpenBLAS's choice stands, whichever family of that level it picked.
  EXPECT_EQ(openblas_core_to_force("SkylakeX", IsaLevel::Avx512), "");
  EXPECT_EQ(openblas_core_to_force("Cooperlake", IsaLevel::Avx512), "");
  EXPECT_EQ(openblas_core_to_force("Zen", IsaLevel::Avx2), "");
  EXPECT_EQ(openblas_core_to_force("Excavator", IsaLevel::Avx2), "");
  EXPECT_EQ(openblas_core_to_force("Bulldozer", IsaLevel::Avx), "");
  EXPECT_EQ(openblas_core_to_force("Prescott", IsaLevel::Sse), "");
}

// The mechanism itself, on any CPU (the load-time choice above runs it only where OpenBLAS chose too low): switch to
// the SSE3 kernels and back; the products stay right, and nothing is left in the environment.
TEST(BlasCore, OpenblasChoosesAgainAsTheVariableWouldAndTheEnvironmentIsLeftAsItWas) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "the user's OPENBLAS_CORETYPE is set";
  const std::string before = blas_core_choice().core;
  ASSERT_EQ(strcasecmp(rechoose_openblas_core("Prescott").c_str(), "Prescott"), 0);
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {};
  gemm(Trans::No, Trans::No, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[3], 50.0f);
  EXPECT_EQ(strcasecmp(rechoose_openblas_core(before).c_str(), before.c_str()), 0);
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
}

TEST(BlasCore, TheKernelsInUseAreTheUsersOrAtTheLevelOfThisCpu) {
  const BlasCoreChoice& choice = blas_core_choice();
  ASSERT_EQ(choice.library.rfind("OpenBLAS", 0), 0u) << "tenax is built on OpenBLAS: " << choice.library;
  ASSERT_FALSE(choice.core.empty());
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user != nullptr) {
    EXPECT_TRUE(choice.set_by_user);
    EXPECT_FALSE(choice.corrected);
    EXPECT_EQ(strcasecmp(choice.core.c_str(), user), 0) << choice.core << " in use, OPENBLAS_CORETYPE=" << user;
    EXPECT_NE(describe(choice).find("set by OPENBLAS_CORETYPE"), std::string::npos) << describe(choice);
    return;
  }
  EXPECT_FALSE(choice.set_by_user);
  EXPECT_EQ(choice.problem, "");
  EXPECT_GE(static_cast<int>(isa_level_of_openblas_core(choice.core)), static_cast<int>(this_cpu_isa()))
      << describe(choice) << "; OpenBLAS chose " << choice.detected_core;
  EXPECT_EQ(choice.corrected, choice.core != choice.detected_core);
  // Nothing of the choosing is left in the environment the program sees.
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
}

TEST(BlasCore, TheDescriptionSaysHowTheKernelsWereChosen) {
  BlasCoreChoice choice{"OpenBLAS 0.3.21", "SkylakeX", "Prescott", false, true, ""};
  const std::string corrected = describe(choice);
  EXPECT_EQ(corrected.rfind("OpenBLAS 0.3.21, SkylakeX kernels (chosen by tenax: OpenBLAS took this CPU", 0), 0u)
      << corrected;
  EXPECT_NE(corrected.find("for a Prescott; set OPENBLAS_CORETYPE to choose otherwise)"), std::string::npos)
      << corrected;
  choice = {"OpenBLAS 0.3.21", "Prescott", "Prescott", false, false, "this OpenBLAS is built for one CPU"};
  EXPECT_EQ(describe(choice),
            "OpenBLAS 0.3.21, Prescott kernels (slower than this CPU allows: this OpenBLAS is built for one CPU)");
  choice = {"OpenBLAS 0.3.21", "Haswell", "Haswell", true, false, ""};
  EXPECT_EQ(describe(choice), "OpenBLAS 0.3.21, Haswell kernels (set by OPENBLAS_CORETYPE)");
  choice = {"OpenBLAS 0.3.26", "Haswell", "Haswell", false, false, ""};
  EXPECT_EQ(describe(choice), "OpenBLAS 0.3.26, Haswell kernels");
  choice = {"a BLAS that does not say which kernels it runs (not OpenBLAS)", "", "", false, false, ""};
  EXPECT_EQ(describe(choice), "a BLAS that does not say which kernels it runs (not OpenBLAS)");
}

}  // namespace
}  // namespace tenax::kernels::cpu
