# Warning flags shared by every tenax target (as an interface library, so no global flags leak into users' builds).
add_library(tenax_warnings INTERFACE)
target_compile_options(tenax_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter
    # Tables of aggregates (the TENAX_* registry, option tables) rely on default member initializers.
    -Wno-missing-field-initializers>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
