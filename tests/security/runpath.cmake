# An installed binary's RUNPATH has no empty element: the loader reads one as the current folder, so a
# library planted where the binary is run would be loaded (CMake pads a build tree's RUNPATH with one
# unless the target is built with its install RUNPATH). usage: cmake -DFILES=a;b -P runpath.cmake
find_program(READELF readelf REQUIRED)
foreach(f IN LISTS FILES)
  execute_process(COMMAND ${READELF} -d ${f} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${f} failed")
  endif()
  string(REGEX MATCHALL "(RUNPATH|RPATH)\\) +Library r[a-z]*path: \\[[^]\n]*\\]" paths "${out}")
  foreach(p IN LISTS paths)
    string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" value "${p}")
    if(value STREQUAL "" OR value MATCHES "^:|:$|::")
      message(FATAL_ERROR "${f}: its RUNPATH [${value}] has an empty element (the current folder)")
    endif()
    message(STATUS "${f}: [${value}]")
  endforeach()
endforeach()
