# Finds cuDNN. Provides CUDNN::cudnn. Searches CUDNN_ROOT, the CUDA toolkit (cuDNN is often
# copied into its lib/), and the nvidia-cudnn Python wheels' layout.
find_path(CUDNN_INCLUDE_DIR cudnn.h
          HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
          PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY cudnn
             HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
             PATH_SUFFIXES lib lib64)
if(CUDNN_INCLUDE_DIR)
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_major REGEX "^#define CUDNN_MAJOR ")
  string(REGEX REPLACE "[^0-9]" "" CUDNN_VERSION "${_cudnn_major}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
