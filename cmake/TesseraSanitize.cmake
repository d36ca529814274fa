# AddressSanitizer + UndefinedBehaviorSanitizer for the CPU build. Only Tessera's own code
# is instrumented; Kokkos and the Debian libraries are linked as they are.
if(TESSERA_ENABLE_CUDA)
  message(FATAL_ERROR "TESSERA_SANITIZE is for the CPU build; configure without TESSERA_ENABLE_CUDA")
endif()
set(TESSERA_SANITIZE_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)
add_compile_options(${TESSERA_SANITIZE_FLAGS})
# -O1 and line tables only (-g1), after the build type's flags so they win: AddressSanitizer's
# recommended level, reports still name file and line, and the build compiles in about 0.55x
# the time of RelWithDebInfo's -O2 -g (measured on layer_registry.cpp: 207 s -> 98 s), which
# CI's budget needs.
add_compile_options(-O1 -g1)
add_link_options(${TESSERA_SANITIZE_FLAGS})
# MPICH allocates process-lifetime objects it never frees; tests/sanitize/lsan.supp names
# those frames (and only MPICH's), so Tessera's own leaks still fail the run.
# hwloc (which MPICH uses for topology) dlopens its PCI plugin, whose libpciaccess state
# is lost when the plugin is dlclose'd at exit. LeakSanitizer then reports frames from an
# unloaded, unnamed module that no suppression can name, so that plugin is not loaded in
# sanitizer runs; a CPU test needs no PCI topology.
set(TESSERA_SANITIZE_ENV
    "HWLOC_COMPONENTS=-pci"
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_init_order=1"
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitize/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
