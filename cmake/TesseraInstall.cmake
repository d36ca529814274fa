# Install rules and an exported package, so that out-of-tree code (a custom layer, say)
# can use find_package(Tessera) and link tessera::layers.
include(CMakePackageConfigHelpers)

get_property(tessera_libraries GLOBAL PROPERTY TESSERA_LIBRARIES)
install(TARGETS ${tessera_libraries} EXPORT TesseraTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(folder distarray halo layers models)
  install(DIRECTORY ${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera/${folder}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(FILES "${TESSERA_GENERATED_DIR}/tessera_config.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
install(EXPORT TesseraTargets NAMESPACE tessera:: DESTINATION ${config_dir})
configure_package_config_file(cmake/TesseraConfig.cmake.in
  "${PROJECT_BINARY_DIR}/TesseraConfig.cmake" INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/TesseraConfig.cmake"
              "${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake"
              cmake/FindCUDNN.cmake cmake/FindNCCL.cmake cmake/TesseraFindCudaLibrary.cmake
        DESTINATION ${config_dir})
