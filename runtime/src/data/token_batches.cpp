// The DataLoader glue of TokenDataset: batch index (the optimizer step) -> global sample positions of one
// data-parallel rank. The formula is in tenax/token_dataset.hpp; everything is checked in 64 bits.
#include <string>

#include "tenax/error.hpp"
#include "tenax/token_dataset.hpp"

namespace tenax {
namespace {

std::uint64_t local_batch(std::uint64_t global_batch, int dp_size) {
  if (global_batch == 0) throw UsageError("the global batch size is 0: it must be at least the data-parallel size");
  if (dp_size < 1) throw UsageError("data-parallel size " + std::to_string(dp_size) + " is below 1");
  if (global_batch % static_cast<std::uint64_t>(dp_size) != 0)
    throw UsageError("global batch " + std::to_string(global_batch) + " is not a multiple of the data-parallel size " +
                     std::to_string(dp_size) + ": choose a global batch that " + std::to_string(dp_size) +
                     " ranks can share equally");
  return global_batch / static_cast<std::uint64_t>(dp_size);
}

}  // namespace

std::size_t token_batch_bytes(const TokenDataset& dataset, std::uint64_t global_batch, int dp_size) {
  const std::uint64_t rows = local_batch(global_batch, dp_size);
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(rows, std::uint64_t{dataset.sample_tokens()} * sizeof(std::int32_t), &bytes) ||
      bytes > SIZE_MAX)
    throw UsageError("a batch of " + std::to_string(rows) + " samples of " + std::to_string(dataset.sample_tokens()) +
                     " tokens overflows the address space");
  return static_cast<std::size_t>(bytes);
}

std::uint64_t token_batch_first_position(std::int64_t index, std::uint64_t global_batch, int dp_rank, int dp_size) {
  const std::uint64_t rows = local_batch(global_batch, dp_size);
  if (dp_rank < 0 || dp_rank >= dp_size)
    throw UsageError("data-parallel rank " + std::to_string(dp_rank) + " is outside 0.." + std::to_string(dp_size - 1));
  if (index < 0) throw UsageError("batch index " + std::to_string(index) + " is negative");
  std::uint64_t first = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(index), global_batch, &first) ||
      __builtin_add_overflow(first, static_cast<std::uint64_t>(dp_rank) * rows, &first))
    throw UsageError("batch index " + std::to_string(index) + " x global batch " + std::to_string(global_batch) +
                     " overflows 64-bit sample positions");
  return first;
}

DataLoader::Producer make_token_batch_producer(std::shared_ptr<const TokenDataset> dataset, std::uint64_t global_batch,
                                               int dp_rank, int dp_size) {
  if (!dataset) throw UsageError("make_token_batch_producer: the dataset is null");
  const std::size_t bytes = token_batch_bytes(*dataset, global_batch, dp_size);
  token_batch_first_position(0, global_batch, dp_rank, dp_size);  // validates dp_rank now, not in a worker thread
  const std::uint64_t rows = global_batch / static_cast<std::uint64_t>(dp_size);
  return [dataset = std::move(dataset), bytes, rows, global_batch, dp_rank, dp_size](std::int64_t index,
                                                                                     std::span<std::byte> out) {
    if (out.size() != bytes || reinterpret_cast<std::uintptr_t>(out.data()) % alignof(std::int32_t) != 0)
      throw UsageError("token batch producer: the DataLoader slot has " + std::to_string(out.size()) +
                       " bytes, the batch needs " + std::to_string(bytes) +
                       " (4-byte aligned): set DataLoaderOptions::batch_bytes = token_batch_bytes(...)");
    const std::uint64_t first = token_batch_first_position(index, global_batch, dp_rank, dp_size);
    dataset->fill(first, static_cast<std::size_t>(rows), reinterpret_cast<std::int32_t*>(out.data()));
  };
}

}  // namespace tenax
