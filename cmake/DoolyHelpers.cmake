# dooly_library(NAME SOURCES... DEPS ...): one static library per concept folder.
function(dooly_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(dooly_${name} STATIC ${ARG_SOURCES})
  add_library(dooly::${name} ALIAS dooly_${name})
  target_include_directories(dooly_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(dooly_${name} PUBLIC ${ARG_DEPS})
endfunction()

# dooly_test(NAME SOURCES... DEPS ... [LABELS ...]): one gtest executable registered with ctest.
function(dooly_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE DOOLY_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             DOOLY_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  # `cmake --build ... --target dooly_threads_tests` builds what the ThreadSanitizer tier runs.
  if("threads" IN_LIST ARG_LABELS)
    if(NOT TARGET dooly_threads_tests)
      add_custom_target(dooly_threads_tests)
    endif()
    add_dependencies(dooly_threads_tests ${name})
  endif()
endfunction()
