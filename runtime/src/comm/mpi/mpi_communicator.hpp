// The MPI backend of Communicator (host buffers). Every operation but the nonblocking two (exchange,
// start_all_reduce) is exactly the blocking MPI call it wraps, watched by the process's watchdog under
// TENAX_COMM_TIMEOUT (watchdog.hpp says why); bf16/f16 reductions go through fp32 scratch buffers that are kept and
// reused (fresh pages are expensive on the machines tenax runs on).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "comm/mpi/watchdog.hpp"
#include "tenax/communicator.hpp"

namespace tenax::detail {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor) and sets MPI_ERRORS_RETURN on it.
  MpiCommunicator(MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;

  Backend backend() const override { return Backend::Mpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::uint64_t sequence() const override { return sequence_; }
  bool aborted() const override { return aborted_; }

  void barrier() override;
  void synchronize() override {}
  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;

  MPI_Comm handle() const { return comm_; }

 protected:
  Work do_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override;
  Work do_all_gather(const void* send, void* recv, std::size_t count, DType dtype) override;
  Work do_reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override;
  Work do_broadcast(void* buffer, std::size_t count, DType dtype, int root) override;
  Work do_send(const void* buffer, std::size_t count, DType dtype, int peer) override;
  Work do_recv(void* buffer, std::size_t count, DType dtype, int peer) override;
  Work do_send_recv(const void* send_buffer, std::size_t send_count, int dst, void* recv_buffer, std::size_t recv_count,
                    int src, DType dtype) override;
  // Nonblocking, like do_exchange: MPI_Iallreduce, polled by its handle.
  Work do_start_all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override;
  // Nonblocking: the handle completes once every transfer did (its wait is bounded; the watchdog is not involved).
  Work do_exchange(const std::vector<PeerTransfer>& transfers, DType dtype) override;

 private:
  class PendingRequests;
  class PendingCollective;
  // Runs one blocking MPI call under the watchdog; an MPI error marks this communicator aborted and throws CommError
  // naming the operation. Throws at once if the communicator was aborted earlier. `op` must be a string literal.
  template <class Call>
  void run(const char* op, std::size_t count, DType dtype, Call&& call);
  void fail();
  // CommError naming `op` once the communicator was aborted: every operation after a failure is refused at once.
  void refuse_if_aborted(const char* op) const;

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t sequence_ = 0;
  bool aborted_ = false;
  std::vector<float> scratch_in_;
  std::vector<float> scratch_out_;
  OperationSlot slot_{*this};
};

}  // namespace tenax::detail
