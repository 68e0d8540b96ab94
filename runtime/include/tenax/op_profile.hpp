// Op profile: where an execution context's time goes, per tenax::ops call, without an external profiler.
//
//   ctx.begin_op_profile();            // or TENAX_PROFILE_OPS=A:B, which makes the engine profile steps A to B-1
//   ... steps ...
//   tenax::OpProfile p = ctx.end_op_profile();       // waits for the device
//   std::fputs(tenax::format_op_profile(p, steps).c_str(), stderr);
//
// Every tenax::ops call (and ExecutionContext::copy/zero) on a profiled context opens an interval when it starts and
// closes it when it returns; a call made inside another (the casts gemm_mixed makes before a 16-bit product) is charged
// to itself, not to its caller, so the rows are exclusive and add up to the whole window together with the row
// "(between ops)": whatever the context spent outside every op (communication, host work, an idle device).
//
// Clocks: on the host context, the monotonic clock around each call (the CPU kernels complete before they return). On
// a CUDA context, a CUDA event recorded on the compute stream at every interval boundary: an op's time is the device
// time between the events around the work it enqueued, so asynchronous kernels are charged to the op that enqueued
// them, and "(between ops)" holds the device's idle time and waits on communicators' streams. The engine reads the
// completed events back at the end of every step, without waiting; when 16384 boundaries pile up before that (a very
// large step, or a profile driven by hand) the host waits for the device once to read them, and that wait is charged
// to no row.
//
// Cost: off (the default) one pointer test per op. On, two clock reads and a hash lookup per call on the host, two
// cudaEventRecord calls on a device (docs/metrics.md has what it measured); ops only a few times longer than that
// look slower in the profile than they are.
//
// Not thread-safe, like the context it belongs to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tenax {

struct OpProfileRow {
  std::string op;     // the tenax::ops function ("gemm_mixed", "layernorm_backward", ...) or "(between ops)"
  std::string shape;  // its size arguments in signature order, "x"-joined (matrix products: "NT m x n x k")
  std::string dtype;  // the 16-bit input format of a mixed-precision product or fused attention; "" otherwise
  std::uint64_t calls = 0;
  double seconds = 0;  // exclusive time, summed over calls
  // Counted work, summed over calls: floating-point operations of matrix products and attention (a causal mask
  // halves the attention products: only the unmasked half counts), and the fewest bytes an op must read and write for
  // the memory-bound kernels. 0 where not counted.
  double flops = 0;
  double bytes = 0;
};

struct OpProfile {
  std::string clock;               // "host clock" or "cuda events"
  double seconds = 0;              // the whole window (the rows' sum)
  std::vector<OpProfileRow> rows;  // the most time first
};

// A table for people: per row its share of the window, calls and milliseconds per step (`steps` > 0 divides by the
// number of steps profiled), and the achieved TFLOP/s or GB/s where work is counted.
std::string format_op_profile(const OpProfile& profile, std::int64_t steps);

}  // namespace tenax
