#include "collective_check.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tenax/kernels/half.hpp"

namespace tenax::test {
namespace {

// A value in [-1000, 1000] / 64: exact in f32, f64 and f16; bf16 rounds it, and the reference uses the rounded input.
double raw_value(int rank, std::size_t index, std::uint32_t salt) {
  const std::uint64_t h = (index * 2654435761ull + static_cast<std::uint64_t>(rank) * 40503ull + salt * 97ull) % 2001;
  return (static_cast<double>(h) - 1000.0) / 64.0;
}

std::int64_t raw_int(int rank, std::size_t index, std::uint32_t salt, DType dtype) {
  const std::uint64_t h = index * 31ull + static_cast<std::uint64_t>(rank) * 7ull + salt * 13ull;
  if (dtype == DType::U8) return static_cast<std::int64_t>(h % 50);  // 4 ranks sum below 256
  return static_cast<std::int64_t>(h % 1000) - 500;
}

// Stores element i of type t from a double (rounding as the type does) and reads it back as a double.
void store(void* buffer, DType t, std::size_t i, double v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(buffer)[i] = static_cast<float>(v);
      break;
    case DType::F64:
      static_cast<double*>(buffer)[i] = v;
      break;
    case DType::BF16:
      static_cast<std::uint16_t*>(buffer)[i] = kernels::float_to_bf16_bits(static_cast<float>(v));
      break;
    case DType::F16:
      static_cast<std::uint16_t*>(buffer)[i] = kernels::float_to_f16_bits(static_cast<float>(v));
      break;
    case DType::I32:
      static_cast<std::int32_t*>(buffer)[i] = static_cast<std::int32_t>(v);
      break;
    case DType::I64:
      static_cast<std::int64_t*>(buffer)[i] = static_cast<std::int64_t>(v);
      break;
    case DType::U8:
      static_cast<std::uint8_t*>(buffer)[i] = static_cast<std::uint8_t>(v);
      break;
  }
}

double load(const void* buffer, DType t, std::size_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(buffer)[i];
    case DType::F64:
      return static_cast<const double*>(buffer)[i];
    case DType::BF16:
      return kernels::bf16_bits_to_float(static_cast<const std::uint16_t*>(buffer)[i]);
    case DType::F16:
      return kernels::f16_bits_to_float(static_cast<const std::uint16_t*>(buffer)[i]);
    case DType::I32:
      return static_cast<const std::int32_t*>(buffer)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const std::int64_t*>(buffer)[i]);
    case DType::U8:
      return static_cast<const std::uint8_t*>(buffer)[i];
  }
  return 0;
}

// The input element as stored (after the dtype's rounding), as a double.
double input(DType t, int rank, std::size_t index, std::uint32_t salt) {
  const double v =
      dtype_is_float(t) ? raw_value(rank, index, salt) : static_cast<double>(raw_int(rank, index, salt, t));
  unsigned char cell[8];
  store(cell, t, 0, v);
  return load(cell, t, 0);
}

std::vector<unsigned char> make_input(DType t, int rank, std::size_t count, std::uint32_t salt) {
  std::vector<unsigned char> buffer(std::max<std::size_t>(count, 1) * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i)
    store(buffer.data(), t, i, input(t, rank, i, salt));
  return buffer;
}

// Every rank's inputs for the index range [first, first + count) as doubles, computed once per check.
class InputTable {
 public:
  InputTable(DType t, int size, std::size_t first, std::size_t count, std::uint32_t salt)
      : first_(first), count_(count), values_(size * count) {
    for (int r = 0; r < size; ++r)
      for (std::size_t i = 0; i < count; ++i)
        values_[r * count + i] = input(t, r, first + i, salt);
  }
  double at(int rank, std::size_t index) const { return values_[rank * count_ + (index - first_)]; }

 private:
  std::size_t first_;
  std::size_t count_;
  std::vector<double> values_;
};

double reduce_reference(DType t, ReduceOp op, int size, std::size_t index, const InputTable& inputs) {
  double acc = inputs.at(0, index);
  double sum = acc;
  for (int r = 1; r < size; ++r) {
    const double v = inputs.at(r, index);
    sum += v;
    if (op == ReduceOp::Max) acc = std::max(acc, v);
    if (op == ReduceOp::Min) acc = std::min(acc, v);
  }
  if (op == ReduceOp::Sum) return sum;
  if (op == ReduceOp::Avg) return dtype_is_float(t) ? sum / size : std::trunc(sum / size);
  return acc;
}

// Allowed distance from the float64 reference: integers and max/min are exact; float sums may round once per
// addition in the reduction type (fp32 for 16-bit types) and once more when stored in the result type.
double tolerance(DType t, ReduceOp op, int size, double reference) {
  if (!dtype_is_float(t) || op == ReduceOp::Max || op == ReduceOp::Min) return 0.0;
  const double magnitude = std::max(std::abs(reference), 1000.0 / 64.0) * size;
  switch (t) {
    case DType::F64:
      return magnitude * size * 0x1p-52;
    case DType::F32:
      return magnitude * size * 0x1p-23;
    case DType::BF16:
      return std::abs(reference) * 0x1p-8 + magnitude * size * 0x1p-23;
    case DType::F16:
      return std::abs(reference) * 0x1p-11 + magnitude * size * 0x1p-23;
    default:
      return 0.0;
  }
}

std::string where(const Communicator& comm, std::string_view op, DType t, std::size_t count, std::size_t i) {
  return std::string(op) + " on '" + comm.name() + "' " + std::string(dtype_name(t)) + " count " +
         std::to_string(count) + " element " + std::to_string(i);
}

// Reports at most a few mismatches per call: a broken collective would otherwise print a million lines.
class MismatchBudget {
 public:
  bool spend() { return ++used_ <= 5; }

 private:
  int used_ = 0;
};

void expect_reduced(const Communicator& comm, const void* out, DType t, ReduceOp op, std::size_t count,
                    std::size_t first_index, std::uint32_t salt, std::string_view what) {
  const InputTable inputs(t, comm.size(), first_index, count, salt);
  MismatchBudget budget;
  for (std::size_t i = 0; i < count; ++i) {
    const double expected = reduce_reference(t, op, comm.size(), first_index + i, inputs);
    const double got = load(out, t, i);
    const double tol = tolerance(t, op, comm.size(), expected);
    if (std::abs(got - expected) > tol && budget.spend())
      ADD_FAILURE() << where(comm, what, t, count, first_index + i) << " (" << reduce_op_name(op) << "): got " << got
                    << ", expected " << expected << " within " << tol;
  }
}

}  // namespace

void check_all_reduce(Communicator& comm, DType t, ReduceOp op, std::size_t count, std::uint32_t salt) {
  const auto in = make_input(t, comm.rank(), count, salt);
  std::vector<unsigned char> out(in.size(), 0xAB);
  comm.all_reduce(in.data(), out.data(), count, t, op);
  expect_reduced(comm, out.data(), t, op, count, 0, salt, "all_reduce");
  // The input must be left untouched.
  EXPECT_EQ(in, make_input(t, comm.rank(), count, salt)) << where(comm, "all_reduce input", t, count, 0);
}

void check_all_reduce_in_place(Communicator& comm, DType t, std::size_t count, std::uint32_t salt) {
  auto buffer = make_input(t, comm.rank(), count, salt);
  comm.all_reduce(buffer.data(), buffer.data(), count, t, ReduceOp::Sum);
  expect_reduced(comm, buffer.data(), t, ReduceOp::Sum, count, 0, salt, "all_reduce in place");
}

void check_all_gather(Communicator& comm, DType t, std::size_t count, std::uint32_t salt, bool in_place) {
  const std::size_t block = count * dtype_size(t);
  std::vector<unsigned char> out(std::max<std::size_t>(block * comm.size(), 1), 0xCD);
  const auto in = make_input(t, comm.rank(), count, salt);
  if (in_place) {
    if (block) std::memcpy(out.data() + block * comm.rank(), in.data(), block);
    comm.all_gather(out.data() + block * comm.rank(), out.data(), count, t);
  } else {
    comm.all_gather(in.data(), out.data(), count, t);
  }
  for (int r = 0; r < comm.size(); ++r) {
    const auto expected = make_input(t, r, count, salt);
    if (block && std::memcmp(out.data() + block * r, expected.data(), block) != 0)
      ADD_FAILURE() << where(comm, in_place ? "all_gather in place" : "all_gather", t, count, 0) << ": block of rank "
                    << r << " differs";
  }
}

void check_reduce_scatter(Communicator& comm, DType t, ReduceOp op, std::size_t count, std::uint32_t salt) {
  const std::size_t total = count * comm.size();
  const auto in = make_input(t, comm.rank(), total, salt);
  std::vector<unsigned char> out(std::max<std::size_t>(count, 1) * dtype_size(t), 0xEF);
  comm.reduce_scatter(in.data(), out.data(), count, t, op);
  expect_reduced(comm, out.data(), t, op, count, count * comm.rank(), salt, "reduce_scatter");
}

void check_broadcast(Communicator& comm, DType t, std::size_t count, int root, std::uint32_t salt) {
  auto buffer = comm.rank() == root ? make_input(t, root, count, salt)
                                    : std::vector<unsigned char>(std::max<std::size_t>(count, 1) * dtype_size(t), 0);
  comm.broadcast(buffer.data(), count, t, root);
  const auto expected = make_input(t, root, count, salt);
  EXPECT_EQ(0, std::memcmp(buffer.data(), expected.data(), count * dtype_size(t)))
      << where(comm, "broadcast", t, count, 0) << " from root " << root;
}

void check_send_recv_ring(Communicator& comm, DType t, std::size_t count, std::uint32_t salt) {
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  const auto in = make_input(t, comm.rank(), count, salt);
  std::vector<unsigned char> out(in.size(), 0);
  comm.send_recv(in.data(), count, next, out.data(), count, prev, t);
  const auto expected = make_input(t, prev, count, salt);
  EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), count * dtype_size(t)))
      << where(comm, "send_recv ring", t, count, 0);
}

void check_send_then_recv(Communicator& comm, DType t, std::size_t count, std::uint32_t salt) {
  // Pairs (0,1), (2,3), …: the even rank sends first, then receives; an odd rank out sits this one out.
  const int partner = comm.rank() ^ 1;
  if (partner >= comm.size()) return;
  const auto in = make_input(t, comm.rank(), count, salt);
  std::vector<unsigned char> out(in.size(), 0);
  if (comm.rank() % 2 == 0) {
    comm.send(in.data(), count, t, partner);
    comm.recv(out.data(), count, t, partner);
  } else {
    comm.recv(out.data(), count, t, partner);
    comm.send(in.data(), count, t, partner);
  }
  const auto expected = make_input(t, partner, count, salt);
  EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), count * dtype_size(t)))
      << where(comm, "send/recv", t, count, 0);
}

void check_everything(Communicator& comm, std::uint32_t salt) {
  for (DType t : kAllDTypes) {
    const std::size_t counts[] = {kSmallCounts[0], kSmallCounts[1], kSmallCounts[2], large_count(t)};
    for (std::size_t count : counts) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg}) {
        check_all_reduce(comm, t, op, count, salt);
        check_reduce_scatter(comm, t, op, count, salt + 1);
      }
      check_all_reduce_in_place(comm, t, count, salt + 2);
      check_all_gather(comm, t, count, salt + 3, false);
      check_all_gather(comm, t, count, salt + 4, true);
      check_broadcast(comm, t, count, comm.size() - 1, salt + 5);
      check_send_recv_ring(comm, t, count, salt + 6);
      check_send_then_recv(comm, t, count, salt + 7);
    }
  }
}

}  // namespace tenax::test
