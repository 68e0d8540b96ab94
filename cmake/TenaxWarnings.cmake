# Warning flags shared by every tenax target (as an interface library, so no global flags leak into users' builds).
# -Wno-missing-field-initializers: tables of aggregates (the TENAX_* registry, option tables) rely on default member
# initializers for the fields they leave out.
set(tenax_host_warnings -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter -Wno-missing-field-initializers)
add_library(tenax_warnings INTERFACE)
target_compile_options(tenax_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX,C>:${tenax_host_warnings}>"
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>")
