# tessera_find_cuda_library(<Package> HEADER <h> LIBRARY <name> TARGET <ns::name>
#                           VERSION_HEADER <h> VERSION_MACRO <macro>)
# The body of Tessera's find modules for NVIDIA libraries shipped beside CUDA (cuDNN, NCCL).
# Searches <Package>_ROOT (variable or environment), the CUDA toolkit (the libraries are
# often copied into its include/ and lib/), and the NVIDIA Python wheels' layout; reads the
# major version from <VERSION_MACRO> in <VERSION_HEADER>; sets <Package>_INCLUDE_DIR,
# <Package>_LIBRARY, <Package>_VERSION and <Package>_FOUND, and provides the imported
# target. Call it from Find<Package>.cmake, so find_package's REQUIRED/QUIET/version
# arguments reach find_package_handle_standard_args.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

function(tessera_find_cuda_library pkg)
  cmake_parse_arguments(arg "" "HEADER;LIBRARY;TARGET;VERSION_HEADER;VERSION_MACRO" "" ${ARGN})
  find_path(${pkg}_INCLUDE_DIR ${arg_HEADER}
            HINTS ${${pkg}_ROOT} ENV ${pkg}_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
            PATH_SUFFIXES include)
  find_library(${pkg}_LIBRARY ${arg_LIBRARY}
               HINTS ${${pkg}_ROOT} ENV ${pkg}_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
               PATH_SUFFIXES lib lib64)
  set(${pkg}_VERSION "")
  if(${pkg}_INCLUDE_DIR)
    file(STRINGS "${${pkg}_INCLUDE_DIR}/${arg_VERSION_HEADER}" major REGEX "^#define ${arg_VERSION_MACRO} ")
    string(REGEX REPLACE "[^0-9]" "" ${pkg}_VERSION "${major}")
  endif()
  find_package_handle_standard_args(${pkg} REQUIRED_VARS ${pkg}_LIBRARY ${pkg}_INCLUDE_DIR
                                    VERSION_VAR ${pkg}_VERSION)
  set(${pkg}_VERSION "${${pkg}_VERSION}" PARENT_SCOPE)
  set(${pkg}_FOUND "${${pkg}_FOUND}" PARENT_SCOPE)
  if(${pkg}_FOUND AND NOT TARGET ${arg_TARGET})
    add_library(${arg_TARGET} UNKNOWN IMPORTED)
    set_target_properties(${arg_TARGET} PROPERTIES IMPORTED_LOCATION "${${pkg}_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${${pkg}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${pkg}_INCLUDE_DIR ${pkg}_LIBRARY)
endfunction()
