# dooly_add_header_check(): the target `dooly_header_check` compiles every header under src/dooly/ alone, one
# translation unit per header that includes it twice (so a header that leans on an include it does not make, or
# lacks `#pragma once`, fails to compile). The units are generated into the build folder; the target is an object
# library outside `all` (compiling ~60 headers alone is not free), built on request or in CI:
#   cmake --build build/default --target dooly_header_check
# Folders whose library this configuration does not build (DOOLY_ENERGY_ONLY) are left out.
function(dooly_add_header_check)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}/src" "${PROJECT_SOURCE_DIR}/src/dooly/*.hpp")
  list(SORT headers)
  set(sources "")
  foreach(header IN LISTS headers)
    # dooly/<folder>/...: the folder's library brings the include paths and third-party headers it needs.
    string(REGEX REPLACE "^dooly/([^/]+)/.*" "\\1" folder "${header}")
    if(folder STREQUAL "cli")
      if(NOT TARGET CLI11::CLI11)
        continue()
      endif()
    elseif(NOT TARGET dooly_${folder})
      continue()
    endif()
    string(MAKE_C_IDENTIFIER "${header}" unit)
    set(tu "${CMAKE_CURRENT_BINARY_DIR}/header_check/${unit}.cpp")
    file(CONFIGURE OUTPUT "${tu}"
         CONTENT "#include \"${header}\"\n#include \"${header}\"  // a second time: the header guards itself\n")
    list(APPEND sources "${tu}")
  endforeach()
  add_library(dooly_header_check OBJECT EXCLUDE_FROM_ALL ${sources})
  foreach(lib IN ITEMS common power energy kokkos cupti taint trace signature store store_ingest plan predict sim
                      plot plot_run)
    if(TARGET dooly_${lib})
      target_link_libraries(dooly_header_check PRIVATE dooly::${lib})
    endif()
  endforeach()
  if(TARGET CLI11::CLI11)
    target_link_libraries(dooly_header_check PRIVATE CLI11::CLI11)
  endif()
endfunction()
