# Finds cuDNN. Provides CUDNN::cudnn. Searches CUDNN_ROOT, the CUDA toolkit (cuDNN is often
# copied into its lib/), and the nvidia-cudnn Python wheels' layout.
include(${CMAKE_CURRENT_LIST_DIR}/TesseraFindCudaLibrary.cmake)
tessera_find_cuda_library(CUDNN HEADER cudnn.h LIBRARY cudnn TARGET CUDNN::cudnn
                          VERSION_HEADER cudnn_version.h VERSION_MACRO CUDNN_MAJOR)
