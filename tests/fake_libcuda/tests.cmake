# libfakecuda.so: a fake CUDA driver selected with TVMFFI_JIT_LIBCUDA, so the
# driver plumbing (validation verdicts, crash and hang isolation) is tested on
# machines without a GPU. See fake_cuda.c for the modes.
add_library(fakecuda SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_cuda.c)
set_target_properties(fakecuda PROPERTIES
  C_VISIBILITY_PRESET hidden
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fake_libcuda)
# Tests find it at this fixed path (TVMFFI_JIT_BINARY_DIR/tests/fake_libcuda/libfakecuda.so);
# the unit tests and the tool must be built before they run.
add_dependencies(unit_tests fakecuda)
