# Finds NCCL (shipped next to the CUDA toolkit or system-wide; no CMake config).
# Defines NCCL_FOUND and the imported target NCCL::nccl.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_INCLUDE_DIR NCCL_LIBRARY)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
