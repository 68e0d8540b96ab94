// The choice of OpenBLAS kernels: the rule (which kernels replace which, on which CPU) and, in this process, that the
// kernels in use are at the level of this CPU, or exactly the ones OPENBLAS_CORETYPE names when it is set (ctest runs
// this binary's BlasCore.TheKernelsInUse... case a second time with OPENBLAS_CORETYPE=Prescott).
#include <gtest/gtest.h>

#include <strings.h>

#include <cstdlib>
#include <string>

#include "tenax/kernels/blas_core.hpp"

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
  const CpuIsa avx512{IsaLevel::Avx512, false}, avx512_bf16{IsaLevel::Avx512, true};
  const CpuIsa avx2{IsaLevel::Avx2, false}, avx{IsaLevel::Avx, false}, sse{IsaLevel::Sse, false};
  // The fallback of a CPU newer than the library (an Emerald Rapids Xeon under OpenBLAS 0.3.21).
  EXPECT_EQ(openblas_core_to_force("Prescott", avx512_bf16), "Cooperlake");
  EXPECT_EQ(openblas_core_to_force("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(openblas_core_to_force("Haswell", avx512), "SkylakeX");  // an AVX-512 AMD CPU taken for an older Zen
  EXPECT_EQ(openblas_core_to_force("Zen", avx512_bf16), "Cooperlake");
  EXPECT_EQ(openblas_core_to_force("Prescott", avx2), "Haswell");
  EXPECT_EQ(openblas_core_to_force("Sandybridge", avx2), "Haswell");
  EXPECT_EQ(openblas_core_to_force("Nehalem", avx), "Sandybridge");
  // At or above the CPU's level: OpenBLAS's choice stands, whichever family of that level it picked.
  EXPECT_EQ(openblas_core_to_force("SkylakeX", avx512_bf16), "");
  EXPECT_EQ(openblas_core_to_force("Cooperlake", avx512), "");
  EXPECT_EQ(openblas_core_to_force("Zen", avx2), "");
  EXPECT_EQ(openblas_core_to_force("Excavator", avx2), "");
  EXPECT_EQ(openblas_core_to_force("Bulldozer", avx), "");
  EXPECT_EQ(openblas_core_to_force("Prescott", sse), "");
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
  EXPECT_GE(static_cast<int>(isa_level_of_openblas_core(choice.core)), static_cast<int>(this_cpu_isa().level))
      << describe(choice) << "; OpenBLAS chose " << choice.detected_core;
  EXPECT_EQ(choice.corrected, choice.core != choice.detected_core);
  // Nothing of the choosing is left in the environment the program sees.
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr);
}

TEST(BlasCore, TheDescriptionSaysHowTheKernelsWereChosen) {
  BlasCoreChoice choice{"OpenBLAS 0.3.21", "Cooperlake", "Prescott", false, true, ""};
  const std::string corrected = describe(choice);
  EXPECT_EQ(corrected.rfind("OpenBLAS 0.3.21, Cooperlake kernels (chosen by tenax: OpenBLAS took this CPU", 0), 0u)
      << corrected;
  EXPECT_NE(corrected.find("for a Prescott; set OPENBLAS_CORETYPE to choose otherwise)"), std::string::npos)
      << corrected;
  choice = {"OpenBLAS 0.3.21", "Prescott", "Prescott", false, false, "this OpenBLAS is built for one CPU"};
  EXPECT_EQ(describe(choice),
            "OpenBLAS 0.3.21, Prescott kernels (slower than this CPU allows: this OpenBLAS is built for one CPU)");
  choice = {"OpenBLAS 0.3.26", "Haswell", "Haswell", false, false, ""};
  EXPECT_EQ(describe(choice), "OpenBLAS 0.3.26, Haswell kernels");
  choice = {"a BLAS other than OpenBLAS", "", "", false, false, ""};
  EXPECT_EQ(describe(choice), "a BLAS other than OpenBLAS");
}

}  // namespace
}  // namespace tenax::kernels::cpu
