# Flags for test code: the calling directory's executables (not its
# subdirectories': fixture programs keep the flags their tests decode) are
# built -O1 with line tables only in optimized builds, 40 % less compile
# time than -O2 -g for code whose speed nobody measures. What they test is
# built as shipped, in its libraries; benchmarks and fuzzers keep -O2.
function(loupe_test_code_options)
  get_property(targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_compile_options(${target} PRIVATE "$<$<NOT:$<CONFIG:Debug>>:-O1;-g1>")
    endif()
  endforeach()
endfunction()
