# Finds NCCL. Provides NCCL::nccl. Searches NCCL_ROOT, the CUDA toolkit, and the
# nvidia-nccl Python wheels' layout.
include(${CMAKE_CURRENT_LIST_DIR}/TesseraFindCudaLibrary.cmake)
tessera_find_cuda_library(NCCL HEADER nccl.h LIBRARY nccl TARGET NCCL::nccl
                          VERSION_HEADER nccl.h VERSION_MACRO NCCL_MAJOR)
