# dooly_library(NAME SOURCES... DEPS ...): one static library per concept folder.
function(dooly_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(dooly_${name} STATIC ${ARG_SOURCES})
  add_library(dooly::${name} ALIAS dooly_${name})
  target_include_directories(dooly_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(dooly_${name} PUBLIC ${ARG_DEPS})
  if(DOOLY_PCH)
    target_link_libraries(dooly_${name} PRIVATE fmt::fmt)  # the header's macros (below)
    target_precompile_headers(dooly_${name} REUSE_FROM dooly_pch_library)
  endif()
endfunction()

# DOOLY_PCH=ON: three hosts compile the system headers most units include once, and the libraries, the CLI and the
# unit tests reuse them (REUSE_FROM asks for the same flags: a static library's units are -fPIC, an executable's
# -fPIE, hence a host of each kind). Only system headers: a precompiled project header would rebuild everything on
# each edit. The macros a precompiled header was made with must be those of every unit that uses it (gcc ignores the
# header otherwise, clang refuses the unit): the hosts, every library and every test link fmt::fmt (FMT_SHARED) and
# the test host GoogleTest (GTEST_HAS_PTHREAD). A target's own macros that no system header mentions
# (DOOLY_SOURCE_DIR, a stub's path) do not matter.
set(DOOLY_PCH_HEADERS <algorithm> <array> <atomic> <chrono> <cmath> <cstddef> <cstdint> <cstdio> <cstdlib> <cstring>
    <filesystem> <fstream> <functional> <limits> <map> <memory> <mutex> <optional> <set> <span> <sstream>
    <string> <string_view> <thread> <unordered_map> <utility> <vector> <fmt/format.h> <nlohmann/json.hpp>)
# dooly_pch_host(NAME library|executable [LINKS ...] [HEADERS ...]): a host that precompiles the shared headers and
# HEADERS with the macros of LINKS.
function(dooly_pch_host name kind)
  cmake_parse_arguments(ARG "" "" "LINKS;HEADERS" ${ARGN})
  if(NOT DOOLY_PCH)
    return()
  endif()
  if(kind STREQUAL "library")
    add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/cmake/pch_host.cpp)
  else()
    add_executable(${name} ${PROJECT_SOURCE_DIR}/cmake/pch_host_main.cpp)
  endif()
  target_link_libraries(${name} PRIVATE fmt::fmt ${ARG_LINKS})
  target_precompile_headers(${name} PRIVATE ${DOOLY_PCH_HEADERS} ${ARG_HEADERS})
endfunction()

# dooly_test(NAME SOURCES... DEPS ... [LABELS ...] [SHARDS n]): one gtest executable registered with ctest.
# With DOOLY_UNIT_TESTS=OFF (the plain tier of scripts/test.sh) a test not labelled random or no-sanitizer is left
# out of `all` and of ctest: its target still exists, so the lines after its dooly_test() need no guard.
# SHARDS n: a slow executable (tens of seconds unoptimised under the sanitizers) runs as n ctest tests NAME_1of<n>..,
# each a share of its cases (gtest's GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX), so `ctest -j` spreads it over the cores;
# they are given a high COST, so that ctest starts them first (a clean checkout has no timings from a previous run).
function(dooly_test name)
  cmake_parse_arguments(ARG "" "SHARDS" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE DOOLY_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             DOOLY_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(DOOLY_PCH)
    target_link_libraries(${name} PRIVATE fmt::fmt)  # the header's macros (dooly_library)
    target_precompile_headers(${name} REUSE_FROM dooly_pch_test)
  endif()
  if(NOT DOOLY_UNIT_TESTS AND NOT "random" IN_LIST ARG_LABELS AND NOT "no-sanitizer" IN_LIST ARG_LABELS)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  set(tests ${name})
  if(ARG_SHARDS)
    set(tests "")
    math(EXPR last "${ARG_SHARDS} - 1")
    foreach(i RANGE ${last})
      math(EXPR n "${i} + 1")
      set(shard ${name}_${n}of${ARG_SHARDS})
      add_test(NAME ${shard} COMMAND ${name})
      set_tests_properties(${shard} PROPERTIES COST 1000 ENVIRONMENT "GTEST_TOTAL_SHARDS=${ARG_SHARDS};GTEST_SHARD_INDEX=${i}")
      list(APPEND tests ${shard})
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  if(ARG_LABELS)
    set_tests_properties(${tests} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
  # `cmake --build ... --target dooly_threads_tests` builds what the ThreadSanitizer tier runs.
  if("threads" IN_LIST ARG_LABELS)
    if(NOT TARGET dooly_threads_tests)
      add_custom_target(dooly_threads_tests)
    endif()
    add_dependencies(dooly_threads_tests ${name})
  endif()
endfunction()

# dooly_vendor_stub(TARGET): a test's stand-in for a vendor's C library (NVML, CUDA, Variorum, CUPTI). The real
# libraries are C, so a call through dlsym never meets clang's -fsanitize=function type check; dooly declares their
# functions with its own opaque handle types (the same ABI), and the stub, compiled as C++ under UBSan, would fail
# that check where the real library cannot. The stub is built without it.
function(dooly_vendor_stub target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND "undefined" IN_LIST DOOLY_SANITIZE)
    target_compile_options(${target} PRIVATE -fno-sanitize=function)
  endif()
endfunction()
