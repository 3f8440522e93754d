# CUDA::nvJitLink, which FindCUDAToolkit defines from CMake 3.26 on; for older CMake, found beside the
# toolkit's other libraries. Used by the library's build and by find_package(resident).
if(NOT TARGET CUDA::nvJitLink)
  find_library(RESIDENT_NVJITLINK_LIBRARY nvJitLink HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  add_library(CUDA::nvJitLink SHARED IMPORTED)
  set_target_properties(CUDA::nvJitLink PROPERTIES IMPORTED_LOCATION ${RESIDENT_NVJITLINK_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDAToolkit_INCLUDE_DIRS}")
endif()
