// A training program outside the tenax tree: links the installed library through find_package(tenax).
#include <cstdio>

#include "tenax/layout.hpp"
#include "tenax/runtime.hpp"

static int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  auto groups = tenax::ProcessGroups::create(runtime.world(), tenax::ParallelLayout::infer(runtime.size(), 1, 1));
  int value = runtime.rank() + 1;
  groups.dp->all_reduce(&value, &value, 1, tenax::DType::I32, tenax::ReduceOp::Sum);
  if (runtime.rank() == 0) std::printf("consumer: sum over %d ranks = %d\n", runtime.size(), value);
  return 0;
}

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
