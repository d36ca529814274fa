# Finds NCCL. Provides NCCL::nccl. Searches NCCL_ROOT, the CUDA toolkit, and the
# nvidia-nccl Python wheels' layout.
find_path(NCCL_INCLUDE_DIR nccl.h
          HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
          PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
             HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
             PATH_SUFFIXES lib lib64)
if(NCCL_INCLUDE_DIR)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_major REGEX "^#define NCCL_MAJOR ")
  string(REGEX REPLACE "[^0-9]" "" NCCL_VERSION "${_nccl_major}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
                                  VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
