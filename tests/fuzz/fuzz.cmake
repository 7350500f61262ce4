# Fuzz targets (tests/fuzz/<name>_fuzz.cpp), included from the top-level CMakeLists.txt.
#   - LOOM_FUZZ=ON (clang only; tests/fuzz/run.sh configures build-fuzz so): every library is
#     built with ASan + UBSan and libFuzzer's coverage instrumentation, and each target becomes
#     an executable fuzz_<name> (libFuzzer's main). `cmake --build build-fuzz --target fuzz`.
#   - Normal builds: test_fuzz_smoke links every target's entry point (GCC, no fuzzing engine)
#     and runs it on the seed corpus and seeded mutations (tests/fuzz/fuzz_smoke_test.cpp).
# name|libraries it needs (comma-separated)
set(LOOM_FUZZ_TARGETS
    "gguf|loom_model,loom_tokenizer"
    "safetensors|loom_format"
    "hf_config|loom_model"
    "tokenizer|loom_tokenizer"
    "jinja|loom_jinja"
    "server_request|loom_server"
    "structured|loom_structured")

set(fuzz_defs LOOM_TEST_DATA="${CMAKE_SOURCE_DIR}/tests/data"
              LOOM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
if(LOOM_FUZZ)
  add_custom_target(fuzz)
  foreach(entry IN LISTS LOOM_FUZZ_TARGETS)
    string(REPLACE "|" ";" parts "${entry}")
    string(REPLACE "," ";" parts "${parts}")
    list(GET parts 0 name)
    list(SUBLIST parts 1 -1 libs)
    add_executable(fuzz_${name} ${CMAKE_SOURCE_DIR}/tests/fuzz/${name}_fuzz.cpp)
    target_compile_definitions(fuzz_${name} PRIVATE LOOM_FUZZ_LIBFUZZER ${fuzz_defs})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${name} PRIVATE ${libs})
    add_dependencies(fuzz fuzz_${name})
  endforeach()
elseif(LOOM_BUILD_TESTS)
  set(smoke_srcs ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_smoke_test.cpp)
  set(smoke_libs "")
  foreach(entry IN LISTS LOOM_FUZZ_TARGETS)
    string(REPLACE "|" ";" parts "${entry}")
    string(REPLACE "," ";" parts "${parts}")
    list(GET parts 0 name)
    list(SUBLIST parts 1 -1 libs)
    list(APPEND smoke_srcs ${CMAKE_SOURCE_DIR}/tests/fuzz/${name}_fuzz.cpp)
    list(APPEND smoke_libs ${libs})
  endforeach()
  list(REMOVE_DUPLICATES smoke_libs)
  add_executable(test_fuzz_smoke ${smoke_srcs})
  target_compile_definitions(test_fuzz_smoke PRIVATE ${fuzz_defs})
  target_link_libraries(test_fuzz_smoke PRIVATE ${smoke_libs} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(test_fuzz_smoke DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
endif()
