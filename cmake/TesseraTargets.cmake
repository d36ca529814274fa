# tessera_add_library(<name> SOURCES ... [DEPS ...]): the target tessera_<name>, exported as
# tessera::<name>. Headers are included as "<folder>/<file>.hpp" from the source root in
# the build tree and from <prefix>/include/tessera once installed.
set(TESSERA_GENERATED_DIR "${PROJECT_BINARY_DIR}/generated")
configure_file("${PROJECT_SOURCE_DIR}/cmake/tessera_config.hpp.in"
               "${TESSERA_GENERATED_DIR}/tessera_config.hpp" @ONLY)

# nvcc_wrapper hands flags it does not know (these included) to the host compiler.
set(TESSERA_WARNINGS -Wall -Wextra)

set_property(GLOBAL PROPERTY TESSERA_LIBRARIES "")

# A folder whose code is all templates in headers gives no SOURCES: its target is then an
# INTERFACE library that carries include paths and dependencies.
function(tessera_add_library name)
  cmake_parse_arguments(arg "" "" "SOURCES;DEPS" ${ARGN})
  set(target tessera_${name})
  if(arg_SOURCES)
    add_library(${target} ${arg_SOURCES})
    set(scope PUBLIC)
    target_compile_options(${target} PRIVATE ${TESSERA_WARNINGS})
    set_target_properties(${target} PROPERTIES OUTPUT_NAME tessera_${name})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(tessera::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${TESSERA_GENERATED_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tessera>)
  target_link_libraries(${target} ${scope} ${arg_DEPS})
  target_compile_features(${target} ${scope} cxx_std_20)
  set_property(GLOBAL APPEND PROPERTY TESSERA_LIBRARIES ${target})
endfunction()
