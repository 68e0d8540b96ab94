// Access to the world communicator from tests that run under mpirun (see mpi_gtest_main.cpp).
#pragma once

#include "tenax/communicator.hpp"

namespace tenax::test {

Communicator& world();

// True when the test must fail rather than skip without a GPU (TENAX_TEST_GPU=1).
bool gpu_required();

}  // namespace tenax::test
