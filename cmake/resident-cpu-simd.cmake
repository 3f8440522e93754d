# The CPU backend's vector math (docs/cpu.md): its loops run in copies compiled for AVX-512, AVX2 and
# the baseline, chosen at run time (src/launch/cpu_simd.cpp), and GCC turns the element functions'
# sinf, expf, ... into calls to glibc's vector math (libmvec) only where errno need not be set. So the
# library and its consumers compile with -fno-math-errno (math functions then leave errno alone, as
# under -ffast-math, without its other changes). OFF: errno kept, such calls stay scalar.
option(RESIDENT_VECTOR_MATH "Vector math in the CPU backend's loops (consumers compile with -fno-math-errno)" ON)
target_sources(resident PRIVATE ${PROJECT_SOURCE_DIR}/src/launch/cpu_simd.cpp)
if(RESIDENT_VECTOR_MATH AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(resident PUBLIC $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno>
                                         $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fno-math-errno>)
endif()
# a * b + c stays two roundings in the CPU loops (GCC contracts it to an fma where the copy for AVX2 or
# AVX-512 has one, and the baseline copy cannot): an element's value does not depend on the machine's
# vector width, and equals the run-time kernels' (src/jit/host.cpp) and NumPy's. GPU code contracts.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(resident PUBLIC $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>
                                         $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-ffp-contract=off>)
endif()
message(STATUS "resident: CPU vector math ${RESIDENT_VECTOR_MATH}")
