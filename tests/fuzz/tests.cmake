# Fuzz-corpus replays: every corpus input goes through the same
# LLVMFuzzerTestOneInput as the libFuzzer build, in the normal (gcc) build and
# again under ASan+UBSan in CI (label `fuzz`).
add_executable(fuzz_replay_devcode
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/devcode_fuzz.cpp)
target_link_libraries(fuzz_replay_devcode PRIVATE tvmffi_jit tvmffi_jit_settings)
add_test(NAME fuzz.devcode
  COMMAND fuzz_replay_devcode ${CMAKE_CURRENT_LIST_DIR}/corpus/devcode)
set_tests_properties(fuzz.devcode PROPERTIES LABELS fuzz TIMEOUT 300)

add_executable(fuzz_replay_blob
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/blob_fuzz.cpp)
target_link_libraries(fuzz_replay_blob PRIVATE tvmffi_jit tvmffi_jit_settings)
add_test(NAME fuzz.blob
  COMMAND fuzz_replay_blob ${CMAKE_CURRENT_LIST_DIR}/corpus/blob)
set_tests_properties(fuzz.blob PROPERTIES LABELS fuzz TIMEOUT 300)

add_executable(fuzz_replay_entry_bin
  ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/entry_bin_fuzz.cpp)
target_include_directories(fuzz_replay_entry_bin PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(fuzz_replay_entry_bin PRIVATE tvmffi_jit tvmffi_jit_settings)
add_test(NAME fuzz.entry_bin
  COMMAND fuzz_replay_entry_bin ${CMAKE_CURRENT_LIST_DIR}/corpus/entry_bin)
set_tests_properties(fuzz.entry_bin PROPERTIES LABELS fuzz TIMEOUT 300)
