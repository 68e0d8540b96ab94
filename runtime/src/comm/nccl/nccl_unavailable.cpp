// The NCCL entry points of a build without CUDA/NCCL: a clear error instead of a missing symbol.
#include "tenax/communicator.hpp"
#include "tenax/error.hpp"

namespace tenax {

bool nccl_available() {
  return false;
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int, std::string) {
  throw UsageError(
      "this build of tenax has no NCCL backend (CUDA or NCCL was not found at configure time); rebuild with the CUDA "
      "toolkit and NCCL installed (TENAX_WITH_CUDA=ON), or use the MPI backend");
}

}  // namespace tenax
